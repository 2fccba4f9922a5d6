"""Counter increase/rate with resets and PromQL extrapolation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.rates import counter_increase, increase, rate, rate_between


def test_reset_adds_value_after_drop():
    pts = [(0, 10), (10, 20), (20, 5), (30, 15)]
    assert counter_increase(pts) == (10 + 5 + 10, 1)


def test_samples_on_boundaries_need_no_extrapolation():
    pts = [(t, t * 2.0) for t in range(0, 301, 60)]
    assert increase(pts, 0, 300) == pytest.approx(600)
    assert rate(pts, 0, 300) == pytest.approx(2.0)


def test_extrapolates_half_an_interval_when_far_from_boundaries():
    # samples at 100..200 every 10 s in a range [0, 300]: far from both ends -> +5 s each side
    pts = [(t, 1000.0 + t) for t in range(100, 201, 10)]
    assert increase(pts, 0, 300) == pytest.approx(100 * (110 / 100))


def test_extrapolation_stops_at_zero_for_counters():
    # counter starting at 1 with slope 1/s: zero was 1 s before the first sample
    pts = [(t, 1.0 + (t - 50)) for t in range(50, 101, 10)]
    assert increase(pts, 0, 100) == pytest.approx(50 * (51 / 50))


def test_fewer_than_two_points_give_none():
    assert increase([(5, 1.0)], 0, 10) is None
    assert rate([], 0, 10) is None


def test_rate_between_two_scrapes():
    assert rate_between(10, 0, 30, 5) == 4
    assert rate_between(30, 0, 10, 5) == 2  # reset: counted from zero
    assert math.isnan(rate_between(1, 5, 2, 5))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6), st.booleans()), min_size=1, max_size=40), st.floats(0, 1e6))
def test_counter_increase_recovers_true_increase(steps, start):
    """A counter built from increments, restarting at random points, yields their sum."""
    v = start
    pts = [(0.0, v)]
    true = 0.0
    for i, (inc, restart) in enumerate(steps, 1):
        if restart and inc > 0:
            v = inc  # restarted at zero, then grew by inc (a drop only when inc < v)
            if v >= pts[-1][1]:
                true += v - pts[-1][1]
            else:
                true += v
        else:
            v += inc
            true += inc
        pts.append((float(i), v))
    got, _ = counter_increase(pts)
    assert got == pytest.approx(true, rel=1e-9, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.01, 100), st.integers(3, 50), st.floats(1, 60))
def test_linear_counter_rate_is_exact(slope, n, dt):
    pts = [(i * dt, 1e7 + slope * i * dt) for i in range(n)]  # far from zero: no zero clamp
    end = (n - 1) * dt
    assert rate(pts, 0, end) == pytest.approx(slope, rel=1e-6)
    # a range a little wider than the samples extrapolates and still gives the slope
    assert rate(pts, -dt / 4, end + dt / 4) == pytest.approx(slope, rel=1e-6)
