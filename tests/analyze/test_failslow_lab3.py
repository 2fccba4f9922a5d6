"""The fail-slow detector on real probe files of batch 3 of bench/failslow.py (tests/data/failslow,
README: "Batch 3 runs"): several stragglers at once, a rank slow from step 1, a gradual onset."""

from __future__ import annotations

import numpy as np
import pytest

from clusterdoctor.analyze.failslow import StepTable, detect, table_from_records
from clusterdoctor.observe.watch.records import load_watch_dir
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "failslow"


def _table(name: str) -> StepTable:
    wf = load_watch_dir(str(DATA / name))
    return table_from_records(wf.steps, wf.identities, wf.links, wf.warnings)


def _alarms(res):
    return [e for e in res.episodes if e.level != "info"]


@pytest.mark.parametrize("folder", ["two-quota-rank1-rank3", "two-quota-rank3-rank1"])
def test_two_ranks_frozen_inside_the_collectives_are_both_named(folder):
    # ranks 1 and 3 throttled at once: neither is reliably the last to be ready, every rank's wait
    # grew; their own stalls name both (before: a whole-job slowdown, or a collective one, no rank)
    res = detect(_table(folder))
    al = _alarms(res)
    assert {(e.kind, e.rank) for e in al} == {("compute", 1), ("compute", 3)}
    for e in al:
        assert e.detail["frozen_in_collective"] and 26 <= e.onset_step <= 40
        assert "froze at the same time" in e.why
    assert sorted(al[0].detail["frozen_together"] + [al[0].rank]) == [1, 3]


def test_rank_frozen_beside_a_late_rank_is_named_too():
    # rank 0 late to the collectives (its lateness), rank 2 frozen inside them (its stall only)
    res = detect(_table("two-quota-rank0-rank2"))
    al = _alarms(res)
    assert {(e.kind, e.rank) for e in al} == {("compute", 0), ("compute", 2)}
    (beside,) = [e for e in al if e.rank == 2]
    assert beside.detail["beside_straggler"] == 0 and "rank 0 was late" in beside.why


def test_a_second_rank_is_not_named_without_its_own_stall():
    # the same run with rank 2's stalls replaced by the healthy ranks' median: only rank 0 is named
    tb = _table("two-quota-rank0-rank2")
    tb.stall[2] = np.nanmedian(tb.stall[[1, 3]], axis=0)
    assert {e.rank for e in _alarms(detect(tb))} == {0}
