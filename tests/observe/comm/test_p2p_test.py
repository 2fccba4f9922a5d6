"""p2pBandwidthLatencyTest output (observe/comm/p2p_test.py) and COMM017 (rules/comm_p2p.py): a dev control
cut inside its matrices, a public run whose direct copies are slower than the staged ones, properties."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor import diagnosis
from clusterdoctor.errors import InputError
from clusterdoctor.model import Severity
from clusterdoctor.observe.comm.p2p_test import parse_p2p_test, sniff_p2p_test

DATA = Path(__file__).resolve().parents[2] / "data"
NOW = 1_790_000_000.0


def _findings(path: Path):
    obs = diagnosis.new_observations(clock=lambda: NOW)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [path])).findings


def test_cut_output_of_a_healthy_box_is_read_and_quiet() -> None:
    # dev control ok-nccl-001: peer access only within each PCIe pair (normal across sockets), cut at the
    # first bandwidth matrix
    path = DATA / "incidents" / "ok-nccl-001" / "paste.txt"
    assert sniff_p2p_test(path.read_bytes())
    t = parse_p2p_test(path.read_text())
    assert len(t.devices) == 4 and t.can_access[(0, 1)] and not t.can_access[(0, 2)]
    assert len(t.matrices["connectivity"]) == 16 and any("not judged" in w for w in t.warnings)
    assert not [f for f in _findings(path) if f.severity >= Severity.WARNING]


def test_direct_copies_slower_than_staged_ones() -> None:
    # NVIDIA/nccl#814: ~10 GB/s with P2P enabled against ~22 GB/s through the host, every pair
    path = DATA / "comm" / "public" / "p2p_bandwidth_nccl_814.txt"
    t = parse_p2p_test(path.read_text())
    assert t.bandwidth("Enabled")[(0, 1)] == 9.90 and t.bandwidth("Disabled")[(0, 1)] == 20.10
    assert t.matrices["uni-Enabled-Bandwidth-reads"][(0, 2)] == 10.01  # the Reads matrix kept apart
    (f,) = [x for x in _findings(path) if x.rule == "COMM017"]
    assert f.severity == Severity.WARNING and f.subject == "GPUs 0, 1, 2, 3, 4, 5"
    assert f.causes == ("nccl.p2p-unsupported",) and "15 GPU pair(s)" in f.summary


def test_other_text_is_refused() -> None:
    assert not sniff_p2p_test(b"Device 0 is a GPU\n")
    try:
        parse_p2p_test("Device 0 is a GPU\n")
    except InputError:
        pass
    else:
        raise AssertionError("not p2pBandwidthLatencyTest output")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "P2P Connectivity Matrix",
                "   D\\D     0     1",
                "     0  1.5  2",
                "     1 x",
                "Device=0 CAN Access Peer Device=1",
                "zz",
            ]
        ),
        max_size=12,
    )
)
def test_any_line_mix_is_read_or_refused(lines: list[str]) -> None:
    try:
        t = parse_p2p_test("\n".join(lines))
    except InputError:
        return
    assert all(isinstance(v, float) for m in t.matrices.values() for v in m.values())
