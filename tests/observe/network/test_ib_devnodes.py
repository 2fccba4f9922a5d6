"""ls /sys/class/infiniband with ls /dev/infiniband (real paste,
https://github.com/linux-rdma/rdma-core/pull/1060, incident rdma-035)."""

from __future__ import annotations

from pathlib import Path

from clusterdoctor import diagnosis
from clusterdoctor.observe.network.ib_devnodes import parse_ib_devnodes, sniff_ib_devnodes

PASTE = """\
# ls /sys/class/infiniband
mlx5_0  mlx5_1  mlx5_2  mlx5_3

# ls /dev/infiniband/
rdma_cm  ucm0  ucm2  uverbs0  uverbs2
"""
ALL = PASTE.replace("ucm2  uverbs0  uverbs2", "uverbs0  uverbs1  uverbs2  uverbs3")


def _findings(tmp_path: Path, text: str) -> list:
    p = tmp_path / "paste.txt"
    p.write_text(text)
    obs = diagnosis.new_observations(clock=lambda: 1_780_000_000.0)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [p])).findings


def test_listings_are_read_with_their_command_lines() -> None:
    assert sniff_ib_devnodes(PASTE.encode())
    res = parse_ib_devnodes(PASTE)
    assert res.devices == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert res.uverbs == ["uverbs0", "uverbs2"]


def test_missing_uverbs_nodes_are_the_finding(tmp_path: Path) -> None:
    top = _findings(tmp_path, PASTE)[0]
    assert top.rule == "RDMA024"


def test_every_device_with_its_node_is_quiet(tmp_path: Path) -> None:
    assert not [f for f in _findings(tmp_path, ALL) if f.rule == "RDMA024"]
