"""Placement audit: real processes of this machine against topologies.

This machine has ONE NUMA node, so multi-node logic is tested against a CONSTRUCTED model of a
2-node machine (not a real sample): node 0 holds this machine's first allowed CPU, node 1 its
second, with GPUs and a NIC on chosen nodes. The processes are real children started here (pinned
with sched_setaffinity, run under numactl, with CUDA_VISIBLE_DEVICES set), read from the live /proc;
the kernel puts all their memory on node 0, which the model reads as node 0.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.observe.node.procfs import NumaMaps, ProcessInfo, ThreadInfo, collect_process
from clusterdoctor.topology.cpuset import parse_cpulist
from clusterdoctor.topology.model import Device, NumaNode, Topology
from clusterdoctor.topology.placement import (
    FLAG_NAMES,
    REMOTE_MEMORY_STRONG,
    REMOTE_MEMORY_STRONG_THRESHOLD,
    audit,
    audit_process,
    parse_visible_devices,
)
from tests.observe.node.test_procfs import copy_proc_tree, start_child, two_cpus

GIB = 1 << 30
UUID1 = "GPU-5f0c8a4e-0000-4000-8000-000000000001"


def two_node_model(cpus: list[int], *, allowed: tuple[int, ...] | None = None) -> Topology:
    """Constructed 2-node machine: node 0 = cpus[0], node 1 = cpus[1]; GPU0 node 0, GPU1 node 1
    (with a UUID), GPU2 node unknown, mlx5_0 on node 1, mlx5_1 node unknown."""
    return Topology(
        source="constructed 2-node model",
        source_kind="test",
        nodes=[NumaNode(0, (cpus[0],), 64 * GIB), NumaNode(1, (cpus[1],), 64 * GIB)],
        distances=[[10, 21], [21, 10]],
        gpus=[
            Device("GPU0", "gpu", "0000:07:00.0", 0, "numa_node", index=0, model="H100"),
            Device(
                "GPU1", "gpu", "0000:87:00.0", 1, "numa_node", index=1, model="H100", attrs={"uuid": UUID1}
            ),
            Device("GPU2", "gpu", "0000:c7:00.0", None, "unknown", index=2, model="H100"),
        ],
        nics=[
            Device("mlx5_0", "nic", "0000:86:00.0", 1, "numa_node"),
            Device("mlx5_1", "nic", "0000:c6:00.0", None, "unknown"),
        ],
        allowed_cpus=allowed,
    )


def this_machine() -> Topology:
    """This machine's nodes and CPUs, read from its /sys (one node here)."""
    base = Path("/sys/devices/system/node")
    nodes = []
    for d in sorted(base.glob("node[0-9]*")):
        nodes.append(NumaNode(int(d.name[4:]), parse_cpulist((d / "cpulist").read_text())))
    if not nodes:
        pytest.skip("no /sys/devices/system/node here")
    return Topology(source="/sys", source_kind="sysfs", nodes=nodes)


def collect_on_model(pid: int) -> ProcessInfo:
    """Collect a real process for the 2-node model. Its real Mems_allowed_list is "0" (this machine
    has one node); on the model that would read as a cpuset restricting memory to node 0, so the
    model's cpuset is taken to allow both memory nodes. (test_mems_allowed_restriction_* keeps it.)"""
    info = collect_process(pid)
    assert info.mems_allowed == (0,)
    info.mems_allowed = (0, 1)
    return info


def raised(pl) -> set[str]:
    return set(pl.raised())


def test_pinned_away_from_its_memory_is_a_strong_mismatch() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    with start_child(mib=32, cpus=[cpus[1]], env={"CUDA_VISIBLE_DEVICES": "1"}) as child:
        info = collect_on_model(child.pid)
    pl = audit_process(info, topo)
    assert pl.cpus_allowed == [cpus[1]] and pl.cpu_nodes == [1]
    assert pl.bound is True
    assert set(pl.memory_bytes_by_node) == {0}  # the kernel placed it all on (real) node 0
    assert pl.memory_total_bytes == info.numa_maps.total_bytes >= 32 << 20
    assert pl.majority_memory_node == 0
    assert pl.remote_memory_share == 1.0
    assert pl.gpus == ["GPU1"] and pl.gpu_nodes == [1]
    assert pl.gpu_remote_memory_share == 1.0
    assert raised(pl) == {"base_mismatch", "strong_mismatch"}
    assert "most memory on node 0" in pl.flags["base_mismatch"].reason
    assert pl.flags["io_remote"].checked and not pl.flags["io_remote"].raised
    assert pl.flags["unbound_on_multinode"].checked and not pl.flags["unbound_on_multinode"].raised


def test_bound_away_from_its_gpu_is_io_remote() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    with start_child(mib=8, cpus=[cpus[0]], env={"CUDA_VISIBLE_DEVICES": "1", "LOCAL_RANK": "0"}) as child:
        pl = audit(collect_processes_one(child.pid), topo)[0]
    assert pl.cpu_nodes == [0] and pl.gpu_nodes == [1]
    assert pl.remote_memory_share == 0.0
    assert raised(pl) == {"base_mismatch", "io_remote", "thread_mismatch"}
    assert "GPU(s) GPU1 on node(s) 1" in pl.flags["base_mismatch"].reason
    assert pl.flags["strong_mismatch"].checked and not pl.flags["strong_mismatch"].raised
    assert pl.local_rank == "0"
    # every thread inherits the process's CPUs, so every thread is away from GPU1
    assert pl.threads and all(t.mismatch for t in pl.threads)


def collect_processes_one(pid: int) -> list[ProcessInfo]:
    return [collect_on_model(pid)]


def test_unbound_process_on_a_multinode_machine() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    with start_child(mib=8, cpus=cpus, env={"CUDA_VISIBLE_DEVICES": "0"}) as child:
        pl = audit_process(collect_on_model(child.pid), topo)
    assert pl.bound is False and pl.cpu_nodes == [0, 1]
    assert raised(pl) == {"unbound_on_multinode"}
    assert pl.remote_memory_share == 0.0  # every node is one of its CPUs' nodes
    assert not pl.flags["io_remote"].raised
    assert "CPUs not bound" in pl.flags["io_remote"].reason


def test_cgroup_cpuset_is_the_baseline_for_bound() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus, allowed=(cpus[1],))  # the container only has cpus[1]
    with start_child(mib=1, cpus=[cpus[1]]) as child:
        pl = audit_process(collect_on_model(child.pid), topo)
    assert pl.bound is False
    assert pl.flags["unbound_on_multinode"].raised


def test_thread_pinned_away_from_the_gpu() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    with start_child(mib=4, cpus=cpus, thread_cpus=[cpus[0]], env={"CUDA_VISIBLE_DEVICES": "1"}) as child:
        pl = audit_process(collect_on_model(child.pid), topo)
    by_tid = {t.tid: t for t in pl.threads}
    assert by_tid[child.worker_tid].mismatch is True
    assert by_tid[child.worker_tid].name == "cd-worker" and by_tid[child.worker_tid].cpu_nodes == [0]
    assert by_tid[child.main_tid].mismatch is False
    assert pl.flags["thread_mismatch"].raised
    assert f"{child.worker_tid}(cd-worker)" in pl.flags["thread_mismatch"].reason


def test_unknown_gpu_node_is_reported_not_guessed() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    with start_child(mib=4, cpus=[cpus[0]], env={"CUDA_VISIBLE_DEVICES": "2"}) as child:
        pl = audit_process(collect_on_model(child.pid), topo)
    assert pl.gpus == ["GPU2"] and pl.gpu_nodes == []
    assert pl.gpu_details[0].numa_node is None and "unknown" in pl.gpu_details[0].reason
    io = pl.flags["io_remote"]
    assert (io.raised, io.checked) == (False, False) and "unknown" in io.reason
    base = pl.flags["base_mismatch"]
    assert not base.raised and not base.checked and "unknown" in base.reason
    assert pl.flags["thread_mismatch"].checked is False


@pytest.mark.parametrize(
    ("value", "gpus", "unknown_fragment"),
    [
        (UUID1, ["GPU1"], None),
        (UUID1.upper().replace("GPU-", "GPU-"), ["GPU1"], None),
        ("GPU-00000000-dead-beef-0000-000000000000", [], "unknown"),
        ("MIG-GPU-5f0c8a4e/1/0", [], "MIG"),
        ("7", [], "not in the topology"),
        ("0,1,-1,2", ["GPU0", "GPU1"], None),  # CUDA stops at the first invalid entry
        ("", [], None),
    ],
)
def test_cuda_visible_devices_forms(value: str, gpus: list[str], unknown_fragment: str | None) -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    info = ProcessInfo(pid=1, comm="x", cpus_allowed=tuple(cpus), env={"CUDA_VISIBLE_DEVICES": value})
    pl = audit_process(info, topo)
    assert pl.gpus == gpus
    if unknown_fragment:
        assert any(unknown_fragment in d for d in pl.unknown_devices)
    else:
        assert pl.unknown_devices == []


def test_gpu_uuid_resolved_through_nvml_map() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    uuid = "GPU-11111111-2222-3333-4444-555555555555"  # not in the topology's attrs
    info = ProcessInfo(pid=1, cpus_allowed=(cpus[0],), env={"CUDA_VISIBLE_DEVICES": uuid})
    assert audit_process(info, topo).gpus == []
    assert audit_process(info, topo, gpu_uuids={uuid: 0}).gpus == ["GPU0"]


def test_mixed_gpu_models_make_cuda_indices_unknown() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    topo.gpus[0].model = "A100"
    info = ProcessInfo(pid=1, cpus_allowed=(cpus[0],), env={"CUDA_VISIBLE_DEVICES": "1"})
    assert audit_process(info, topo).gpus == []
    info.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    assert audit_process(info, topo).gpus == ["GPU1"]


def test_container_gpu_list_composes_with_cuda_visible_devices() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    env = {"NVIDIA_VISIBLE_DEVICES": "1,2", "CUDA_VISIBLE_DEVICES": "0"}
    pl = audit_process(ProcessInfo(pid=1, cpus_allowed=(cpus[1],), env=env), topo)
    assert pl.gpus == ["GPU1"] and pl.gpu_nodes == [1]
    env = {"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "0"}
    assert audit_process(ProcessInfo(pid=1, cpus_allowed=(cpus[1],), env=env), topo).gpus == ["GPU0"]


def test_nvml_list_wins_over_visible_devices() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    info = ProcessInfo(pid=1, cpus_allowed=(cpus[1],), env={"CUDA_VISIBLE_DEVICES": "0,1"}, nvml_gpus=(1,))
    pl = audit_process(info, topo)
    assert pl.gpus == ["GPU1"] and pl.gpu_details[0].source == "nvml"


def test_devices_from_open_fds_in_a_constructed_tree(tmp_path: Path) -> None:
    """A proc-like tree: real status/numa_maps of a child pinned to cpus[0], plus constructed fd links
    to /dev/nvidia1 and uverbs0/uverbs1 and a constructed sysfs naming uverbs0 mlx5_0."""
    cpus = two_cpus()
    topo = two_node_model(cpus)
    with start_child(mib=4, cpus=[cpus[0]]) as child:
        d = copy_proc_tree(child.pid, tmp_path / "proc")
    fd = d / "fd"
    fd.mkdir()
    for i, t in enumerate(
        ["/dev/nvidia1", "/dev/nvidiactl", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1"]
    ):
        os.symlink(t, fd / str(i))
    ib = tmp_path / "sys" / "sys" / "class" / "infiniband_verbs"
    for n, dev in (("uverbs0", "mlx5_0"), ("uverbs1", "mlx5_1")):
        (ib / n).mkdir(parents=True)
        (ib / n / "ibdev").write_text(dev + "\n")
    info = collect_process(child.pid, str(tmp_path / "proc"), sysfs_root=str(tmp_path / "sys"))
    pl = audit_process(info, topo)
    assert pl.gpus == ["GPU1"] and pl.gpu_details[0].source == "/dev/nvidiaN"
    assert pl.nics == ["mlx5_0", "mlx5_1"] and pl.nic_nodes == [1]
    assert any("mlx5_1" in u and "unknown" in u for u in pl.unknown_devices)
    assert pl.flags["io_remote"].raised  # bound to node 0, GPU1 and mlx5_0 on node 1
    assert "unknown" in pl.flags["io_remote"].reason


def test_mems_allowed_restriction_to_another_node_is_io_remote() -> None:
    # The real Mems_allowed_list "0" read on the 2-node model: a cpuset that keeps memory on node 0.
    cpus = two_cpus()
    topo = two_node_model(cpus)
    with start_child(mib=4, cpus=[cpus[1]], env={"CUDA_VISIBLE_DEVICES": "1"}) as child:
        pl = audit_process(collect_process(child.pid), topo)
    assert pl.mems_allowed == [0]
    assert pl.memory_bound is True and pl.memory_nodes_bound == [0]
    assert pl.memory_policies == {}
    assert pl.flags["io_remote"].raised and "memory bound to node(s) 0" in pl.flags["io_remote"].reason


def test_membind_to_the_wrong_node_is_io_remote() -> None:
    if shutil.which("numactl") is None:
        pytest.skip("numactl not installed")
    cpus = two_cpus()
    topo = two_node_model(cpus)
    with start_child(
        mib=8, cpus=[cpus[1]], env={"CUDA_VISIBLE_DEVICES": "1"}, prefix=["numactl", "--membind=0", "--"]
    ) as child:
        pl = audit_process(collect_on_model(child.pid), topo)
    assert pl.memory_policies == {"bind:0": pl.memory_total_bytes}
    assert pl.memory_bound is True and pl.memory_nodes_bound == [0]
    assert pl.flags["io_remote"].raised
    assert "memory bound to node(s) 0" in pl.flags["io_remote"].reason


def test_single_node_machine_this_one() -> None:
    topo = this_machine()
    with start_child(mib=4) as child:
        pl = audit_process(collect_process(child.pid), topo)
    node_ids = {n.id for n in topo.nodes}
    assert set(pl.memory_bytes_by_node) <= node_ids
    if not topo.is_multi_node:
        f = pl.flags["unbound_on_multinode"]
        assert (f.raised, f.checked) == (False, True) and "one CPU-bearing" in f.reason
        assert pl.remote_memory_share == 0.0
        assert not pl.flags["base_mismatch"].raised


def test_vanished_process_placement() -> None:
    topo = two_node_model(two_cpus())
    pl = audit_process(ProcessInfo(pid=42, error="vanished"), topo)
    assert pl.error == "vanished"
    assert set(pl.flags) == set(FLAG_NAMES)
    assert all(not f.raised and not f.checked for f in pl.flags.values())
    json.dumps(pl.as_dict())


def test_as_dict_has_the_documented_keys_and_serialises() -> None:
    cpus = two_cpus()
    with start_child(
        mib=2, cpus=[cpus[0]], env={"CUDA_VISIBLE_DEVICES": "1"}, extra_args=["--token=zzz-secret"]
    ) as c:
        d = audit_process(collect_process(c.pid), two_node_model(cpus)).as_dict()
    for key in (
        "pid",
        "comm",
        "cmdline",
        "error",
        "cpus_allowed",
        "mems_allowed",
        "cpu_nodes",
        "memory_bytes_by_node",
        "memory_total_bytes",
        "majority_memory_node",
        "remote_memory_share",
        "gpus",
        "gpu_nodes",
        "nics",
        "bound",
        "threads",
        "flags",
    ):
        assert key in d
    text = json.dumps(d)
    assert "zzz-secret" not in text
    assert d["memory_bytes_by_node"] == {"0": d["memory_total_bytes"]}
    assert set(d["flags"]) == set(FLAG_NAMES)


def test_threshold_constant_and_its_source() -> None:
    assert REMOTE_MEMORY_STRONG == 0.30 == REMOTE_MEMORY_STRONG_THRESHOLD.value
    assert "issue #2" in REMOTE_MEMORY_STRONG_THRESHOLD.source


def test_parse_visible_devices() -> None:
    assert parse_visible_devices("all") is None
    assert parse_visible_devices("none") == [] and parse_visible_devices("void") == []
    assert parse_visible_devices(" 0, 2 ,GPU-ab") == ["0", "2", "GPU-ab"]
    assert parse_visible_devices("NoDevFiles") == []


# -- numeric properties on constructed memory layouts -------------------------------------------


@given(
    st.dictionaries(st.integers(0, 3), st.integers(0, 1 << 40), max_size=4),
    st.sets(st.integers(0, 3), min_size=1),
)
def test_remote_share_and_majority_properties(by_node: dict[int, int], cpu_nodes: set[int]) -> None:
    topo = Topology(
        source="constructed 4-node model",
        source_kind="test",
        nodes=[NumaNode(i, (2 * i, 2 * i + 1)) for i in range(4)],
    )
    cpus = tuple(sorted(c for n in cpu_nodes for c in (2 * n, 2 * n + 1)))
    nm = NumaMaps(bytes_by_node=dict(by_node))
    info = ProcessInfo(pid=7, cpus_allowed=cpus, numa_maps=nm, threads=[ThreadInfo(7, "main", cpus)])
    pl = audit_process(info, topo)
    total = sum(by_node.values())
    assert pl.memory_total_bytes == total
    assert pl.bound == (cpu_nodes != {0, 1, 2, 3})
    if total == 0:
        assert pl.remote_memory_share is None and pl.majority_memory_node is None
        assert not pl.flags["strong_mismatch"].checked
        return
    remote = sum(b for n, b in by_node.items() if n not in cpu_nodes)
    assert pl.remote_memory_share == pytest.approx(remote / total)
    assert 0.0 <= pl.remote_memory_share <= 1.0
    assert by_node[pl.majority_memory_node] == max(by_node.values())
    assert pl.flags["strong_mismatch"].raised == (remote / total > REMOTE_MEMORY_STRONG)
    assert pl.flags["base_mismatch"].raised == (pl.majority_memory_node not in cpu_nodes)
    assert pl.flags["unbound_on_multinode"].raised == (not pl.bound)


def test_dev_nvidia_minor_numbers_from_the_topology() -> None:
    cpus = two_cpus()
    topo = two_node_model(cpus)
    # A topology that records minor numbers (nvidia-smi -q "Minor Number"): GPU1 has minor 0.
    topo.gpus[0].attrs["minor_number"] = 1
    topo.gpus[1].attrs["minor_number"] = 0
    info = ProcessInfo(pid=1, cpus_allowed=(cpus[0],), nvidia_devices=(0,))
    assert audit_process(info, topo).gpus == ["GPU1"]
    info.nvidia_devices = (2,)  # GPU2 has no minor recorded: not guessed from the index
    assert audit_process(info, topo).gpus == []
