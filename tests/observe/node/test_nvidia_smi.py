"""``nvidia-smi topo -m`` parser on the two published outputs in ../shared/fixtures/numa.

Expected values were read from the files. Layout variants (tabs expanded, ANSI header, SOC, N/A) are
made in the test by transforming a real file, never written from scratch.
"""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.nvidia_smi import parse_nvidia_smi_topo, sniff_nvidia_smi_topo
from tests.conftest import shared_fixture

DGX = "numa/nvidia-smi-topo-m_dgx-a100_epyc-nps4_8gpu-12nic.txt"
ASUS = "numa/nvidia-smi-topo-m_asus-esc8000a-e12_genoa-2s_4x-rtx6000ada_2x-cx7.txt"


def text(rel: str) -> str:
    return shared_fixture(rel).read_text()


def summary(t) -> dict:
    return {
        "nodes": [(n.id, n.cpus) for n in t.nodes],
        "gpus": [(g.name, g.numa_node, g.local_cpus) for g in t.gpus],
        "nics": [(n.name, n.numa_node) for n in t.nics],
        "paths": sorted((p.a, p.b, p.kind) for p in t.paths),
    }


def test_dgx_a100_old_layout():
    t = parse_nvidia_smi_topo(text(DGX), DGX)
    assert t.source_kind == "nvidia-smi-topo" and t.distances is None
    # NUMA Affinity column: 3,3,1,1,7,7,5,5 (not monotonic in GPU index).
    assert [g.numa_node for g in t.gpus] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert [g.index for g in t.gpus] == list(range(8))
    assert t.gpus[0].local_cpus == (*range(48, 64), *range(176, 192))  # "48-63,176-191"
    assert t.node_ids == [1, 3, 5, 7]  # only the nodes the file names
    assert t.node(5).cpus == (*range(80, 96), *range(208, 224))
    assert t.node(5).memory_bytes is None
    # NIC columns are named mlx5_0..11; a NIC's node comes only from a PXB GPU on a known node.
    nic_nodes = {n.name: n.numa_node for n in t.nics}
    assert nic_nodes == {
        "mlx5_0": 3, "mlx5_1": 3, "mlx5_2": 1, "mlx5_3": 1, "mlx5_4": None, "mlx5_5": None,
        "mlx5_6": 7, "mlx5_7": 7, "mlx5_8": 5, "mlx5_9": 5, "mlx5_10": None, "mlx5_11": None,
    }  # fmt: skip
    assert t.find_device("mlx5_0").numa_source == "derived"
    assert t.find_device("mlx5_4").numa_source == "unknown"
    assert t.path("GPU0", "mlx5_0").kind == "PXB" and t.path("GPU0", "mlx5_0").source == "source"
    assert t.path("GPU6", "mlx5_9").kind == "PXB"
    assert t.path("GPU0", "mlx5_4").kind == "SYS"
    assert t.path("GPU3", "GPU7").kind == "NV12"
    assert len(t.paths) == 8 * 12 + 28  # every GPU-NIC cell and every GPU pair, NIC-NIC left out
    assert t.best_nic_for(t.gpus[4])[0].name in ("mlx5_6", "mlx5_7")


def test_asus_new_layout_with_nic_legend():
    t = parse_nvidia_smi_topo(text(ASUS), ASUS)
    assert [(g.name, g.numa_node) for g in t.gpus] == [("GPU0", 0), ("GPU1", 0), ("GPU2", 1), ("GPU3", 1)]
    assert t.node(0).cpus == tuple(range(32)) and t.node(1).cpus == tuple(range(32, 64))
    # NIC0..3 are named through the "NIC Legend:" block; the column title stays in attrs.
    assert [(n.name, n.attrs["column"], n.numa_node) for n in t.nics] == [
        ("mlx5_0", "NIC0", 0),
        ("mlx5_1", "NIC1", 0),
        ("mlx5_2", "NIC2", 1),
        ("mlx5_3", "NIC3", 1),
    ]
    assert all(n.is_rdma for n in t.nics)
    assert t.path("GPU0", "mlx5_0").kind == "NODE"
    assert t.path("GPU2", "mlx5_0").kind == "SYS"
    assert t.path("GPU2", "GPU3").kind == "NODE"
    assert all("gpu_numa_id" not in g.attrs for g in t.gpus)  # GPU NUMA ID is N/A


def test_tabs_and_expanded_tabs_parse_the_same():
    raw = text(DGX)
    assert "\t" in raw
    assert summary(parse_nvidia_smi_topo(raw.expandtabs(8))) == summary(parse_nvidia_smi_topo(raw))


def test_ansi_underlined_header_and_crlf():
    raw = text(ASUS)
    first, rest = raw.split("\n", 1)
    decorated = "\x1b[4m" + first + "\x1b[0m\r\n" + rest.replace("\n", "\r\n")
    assert summary(parse_nvidia_smi_topo(decorated.encode())) == summary(parse_nvidia_smi_topo(raw))


def test_old_soc_spelling_means_sys():
    raw = text(DGX)
    matrix, legend = raw.split("Legend:", 1)
    t = parse_nvidia_smi_topo(matrix.replace("SYS", "SOC") + "Legend:" + legend)
    assert t.path("GPU0", "mlx5_4").kind == "SYS"
    assert t.path("GPU0", "mlx5_0").kind == "PXB"


def test_numa_not_available_means_unknown_never_zero():
    lines = text(ASUS).split("\n")
    out = []
    for line in lines:
        if line.startswith("GPU"):
            parts = line.split()
            parts[-2] = "N/A"  # NUMA Affinity
            line = "\t".join(parts)
        out.append(line)
    t = parse_nvidia_smi_topo("\n".join(out))
    assert all(g.numa_node is None for g in t.gpus)
    assert all(n.numa_node is None for n in t.nics)
    assert t.nodes == []
    assert any("NUMA layout unknown" in w for w in t.warnings)


def test_sniff():
    assert sniff_nvidia_smi_topo(text(DGX).encode()[:4096])
    assert sniff_nvidia_smi_topo(text(ASUS).encode()[:4096])
    assert not sniff_nvidia_smi_topo(b"available: 2 nodes (0-1)\nnode 0 cpus: 0\n")
    assert not sniff_nvidia_smi_topo(b"GPU0 is hot\n")


def test_matrix_cut_short_reads_the_rows_present_with_a_warning():
    """A paste cut inside the matrix: the rows present state the paths to the missing devices (the
    matrix is symmetric); what only the missing rows state (their affinity) is unknown, in a warning."""
    lines = text(ASUS).split("\n")
    topo = parse_nvidia_smi_topo("\n".join(lines[:3]), "t.txt")
    assert len(topo.gpus) == len(parse_nvidia_smi_topo(text(ASUS), "t.txt").gpus)
    assert any("cut short" in w and "no row for" in w for w in topo.warnings)
    missing = [g for g in topo.gpus if g.attrs.get("row_missing")]
    assert missing and all(g.numa_node is None for g in missing)
    assert {g.name for g in topo.gpus if not g.attrs.get("row_missing")} <= {p.a for p in topo.paths} | {
        p.b for p in topo.paths
    }


def test_matrix_without_any_gpu_row_is_an_input_error():
    lines = text(ASUS).split("\n")
    with pytest.raises(InputError, match="no row for|without any rows"):
        parse_nvidia_smi_topo("\n".join(lines[:1]), "t.txt")


def test_short_row_is_an_input_error_with_line():
    lines = text(ASUS).split("\n")
    lines[2] = " ".join(lines[2].split()[:4])
    with pytest.raises(InputError) as e:
        parse_nvidia_smi_topo("\n".join(lines), "t.txt")
    assert e.value.line == 3 and "cells" in e.value.reason


def test_bad_cell_and_diagonal():
    raw = text(ASUS)
    with pytest.raises(InputError, match="not a path class"):
        parse_nvidia_smi_topo(raw.replace("NODE", "node", 1))
    lines = raw.split("\n")
    lines[1] = lines[1].replace(" X ", "SYS", 1)
    with pytest.raises(InputError, match="diagonal"):
        parse_nvidia_smi_topo("\n".join(lines))


@pytest.mark.parametrize("data", ["", "hello\nworld\n", "\x00\x01\x02", "GPU0\tGPU1\n"])
def test_not_a_matrix(data: str):
    with pytest.raises(InputError):
        parse_nvidia_smi_topo(data)
