"""NCCL topology XML parser: the IBM Cloud dump and Azure's NCCL_TOPO_FILE (../shared/fixtures/numa).

Expected values were read from the XML (cpu numaid/affinity, pci nesting, gpu dev, net name).
"""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.nccl_topo import parse_nccl_topo_xml, sniff_nccl_topo
from tests.conftest import shared_fixture

IBM = "numa/nccl-topo-dump_ibm-cloud-gx3d-160x1792x8h100_2numa_8gpu-8nic.xml"
AZURE = "numa/nccl-topo-file_azure-ndv4_a100x8_epyc-4numa.xml"


def load(rel: str):
    p = shared_fixture(rel)
    return parse_nccl_topo_xml(p.read_bytes(), str(p))


def test_ibm_dump():
    t = load(IBM)
    assert t.source_kind == "nccl-topo-xml" and t.distances is None
    # affinity 0000ffff,ffffffff,ffffffff (80 bits) on numaid 0, the next 80 CPUs on numaid 1.
    assert t.node_ids == [0, 1]
    assert t.node(0).cpus == tuple(range(80)) and t.node(1).cpus == tuple(range(80, 160))
    assert t.node(0).memory_bytes is None
    buses = ["a4", "ae", "b8", "c2", "cc", "d6", "e0", "ea"]
    assert [(g.name, g.pci, g.numa_node) for g in t.gpus] == [
        (f"GPU{i}", f"0000:{b}:00.0", 0 if i < 4 else 1) for i, b in enumerate(buses)
    ]
    assert t.gpus[0].attrs["sm"] == "90"
    # mlx5_7 shares virtual bridge 0000:a1:00.0 with GPU0, ... mlx5_0 shares 0000:e7:00.0 with GPU7.
    nic_of_gpu = {f"GPU{i}": f"mlx5_{7 - i}" for i in range(8)}
    for g, n in nic_of_gpu.items():
        assert t.path(g, n).kind == "PIX", (g, n)
        assert t.find_device(n).numa_node == t.find_device(g).numa_node
    assert t.path("GPU0", "mlx5_6").kind == "NODE"  # other bridge, same <cpu>
    assert t.path("GPU0", "mlx5_0").kind == "SYS"  # other NUMA node
    assert t.best_nic_for(t.gpus[3])[0].name == "mlx5_4"
    assert all(n.is_rdma for n in t.nics)
    # Each GPU: nvlink 5+5+4+4 into the four NVSwitches f3..f6 -> NV18 between any two GPUs.
    assert t.path("GPU0", "GPU7").kind == "NV18"
    assert {p.kind for p in t.paths if p.a.startswith("GPU") and p.b.startswith("GPU")} == {"NV18"}


def test_azure_topo_file_without_gpu_or_nic_elements():
    t = load(AZURE)
    assert t.node_ids == [0, 1, 2, 3]
    assert [t.node(n).cpus for n in range(4)] == [tuple(range(24 * n, 24 * (n + 1))) for n in range(4)]
    # GPUs (class 0x030200) numbered by PCI bus: 0001,0002 (numaid 1), 0003,0004 (0), 000b,000c (3), 000d,000e (2).
    assert [(g.pci, g.numa_node) for g in t.gpus] == [
        ("0001:00:00.0", 1),
        ("0002:00:00.0", 1),
        ("0003:00:00.0", 0),
        ("0004:00:00.0", 0),
        ("000b:00:00.0", 3),
        ("000c:00:00.0", 3),
        ("000d:00:00.0", 2),
        ("000e:00:00.0", 2),
    ]
    assert all("PCI bus order" in g.attrs["index_basis"] for g in t.gpus)
    # IB HCAs (class 0x020700), unnamed in the file: NIC0.. in bus order 0101..0108.
    assert [(n.name, n.pci, n.numa_node) for n in t.nics] == [
        ("NIC0", "0101:00:00.0", 1),
        ("NIC1", "0102:00:00.0", 1),
        ("NIC2", "0103:00:00.0", 0),
        ("NIC3", "0104:00:00.0", 0),
        ("NIC4", "0105:00:00.0", 3),
        ("NIC5", "0106:00:00.0", 3),
        ("NIC6", "0107:00:00.0", 2),
        ("NIC7", "0108:00:00.0", 2),
    ]
    assert all(n.is_rdma for n in t.nics)  # InfiniBand class 0x0207: RDMA even without an mlx5 name
    gpu_0003 = t.find_device("0003:00:00.0")
    assert t.path(gpu_0003.name, "NIC2").kind == "PIX"  # both under ffff:ff:01.0
    assert t.path(gpu_0003.name, "NIC0").kind == "SYS"


SMALL = """<system version="1">
  <cpu numaid="{numaid}" affinity="0000000f">
    <pci busid="0000:10:00.0" class="0x060400">
      <pci busid="0000:11:00.0" class="0x060400">
        <pci busid="0000:12:00.0" class="0x030200" vendor="0x10de"><gpu dev="0" sm="80"/></pci>
      </pci>
      <pci busid="0000:13:00.0" class="0x020700" vendor="0x15b3">
        <nic><net name="mlx5_0" dev="0" port="1"/><net name="mlx5_0" dev="1" port="2"/></nic>
      </pci>
    </pci>
  </cpu>
</system>"""


def test_nested_bridges_give_pxb_and_ports_get_unique_names():
    t = parse_nccl_topo_xml(SMALL.format(numaid="0"))
    assert [n.name for n in t.nics] == ["mlx5_0", "mlx5_0:2"]
    assert t.path("GPU0", "mlx5_0").kind == "PXB"  # GPU two bridges down, NIC one
    assert t.node(0).cpus == (0, 1, 2, 3)


def test_numaid_minus_one_is_unknown_not_node_zero():
    t = parse_nccl_topo_xml(SMALL.format(numaid="-1"))
    assert t.nodes == []
    assert t.gpus[0].numa_node is None and t.gpus[0].numa_source == "unknown"
    assert t.gpus[0].local_cpus == (0, 1, 2, 3)
    assert any("NUMA layout unknown" in w for w in t.warnings)


def test_sniff():
    assert sniff_nccl_topo(shared_fixture(IBM).read_bytes()[:4096])
    assert sniff_nccl_topo(b'<?xml version="1.0"?>\n<system version="1">')
    assert not sniff_nccl_topo(b'<topology version="2.0"><object type="Machine"/>')


@pytest.mark.parametrize(
    "data, reason",
    [
        ("<topology/>", "expected <system>"),
        ('<system version="1"></system>', "without any <cpu>"),
        ('<system version="1"><cpu numaid="zero"/></system>', "not a NUMA node id"),
        ('<system version="1"><cpu numaid="0" affinity="xyz"/></system>', "bad hex cpu mask"),
        (
            '<system version="1"><cpu numaid="0"><pci busid="nope" class="0x030200"/></cpu></system>',
            "not a PCI address",
        ),
        (
            '<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0" class="0xzz"/></cpu></system>',
            "hex class",
        ),
        ('<system version="1"><cpu numaid="0">', "malformed XML"),
    ],
)
def test_bad_input(data: str, reason: str):
    with pytest.raises(InputError) as e:
        parse_nccl_topo_xml(data, "t.xml")
    assert reason in e.value.reason and e.value.path == "t.xml"
