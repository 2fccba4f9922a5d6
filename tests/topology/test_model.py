"""Path classification from PCI ancestor chains, and model lookups."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.topology.model import Device, NumaNode, PathInfo, Topology, classify_pci_path, path_rank

bdf = st.integers(0, 255).map(lambda b: f"0000:{b:02x}:00.0")
chain = st.tuples(st.sampled_from(["pci0000:00", "pci0000:80"]), st.lists(bdf, min_size=1, max_size=5)).map(
    lambda t: (t[0], *t[1])
)
node = st.one_of(st.none(), st.integers(0, 3))


@given(chain, chain, node, node)
def test_classification_is_symmetric_and_valid(a, b, na, nb):
    k1 = classify_pci_path(a, b, na, nb)
    assert k1 == classify_pci_path(b, a, nb, na)
    assert k1 is None or k1 in ("PIX", "PXB", "PHB", "NODE", "SYS")
    if a[0] != b[0] and (na is None or nb is None):
        assert k1 is None  # across host bridges with an unknown node: not guessed


def test_real_shapes():
    host = "pci0000:00"
    # GPU and NIC behind one PCIe switch (upstream 01:00.0, downstream ports 02:08.0 / 02:10.0)
    gpu = (host, "0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:03:00.0")
    nic = (host, "0000:00:01.0", "0000:01:00.0", "0000:02:10.0", "0000:04:00.0")
    assert classify_pci_path(gpu, nic, 0, 0) == "PIX"
    # two switch levels apart
    deep = (
        host,
        "0000:00:01.0",
        "0000:01:00.0",
        "0000:02:10.0",
        "0000:05:00.0",
        "0000:06:00.0",
        "0000:07:00.0",
    )
    assert classify_pci_path(gpu, deep, 0, 0) == "PXB"
    # different root ports of one host bridge
    other = (host, "0000:00:02.0", "0000:08:00.0")
    assert classify_pci_path(gpu, other, 0, 0) == "PHB"
    # different host bridges
    far = ("pci0000:80", "0000:80:02.0", "0000:81:00.0")
    assert classify_pci_path(gpu, far, 0, 0) == "NODE"
    assert classify_pci_path(gpu, far, 0, 1) == "SYS"
    assert classify_pci_path((), far, 0, 1) is None


def test_path_rank_order_and_aliases():
    assert (
        path_rank("NV12")
        < path_rank("PIX")
        < path_rank("PXB")
        < path_rank("PHB")
        < path_rank("NODE")
        < path_rank("SYS")
    )
    assert path_rank("SOC") == path_rank("SYS")


def test_best_nic_prefers_stated_path_then_node():
    g = Device("GPU0", "gpu", numa_node=1, index=0)
    n0 = Device("mlx5_0", "nic", numa_node=0)
    n1 = Device("mlx5_1", "nic", numa_node=1)
    topo = Topology("t", "test", nodes=[NumaNode(0, (0,)), NumaNode(1, (1,))], gpus=[g], nics=[n0, n1])
    assert topo.best_nic_for(g)[0].name == "mlx5_1"
    topo.paths.append(PathInfo("GPU0", "mlx5_0", "PIX"))
    assert topo.best_nic_for(g) == (n0, "PIX")
    assert topo.find_device("0") is g and topo.find_device("mlx5_1") is n1
    assert n0.is_rdma and not Device("eth0", "nic").is_rdma
