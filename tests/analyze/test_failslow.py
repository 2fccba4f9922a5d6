"""The fail-slow detector on real probe files from the fault lab (tests/data/failslow) and on damaged
copies of them (restarts, clock skew, silent ranks, disorder)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.failslow import StepTable, detect, table_from_records
from clusterdoctor.observe.watch.records import load_watch_dir
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "failslow"


def _table(name: str, **kw) -> StepTable:
    wf = load_watch_dir(str(DATA / name))
    return table_from_records(wf.steps, wf.identities, wf.links, wf.warnings, **kw)


@pytest.mark.parametrize(
    ("folder", "kind", "rank"),
    [
        ("quota-rank2", "compute", 2),
        ("stopcont-rank1", "compute", 1),
        ("slowloader-rank1", "data", 1),
        ("slowlink-rank3", "communication", 3),
        ("periodic-quota-rank2", "periodic", 2),
        ("jobwide-quota", "job", None),
    ],
)
def test_real_faults_named(folder, kind, rank):
    res = detect(_table(folder))
    assert [(e.kind, e.rank) for e in res.episodes] == [(kind, rank)]
    (ep,) = res.episodes
    assert 20 <= ep.onset_step <= 40  # injected when rank 0's file showed step 25 (flushed every 5)
    # stragglers within 10 steps; job-wide and collective slowdowns must last JOB_MIN_STEPS first
    # (from the lateness onset: an onset moved earlier to where the rank began to be the last to be
    # ready, 3 steps here, does not make the alarm later)
    began = ep.detail.get("lateness_onset_step", ep.onset_step)
    assert ep.detect_step - began <= (10 if rank is not None and kind != "communication" else 20)
    assert ep.factor > 1.3 and ep.steps_lost > 5 and 0.3 <= ep.confidence <= 1
    if kind == "periodic":
        assert ep.periodic_of == "compute" and ep.recurrences >= 3 and 1.5 < ep.period_s < 6


def test_clean_run_has_no_episode():
    res = detect(_table("clean"))
    assert res.episodes == [] and res.silent == [] and res.baseline_s > 0


def test_restarted_rank_keeps_its_last_run():
    wf = load_watch_dir(str(DATA / "quota-rank2"))
    # rank 1 restarted: a second run whose step counter starts again at 1
    again = [
        dataclasses.replace(r, run="restarted", step=r.step - 30)
        for r in wf.steps
        if r.rank == 1 and r.step > 30
    ]
    tb = table_from_records(wf.steps + again, wf.identities, wf.links)
    assert any("rank 1 restarted 1 time" in w for w in tb.warnings)
    res = detect(tb)
    assert res.warnings  # said, and still an answer
    assert isinstance(res.episodes, list)


def test_out_of_order_and_duplicate_records():
    wf = load_watch_dir(str(DATA / "slowloader-rank1"))
    rng = np.random.default_rng(1)
    steps = list(wf.steps)
    rng.shuffle(steps)
    steps += steps[:10]
    tb = table_from_records(steps, wf.identities, wf.links)
    assert any("out of order" in w for w in tb.warnings)
    assert any("recorded twice" in w for w in tb.warnings)
    res = detect(tb)
    assert [(e.kind, e.rank) for e in res.episodes] == [("data", 1)]


def test_clock_skew_between_hosts_corrected():
    wf = load_watch_dir(str(DATA / "quota-rank2"))
    ids = {r: [dataclasses.replace(i, host=f"node{r // 2}") for i in v] for r, v in wf.identities.items()}
    skewed = [dataclasses.replace(r, t=r.t + 7.5) if r.rank >= 2 else r for r in wf.steps]
    tb = table_from_records(skewed, ids, wf.links)
    assert any("node1: clock 7.50 s ahead of host node0" in w for w in tb.warnings)
    res = detect(tb)
    ref = detect(_table("quota-rank2"))
    assert [(e.kind, e.rank) for e in res.episodes] == [("compute", 2)]
    assert res.episodes[0].onset_t == pytest.approx(ref.episodes[0].onset_t, abs=0.1)


def test_rank_that_stops_reporting_is_silent():
    wf = load_watch_dir(str(DATA / "clean"))
    # rank 3's file ends at step 30; the others go on for 40 steps more, 60 s later
    cut = [r for r in wf.steps if not (r.rank == 3 and r.step > 30)]
    later = [dataclasses.replace(r, t=r.t + 60) if r.step > 30 else r for r in cut]
    res = detect(table_from_records(later, wf.identities))
    (s,) = res.silent
    assert s.rank == 3 and s.last_step == 30 and s.others_step == 70


def test_too_little_data_is_said():
    wf = load_watch_dir(str(DATA / "clean"))
    res = detect(table_from_records([r for r in wf.steps if r.step <= 8], wf.identities))
    assert res.episodes == [] and any("too few" in w for w in res.warnings)
    assert detect(table_from_records([], {})).episodes == []


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(0, 60),
    st.lists(st.one_of(st.floats(0, 5), st.just(float("nan"))), min_size=1, max_size=40),
)
def test_any_table_never_raises(ranks, steps, vals):
    rng = np.random.default_rng(len(vals))
    shape = (ranks, steps)
    pick = np.array(vals)[rng.integers(0, len(vals), size=(7, *shape))] if steps else np.zeros((7, *shape))
    tb = StepTable(list(range(ranks)), np.arange(steps), *pick)
    res = detect(tb)
    for e in res.episodes:
        assert e.kind in ("compute", "data", "storage", "communication", "job", "periodic")
        assert e.level in ("info", "warning", "critical")


@settings(max_examples=25, deadline=None)
@given(
    st.sets(st.integers(0, 3), max_size=2),
    st.integers(0, 40),
    st.lists(st.integers(1, 70), max_size=30),
    st.integers(0, 20),
)
def test_missing_data_never_invents_a_straggler(missing_ranks, joined_late_at, dropped, ends_early):
    """A clean run's files with whole ranks missing, one rank that joined late, steps lost here and
    there and a rank whose last steps never arrived: warnings and a best-effort answer, never an alarm."""
    wf = load_watch_dir(str(DATA / "clean"))
    drop = set(dropped)
    steps = [
        r
        for r in wf.steps
        if r.rank not in missing_ranks
        and not (r.rank == 1 and r.step < joined_late_at)
        and not (r.rank == 2 and r.step in drop)
        and not (r.rank == 0 and r.step > 70 - ends_early)
    ]
    res = detect(table_from_records(steps, wf.identities, wf.links, wf.warnings))
    assert [e for e in res.episodes if e.level != "info"] == []


def test_fsdp_straggler_is_never_a_rankless_communication_slowdown(monkeypatch):
    """FSDP2 with rank 1's training thread held to 1 ms of CPU per 25 ms (real run, README): the others
    waited ~140 ms a step for it at its first collective while the job's step grew ~350 ms (its late
    start delays every layer's all-gather), so its lateness explains only 0.40 of the growth; in a CI
    run it explained under 0.3 and the detector called it a communication slowdown with no rank. Here
    the bar is raised above this run's share to act that out on the real data: rank 1, last to be ready
    in every step with its peers waiting for it, is still the compute straggler, never rankless."""
    from clusterdoctor.analyze import failslow_classify

    res = detect(_table("fsdp2-mainthread-rank1"))
    assert [(e.kind, e.rank) for e in res.episodes if e.level != "info"][:1] == [("compute", 1)]
    monkeypatch.setattr(failslow_classify, "EXPLAINS_ALWAYS_LAST", 0.6)
    res = detect(_table("fsdp2-mainthread-rank1"))
    alarms = [e for e in res.episodes if e.level != "info"]
    assert alarms and (alarms[0].kind, alarms[0].rank) == ("compute", 1), [(e.kind, e.rank) for e in alarms]
    assert alarms[0].detail["behind_collective_slowdown"] and "only look slower" in alarms[0].why
    assert 25 <= alarms[0].onset_step <= 35 and alarms[0].detail["consistency"] >= 0.9
    assert not [e for e in res.episodes if e.kind == "communication"]  # nor a victim named by the link tests
