"""Quantiles of classic (cumulative, ``le``-bucketed) histograms with PromQL semantics.

:func:`histogram_quantile` follows Prometheus ``promql/quantile.go`` (``bucketQuantile``) for
classic buckets: linear interpolation inside the bucket, the lowest bucket starts at 0 when its
upper bound is positive, a rank that falls in the ``+Inf`` bucket returns the second-highest
bound, fewer than two buckets or no ``+Inf`` bucket give NaN, and counts that decrease are
raised to the previous count (differences below a relative 1e-12 are treated as float noise).
Bucket layouts always come from the data.

:func:`validate_histogram` lists what is wrong with a histogram before anyone trusts a
quantile of it (a negative ``_sum``, ``_count`` disagreeing with the ``+Inf`` bucket, repairs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from clusterdoctor.model import Histogram

__all__ = [
    "QuantileResult",
    "bucket_delta",
    "fraction_above",
    "histogram_quantile",
    "merge_histograms",
    "quantile_of",
    "validate_histogram",
]

# promql/quantile.go: smallDeltaTolerance
SMALL_DELTA_TOLERANCE = 1e-12
_MIN_NORMAL = 2.2250738585072014e-308


@dataclass
class QuantileResult:
    """A quantile and what had to be done to the data to compute it."""

    value: float
    forced_monotonic: bool = False
    fixed_precision: bool = False
    problems: list[str] = field(default_factory=list)


def _almost_equal(a: float, b: float, eps: float) -> bool:
    # github.com/prometheus/prometheus/util/almost.Equal
    if a == b:
        return True
    abs_sum = abs(a) + abs(b)
    diff = abs(a - b)
    if a == 0 or b == 0 or abs_sum < _MIN_NORMAL:
        return diff < eps * _MIN_NORMAL
    return diff / min(abs_sum, 1.7976931348623157e308) < eps


def _prepare(buckets: Sequence[tuple[float, float]]) -> tuple[list[list[float]], bool, bool]:
    """Sort, merge equal bounds, and repair monotonicity (PromQL order of operations)."""
    bs = sorted(([float(u), float(c)] for u, c in buckets), key=lambda b: b[0])
    merged: list[list[float]] = []
    for b in bs:
        if merged and merged[-1][0] == b[0]:
            merged[-1][1] += b[1]
        else:
            merged.append(b)
    forced = fixed = False
    if merged:
        prev = merged[0][1]
        for b in merged[1:]:
            curr = b[1]
            if curr == prev:
                continue
            if _almost_equal(prev, curr, SMALL_DELTA_TOLERANCE):
                b[1] = prev
                fixed = True
                continue
            if curr < prev:
                b[1] = prev
                forced = True
                continue
            prev = curr
    return merged, forced, fixed


def quantile_of(q: float, buckets: Sequence[tuple[float, float]]) -> QuantileResult:
    """φ-quantile of cumulative ``(upper_bound, count)`` buckets, with what was repaired."""
    if math.isnan(q):
        return QuantileResult(math.nan)
    if q < 0:
        return QuantileResult(-math.inf)
    if q > 1:
        return QuantileResult(math.inf)
    if not buckets:
        return QuantileResult(math.nan, problems=["no buckets"])
    bs, forced, fixed = _prepare(buckets)
    res = QuantileResult(math.nan, forced, fixed)
    if forced:
        res.problems.append("bucket counts decrease with le; raised to keep them monotonic")
    if not math.isinf(bs[-1][0]) or bs[-1][0] < 0:
        res.problems.append("no +Inf bucket")
        return res
    if len(bs) < 2:
        res.problems.append("fewer than two buckets")
        return res
    observations = bs[-1][1]
    if observations == 0 or math.isnan(observations):
        return res
    rank = q * observations
    # sort.Search over all but the +Inf bucket: first index with count >= rank
    b = len(bs) - 1
    for i in range(len(bs) - 1):
        if bs[i][1] >= rank:
            b = i
            break
    if b == len(bs) - 1:
        res.value = bs[-2][0]
        return res
    if b == 0 and bs[0][0] <= 0:
        res.value = bs[0][0]
        return res
    bucket_start = 0.0
    bucket_end = bs[b][0]
    count = bs[b][1]
    if b > 0:
        bucket_start = bs[b - 1][0]
        count -= bs[b - 1][1]
        rank -= bs[b - 1][1]
    if count == 0:  # only for rank 0 (q = 0) with an empty first bucket: Go's 0/0 is NaN
        return res
    res.value = bucket_start + (bucket_end - bucket_start) * (rank / count)
    return res


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]] | Histogram) -> float:
    """PromQL ``histogram_quantile(q, …)`` for one classic histogram (NaN when undefined)."""
    if isinstance(buckets, Histogram):
        buckets = buckets.buckets
    return quantile_of(q, buckets).value


def fraction_above(threshold: float, buckets: Sequence[tuple[float, float]] | Histogram) -> float:
    """Fraction of observations above ``threshold`` (exact when it is a bucket bound,
    linearly interpolated inside a bucket otherwise). NaN for an empty histogram."""
    if isinstance(buckets, Histogram):
        buckets = buckets.buckets
    bs, _, _ = _prepare(buckets)
    if not bs or not math.isinf(bs[-1][0]):
        return math.nan
    total = bs[-1][1]
    if total <= 0 or math.isnan(total):
        return math.nan
    below = 0.0
    lo_u, lo_c = 0.0, 0.0  # PromQL: the lowest bucket starts at 0
    for ub, c in bs:
        if threshold >= ub:
            lo_u, lo_c = ub, c
            below = c
            continue
        if math.isinf(ub) or threshold <= lo_u:
            below = lo_c
        else:
            below = lo_c + (c - lo_c) * (threshold - lo_u) / (ub - lo_u)
        break
    return min(1.0, max(0.0, (total - below) / total))


def bucket_delta(
    end: Sequence[tuple[float, float]], start: Sequence[tuple[float, float]] | None
) -> tuple[list[tuple[float, float]], bool]:
    """Bucket increases from ``start`` to ``end`` (the ``increase()`` of each ``_bucket``).

    Returns ``(buckets, reset)``: when any bucket went down the process restarted, and the
    ``end`` counts (everything since the restart) are returned with ``reset`` True.
    """
    if start is None:
        return [(float(u), float(c)) for u, c in end], False
    before = {float(u): float(c) for u, c in start}
    out = []
    for u, c in end:
        u = float(u)
        c0 = before.get(u)
        if c0 is None:
            return [(float(x), float(y)) for x, y in end], True
        if c < c0:
            return [(float(x), float(y)) for x, y in end], True
        out.append((u, float(c) - c0))
    return out, False


def merge_histograms(hists: Sequence[Histogram], name: str | None = None) -> Histogram | None:
    """Sum histograms with the same layout (PromQL ``sum by (le)``); None when empty.

    Buckets are matched by bound; a bound missing from one histogram is taken as that
    histogram's count at the next lower bound it has (cumulative semantics).
    """
    if not hists:
        return None
    bounds = sorted({u for h in hists for u, _ in h.buckets})
    totals = dict.fromkeys(bounds, 0.0)
    for h in hists:
        hb = sorted(h.buckets)
        j = -1
        for u in bounds:
            while j + 1 < len(hb) and hb[j + 1][0] <= u:
                j += 1
            totals[u] += hb[j][1] if j >= 0 else 0.0
    count = (
        sum(h.count for h in hists if h.count is not None)
        if all(h.count is not None for h in hists)
        else None
    )
    s = sum(h.sum for h in hists if h.sum is not None) if all(h.sum is not None for h in hists) else None
    common = dict(set.intersection(*(set(h.labels.items()) for h in hists)))
    ts = max((h.timestamp for h in hists if h.timestamp is not None), default=None)
    return Histogram(name or hists[0].name, common, [(u, totals[u]) for u in bounds], count, s, ts)


def validate_histogram(h: Histogram) -> list[str]:
    """Problems that make quantiles of ``h`` suspect, in words (empty when it looks sound)."""
    problems: list[str] = []
    if not h.buckets:
        return ["no buckets"]
    bs = sorted(h.buckets)
    if not math.isinf(bs[-1][0]):
        problems.append('no le="+Inf" bucket (PromQL returns NaN)')
    if any(math.isnan(c) for _, c in bs):
        problems.append("NaN bucket count")
    if any(c < 0 for _, c in bs):
        problems.append("negative bucket count")
    prev = None
    for u, c in bs:
        if prev is not None and c < prev[1] and not _almost_equal(prev[1], c, SMALL_DELTA_TOLERANCE):
            problems.append(
                f"bucket le={u:g} has fewer observations ({c:g}) than le={prev[0]:g} ({prev[1]:g})"
            )
            break
        prev = (u, c)
    if h.sum is not None:
        if math.isnan(h.sum):
            problems.append("_sum is NaN")
        elif h.sum < 0 and bs[0][0] >= 0:
            problems.append(
                f"negative _sum ({h.sum:g}) although every bucket bound is >= 0: the sum counter is corrupt"
            )
    if h.count is not None and math.isinf(bs[-1][0]) and h.count != bs[-1][1]:
        problems.append(f"_count ({h.count:g}) differs from the +Inf bucket ({bs[-1][1]:g})")
    return problems
