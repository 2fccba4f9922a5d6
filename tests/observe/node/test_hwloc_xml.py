"""hwloc XML parser: real hwloc test-suite XMLs (../shared/fixtures), live lstopo output, bad input.

Expected values below were read from the XML files themselves (object tree, cpusets, pci_busid,
distances2), not copied from the parser's output.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.hwloc_xml import parse_hwloc_bitmap, parse_hwloc_xml, sniff_hwloc_xml
from clusterdoctor.observe.node.numactl import parse_numactl_hardware
from tests.conftest import TEST_DATA, shared_fixture

LSTOPO = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
needs_lstopo = pytest.mark.skipif(
    LSTOPO is None, reason="hwloc's lstopo not installed (apt-get install hwloc-nox)"
)


def load(rel: str):
    p = shared_fixture(f"numa/hwloc/{rel}")
    return parse_hwloc_xml(p.read_bytes(), str(p))


def lstopo(*args: str) -> bytes:
    assert LSTOPO is not None
    return subprocess.run([LSTOPO, *args], check=True, capture_output=True, timeout=60).stdout


def path_kind(topo, a: str, b: str) -> str | None:
    p = topo.path(a, b)
    return p.kind if p else None


# -- real hwloc test-suite files -----------------------------------------------------------------


def test_normalio_v3_gpu_nic_placement_follows_the_tree():
    t = load("32em64t-2n8c2t-pci-normalio.xml")
    assert t.source_kind == "hwloc-xml"
    assert t.hostname == "conan"
    assert t.node_ids == [0, 1]
    # NUMANode os_index=0 cpuset 0x00ff00ff, os_index=1 0xff00ff00; local_memory as written.
    assert t.node(0).cpus == (*range(0, 8), *range(16, 24))
    assert t.node(1).cpus == (*range(8, 16), *range(24, 32))
    assert t.node(0).memory_bytes == 34330173440
    assert t.node(1).memory_bytes == 34359738368
    assert t.distances == [[10, 20], [20, 10]]
    # Core os_index=0 of Package 0 holds PUs 0 and 16; one L3 per package.
    assert t.cpus[0].siblings == (0, 16)
    assert t.cpus[0].package == 0 and t.cpus[8].package == 1
    assert t.cpus[0].l3 == t.node(0).cpus
    # cuda0 sits on PCIDev 0000:84:00.0 below Package 1's host bridge -> node 1, GPU index 0.
    g0 = t.gpu_by_index(0)
    assert g0.pci == "0000:84:00.0" and g0.numa_node == 1 and g0.model == "Tesla K40m"
    assert "cuda0" in g0.attrs["os_devices"]
    # mlx5_0 (PCIDev 0000:04:00.0) is in the tree under Package 1's bridge 0000:80:03.0 (host bridge range
    # 0000:[80-84]) — impossible for bus 0x04 on real PCIe — while pci_locality maps bus 0x04 to node 0's
    # cpuset and Package 0's host bridge covers 0000:[00-05]: the bus ranges win (SOURCES.md: "mlx5 on
    # node 0"), with a warning naming both.
    nic = t.find_device("mlx5_0")
    assert nic.kind == "nic" and nic.pci == "0000:04:00.0" and nic.numa_node == 0
    assert nic.attrs["rdma"] is True and nic.attrs["netdevs"] == ["ib0"]
    assert any("pci_locality" in w and "0000:04:00.0" in w for w in t.warnings)
    assert path_kind(t, "GPU0", "mlx5_0") == "SYS"  # cuda0 on node 1, the HCA on node 0
    assert path_kind(t, "GPU1", "mlx5_0") == "PHB"  # the M2075 at 03:00.0 shares host bridge [00-05]
    # The AMD Radeon with only an OpenCL OS device is a GPU too; the Matrox VGA (102b) is not.
    assert {g.pci for g in t.gpus} == {"0000:03:00.0", "0000:83:00.0", "0000:84:00.0", "0000:84:00.1"}
    assert all(p.source == "derived" for p in t.paths)


def test_24em64t_three_tesla_and_mlx4_on_node0():
    t = load("24em64t-2n6c2t-pci.xml")
    assert t.node(0).cpus == tuple(range(0, 24, 2))  # cpuset 0x00555555
    assert t.node(1).cpus == tuple(range(1, 24, 2))  # cpuset 0x00aaaaaa
    assert t.distances == [[10, 20], [20, 10]]
    # PCIDev 10de:06d2 at 06:00.0 (Package 0), 11:00.0 and 14:00.0 (Package 1); no CUDA OS devices, so
    # numbered in PCI bus order. The ATI ES1000 VGA (1002:515e, class 0300) is a BMC chip, not a GPU.
    assert [(g.name, g.pci, g.numa_node) for g in t.gpus] == [
        ("GPU0", "0000:06:00.0", 0),
        ("GPU1", "0000:11:00.0", 1),
        ("GPU2", "0000:14:00.0", 1),
    ]
    assert all("PCI bus order" in g.attrs["index_basis"] for g in t.gpus)
    hca = t.find_device("mlx4_0")
    assert hca.numa_node == 0 and hca.pci == "0000:05:00.0"
    assert hca.attrs["netdevs"] == ["eth2", "ib0"]
    # GPU0 and mlx4_0 hang below different root ports of the same host bridge: PHB; the others: SYS.
    assert path_kind(t, "GPU0", "mlx4_0") == "PHB"
    assert path_kind(t, "GPU1", "mlx4_0") == "SYS"
    assert path_kind(t, "GPU2", "mlx4_0") == "SYS"
    assert path_kind(t, "GPU1", "GPU2") == "PHB"
    assert t.cpus[0].siblings == (0, 12)


def test_devel09_v2_package_and_numa_numbering_differ():
    t = load("devel09-pci.xml")
    assert t.hostname == "devel09"
    # Package os_index=1 holds NUMANode os_index=0 (PUs 0, 2); Package 0 holds NUMANode 1 (PUs 1, 3).
    assert t.node(0).cpus == (0, 2) and t.node(1).cpus == (1, 3)
    assert t.cpus[0].package == 1 and t.cpus[0].node == 0
    assert t.cpus[1].package == 0 and t.cpus[1].node == 1
    assert t.node(0).memory_bytes == 12884901888
    assert t.distances is None  # the file has no distances2 element
    assert t.gpus == []  # only a Matrox G200 VGA
    hca = t.find_device("mlx4_0")
    assert hca.numa_node == 0 and hca.attrs["rdma"] is True  # osdev_type="2" but an HCA name
    assert t.find_device("eth0").attrs["rdma"] is False


def test_power8_nvlink_and_non_x86_bitmaps():
    t = load("power8gpudistances.xml")
    # NUMANode 1 cpuset "0x00000303,0x03030000,,0x0": words 3..0, the empty word is zero.
    assert t.node(0).cpus == (0, 1, 8, 9, 16, 17, 24, 25)
    assert t.node(1).cpus == (80, 81, 88, 89, 96, 97, 104, 105)
    assert t.distances == [[10, 40], [40, 10]]
    assert [(g.name, g.pci, g.numa_node) for g in t.gpus] == [
        ("GPU0", "0002:01:00.0", 0),
        ("GPU1", "0003:01:00.0", 0),
        ("GPU2", "000a:01:00.0", 1),
        ("GPU3", "000b:01:00.0", 1),
    ]
    assert all(g.attrs["index_basis"].endswith(f"cuda{g.index}") for g in t.gpus)
    # NVLinkBandwidth: nvml0<->nvml1 and nvml2<->nvml3 at 40000, nothing between the pairs.
    assert path_kind(t, "GPU0", "GPU1") == "NV"
    assert path_kind(t, "GPU2", "GPU3") == "NV"
    assert path_kind(t, "GPU0", "GPU2") == "SYS"
    assert t.gpus[0].attrs["nvlink_bandwidth_mbs"] == {"GPU1": 40000}
    assert t.nics == []


# -- output of the real tool -------------------------------------------------------------------


def check_pack2_numa2(t, cores: int) -> None:
    per_node = cores * 2
    assert t.node_ids == [0, 1, 2, 3]
    for n in range(4):
        assert t.node(n).cpus == tuple(range(n * per_node, (n + 1) * per_node))
        assert t.node(n).memory_bytes == 1 << 30
    assert len(t.cpus) == 4 * per_node
    assert {t.cpus[c].package for c in range(2 * per_node)} == {0}
    assert {t.cpus[c].package for c in range(2 * per_node, 4 * per_node)} == {1}
    for c in range(0, 4 * per_node, 2):
        assert t.cpus[c].siblings == (c, c + 1) == t.cpus[c + 1].siblings
    assert t.smt_info()["physical_cores"] == 4 * cores


@needs_lstopo
def test_lstopo_synthetic_v2_export():
    t = parse_hwloc_xml(lstopo("--input", "pack:2 numa:2 core:8 pu:2", "--of", "xml", "-"))
    check_pack2_numa2(t, cores=8)
    assert t.distances is None  # synthetic topologies carry no distance matrix
    assert t.gpus == [] and t.nics == []


@needs_lstopo
def test_lstopo_v1_and_v2_exports_agree(tmp_path: Path):
    shape = "pack:2 numa:2 core:4 pu:2"
    v2 = lstopo("--input", shape, "--of", "xml", "-")
    v1 = lstopo("--input", shape, "--export-xml-flags", "1", "--of", "xml", "-")
    assert b'version="2.0"' in v2 and b"<topology>" in v1  # really the two formats
    t1, t2 = parse_hwloc_xml(v1), parse_hwloc_xml(v2)
    check_pack2_numa2(t1, cores=4)
    assert [n.as_dict() for n in t1.nodes] == [n.as_dict() for n in t2.nodes]
    assert t1.cpus == t2.cpus


SLIT = [[10, 12, 32, 32], [12, 10, 32, 32], [32, 32, 10, 12], [32, 32, 12, 10]]
FAKE = [[1, 2, 4, 4], [2, 1, 4, 4], [4, 4, 1, 2], [4, 4, 2, 1]]


def annotate(tmp_path: Path, xml: Path, name: str, kind: int, matrix: list[list[int]]) -> Path:
    """Add a NUMA distance matrix with hwloc-annotate (the documented file format of its man page)."""
    spec = tmp_path / f"{name}.txt"
    objs = [f"NUMANode:{i}" for i in range(len(matrix))]
    lines = [f"name={name}", str(kind), str(len(matrix)), *objs, *(str(v) for row in matrix for v in row)]
    spec.write_text("\n".join(lines) + "\n")
    out = tmp_path / f"{xml.stem}+{name}.xml"
    subprocess.run(
        ["hwloc-annotate", str(xml), str(out), "--", "root", "--", "distances", str(spec)], check=True
    )
    return out


@needs_lstopo
def test_lstopo_numalatency_preferred_over_other_matrices_v2_and_v1(tmp_path: Path):
    if shutil.which("hwloc-annotate") is None:
        pytest.skip("hwloc-annotate not installed")
    syn = tmp_path / "syn.xml"
    syn.write_bytes(lstopo("--input", "pack:2 numa:2 core:2 pu:2", "--of", "xml", "-"))
    only = annotate(tmp_path, syn, "NUMALatency", 5, SLIT)
    assert parse_hwloc_xml(only.read_bytes(), str(only)).distances == SLIT
    # A user latency matrix first, then the SLIT: v2 keeps the names, v1 drops them.
    both = annotate(tmp_path, annotate(tmp_path, syn, "Fake", 6, FAKE), "NUMALatency", 5, SLIT)
    assert parse_hwloc_xml(both.read_bytes(), str(both)).distances == SLIT
    v1 = lstopo("-i", str(both), "--export-xml-flags", "1", "--of", "xml", "-")
    assert v1.count(b"<distances ") == 2
    assert parse_hwloc_xml(v1).distances == SLIT


@needs_lstopo
def test_lstopo_two_memory_nodes_per_package_share_cpus():
    # "[numa] [numa]": two memory children of each package (DRAM + HBM-like), same CPUs.
    t = parse_hwloc_xml(lstopo("--input", "pack:2 [numa] [numa(memory=1GB)] core:2 pu:2", "--of", "xml", "-"))
    assert t.node_ids == [0, 1, 2, 3]
    assert t.node(0).cpus == t.node(1).cpus == (0, 1, 2, 3)
    assert t.node(2).cpus == t.node(3).cpus == (4, 5, 6, 7)
    assert t.node(1).memory_bytes == 1_000_000_000
    assert t.cpus[0].node == 0  # the first node of the package


@needs_lstopo
def test_lstopo_l3_groups():
    t = parse_hwloc_xml(lstopo("--input", "pack:2 numa:1 l3:2 core:4 pu:2", "--of", "xml", "-"))
    assert t.cpus[0].l3 == tuple(range(0, 8))
    assert t.cpus[9].l3 == tuple(range(8, 16))
    assert t.smt_info()["l3_groups"] == 4


@needs_lstopo
def test_lstopo_this_machine_matches_numactl():
    t = parse_hwloc_xml(lstopo("--of", "xml", "-"), "<lstopo>")
    assert t.cpus, "this machine has PUs"
    if shutil.which("numactl") is None:
        pytest.skip("numactl not installed")
    out = subprocess.run(["numactl", "--hardware"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or "No NUMA" in out.stdout:
        pytest.skip("numactl sees no NUMA on this machine")
    n = parse_numactl_hardware(out.stdout)
    assert t.node_ids == n.node_ids
    for a, b in zip(t.nodes, n.nodes):
        assert a.cpus == b.cpus


# -- captured real-tool output committed under tests/data ------------------------------------------


def test_committed_lstopo_v2_capture():
    p = TEST_DATA / "topology" / "hwloc-2.9.0_synthetic_pack2-numa2-core8-pu2.v2.xml"
    check_pack2_numa2(parse_hwloc_xml(p.read_bytes(), str(p)), cores=8)


def test_committed_lstopo_v1_capture_with_two_matrices():
    p = TEST_DATA / "topology" / "hwloc-2.9.0_synthetic_pack2-numa2-core2-pu2_two-matrices.v1.xml"
    data = p.read_bytes()
    assert data.count(b"<distances ") == 2 and b"version=" not in data.split(b"<topology", 1)[1][:20]
    t = parse_hwloc_xml(data, str(p))
    check_pack2_numa2(t, cores=2)
    assert t.distances == SLIT  # the unnamed SLIT matrix (diagonal 10), not the user one listed first


# -- detection ---------------------------------------------------------------------------------


def test_sniff():
    p = TEST_DATA / "topology" / "hwloc-2.9.0_synthetic_pack2-numa2-core8-pu2.v2.xml"
    assert sniff_hwloc_xml(p.read_bytes()[:4096])
    assert not sniff_hwloc_xml(b'<system version="1"><cpu numaid="0"/></system>')
    assert not sniff_hwloc_xml(b"available: 1 nodes (0)\n")
    assert not sniff_hwloc_xml(b"<!-- <topology> --><other/>")


# -- bad input ---------------------------------------------------------------------------------

MINI = (
    '<?xml version="1.0"?><topology version="2.0"><object type="Machine" os_index="0" cpuset="0x3">'
    '<object type="NUMANode" os_index="0" cpuset="0x3" local_memory="1024"/>'
    '<object type="Core" os_index="0" cpuset="0x3"><object type="PU" os_index="0" cpuset="0x1"/>'
    '<object type="PU" os_index="1" cpuset="0x2"/></object></object>{extra}</topology>'
)


def test_minimal_document_parses():
    t = parse_hwloc_xml(MINI.format(extra=""))
    assert t.node_ids == [0] and t.node(0).cpus == (0, 1) and t.node(0).memory_bytes == 1024


def test_hwloc_2_0_float_matrix_and_cpu_less_node():
    # hwloc 2.0.x wrote <floats>; a CXL/memory-only node has an empty cpuset. (Hand-written shape.)
    extra = (
        '<distances2 type="NUMANode" nbobjs="2" kind="5" indexing="os"><indexes length="4">0 1 </indexes>'
        '<floats length="40">10.000000 50.000000 50.000000 10.000000 </floats></distances2>'
    )
    doc = MINI.format(extra=extra).replace(
        '<object type="Core"',
        '<object type="NUMANode" os_index="1" cpuset="0x0" local_memory="2048"/><object type="Core"',
        1,
    )
    t = parse_hwloc_xml(doc)
    assert t.node_ids == [0, 1]
    assert t.node(1).cpus == () and t.node(1).memory_bytes == 2048
    assert t.distances == [[10, 50], [50, 10]]
    assert not t.is_multi_node


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "malformed XML"),
        (b"\x00\xff\xfe garbage", "malformed XML"),
        (b"<system version='1'><cpu/></system>", "expected <topology>"),
        (b"<topology version='2.0'></topology>", "without any <object>"),
        (b"<topology version='9.0'><object type='Machine'/></topology>", "unsupported hwloc XML version"),
        (
            b"<topology version='2.0'><object type='Machine'><object type='Misc'/></object></topology>",
            "neither",
        ),
        (MINI.format(extra="").replace('os_index="1"', 'os_index="0"').encode(), "two PU objects"),
        (
            MINI.format(extra="")
            .replace('os_index="0" cpuset="0x3" local', 'os_index="x" cpuset="0x3" local')
            .encode(),
            "not an integer",
        ),
        (
            MINI.format(extra="").replace('cpuset="0x3" local', 'cpuset="0xzz" local').encode(),
            "bad hwloc bitmap",
        ),
        (
            MINI.format(
                extra='<distances2 type="NUMANode" nbobjs="1" kind="5" name="NUMALatency" indexing="os">'
                "<indexes length='2'>0 </indexes><u64values length='6'>10 20 </u64values></distances2>"
            ).encode(),
            "inconsistent matrix",
        ),
    ],
)
def test_bad_input_raises_input_error(data: bytes, reason: str):
    with pytest.raises(InputError) as e:
        parse_hwloc_xml(data, "x.xml")
    assert reason in e.value.reason
    assert e.value.path == "x.xml"


def test_truncated_real_export_is_an_input_error():
    p = TEST_DATA / "topology" / "hwloc-2.9.0_synthetic_pack2-numa2-core8-pu2.v2.xml"
    data = p.read_bytes()
    with pytest.raises(InputError, match="malformed XML"):
        parse_hwloc_xml(data[: len(data) // 2], str(p))


def test_entity_expansion_is_refused_quickly():
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE topology [<!ENTITY a "aaaaaaaaaa">'
        + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
        + ']><topology version="2.0"><object type="Machine" name="&i;"/></topology>'
    )
    t0 = time.monotonic()
    with pytest.raises(InputError, match="internal subset|entity"):
        parse_hwloc_xml(bomb)
    assert time.monotonic() - t0 < 30  # a cap on a hostile input, generous under load


def test_external_doctype_is_accepted_but_not_fetched():
    data = MINI.format(extra="").replace(
        "<topology", '<!DOCTYPE topology SYSTEM "http://127.0.0.1:9/x.dtd"><topology', 1
    )
    assert parse_hwloc_xml(data).node_ids == [0]


# -- bitmap syntax -----------------------------------------------------------------------------


def format_bitmap(bits: set[int]) -> str:
    """Write an hwloc bitmap the way hwloc does: 32-bit words, most significant first, empty zero words."""
    if not bits:
        return "0x0"
    value = sum(1 << b for b in bits)
    words = []
    while value:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
    words.reverse()
    return ",".join(f"0x{w:08x}" if i == 0 or w else "" for i, w in enumerate(words))


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=600), max_size=40))
def test_bitmap_roundtrip(bits: set[int]):
    assert parse_hwloc_bitmap(format_bitmap(bits)) == tuple(sorted(bits))


def test_bitmap_examples_from_hwloc_files():
    assert parse_hwloc_bitmap("0x00000303,0x03030000,,0x0") == (80, 81, 88, 89, 96, 97, 104, 105)
    assert parse_hwloc_bitmap("0xf...f,0x00000003") == (0, 1)
    assert parse_hwloc_bitmap("") == ()
    with pytest.raises(InputError):
        parse_hwloc_bitmap("0x123456789")  # a word wider than 32 bits
