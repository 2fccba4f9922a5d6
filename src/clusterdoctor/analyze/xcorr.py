"""Lagged cross-correlation between an event stream and a latency series: which came first.

:func:`event_series_lag` bins the event times onto the series' grid (counts per step) and
correlates them with the series at lags in ``[-max_lag, +max_lag]``. A **positive** lag means the
events *precede* the latency change by that many seconds (a cause candidate); negative means they
follow it (a consequence). :func:`series_lag` does the same for two series. numpy is imported
inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from clusterdoctor.analyze.periodicity import resample

__all__ = ["LagResult", "event_series_lag", "series_lag"]


@dataclass(frozen=True)
class LagResult:
    """Best lag (seconds; > 0: the first input leads), its Pearson correlation and who leads."""

    lag: float
    correlation: float
    leader: str  # "first", "second" or "simultaneous"
    n: int

    @property
    def precedes(self) -> bool:
        return self.lag > 0


def _best_lag(a, b, max_steps: int, step: float) -> LagResult | None:
    import numpy as np

    n = len(a)
    best = None
    for k in range(-max_steps, max_steps + 1):
        # a[t] against b[t + k]: k > 0 means a leads b by k steps
        if k >= 0:
            x, y = a[: n - k], b[k:]
        else:
            x, y = a[-k:], b[: n + k]
        if len(x) < 3:
            continue
        sx, sy = float(np.std(x)), float(np.std(y))
        if sx == 0 or sy == 0:
            continue
        r = float(np.mean((x - x.mean()) * (y - y.mean())) / (sx * sy))
        if best is None or r > best[1] + 1e-12 or (abs(r - best[1]) <= 1e-12 and abs(k) < abs(best[0])):
            best = (k, r, len(x))
    if best is None:
        return None
    k, r, m = best
    leader = "first" if k > 0 else "second" if k < 0 else "simultaneous"
    return LagResult(lag=k * step, correlation=r, leader=leader, n=m)


def event_series_lag(
    event_times: Sequence[float],
    series: Sequence[tuple[float, float]],
    max_lag: float,
    step: float | None = None,
) -> LagResult | None:
    """How far the events lead (lag > 0) or trail (lag < 0) the series, by cross-correlation.

    None when the series is too short or constant, or no event falls in its span.
    """
    import numpy as np

    vals, t0, st = resample(series, step)
    if len(vals) < 4 or st <= 0:
        return None
    n = len(vals)
    counts = np.zeros(n)
    inside = 0
    for t in event_times:
        if t != t:
            continue
        i = int(math.floor((t - t0) / st + 0.5))
        if 0 <= i < n:
            counts[i] += 1
            inside += 1
    if inside == 0:
        return None
    return _best_lag(counts, np.asarray(vals, dtype=float), max(0, int(max_lag / st)), st)


def series_lag(
    first: Sequence[tuple[float, float]],
    second: Sequence[tuple[float, float]],
    max_lag: float,
    step: float | None = None,
) -> LagResult | None:
    """How far ``first`` leads (lag > 0) or trails ``second``, both resampled to one grid."""
    import numpy as np

    v2, t0, st = resample(second, step)
    if len(v2) < 4 or st <= 0:
        return None
    t_first = [t for t, _ in first]
    v_first = [v for _, v in first]
    if len(t_first) < 2:
        return None
    grid = t0 + st * np.arange(len(v2))
    order = np.argsort(t_first)
    v1 = np.interp(grid, np.asarray(t_first)[order], np.asarray(v_first, dtype=float)[order])
    return _best_lag(v1, np.asarray(v2, dtype=float), max(0, int(max_lag / st)), st)
