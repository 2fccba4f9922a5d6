"""detect() linear in steps (issue 26): the tail median it keeps is numpy's median exactly, and a
long run with a straggler to its end costs about steps, not steps squared (counted, not timed)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze import failslow
from clusterdoctor.analyze.failslow import StepTable, _TailMedian, detect

VALUES = st.one_of(st.sampled_from([0.0, 1.0, 1.0, 2.5, float("nan")]), st.floats(-1e6, 1e6))


@settings(max_examples=300, deadline=None)
@given(st.lists(VALUES, max_size=60), st.lists(st.integers(0, 70), max_size=20))
def test_tail_median_is_numpys(values: list[float], starts: list[int]) -> None:
    w = np.array(values, dtype=float)
    tm = _TailMedian(w)
    for i in sorted(starts):
        got = tm.median_from(i)
        want = float(np.median(w[i:])) if i < len(w) else float("nan")
        assert (np.isnan(got) and np.isnan(want)) or got == want, (i, got, want)


def _table(R: int, S: int) -> StepTable:
    rng = np.random.default_rng(7)
    own = np.abs(0.02 + 0.002 * rng.standard_normal((R, S)))
    wait = np.abs(0.01 + 0.001 * rng.standard_normal((R, S)))
    data = np.abs(0.001 + 0.0001 * rng.standard_normal((R, S)))
    on = S // 2
    own[3, on:] += 0.03  # rank 3 a compute straggler from the middle to the end
    wait[:, on:] += 0.03
    wait[3, on:] -= 0.03
    wait = np.abs(wait)
    wall = own + wait + 0.001
    t = 1.7e9 + np.cumsum(np.median(wall, axis=0))[None, :].repeat(R, 0)
    return StepTable(list(range(R)), np.arange(S), t, wall, own, wall - own, wait, data, np.zeros((R, S)))


def test_recovery_scans_stay_linear_in_steps(monkeypatch) -> None:
    scanned = {"n": 0}
    real = failslow._recovery

    def counting(x: np.ndarray, start: int, k: float, h: float) -> int | None:
        scanned["n"] += len(x) - start
        return real(x, start, k, h)

    monkeypatch.setattr(failslow, "_recovery", counting)
    work = {}
    for S in (1000, 8000):
        scanned["n"] = 0
        res = detect(_table(16, S))
        assert [(e.kind, e.rank) for e in res.episodes][:1] == [("compute", 3)]
        work[S] = scanned["n"]
    assert work[8000] <= 8 * 2 * max(work[1000], 1000)  # about 8x, never 64x
