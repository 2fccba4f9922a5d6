"""NUMA-aware DataLoader workers: real worker processes, affinity read back from /proc/<pid>/status.

This machine may have one NUMA node. Multi-node behaviour is tested on a *constructed* topology:
this machine's allowed CPUs split into two "nodes" with a GPU on each (not a real machine's layout),
so the kernel really applies the pinning and the test reads it back. The real single-node path runs
on this machine's own topology.
"""

from __future__ import annotations

import logging
import os
import threading

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clusterdoctor.topology.cpuset import parse_cpulist  # noqa: E402
from clusterdoctor.topology.model import CpuInfo, Device, NumaNode, Topology  # noqa: E402
from clusterdoctor.training import NumaDataLoader, numa_worker_init_fn, plan_worker_cpus  # noqa: E402
from clusterdoctor.training.dataloader import physical_cores, pin_thread, resolve_gpu  # noqa: E402

pytestmark = pytest.mark.torch

CPUS = sorted(os.sched_getaffinity(0))


def two_node_model(allowed: tuple[int, ...] | None = None) -> Topology:
    if len(CPUS) < 2:
        pytest.skip("needs at least 2 usable CPUs to split into two nodes")
    half = len(CPUS) // 2
    parts = (tuple(CPUS[:half]), tuple(CPUS[half:]))
    cpus = {
        c: CpuInfo(id=c, node=n, package=n, core=c, siblings=(c,)) for n, p in enumerate(parts) for c in p
    }
    return Topology(
        source="constructed in tests: this machine's CPUs split into two NUMA nodes",
        source_kind="constructed",
        nodes=[NumaNode(0, parts[0]), NumaNode(1, parts[1])],
        cpus=cpus,
        gpus=[
            Device("GPU0", "gpu", pci="0000:07:00.0", numa_node=0, index=0, attrs={"uuid": "GPU-aaaa-0000"}),
            Device("GPU1", "gpu", pci="0000:87:00.0", numa_node=1, index=1, attrs={"uuid": "GPU-bbbb-1111"}),
        ],
        allowed_cpus=allowed,
    )


class PidDataset(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[int, str]:
        return os.getpid(), os.environ.get("CD_TEST_BASE_INIT", "")


def mark_base_init(worker_id: int) -> None:
    os.environ["CD_TEST_BASE_INIT"] = f"ran:{worker_id}"


def proc_affinity(pid: int) -> set[int]:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return set(parse_cpulist(line.split(":", 1)[1]))
    raise AssertionError(f"no Cpus_allowed_list in /proc/{pid}/status")


def worker_affinities(loader, n_items: int) -> tuple[dict[int, set[int]], set[str]]:
    """Iterate ``n_items`` (workers still alive), read each worker's affinity from /proc."""
    it = iter(loader)
    pids, marks = set(), set()
    for _ in range(n_items):
        pid, mark = next(it)
        pids.add(int(pid))
        marks.add(mark)
    aff = {pid: proc_affinity(pid) for pid in pids}
    del it
    return aff, marks


def loader(topo, *, workers: int, items: int, **kw):
    return NumaDataLoader(PidDataset(items), topology=topo, num_workers=workers, batch_size=None, **kw)


@pytest.mark.parametrize("gpu", [0, 1])
def test_workers_pinned_to_the_gpus_node(gpu):
    topo = two_node_model()
    node = set(topo.node(gpu).cpus)
    aff, _ = worker_affinities(loader(topo, workers=2, items=4, gpu=gpu), 4)
    assert len(aff) == 2 and os.getpid() not in aff
    for cpus in aff.values():
        assert cpus and cpus <= node
    assert proc_affinity(os.getpid()) == set(CPUS)  # the parent is left alone


def test_cuda_visible_devices_is_remapped(monkeypatch):
    topo = two_node_model()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    aff, _ = worker_affinities(loader(topo, workers=2, items=4), 4)
    assert all(cpus <= set(topo.node(1).cpus) for cpus in aff.values())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa")  # UUID prefix, as CUDA accepts
    assert resolve_gpu(topo, 0, use_cuda=False).name == "GPU0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert resolve_gpu(topo, 1, use_cuda=False).name == "GPU1"
    with pytest.raises(ValueError, match="not in CUDA_VISIBLE_DEVICES"):
        resolve_gpu(topo, 2, use_cuda=False)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_more_workers_than_cpus_share_the_nodes_cpus_and_user_init_still_runs():
    topo = two_node_model()
    node = set(topo.node(1).cpus)
    workers = len(node) + 2
    aff, marks = worker_affinities(
        loader(topo, workers=workers, items=2 * workers, gpu=1, worker_init_fn=mark_base_init), 2 * workers
    )
    assert len(aff) == workers
    assert all(cpus and cpus <= node for cpus in aff.values())
    assert marks == {f"ran:{w}" for w in range(workers)}


def test_single_node_machine_is_a_noop_with_a_debug_message(caplog):
    from clusterdoctor.topology.build import from_sysfs

    topo = from_sysfs("/")
    if topo.is_multi_node:
        pytest.skip("this machine has several NUMA nodes")
    with caplog.at_level(logging.DEBUG, logger="clusterdoctor.training.dataloader"):
        init = numa_worker_init_fn(gpu=0)
    assert init.cores is None and "single NUMA node" in init.reason
    assert any("single NUMA node" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)
    aff, _ = worker_affinities(loader(topo, workers=2, items=4), 4)
    assert all(cpus == set(CPUS) for cpus in aff.values())


def test_cpuset_without_the_nodes_cpus_leaves_affinity_alone(caplog):
    topo = two_node_model(allowed=tuple(two_node_model().node(0).cpus))
    with caplog.at_level(logging.WARNING, logger="clusterdoctor.training.dataloader"):
        init = numa_worker_init_fn(topo, gpu=1)
    assert init.cores is None and "cpuset" in init.reason
    assert init.node_cpus == ()


def test_unknown_gpu_node_is_not_guessed():
    topo = two_node_model()
    topo.gpus[1].numa_node = None
    init = numa_worker_init_fn(topo, gpu=1)
    assert init.cores is None and "unknown" in init.reason
    topo.gpus[1].local_cpus = topo.node(1).cpus  # a local_cpulist still places it
    assert numa_worker_init_fn(topo, gpu=1).node_cpus == topo.node(1).cpus


def test_pin_thread_sets_one_threads_affinity():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        pin_thread(t.native_id, {CPUS[-1]})
        with open(f"/proc/self/task/{t.native_id}/status") as f:
            line = next(x for x in f if x.startswith("Cpus_allowed_list:"))
        assert set(parse_cpulist(line.split(":", 1)[1])) == {CPUS[-1]}
        assert proc_affinity(os.getpid()) == set(CPUS)
    finally:
        stop.set()
        t.join()


# -- planning on constructed large machines (pure) --------------------------------------------------
def smt_machine(nodes: int, cores: int, smt: int) -> Topology:
    """Constructed: ``nodes`` x ``cores`` physical cores x ``smt`` threads, Linux-style numbering
    (sibling i of core k is CPU k + i * total_cores)."""
    total = nodes * cores
    cpus, node_cpus = {}, {n: [] for n in range(nodes)}
    for k in range(total):
        n = k // cores
        sib = tuple(k + i * total for i in range(smt))
        for c in sib:
            cpus[c] = CpuInfo(id=c, node=n, package=n, core=k % cores, siblings=sib)
            node_cpus[n].append(c)
    return Topology(
        source="constructed in tests",
        source_kind="constructed",
        nodes=[NumaNode(n, tuple(sorted(v))) for n, v in node_cpus.items()],
        cpus=cpus,
    )


@settings(max_examples=150, deadline=None)
@given(
    cores=st.integers(1, 12),
    smt=st.integers(1, 2),
    workers=st.integers(1, 30),
    drop=st.sets(st.integers(0, 47), max_size=20),
)
def test_plan_spreads_workers_over_physical_cores(cores, smt, workers, drop):
    topo = smt_machine(2, cores, smt)
    node = topo.node(1).cpus
    allowed = set(topo.all_cpus()) - drop
    usable = set(node) & allowed
    plan = plan_worker_cpus(topo, node, workers, allowed)
    assert len(plan) == workers
    phys = physical_cores(topo, usable)
    core_of = {c: i for i, core in enumerate(phys) for c in core}
    for cpus in plan:
        assert set(cpus) <= usable
        assert bool(cpus) == bool(usable)
        # whole cores: every usable sibling of a core a worker got comes along
        for c in cpus:
            assert set(phys[core_of[c]]) <= set(cpus)
    if usable and workers <= len(phys):
        taken = [core_of[c] for cpus in plan for c in cpus if c == phys[core_of[c]][0]]
        assert len(taken) == len(set(taken)) == len(phys)  # disjoint, every core used
        sizes = [len({core_of[c] for c in cpus}) for cpus in plan]
        assert max(sizes) - min(sizes) <= 1
    elif usable:
        assert all(len({core_of[c] for c in cpus}) == 1 for cpus in plan)  # one shared core each
