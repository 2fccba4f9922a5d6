"""Binding plans on real topology dumps (hwloc XML, nvidia-smi topo -m) and their refusals."""

from __future__ import annotations

import pytest

from clusterdoctor.topology.build import load_topology
from clusterdoctor.topology.model import CpuInfo, Device, NumaNode, Topology
from clusterdoctor.topology.plan import PlanError, make_plan, parse_gpu_list
from tests.conftest import shared_fixture

HP_SL390 = (
    "numa/hwloc/24em64t-2n6c2t-pci.xml"  # node 0: even CPUs, node 1: odd CPUs; GPU0 node 0, GPU1/2 node 1
)
DGX_A100 = "numa/nvidia-smi-topo-m_dgx-a100_epyc-nps4_8gpu-12nic.txt"


def test_node_policy_on_hwloc_dump():
    topo = load_topology(shared_fixture(HP_SL390))
    plan = make_plan(topo, ["0", "1", "2"], "node", env={})
    nodes = {r.local_rank: r.numa_node for r in plan.ranks}
    assert nodes == {0: 0, 1: 1, 2: 1}
    for r in plan.ranks:
        node_cpus = set(topo.node(r.numa_node).cpus)
        assert set(r.compute_cpus) <= node_cpus and set(r.comm_cpus) <= node_cpus
        assert not set(r.compute_cpus) & set(r.comm_cpus)
        assert r.memory_node == r.numa_node
        # SMT siblings stay together: a CPU in the set implies its sibling is in the same set
        for cset in (r.compute_cpus, r.comm_cpus):
            for c in cset:
                assert set(topo.cpus[c].siblings) <= set(cset)
    # ranks 1 and 2 share node 1 but get distinct communication cores
    assert not set(plan.ranks[1].comm_cpus) & set(plan.ranks[2].comm_cpus)
    assert plan.ranks[0].nic == "mlx4_0"


def test_exclusive_splits_physical_cores():
    topo = load_topology(shared_fixture(HP_SL390))
    plan = make_plan(topo, ["1", "2"], "exclusive", env={})
    a, b = plan.ranks
    all_a = set(a.compute_cpus) | set(a.comm_cpus)
    all_b = set(b.compute_cpus) | set(b.comm_cpus)
    assert not all_a & all_b
    assert len(all_a) == len(all_b) == 6  # 6 cores x 2 threads on node 1, split 3 cores each


def test_dgx_a100_nps4_nonmonotonic_nodes():
    topo = load_topology(shared_fixture(DGX_A100))
    plan = make_plan(topo, parse_gpu_list("0-7"), "node", env={})
    # GPU NUMA affinity as printed in the file: 3,3,1,1,7,7,5,5
    assert [r.numa_node for r in plan.ranks] == [3, 3, 1, 1, 7, 7, 5, 5]
    # CPU affinity of GPU0's row is 48-63,176-191
    assert set(plan.ranks[0].compute_cpus) | set(plan.ranks[0].comm_cpus) <= set(range(48, 64)) | set(
        range(176, 192)
    )
    assert plan.ranks[0].nic in ("mlx5_0", "mlx5_1") and plan.ranks[0].nic_path == "PXB"


def test_cuda_visible_devices_remaps():
    topo = load_topology(shared_fixture(DGX_A100))
    plan = make_plan(topo, ["0", "1"], "node", env={"CUDA_VISIBLE_DEVICES": "4,2"})
    assert [r.gpu for r in plan.ranks] == ["GPU4", "GPU2"]
    assert [r.numa_node for r in plan.ranks] == [7, 1]
    with pytest.raises(PlanError, match="not visible"):
        make_plan(topo, ["2"], "node", env={"CUDA_VISIBLE_DEVICES": "4,2"})


def test_cgroup_cpuset_respected_and_impossible_refused():
    topo = load_topology(shared_fixture(HP_SL390))
    plan = make_plan(topo, ["0"], "node", allowed_cpus=[0, 2, 4, 6], env={})
    assert set(plan.ranks[0].compute_cpus) | set(plan.ranks[0].comm_cpus) <= {0, 2, 4, 6}
    with pytest.raises(PlanError, match="no allowed CPU"):
        make_plan(topo, ["1"], "node", allowed_cpus=[0, 2, 4, 6], env={})


def _tiny(gpu_node):
    cpus = {i: CpuInfo(i, node=i // 2, package=i // 2, core=i % 2, siblings=(i,)) for i in range(4)}
    return Topology(
        source="constructed",
        source_kind="test",
        nodes=[NumaNode(0, (0, 1), 1 << 30), NumaNode(1, (2, 3), 0)],
        distances=[[10, 21], [21, 10]],
        cpus=cpus,
        gpus=[Device("GPU0", "gpu", index=0, numa_node=gpu_node)],
    )


def test_unknown_gpu_node_is_refused_not_guessed():
    with pytest.raises(PlanError, match="refusing to guess node 0"):
        make_plan(_tiny(None), ["0"], env={})


def test_memoryless_node_uses_nearest_memory_node():
    plan = make_plan(_tiny(1), ["0"], env={})
    assert plan.ranks[0].numa_node == 1 and plan.ranks[0].memory_node == 0
    assert any("no memory" in n for n in plan.ranks[0].notes)


def test_exclusive_with_too_few_cores_refused():
    topo = _tiny(0)
    topo.gpus.append(Device("GPU1", "gpu", index=1, numa_node=0))
    topo.gpus.append(Device("GPU2", "gpu", index=2, numa_node=0))
    with pytest.raises(PlanError, match="exclusive"):
        make_plan(topo, ["0", "1", "2"], "exclusive", env={})


def test_bad_gpu_list():
    from clusterdoctor.errors import InputError

    with pytest.raises(InputError):
        parse_gpu_list("3-1")
    assert parse_gpu_list("0-2,5") == ["0", "1", "2", "5"]
