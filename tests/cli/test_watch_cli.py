"""``clusterdoctor watch --from``: real probe files from the fault lab, and damaged copies of them."""

from __future__ import annotations

import json
import shutil

from tests.conftest import TEST_DATA

DATA = TEST_DATA / "failslow"


def test_straggler_report_fits_80_columns(cli):
    r = cli("watch", "--from", str(DATA / "quota-rank2"), env={"COLUMNS": "80"})
    assert r.code == 1, r.err
    assert "FS001" in r.out and "[rank 2, host vm]" in r.out and "became" in r.out
    assert max(len(line) for line in r.out.splitlines()) <= 80
    assert r.err == ""


def test_json_and_exit_codes(cli):
    r = cli("watch", "--from", str(DATA / "slowloader-rank1"), "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 1 and doc["schema"] == "clusterdoctor.watch/1"
    (f,) = doc["findings"]
    assert f["rule"] == "FS003" and f["subject"].startswith("rank 1")
    (job,) = doc["jobs"]
    assert job["ranks"] == 4 and job["episodes"][0]["kind"] == "data"
    r = cli("watch", "--from", str(DATA / "slowloader-rank1"), "--fail-on", "critical", "--format", "json")
    assert r.code == 1
    clean = cli("watch", "--from", str(DATA / "clean"))
    assert clean.code == 0 and "No fail-slow" in clean.out


def test_a_folder_of_several_jobs_is_several_jobs(cli, tmp_path):
    """Probe files of three real runs under one folder (as a user keeps them: one subfolder a job): each
    job judged on its own, not one job whose ranks "restarted" with only the last run analysed."""
    for run in ("quota-rank2", "slowloader-rank1", "clean"):
        shutil.copytree(DATA / run, tmp_path / "jobs" / run)
    r = cli("watch", "--from", str(tmp_path / "jobs"), "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 1, r.err
    assert len(doc["jobs"]) == 3 and all(j["ranks"] == 4 for j in doc["jobs"])
    assert sorted((f["rule"], f["subject"].split(": ", 1)[1].split(",")[0]) for f in doc["findings"]) == [
        ("FS001", "rank 2"),
        ("FS003", "rank 1"),
    ]
    assert all(f["subject"].startswith("job lab-") for f in doc["findings"])
    assert not any("restarted" in w for w in doc["warnings"]), doc["warnings"]


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    r = cli("watch", "--from", str(tmp_path / "nope"))
    assert r.code == 2 and r.err.count("\n") == 1 and "no such file" in r.err
    (tmp_path / "junk.jsonl").write_text("not json\n")
    r = cli("watch", "--from", str(tmp_path))
    assert r.code == 2 and "no fail-slow probe file" in r.err and "Traceback" not in r.err
    r = cli("watch", "--from", str(DATA / "clean"), "--prometheus", "http://127.0.0.1:9")
    assert r.code == 2 and "exactly one" in r.err
    r = cli("watch")
    assert r.code == 2


def test_damaged_files_give_warnings_and_an_answer(cli, tmp_path):
    d = tmp_path / "job"
    shutil.copytree(DATA / "quota-rank2", d)
    f = d / "watch-rank1.jsonl"
    lines = f.read_text().splitlines(keepends=True)
    lines[10], lines[11] = lines[11], lines[10]  # out of order
    f.write_text("".join(lines)[:-25])  # and cut mid-line at the end
    g = d / "watch-rank3.jsonl"
    head, rest = g.read_text().split("\n", 1)
    restart = json.loads(head)
    restart["run"] = "restarted-1"
    g.write_text(
        head + "\n" + rest + json.dumps(restart) + "\n" + "".join(rest.splitlines(keepends=True)[:30])
    )
    r = cli("watch", "--from", str(d), "--format", "json")
    assert r.code in (0, 1) and "Traceback" not in r.err
    warns = " | ".join(json.loads(r.out)["warnings"])
    assert "out of order" in warns and "last line has no newline" in warns and "rank 3 restarted" in warns


def test_follow_refreshes(cli):
    r = cli("watch", "--from", str(DATA / "stopcont-rank1"), "--follow", "--count", "2", "--interval", "0.1")
    assert r.code == 1 and r.out.count("clusterdoctor watch —") == 2 and "FS001" in r.out


def test_rule_catalog_carries_the_alerts(cli):
    r = cli("rules", "FS001", "--json")
    doc = json.loads(r.out)
    (alert,) = doc["alerts"]
    assert alert["alert"] == "TrainingStragglerPresent" and alert["for"] == "5m"
    assert alert["labels"] == {"severity": "warning", "rule": "FS001", "layer": "failslow"}
    assert "clusterdoctor_watch_collective_wait_seconds_total" in alert["expr"]
    text = cli("rules", "FS001", env={"COLUMNS": "80"}).out
    assert "TrainingStragglerPresent (warning, for 5m):" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    # a rule without alerts of its own alerts through the agent's finding series
    assert "clusterdoctor_finding" in json.loads(cli("rules", "NUMA001", "--json").out)["alerts"][0]["expr"]
    assert "FS006" in cli("rules", "--layer", "failslow").out


def test_fs001_on_a_cpu_rank_gives_cpu_advice(cli):
    """A straggler rank that runs on the CPU (real gloo run, rank 2 under a cgroup quota) is not told
    to run nvidia-smi: its fix and verify name the CPU's causes (quota, affinity, neighbours)."""
    r = cli("watch", "--from", str(DATA / "quota-rank2"), "--once", "--format", "json")
    assert r.code == 1, r.err
    (fs,) = [f for f in json.loads(r.out)["findings"] if f["rule"] == "FS001"]
    assert any(e.get("value") == "CPU (no GPU)" for e in fs["evidence"])
    assert "nvidia-smi" not in fs["fix"] and not any("nvidia-smi" in v for v in fs["verify"])
    assert "CPU limit" in fs["fix"] and any("cpu.stat" in v for v in fs["verify"])
