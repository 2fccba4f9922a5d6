"""PCIe ACS listings (real pastes: tests/data/pcie_acs/SOURCES.md) -> COMM022 or quiet."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.model import Severity
from clusterdoctor.observe.node.pcie_acs import FLAGS, parse_acs, sniff_acs

DATA = Path(__file__).resolve().parents[2] / "data" / "pcie_acs"


def _diagnose(*paths: Path):
    from clusterdoctor import diagnosis

    obs = diagnosis.new_observations(clock=lambda: 1_780_000_000.0)
    return diagnosis.run(obs, diagnosis.load_sources(obs, list(paths)))


@pytest.mark.parametrize(
    "name, ports, on",
    [
        ("nccl_629_acsctl_tabs.txt", 15, 4),
        ("nccl_523_acsctl_prompt.txt", 12, 7),
        ("heymeco_6_plx_midblock.txt", 1, 1),
    ],
)
def test_acs_on_is_the_top_finding(name: str, ports: int, on: int) -> None:
    d = _diagnose(DATA / name)
    top = d.findings[0]
    assert top.rule == "COMM022" and top.severity == Severity.WARNING
    assert f"{on} of the {ports}" in top.summary or (on == ports == 1 and "1 of the 1" in top.summary)
    assert "nccl.p2p-unsupported" in top.causes


@pytest.mark.parametrize(
    "name",
    ["nccl_1405_acsctl_disabled.txt", "openvmm_3461_bridge_acs_off.txt", "nccl_606_setpci_acs_zero.txt"],
)
def test_acs_off_is_read_and_quiet(name: str) -> None:
    d = _diagnose(DATA / name)
    assert d.sources, "read, not refused"
    assert not [f for f in d.findings if f.severity >= Severity.WARNING]


def test_subject_names_lines_per_file_when_several_listings() -> None:
    # two real `grep ACSCtl` pastes: both have an ACSCtl line 2, so bare numbers would repeat
    one = _diagnose(DATA / "nccl_523_acsctl_prompt.txt").findings[0]
    assert one.subject == "ACSCtl line(s) 2, 3, 4, 10, 11, 12"
    both = _diagnose(DATA / "heymeco_6_plx_midblock.txt", DATA / "nccl_523_acsctl_prompt.txt").findings[0]
    assert both.subject == (
        "ACSCtl line(s) heymeco_6_plx_midblock.txt:2, nccl_523_acsctl_prompt.txt:2, 3, 4, 10, 11"
    )


def test_ports_read_from_each_shape() -> None:
    tabs = parse_acs((DATA / "nccl_629_acsctl_tabs.txt").read_text())
    assert [p.line for p in tabs if p.enabled()] == [4, 10, 11, 13]
    assert tabs[3].enabled() == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
    setpci = parse_acs((DATA / "nccl_606_setpci_acs_zero.txt").read_text())
    assert len(setpci) == 10 and setpci[0].bdf == "0000:00:07.1" and not any(p.enabled() for p in setpci)
    block = parse_acs((DATA / "openvmm_3461_bridge_acs_off.txt").read_text())
    assert [(p.bdf, p.enabled()) for p in block] == [("00:00.0", [])]


def test_setpci_word_decodes_bits() -> None:
    # synthetic: the acs.sh line shape with the 0x001d word NVIDIA/nccl#2079 reports for AMD GPP bridges
    (p,) = parse_acs("0000:00:03.1 (ecap 000d @2a0) @2a6 001d\n")
    assert p.enabled() == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]


def test_lspci_block_with_acs_on_names_the_bridge(tmp_path: Path) -> None:
    # synthetic: the real openvmm block with its ACSCtl line switched on
    text = (DATA / "openvmm_3461_bridge_acs_off.txt").read_text()
    p = tmp_path / "paste.txt"
    p.write_text(
        text.replace("ACSCtl: SrcValid- TransBlk- ReqRedir-", "ACSCtl: SrcValid+ TransBlk- ReqRedir+")
    )
    top = _diagnose(p).findings[0]
    assert top.rule == "COMM022" and top.subject == "00:00.0"


def test_not_an_acs_listing() -> None:
    assert not sniff_acs(b"ACSCap: SrcValid+ TransBlk+\n")  # capability only: nothing set
    assert not sniff_acs(b"NCCL INFO Using network IB\n        ACSCtl: SrcValid-\n")
    assert not sniff_acs(b"")


@given(st.lists(st.sampled_from(["+", "-"]), min_size=len(FLAGS), max_size=len(FLAGS)))
def test_flags_round_trip(signs: list[str]) -> None:
    line = "\t\tACSCtl:\t" + " ".join(f"{n}{s}" for n, s in zip(FLAGS, signs)) + "\n"
    (p,) = parse_acs(line)
    assert p.flags == {n: s == "+" for n, s in zip(FLAGS, signs)}
    assert sniff_acs(line.encode())
