"""COMM023: nccl-tests on one node that stops at its column header (real pastes: NVIDIA/nccl#85 in
tests/data/comm/public/SOURCES.md, incident nccl-405)."""

from __future__ import annotations

from pathlib import Path

from clusterdoctor.model import Severity
from clusterdoctor.observe.comm.nccl_tests import parse_nccl_tests, sniff_nccl_tests

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "comm" / "public"
STALLED = PUBLIC / "nccl_85_single_test_stalled_header.txt"


def _findings(p: Path):
    from clusterdoctor import diagnosis

    obs = diagnosis.new_observations(clock=lambda: 1_780_000_000.0)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [p])).findings


def test_nccl1_single_process_test_is_read() -> None:
    text = STALLED.read_text()
    assert sniff_nccl_tests(text.encode())
    run = parse_nccl_tests(text)
    assert [(r.rank, r.device, r.bus, r.gpu) for r in run.ranks] == [
        (0, 0, "0x02", "Tesla P100-PCIE-16GB"),
        (1, 1, "0x03", "Tesla P100-PCIE-16GB"),
    ]
    assert run.stopped_after_header and run.header_line == 6 and not run.rows


def test_stall_after_header_names_peer_to_peer() -> None:
    (top, *_) = _findings(STALLED)
    assert top.rule == "COMM023" and top.severity == Severity.WARNING
    assert top.subject == "GPUs 0-1" and "nccl.p2p-unsupported" in top.causes


def test_quoted_and_unquoted_lines_mixed(tmp_path: Path) -> None:
    # synthetic: the '> ' quoting of incident nccl-405 (some lines quoted, the rank lines not)
    lines = STALLED.read_text().splitlines()
    p = tmp_path / "paste.txt"
    p.write_text(
        "\n".join(("> " + ln if i in (0, 4, 5) else ln.lstrip("#")) for i, ln in enumerate(lines)) + "\n"
    )
    assert [f.rule for f in _findings(p)][:1] == ["COMM023"]


def test_device_list_cut_before_the_header_is_not_judged(tmp_path: Path) -> None:
    # synthetic: the same run cut before its column header: nothing says the collective started
    p = tmp_path / "paste.txt"
    p.write_text("\n".join(STALLED.read_text().splitlines()[:3]) + "\n")
    assert "COMM023" not in [f.rule for f in _findings(p)]


def test_rows_after_the_header_are_no_stall() -> None:
    # synthetic: one NCCL 1.x-style row after the header
    text = STALLED.read_text() + "    10000000    2500000   float    sum    1.394   7.18  12.56    0e+00\n"
    assert not parse_nccl_tests(text).stopped_after_header or parse_nccl_tests(text).rows


def test_two_hosts_are_not_judged_as_peer_to_peer(tmp_path: Path) -> None:
    # synthetic: nccl-tests 2.x device list of two hosts, header last
    p = tmp_path / "paste.txt"
    p.write_text(
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#  Rank  0 Group  0 Pid  11 on nodeA device  0 [0x1a] NVIDIA H100 80GB HBM3\n"
        "#  Rank  1 Group  0 Pid  12 on nodeB device  0 [0x1a] NVIDIA H100 80GB HBM3\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    )
    assert "COMM023" not in [f.rule for f in _findings(p)]


# -- COMM024: nccl-tests in one process, 'unhandled system error' ----------------------------------

INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents"
_NT473 = (INCIDENTS / "nccl-028" / "paste.txt").read_text()  # NVIDIA/nccl#473, fixed by --ipc=host


def test_system_error_in_one_process_names_shared_memory(tmp_path: Path) -> None:
    (top, *_) = _findings(INCIDENTS / "nccl-028" / "paste.txt")
    assert top.rule == "COMM024" and "nccl.shm-no-space" in top.causes and top.subject == "host fastmoe"
    assert "/dev/shm" in top.summary


def test_system_error_beside_the_warn_line_that_names_it(tmp_path: Path) -> None:
    # a splice of two real pastes: nccl#473's device list, then nccl-tests#166's WARN and failure lines
    # (the same single-process shape, pid 9621): the WARN line is the cause, COMM024 says nothing
    warn = (
        "ubuntu:9621:9685 [0] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment "
        "/dev/shm/nccl-zTYolS (size 5967872)\n"
        "ubuntu: Test NCCL failure common.cu:958 'unhandled system error (run with NCCL_DEBUG=INFO for "
        "details) / '\n"
    )
    p = tmp_path / "run.txt"
    p.write_text(_NT473.rsplit("\n", 2)[0] + "\n" + warn)
    found = _findings(p)
    assert found[0].rule == "NCCL101" and not [f for f in found if f.rule == "COMM024"]


def test_system_error_of_several_processes_is_not_judged_here(tmp_path: Path) -> None:
    # synthetic variation of nccl#473: ranks 2 and 3 in another process (an MPI run): the network is
    # a suspect too, so COMM024 does not claim it
    text = _NT473.replace("Rank  2 Pid   1688", "Rank  2 Pid   1689").replace(
        "Rank  3 Pid   1688", "Rank  3 Pid   1689"
    )
    p = tmp_path / "run.txt"
    p.write_text(text)
    assert not [f for f in _findings(p) if f.rule == "COMM024"]
