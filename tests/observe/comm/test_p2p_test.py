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


# `nvidia-smi topo -p2p rw` on two RTX 3090s, as pasted in github.com/noonghunna/club-3090/issues/1229
# (corpus case ok-gpu-602, paste-2.txt)
SMI_P2P = (
    " \tGPU0\tGPU1\t\n"
    " GPU0\tX\tGNS\t\n"
    " GPU1\tGNS\tX\t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  OK   = Status Ok\n"
    "  CNS  = Chipset not supported\n"
    "  GNS  = GPU not supported\n"
)


def test_nvidia_smi_topo_p2p_matrix_is_read_as_peer_access():
    from clusterdoctor.observe.comm.p2p_test import parse_p2p_test, sniff_p2p_test
    from clusterdoctor.observe.node.nvidia_smi import sniff_nvidia_smi_topo

    assert sniff_p2p_test(SMI_P2P.encode())
    assert not sniff_nvidia_smi_topo(SMI_P2P.encode())  # the topo -m reader leaves it alone
    t = parse_p2p_test(SMI_P2P, "p2p.txt")
    assert t.can_access == {(0, 1): False, (1, 0): False}
    assert t.statuses == {(0, 1): "GNS", (1, 0): "GNS"}
    assert t.meaning("GNS") == "GPU not supported" and not t.warnings


def test_topo_m_with_one_gpu_is_still_topo_m():
    from clusterdoctor.observe.node.nvidia_smi import sniff_nvidia_smi_topo

    one = "\tGPU0\tCPU Affinity\tNUMA Affinity\n GPU0\t X \t0-63\t0\n"
    assert sniff_nvidia_smi_topo(one.encode())


def test_pairs_without_peer_access_are_info_not_a_fault(tmp_path):
    from tests.conftest import diagnose_text

    f = diagnose_text(tmp_path, "$ nvidia-smi topo -p2p rw\n" + SMI_P2P)
    assert [x.rule for x in f] == ["COMM025"]
    assert f[0].severity == Severity.INFO and f[0].subject == "GPUs 0, 1"
    assert "GNS = GPU not supported" in f[0].summary
