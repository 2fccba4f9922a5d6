"""``clusterdoctor comm analyze`` as users run it: JSON/HTML/text output, exit codes, bad input."""

from __future__ import annotations

import json
import shutil

from tests.conftest import TEST_DATA, run_cli, shared_fixture

GLOO = TEST_DATA / "comm" / "gloo_2rank"
RANK_KEYS = {
    "rank",
    "compute_time_us",
    "comm_time_us",
    "exposed_comm_time_us",
    "idle_time_us",
    "comm_comp_overlap_pct",
    "temporal_breakdown_pct",
}
FINDING_KEYS = {
    "rule",
    "title",
    "layer",
    "severity",
    "confidence",
    "score",
    "summary",
    "evidence",
    "fix",
    "verify",
}


def test_json_for_two_ranks() -> None:
    r = run_cli("comm", "analyze", str(GLOO), "--format", "json", "--fail-on", "critical")
    assert r.code in (0, 1), r.err
    doc = json.loads(r.out)
    assert doc["schema"] == "clusterdoctor.comm/1"
    assert [x["rank"] for x in doc["ranks"]] == [0, 1]
    for rank in doc["ranks"]:
        assert RANK_KEYS <= set(rank)
        tb = rank["temporal_breakdown_pct"]
        assert abs(tb["compute"] + tb["non_compute"] + tb["idle"] - 100) < 0.05
        assert rank["exposed_comm_time_us"] <= rank["comm_time_us"]
    assert {c["nbytes"] for c in doc["collectives"]} == {4096, 65536, 1048576}
    assert all(c["ranks"] == 2 for c in doc["collectives"])
    for f in doc["findings"]:
        assert FINDING_KEYS <= set(f)
    worst = {f["severity"] for f in doc["findings"]}
    assert r.code == (1 if "critical" in worst else 0)


def test_html_is_self_contained(tmp_path) -> None:
    out = tmp_path / "comm.html"
    r = run_cli(
        "comm",
        "analyze",
        str(shared_fixture("comm/kineto/hta_sampled_rank-0_ws128.json.gz")),
        "-f",
        "html",
        "-o",
        str(out),
    )
    assert r.code in (0, 1), r.err
    html = out.read_text()
    assert "<svg" in html and "Exposed communication" in html and "Collectives by size" in html
    assert "<script" not in html and "http" not in html.split("<body>", 1)[1].split("Sources:")[0]
    assert "COMM006" in html


def test_text_with_link_option_and_findings_exit() -> None:
    r = run_cli(
        "comm",
        "analyze",
        str(shared_fixture("comm/nccl_tests_dgxa100_4gpu_p2pdisabled.txt")),
        "--link",
        "nvswitch",
    )
    assert r.code == 1
    assert "COMM004" in r.out and "5.20 GB/s" in r.out


def test_bad_inputs_one_line_exit_2(tmp_path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    r = run_cli("comm", "analyze", str(junk))
    assert r.code == 2 and r.err.count("\n") == 1 and "notes.txt" in r.err and "Traceback" not in r.err
    r = run_cli("comm", "analyze", str(GLOO), "--link", "warp-drive")
    assert r.code == 2 and "Traceback" not in r.err
    r = run_cli("comm", "analyze", str(tmp_path / "missing"))
    assert r.code == 2 and "no such file" in r.err


def test_truncated_gzip_is_analysed_with_a_warning_and_exit_2(tmp_path) -> None:
    """The report analyses what was read and says the file was cut; the exit code says so too
    (issue 15: an incomplete input never exits as a clean or findings-only run)."""
    d = tmp_path / "traces"
    d.mkdir()
    data = shared_fixture("comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz").read_bytes()
    (d / "rank0.json.gz").write_bytes(data[: len(data) // 2])
    shutil.copy(GLOO / "rank1.json.gz", d / "rank1.json.gz")
    r = run_cli("comm", "analyze", str(d), "--format", "json")
    assert r.code == 2 and "Traceback" not in r.err and "Aborted" not in r.err, r.err
    doc = json.loads(r.out)
    assert any("ends early" in w for w in doc["warnings"])
    assert [t["truncated"] for t in doc["traces"]] == [True, False]


PUBLIC = TEST_DATA / "comm" / "public"
TORCHRUN = TEST_DATA / "comm" / "torchrun_gloo"


def _incident(tmp_path):
    """An incident folder as users have one: logs of two nodes, a pasted nccl-tests table, traces, notes,
    a screenshot, an empty file and an unrelated JSON config."""
    d = tmp_path / "incident-2026-12-01"
    (d / "node1").mkdir(parents=True)
    (d / "node2").mkdir()
    (d / "traces").mkdir()
    shutil.copy(TORCHRUN / "stuck_rank_tee" / "console.log", d / "node1" / "console.log")
    shutil.copy(PUBLIC / "unige_hpc_4301_allgather_seq1_4rank.log", d / "node2" / "train.log")
    shutil.copy(shared_fixture("comm/nccl_tests_dgxa100_4gpu_p2pdisabled.txt"), d / "all_reduce.txt")
    for r in (0, 1):
        shutil.copy(GLOO / f"rank{r}.json.gz", d / "traces" / f"rank{r}.json.gz")
    (d / "notes.txt").write_text("the job hung after the upgrade\n")
    (d / "screenshot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (d / "empty.log").write_bytes(b"")
    (d / "config.json").write_text('{"lr": 0.001, "batch": 32}\n')
    return d


def test_incident_folder_reads_everything_recognised_and_lists_the_rest(tmp_path) -> None:
    d = _incident(tmp_path)
    r = run_cli("comm", "analyze", str(d), "--format", "json")
    assert r.code == 1, r.err  # CRITICAL findings: the first collective never completed, a gloo timeout
    doc = json.loads(r.out)
    assert doc["read_counts"] == {"kineto": 2, "nccl_log": 2, "nccl_tests": 1, "flight_recorder": 0, "ncu": 0}
    skipped = {u["path"].rsplit("/", 1)[-1]: u["reason"] for u in doc["unrecognised"]}
    assert skipped == {
        "config.json": "JSON, but not a Kineto trace or Flight Recorder dump",
        "empty.log": "empty file",
        "notes.txt": "text without NCCL, PyTorch distributed, nccl-tests or ncu lines",
        "screenshot.png": "binary data",
    }
    assert {f["rule"] for f in doc["findings"]} >= {"COMM012", "COMM004", "COMM006"}
    # node1's gloo timeout names no culprit: it is evidence of the incident's cause (node2's first collective
    # that never completed), not a finding of its own
    first = next(f for f in doc["findings"] if f["rule"] == "COMM012")
    assert any("explains COMM009" in e["description"] for e in first["evidence"])


def test_a_list_mixing_recognised_and_unrecognised_files(tmp_path) -> None:
    d = _incident(tmp_path)
    r = run_cli(
        "comm",
        "analyze",
        str(d / "notes.txt"),
        str(d / "node2" / "train.log"),
        str(d / "missing.log"),
        "--format",
        "json",
    )
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    assert [f["rule"] for f in doc["findings"]] == ["COMM012"]
    assert {u["path"].rsplit("/", 1)[-1]: u["reason"] for u in doc["unrecognised"]} == {
        "notes.txt": "text without NCCL, PyTorch distributed, nccl-tests or ncu lines",
        "missing.log": "no such file or directory",
    }


def test_nothing_recognised_is_one_line_naming_the_folder(tmp_path) -> None:
    d = tmp_path / "only-notes"
    d.mkdir()
    (d / "a.txt").write_text("nothing here\n")
    (d / "b.json").write_text("[1, 2, 3]\n")
    r = run_cli("comm", "analyze", str(d))
    assert r.code == 2 and r.out == "" and "Traceback" not in r.err
    assert r.err.count("\n") == 1 and str(d) in r.err and "2 file(s) looked at" in r.err
    r = run_cli("comm", "analyze", str(d / "a.txt"), str(d / "b.json"))
    assert r.code == 2 and r.err.count("\n") == 1 and "a.txt" in r.err


def test_a_damaged_trace_in_a_folder_is_skipped_with_its_reason(tmp_path) -> None:
    d = tmp_path / "traces"
    d.mkdir()
    shutil.copy(GLOO / "rank1.json.gz", d / "rank1.json.gz")
    (d / "rank0.json.gz").write_bytes(
        b"\x1f\x8b\x08\x00" + b"\x00" * 40
    )  # a gzip header, then nothing usable
    r = run_cli("comm", "analyze", str(d), "--format", "json")
    assert r.code in (0, 1), r.err
    doc = json.loads(r.out)
    assert [t["rank"] for t in doc["traces"]] == [1]
    assert [u["path"].rsplit("/", 1)[-1] for u in doc["unrecognised"]] == ["rank0.json.gz"]


def test_launcher_prefixed_pytorch_log_through_diagnose() -> None:
    r = run_cli("diagnose", str(PUBLIC / "unige_hpc_4301_allgather_seq1_4rank.log"), "--format", "json")
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    (f,) = [f for f in doc["findings"] if f["rule"] == "COMM012"]
    assert f["subject"] == "ranks 0-3"


def _too_wide(text: str, width: int) -> list[str]:
    """Lines wider than ``width`` that could have been broken: a line may exceed it only by holding one
    token (a path, a command) wider than what is left of the line."""
    bad = []
    for line in text.splitlines():
        if len(line) <= width:
            continue
        words = line.split()
        longest = max(words, key=len)
        if len(line) - len(longest) < width and len(longest) > width - (len(line) - len(longest)):
            continue
        bad.append(line)
    return bad


def test_text_report_fits_80_columns_with_relative_paths(tmp_path) -> None:
    d = _incident(tmp_path)
    r = run_cli("comm", "analyze", str(d), env={"COLUMNS": "80"})
    assert r.code == 1, r.err
    assert not _too_wide(r.out, 80), _too_wide(r.out, 80)
    head, second, rest = r.out.split("\n", 2)
    assert f"inputs under {d}" in f"{head} {second.strip()}"  # the folder alone on line 2 when it is long
    assert "node2/train.log:1" in r.out and "traces/rank0.json.gz" in r.out
    body = rest
    assert str(d) not in body  # every other path is relative to the inputs' folder
    assert "Skipped files (4):" in r.out and "screenshot.png: binary data" in r.out
    narrow = run_cli("comm", "analyze", str(d), env={"COLUMNS": "60"})
    assert not _too_wide(narrow.out, 60)


def test_text_width_defaults_to_80_without_a_terminal(tmp_path) -> None:
    d = _incident(tmp_path)
    r = run_cli("comm", "analyze", str(d), env={"COLUMNS": ""})  # stdout is a pipe here
    assert r.code == 1 and not _too_wide(r.out, 80) and max(len(x) for x in r.out.splitlines()) > 60


def test_html_lists_skipped_files_and_link_class(tmp_path) -> None:
    d = _incident(tmp_path)
    out = tmp_path / "comm.html"
    r = run_cli("comm", "analyze", str(d), "-f", "html", "-o", str(out))
    assert r.code == 1, r.err
    html = out.read_text()
    assert "Skipped files (4)" in html and "screenshot.png" in html and "binary data" in html
    assert "host memory, one socket (P2P off)" in html and "a degraded path" in html
