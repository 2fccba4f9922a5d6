"""Issue 25: a metrics dump with N instances of one histogram made ``analyze/metric_window._group_loose``
quadratic (1k series 3 s, 4k 39 s, 20k > 280 s). The grouping (now ``analyze/metric_groups``) is one pass over the series plus the
pairs that can compare, capped; the old all-pairs grouping is kept here as the oracle."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze import metric_groups as mg
from clusterdoctor.analyze import metric_window as mw
from clusterdoctor.model import Series
from tests.hostile.harness import run_capped

pytestmark = pytest.mark.hostile


def _old_group_loose(w: mw.MetricWindow, loose: list[str]) -> dict[str, str]:
    """The grouping as it was (every pair of dumps compared in order): the oracle."""
    canon: dict[str, str] = {}
    if len(loose) < 2:
        return canon
    values = {i: mg._counter_values(w, i) for i in loose}
    starts = {i: mg._start_time(w, i) for i in loose}
    later: dict[str, str] = {}
    for x, a in enumerate(loose):
        for b in loose[x + 1 :]:
            if starts[a] is not None and starts[b] is not None and starts[a] != starts[b]:
                continue
            o = mg._order(values[a], values[b])
            if o is None:
                continue
            first, last = (b, a) if o == 1 else (a, b)
            later.setdefault(first, last)
    for i in loose:
        j, seen = i, {i}
        while j in later and later[j] not in seen:
            j = later[j]
            seen.add(j)
        if j != i:
            canon[i] = j
    for i in loose:
        if i in later and i not in canon:
            canon[i] = i
    return canon


_NAMES = ("a_total", "b_total", "h_bucket", "g", "process_start_time_seconds")


@st.composite
def windows(draw) -> tuple[mw.MetricWindow, list[str]]:
    n = draw(st.integers(0, 9))
    insts = [f"d{i}" for i in range(n)]
    w = mw.MetricWindow(source="w.prom")
    w.types = {"g": "gauge", "process_start_time_seconds": "gauge"}
    for i in insts:
        for name in draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=4)):
            les = ["1", "+Inf"] if name == "h_bucket" else [None]
            for le in draw(st.lists(st.sampled_from(les), unique=True, min_size=1)):
                labels = {"instance": i} | ({"le": le} if le else {})
                v = draw(st.sampled_from([0.0, 1.0, 2.0, 3.0, 1e20, math.nan, math.inf]))
                w.series.setdefault(name, []).append(Series(name, labels, [(0.0, v)]))
    w.snapshot_instances = set(insts)
    return w, sorted(insts)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows())
def test_r25_grouping_same_as_every_pair(wl):
    w, loose = wl
    assert mg._group_loose(w, loose) == _old_group_loose(w, loose)
    assert not w.warnings


def _window(n: int, shape: str = "same") -> mw.MetricWindow:
    """``n`` dumps (instances) of one histogram, 3 buckets each: counters equal (``same``: every pair
    compares), increasing with the instance (``rising``: one chain), or two counters that trade off
    (``crossed``: no two dumps compare, yet every sum ties: the worst case of the search)."""
    w = mw.MetricWindow(source="many.prom")
    w.types = {"h": "histogram"}
    lst = w.series.setdefault("h_bucket", [])
    for i in range(n):
        inst = f"i{i:07d}"
        for j, le in enumerate(("0.1", "1", "+Inf")):
            v = {"same": 1.0, "rising": float(i), "crossed": float(i if j == 0 else n - i if j == 1 else 0)}[
                shape
            ]
            lst.append(Series("h_bucket", {"instance": inst, "le": le}, [(0.0, v)]))
    w.snapshot_instances = {f"i{i:07d}" for i in range(n)}
    return w


@pytest.mark.parametrize("shape", ["same", "rising", "crossed"])
def test_r25_grouping_small_is_exact_and_quiet(shape):
    w = _window(300, shape)
    loose = sorted(w.snapshot_instances)
    assert mg._group_loose(w, loose) == _old_group_loose(w, loose)
    assert not w.warnings


@pytest.mark.parametrize("shape", ["same", "rising"])
def test_r25_grouping_200k_series_exact_within_a_cap(shape):
    """200k series (66k dumps of one histogram) that all compare: one group named by the last dump,
    within 2 n log2 n comparisons (the work cap given, so an O(n^2) search would stop with a
    warning; before: hours). The work is counted, not timed: no wall-clock bound."""
    w = _window(66_667, shape)
    loose = sorted(w.snapshot_instances)
    n = len(loose)
    canon = mg._group_loose(w, loose, work=int(2 * n * math.log2(n)))
    assert not w.warnings, w.warnings
    assert canon == {i: loose[-1] for i in loose[:-1]}


def test_r25_grouping_200k_series_that_never_compare_stop_at_the_work_cap():
    """The search's worst case (sums that tie, counters that never order two dumps): the grouping
    stops at its comparison cap with a warning naming the source, instead of minutes of pairs."""
    w = _window(66_667, "crossed")
    loose = sorted(w.snapshot_instances)
    canon = mg._group_loose(w, loose)
    assert canon == {}
    assert len(w.warnings) == 1 and w.warnings[0].startswith("many.prom: 66,667 dumps without identity")
    assert f"more than {mg.GROUP_WORK:,} pairs" in w.warnings[0], w.warnings  # the work cap, not the clock
    assert len(w.warnings[0]) < 200


def test_r25_grouping_stops_at_the_seconds_budget():
    """An injected clock past the ``seconds`` budget stops the grouping, said as a warning."""
    w = _window(20_000, "crossed")
    ticks = iter(range(0, 10**9, 1000))
    canon = mg._group_loose(w, sorted(w.snapshot_instances), clock=lambda: float(next(ticks)))
    assert canon == {}
    assert "took longer than" in w.warnings[0] and "many.prom" in w.warnings[0]


@pytest.mark.parametrize("crossed", [False, True])
def test_r25_grouping_dump_with_many_instances_through_the_cli(tmp_path, crossed):
    """``diagnose dump.prom`` of 60k instances of one histogram (180k series): finishes; when the
    dumps cannot be grouped within the cap, the report says so."""
    n = 60_000
    p = tmp_path / "many.prom"
    with p.open("w") as f:
        f.write("# TYPE h histogram\n")
        for i in range(n):
            for j, le in enumerate(("0.1", "1", "+Inf")):
                v = (i if j == 0 else n - i if j == 1 else 0) if crossed else 1
                f.write(f'h_bucket{{instance="i{i}",le="{le}"}} {v}\n')
    r = run_capped("diagnose", str(p), "--format", "json", timeout=300)
    assert "Traceback" not in r.err and r.code in (0, 1), r.err[-2000:]
    assert ("dumps without identity" in r.out + r.err) == crossed
    assert r.seconds < 240, r.seconds
