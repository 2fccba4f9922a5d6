"""Interval unions on a time line: busy time without double counting, overlap and exposed time.

Kernels on several CUDA streams (or threads) overlap; summing durations counts the same wall time
twice (the Nsight/Megatron pitfall "summed kernels are not wall time"). Everything here works on
*merged* interval lists: sorted, disjoint, half-open ``(start, end)`` pairs with ``start < end``.
Plain lists of tuples keep it dependency-free; one sort plus linear sweeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Merge ``intervals`` into a sorted list of disjoint intervals; empty ones are dropped.

    Intervals that touch (``a.end == b.start``) are merged, as HTA's ``merge_kernel_intervals``
    does (a kernel starting exactly when the previous ends leaves no idle gap).
    """
    items = [iv for iv in intervals if iv[1] > iv[0]]
    items.sort()
    out: list[Interval] = []
    if not items:
        return out
    cur_s, cur_e = items[0]
    for s, e in items[1:]:
        if s <= cur_e:
            if e > cur_e:
                cur_e = e
        else:
            out.append((cur_s, cur_e))
            cur_s, cur_e = s, e
    out.append((cur_s, cur_e))
    return out


def total(merged: Sequence[Interval]) -> float:
    """Total covered length of a merged list."""
    return sum(e - s for s, e in merged)


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """Intersection of two merged lists (a merged list)."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def intersection_length(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """Length of ``a ∩ b`` for merged lists, without building the list."""
    acc = 0.0
    i = j = 0
    while i < len(a) and j < len(b):
        s = a[i][0] if a[i][0] > b[j][0] else b[j][0]
        e = a[i][1] if a[i][1] < b[j][1] else b[j][1]
        if s < e:
            acc += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return acc


def subtract(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """``a − b`` for merged lists: the parts of ``a`` not covered by ``b`` (a merged list).

    Exposed communication is ``subtract(comm, compute)``.
    """
    out: list[Interval] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            if b[k][1] > cur:
                cur = b[k][1]
            if cur >= e:
                break
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def clip(merged: Sequence[Interval], lo: float, hi: float) -> list[Interval]:
    """The parts of a merged list inside ``[lo, hi)``."""
    out = []
    for s, e in merged:
        if e <= lo or s >= hi:
            continue
        out.append((s if s > lo else lo, e if e < hi else hi))
    return out


def span(merged: Sequence[Interval]) -> float:
    """From the first start to the last end (0 for an empty list)."""
    return merged[-1][1] - merged[0][0] if merged else 0.0


# -- numpy versions for large traces (imported lazily; same semantics as the list versions) -----------


def union_arrays(starts: Any, ends: Any) -> tuple[Any, Any]:
    """Vectorised :func:`union`: merged (starts, ends) numpy arrays from interval arrays."""
    import numpy as np

    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    cm = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.greater(s[1:], cm[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], cm[last]


def exclusive_lengths(sets: Sequence[tuple[Any, Any]]) -> dict[int, float]:
    """Time covered by each exact combination of merged interval sets.

    ``sets[i]`` is a merged (starts, ends) pair; the result maps a bit mask (bit ``i`` set when set
    ``i`` covers the time) to the total length, for masks that occur (mask 0 is not reported).
    This is HTA's cumulative-status sweep (+1/-1, +2/-2, +4/-4) in vectorised form.
    """
    import numpy as np

    times, deltas = [], []
    for i, (s, e) in enumerate(sets):
        bit = 1 << i
        times.append(np.asarray(s, dtype=np.float64))
        deltas.append(np.full(len(s), bit, dtype=np.int64))
        times.append(np.asarray(e, dtype=np.float64))
        deltas.append(np.full(len(e), -bit, dtype=np.int64))
    if not times:
        return {}
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    if t.size == 0:
        return {}
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    state = np.cumsum(d)
    seg = np.diff(t)
    st = state[:-1]
    out: dict[int, float] = {}
    for mask in np.unique(st):
        if mask > 0:
            out[int(mask)] = float(seg[st == mask].sum())
    return out


def exclusive_lengths_lists(sets: Sequence[Sequence[Interval]]) -> dict[int, float]:
    """:func:`exclusive_lengths` for merged lists (pure Python; no numpy import for small inputs)."""
    points: list[tuple[float, int]] = []
    for i, merged in enumerate(sets):
        bit = 1 << i
        for s, e in merged:
            points.append((s, bit))
            points.append((e, -bit))
    if not points:
        return {}
    points.sort(key=itemgetter(0))  # stable, like the numpy version
    out: dict[int, float] = {}
    state = 0
    prev = points[0][0]
    for t, d in points:
        if state > 0 and t > prev:
            out[state] = out.get(state, 0.0) + (t - prev)
        state += d
        prev = t
    return out
