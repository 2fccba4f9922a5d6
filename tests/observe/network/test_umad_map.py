"""The /sys/class/infiniband_mad map (observe/network/umad_map.py).

Real: Mellanox/rdmamap#17 (https://github.com/Mellanox/rdmamap/pull/17), an XDR setup's loop over
umad*/issm* (incident ok-rdma-013) and, from the same comment, the PCI map block that is not this
map. No other public paste of this loop was found (search corpus issues, 2026-12-03)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.umad_map import load_umad_map, parse_umad_map, sniff_umad_map

REAL = Path(__file__).resolve().parents[2] / "data" / "incidents" / "ok-rdma-013" / "paste.txt"
# the second block of the same comment (rdmamap#17): PCI class and driver per RDMA device
PCI_BLOCK = """=== 1. PCI class for all infiniband devices ===
mlx5_0 -> pci=0000:0b:00.0 class=0x020700 driver=mlx5_core
smi1 -> pci=0000:0b:00.0 class=0x020700 driver=mlx5_core
"""


def test_real_loop_read_with_its_command_lines():
    text = REAL.read_text()
    assert sniff_umad_map(text.encode())
    nodes, skipped = parse_umad_map(text, "p")
    assert skipped == []
    assert [(n.node, n.ibdev, n.port) for n in nodes][:2] == [("umad0", "mlx5_0", 1), ("umad1", "smi1", 1)]
    assert sum(n.is_sm for n in nodes) == 4
    assert {n.ibdev for n in nodes} == {"mlx5_0", "smi1"}


def test_described_by_what_it_holds(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text(REAL.read_text())
    out = load_umad_map(p)
    assert out["described_as"] == "infiniband_mad map (5 umad, 4 issm node(s); mlx5_0, smi1)"
    assert "warnings" not in out


def test_pci_map_is_not_this_map():
    assert not sniff_umad_map(PCI_BLOCK.encode())
    with pytest.raises(InputError):
        parse_umad_map(PCI_BLOCK, "p")


def test_unreadable_sysfs_values_are_none_and_other_lines_named():
    # synthetic: cat failed for umad1 (2>/dev/null leaves the value empty)
    text = "umad0 -> ibdev=mlx5_0 port=1\numad1 -> ibdev= port=\nsomething else\n"
    nodes, skipped = parse_umad_map(text, "p")
    assert (nodes[1].ibdev, nodes[1].port) == (None, None)
    assert skipped == [3]


def test_control_is_read_and_quiet(tmp_path):
    from clusterdoctor import diagnosis

    p = tmp_path / "paste.txt"
    p.write_text(REAL.read_text())
    obs = diagnosis.new_observations(clock=lambda: 1_700_000_000.0)
    refs = diagnosis.load_sources(obs, [p])
    d = diagnosis.run(obs, refs)
    assert d.findings == []
    assert not [w for w in d.warnings if w.startswith("not used: ")]
