"""Property tests for interval unions, intersections, subtraction and the vectorised versions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.intervals import (
    clip,
    exclusive_lengths,
    intersect,
    intersection_length,
    span,
    subtract,
    total,
    union,
    union_arrays,
)

ivs = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 60)).map(lambda t: (float(t[0]), float(t[0] + t[1]))),
    max_size=30,
)


def _covered(merged, x: float) -> bool:
    return any(s <= x < e for s, e in merged)


def _points(*lists) -> list[float]:
    pts = set()
    for lst in lists:
        for s, e in lst:
            pts.update((s, e - 0.5, s + 0.25, e))
    return sorted(pts)


@given(ivs)
def test_union_is_sorted_disjoint_and_covers_the_same_points(a) -> None:
    u = union(a)
    assert all(s < e for s, e in u)
    assert all(u[i][1] < u[i + 1][0] for i in range(len(u) - 1))
    for x in _points(a):
        assert _covered(u, x) == any(s <= x < e for s, e in a if e > s)
    assert total(u) <= sum(e - s for s, e in a) + 1e-9
    assert union(u) == u


@given(ivs, ivs)
def test_intersection_and_inclusion_exclusion(a, b) -> None:
    ua, ub = union(a), union(b)
    inter = intersect(ua, ub)
    assert intersection_length(ua, ub) == pytest.approx(total(inter))
    assert intersection_length(ua, ub) == pytest.approx(intersection_length(ub, ua))
    assert total(union(ua + ub)) == pytest.approx(total(ua) + total(ub) - total(inter))
    for x in _points(a, b):
        assert _covered(inter, x) == (_covered(ua, x) and _covered(ub, x))


@given(ivs, ivs)
def test_subtract_is_exposed_time(a, b) -> None:
    ua, ub = union(a), union(b)
    d = subtract(ua, ub)
    assert total(d) == pytest.approx(total(ua) - intersection_length(ua, ub))
    for x in _points(a, b):
        assert _covered(d, x) == (_covered(ua, x) and not _covered(ub, x))
    assert union(d) == d


@given(ivs, st.floats(0, 150), st.floats(0, 150))
def test_clip_and_span(a, lo, width) -> None:
    u = union(a)
    c = clip(u, lo, lo + width)
    assert total(c) == pytest.approx(intersection_length(u, [(lo, lo + width)] if width > 0 else []))
    assert span(u) >= total(u)


@settings(max_examples=150)
@given(ivs)
def test_numpy_union_matches(a) -> None:
    s, e = union_arrays([x for x, _ in a], [y for _, y in a])
    assert list(zip(s.tolist(), e.tolist())) == union(a)


@settings(max_examples=150)
@given(ivs, ivs, ivs)
def test_exclusive_lengths_partition_the_union(a, b, c) -> None:
    sets = [union_arrays([x for x, _ in v], [y for _, y in v]) for v in (a, b, c)]
    ex = exclusive_lengths(sets)
    ua, ub, uc = union(a), union(b), union(c)
    assert sum(ex.values()) == pytest.approx(total(union(ua + ub + uc)))
    # bit 0 and bit 1 together = |a ∩ b|; bit 1 without bit 0 = |b − a| (exposed communication).
    assert sum(v for m, v in ex.items() if m & 1 and m & 2) == pytest.approx(intersection_length(ua, ub))
    assert sum(v for m, v in ex.items() if m & 2 and not m & 1) == pytest.approx(total(subtract(ub, ua)))
    assert sum(v for m, v in ex.items() if m & 4) == pytest.approx(total(uc))
