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
