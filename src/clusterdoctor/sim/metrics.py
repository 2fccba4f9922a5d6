"""Metrics: the FGD paper's discretised allocation / fragmentation curves, percentiles, idle share.

``discrete_curve`` mirrors the FGD artifact's ``experiments/analysis/merge_alloc_discrete*.py``: every
scheduling event records (arrived GPU milli, allocated GPU milli); the arrived share is rounded to a
whole percent of cluster GPU capacity, the allocated share to 0.01 %, and column k is the mean of the
events whose arrived share rounds to k (events within k +- 1 when none does).
"""

from __future__ import annotations

import math

import numpy as np


def discrete_curve(
    arrived_milli: np.ndarray, value_milli: np.ndarray, total_gpus: int, max_pct: int = 130
) -> dict[int, float]:
    """{percent of capacity arrived: mean of value (as % of total GPUs)}, as in the FGD table."""
    if total_gpus <= 0 or len(arrived_milli) == 0:
        return {}
    arr = np.round(np.asarray(arrived_milli, dtype=np.float64) / total_gpus / 10.0).astype(np.int64)
    val = np.round(np.asarray(value_milli, dtype=np.float64) / total_gpus / 10.0, 2)
    hi = max(int(arr.max()), max_pct) + 2
    arr_c = np.clip(arr, 0, hi)
    sums = np.bincount(arr_c, weights=val, minlength=hi + 1)
    cnts = np.bincount(arr_c, minlength=hi + 1)
    out: dict[int, float] = {}
    for k in range(0, max_pct + 1):
        if cnts[k]:
            out[k] = round(float(sums[k] / cnts[k]), 2)
            continue
        lo_k, hi_k = max(k - 1, 0), k + 1
        c = cnts[lo_k : hi_k + 1].sum()
        if c:
            out[k] = round(float(sums[lo_k : hi_k + 1].sum() / c), 2)
    return out


def percentile(values, q: float) -> float | None:
    """The q-th percentile (0..100, linear interpolation) or None for no values."""
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=np.float64)
    if v.size == 0:
        return None
    return float(np.percentile(v, q))


def percentiles(values, qs=(50, 90, 99)) -> dict[str, float | None]:
    return {f"p{int(q)}": percentile(values, q) for q in qs}


def cdf_points(values, n: int = 200) -> list[tuple[float, float]]:
    """(value, cumulative fraction) points of the empirical CDF, at most ``n`` of them."""
    v = np.sort(np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=np.float64))
    if v.size == 0:
        return []
    idx = np.unique(np.linspace(0, v.size - 1, min(n, v.size)).astype(np.int64))
    return [(float(v[i]), float((i + 1) / v.size)) for i in idx]


def time_weighted_mean(times: np.ndarray, values: np.ndarray, end: float) -> float:
    """Mean of a step function (value[i] holds from times[i] to times[i+1], the last one until ``end``)."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if t.size == 0 or end <= t[0]:
        return float("nan")
    dt = np.diff(np.append(t, end))
    dt = np.clip(dt, 0, None)
    return float((v * dt).sum() / dt.sum()) if dt.sum() > 0 else float(v[-1])


def idle_share_by_hour(t: np.ndarray, used_milli: np.ndarray, total_gpus: int, t_end: float | None = None,
                       t0_hour: float = 0.0) -> dict[int, float]:  # fmt: skip
    """{hour of day: idle GPU share in %}, time-weighted, from a step timeline (value holds until the next
    point); ``t0_hour`` is the wall-clock hour at t = 0."""
    t = np.asarray(t, dtype=np.float64)
    u = np.asarray(used_milli, dtype=np.float64)
    if t.size == 0 or total_gpus <= 0:
        return {}
    end = float(t[-1]) if t_end is None else float(t_end)
    cap = total_gpus * 1000.0
    idle = np.zeros(24)
    span = np.zeros(24)
    # split every step at hour boundaries
    edges = np.append(t, end)
    for i in range(t.size):
        a, b = float(edges[i]), float(edges[i + 1])
        while a < b:
            h_abs = a / 3600.0 + t0_hour
            nxt = min(b, (np.floor(h_abs) + 1 - t0_hour) * 3600.0)
            h = int(np.floor(h_abs)) % 24
            dt = nxt - a
            idle[h] += dt * (1.0 - u[i] / cap)
            span[h] += dt
            a = nxt
    return {h: round(float(100.0 * idle[h] / span[h]), 2) for h in range(24) if span[h] > 0}
