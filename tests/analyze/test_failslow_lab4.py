"""The fail-slow detector on real probe files of batch 4 of bench/failslow.py (tests/data/failslow,
README: "Batch 4 runs"): clean runs on a heavily loaded host raise no alarm."""

from __future__ import annotations

import dataclasses

from clusterdoctor.analyze.failslow import DEFAULTS, StepTable, detect, table_from_records
from clusterdoctor.observe.watch.records import load_watch_dir
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "failslow"


def _table(name: str) -> StepTable:
    wf = load_watch_dir(str(DATA / name))
    return table_from_records(wf.steps, wf.identities, wf.links, wf.warnings)


def _alarms(res):
    return [e for e in res.episodes if e.level != "info"]


def test_a_rank_slow_only_while_a_loaded_run_settles_is_not_born_slow():
    # b4-l-c10-clean: rank 1 was slow in its first steps on a host at load 18, then settled at ~0.1
    # of a step; the born-slow pass reads its evidence on the settled steps (before: compute@1 from
    # step 1, a warning on a clean run)
    tb = _table("clean-loaded-rank1-slow-start")
    assert _alarms(detect(tb)) == []


def test_the_settled_lateness_is_what_the_bar_judges():
    # the same run with the bar at its settled lateness' level (0.1 of a step) names rank 1 again:
    # the test above passes because of the bar on the settled steps, not because the pass is off
    tb = _table("clean-loaded-rank1-slow-start")
    low = dataclasses.replace(DEFAULTS, born_min_lateness=0.09)
    al = _alarms(detect(tb, low))
    assert [(e.kind, e.rank, e.detail.get("born_slow")) for e in al] == [("compute", 1, True)]


def test_a_rank_with_more_work_is_still_named_from_step_1():
    # b3-q-f21-imbalance (4x the batch on rank 1): slow after the run settled as in its first steps
    res = detect(_table("imbalance-rank1"))
    al = _alarms(res)
    assert [(e.kind, e.rank, e.onset_step) for e in al] == [("compute", 1, 1)]
    assert al[0].detail["born_slow"]
