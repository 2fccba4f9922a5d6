"""Counter arithmetic with PromQL semantics: increases across resets, ``rate``/``increase``.

:func:`extrapolated_increase` is Prometheus' ``extrapolatedRate`` (``promql/functions.go``) for
counters: resets add the value before the drop, and the result is extrapolated to the range
boundaries when the first/last samples are within 1.1 average sample intervals of them (half an
interval otherwise), never below zero for a counter that starts at a non-negative value.
:func:`counter_increase` is the plain, non-extrapolated increase (for two direct scrapes).
Points are ``(timestamp_seconds, value)`` pairs in time order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "counter_increase",
    "extrapolated_increase",
    "increase",
    "rate",
    "rate_between",
]

Point = tuple[float, float]


def counter_increase(points: Sequence[Point]) -> tuple[float, int]:
    """Increase of a counter over ``points`` and the number of resets seen.

    A value lower than the previous one is a reset (process restart): the counter restarted at 0,
    so the new value is the increase since then. NaN values are skipped.
    """
    total = 0.0
    resets = 0
    prev: float | None = None
    for _, v in points:
        if v != v:
            continue
        if prev is not None:
            if v < prev:
                resets += 1
                total += v
            else:
                total += v - prev
        prev = v
    return total, resets


def extrapolated_increase(
    points: Sequence[Point], range_start: float, range_end: float, is_counter: bool = True
) -> float | None:
    """PromQL ``increase()`` (``delta()`` when ``is_counter`` is False) over ``[range_start, range_end]``.

    None when fewer than two points fall in the range (PromQL returns no value).
    """
    pts = [(t, v) for t, v in points if range_start <= t <= range_end]
    if len(pts) < 2:
        return None
    first_t, first_v = pts[0]
    last_t, last_v = pts[-1]
    result = last_v - first_v
    if is_counter:
        last = 0.0
        for _, v in pts:
            if v < last:
                result += last
            last = v
    duration_to_start = first_t - range_start
    duration_to_end = range_end - last_t
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    avg = sampled / (len(pts) - 1)
    threshold = avg * 1.1
    interval = sampled
    if duration_to_start >= threshold:
        duration_to_start = avg / 2
    if is_counter and result > 0 and first_v >= 0:
        duration_to_zero = sampled * (first_v / result)
        if duration_to_zero < duration_to_start:
            duration_to_start = duration_to_zero
    interval += duration_to_start
    if duration_to_end >= threshold:
        duration_to_end = avg / 2
    interval += duration_to_end
    return result * (interval / sampled)


def increase(points: Sequence[Point], range_start: float, range_end: float) -> float | None:
    """PromQL ``increase(x[range])`` evaluated at ``range_end``."""
    return extrapolated_increase(points, range_start, range_end, True)


def rate(points: Sequence[Point], range_start: float, range_end: float) -> float | None:
    """PromQL ``rate(x[range])``: the extrapolated increase per second of the range."""
    inc = extrapolated_increase(points, range_start, range_end, True)
    if inc is None or range_end <= range_start:
        return None
    return inc / (range_end - range_start)


def rate_between(v0: float, t0: float, v1: float, t1: float) -> float:
    """Per-second rate between two reads of a counter; a drop is a reset (rate from zero)."""
    dt = t1 - t0
    if dt <= 0 or math.isnan(v0) or math.isnan(v1):
        return math.nan
    inc = v1 if v1 < v0 else v1 - v0
    return inc / dt
