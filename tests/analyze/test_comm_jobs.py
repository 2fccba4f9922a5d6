"""Traces grouped by job (item 7): ranks are compared only within one job, a rank claimed twice is never
matched, a copied file is analysed once, and a truncated trace's findings say they are partial. Real
Kineto traces (fixtures/comm/kineto, tests/data/comm) copied or cut into tmp_path."""

from __future__ import annotations

import shutil

from clusterdoctor.analyze.comm import analyze_comm, group_traces
from clusterdoctor.model import Severity
from clusterdoctor.observe.comm.kineto import load_kineto
from clusterdoctor.observe.comm.sources import load_comm_observations
from clusterdoctor.rules.comm import run_comm_rules
from clusterdoctor.rules.registry import Observations
from tests.conftest import TEST_DATA, shared_fixture

GLOO = TEST_DATA / "comm" / "gloo_2rank"
HTA_WS2 = "comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz"
HTA_WS128 = "comm/kineto/hta_sampled_rank-0_ws128.json.gz"


def _findings(path) -> list:
    findings, _ = run_comm_rules(Observations(load_comm_observations(path)))
    return findings


def test_two_jobs_in_one_folder_are_compared_separately(tmp_path) -> None:
    shutil.copy(shared_fixture(HTA_WS2), tmp_path / "rank0.json.gz")  # nccl, world size 2, rank 0
    for r in (0, 1):
        shutil.copy(GLOO / f"rank{r}.json.gz", tmp_path / f"gloo_rank{r}.json.gz")  # gloo, world size 2
    traces = [load_kineto(p) for p in sorted(tmp_path.iterdir())]
    jobs, warnings = group_traces(traces)
    assert sorted(j.label for j in jobs) == [
        "gloo job of world size 2",
        "nccl job of world size 2 (NCCL 2.17.1)",
    ]
    assert any("belong to 2 jobs" in w for w in warnings)
    a = analyze_comm(traces)
    # Only the gloo pair is matched: every matched collective has both gloo ranks and none from the NCCL job.
    assert a.groups and all(len(g.calls) == 2 and g.op == "all_reduce" for g in a.groups if len(g.calls) > 1)
    assert not [h for h in a.hangs if h.kind == "mismatch"]
    assert {s.job for s in a.stragglers} <= {"gloo job of world size 2"}
    alone = analyze_comm([t for t in traces if t.backend == "gloo"])
    assert [g.seq for g in a.groups if len(g.calls) > 1] == [g.seq for g in alone.groups if len(g.calls) > 1]


def test_a_rank_claimed_by_two_traces_is_never_matched(tmp_path) -> None:
    # Two real gloo captures of the same script (3 and 2 steps): both say rank 0 of a world of 2.
    shutil.copy(GLOO / "rank0.json.gz", tmp_path / "rank0.json.gz")
    shutil.copy(GLOO / "rank1.json.gz", tmp_path / "rank1.json.gz")
    shutil.copy(TEST_DATA / "comm" / "gloo_2rank_plain" / "rank0.json", tmp_path / "rank0_rerun.json")
    data = load_comm_observations(tmp_path)
    obs = Observations(data)
    findings, _ = run_comm_rules(obs)
    a = obs.get("_comm_analysis")
    assert not [g for g in a.groups if len(g.calls) > 1] and not a.stragglers
    assert not [h for h in a.hangs if h.source != "" and h.kind == "mismatch"]
    assert not [f for f in findings if f.rule in ("COMM007", "COMM009")]
    assert any("rank 0 is claimed by 2 different traces" in w for w in a.warnings)
    # Each duplicate is still analysed on its own, named by rank and file.
    subjects = {f.subject for f in findings if f.rule == "COMM006"}
    assert any(s.startswith("rank 0 (") and "rank0_rerun.json" in s for s in subjects)


def test_a_copied_trace_is_analysed_once(tmp_path) -> None:
    for r in (0, 1):
        shutil.copy(GLOO / f"rank{r}.json.gz", tmp_path / f"rank{r}.json.gz")
    shutil.copy(GLOO / "rank0.json.gz", tmp_path / "rank0 (copy).json.gz")
    base = analyze_comm([load_kineto(GLOO / f"rank{r}.json.gz") for r in (0, 1)])
    a = analyze_comm([load_kineto(p) for p in sorted(tmp_path.iterdir())])
    assert len(a.ranks) == 2 and [g.seq for g in a.groups] == [g.seq for g in base.groups]
    assert [(s.rank, s.late_count) for s in a.stragglers] == [(s.rank, s.late_count) for s in base.stragglers]
    assert any("(a copy); analysed once" in w for w in a.warnings)


def test_truncated_trace_findings_are_partial_and_not_critical(tmp_path) -> None:
    data = shared_fixture(HTA_WS128).read_bytes()
    for frac in (0.3, 0.6, 0.9):
        p = tmp_path / f"cut{int(frac * 10)}" / "rank0.json.gz"
        p.parent.mkdir()
        p.write_bytes(data[: int(len(data) * frac)])
        findings = _findings(p)
        comm = [f for f in findings if f.layer == "comm" and f.rule != "COMM009"]
        for f in comm:
            assert f.severity <= Severity.WARNING, (frac, f.rule, f.summary)
            assert "partial input" in f.summary, (frac, f.rule)
        exposed = [f for f in comm if f.rule == "COMM006"]
        if exposed:  # the cut trace's exposed share still crosses the threshold: said to be partial
            assert any(e.description.startswith("partial input") for e in exposed[0].evidence)
        if frac == 0.6:  # 39.8% exposed on what was read: above 3x the 10% threshold, CRITICAL if whole
            (f,) = exposed
            assert f.evidence[0].value > 30 and f.severity == Severity.WARNING
