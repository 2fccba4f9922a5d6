"""Lagged cross-correlation: which came first, by how much (properties)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.xcorr import event_series_lag, series_lag


def _latency(events, lag, step, n, width=3, base=10.0, rnd=None):
    pts = []
    for i in range(n):
        t = i * step
        v = base + (rnd.random() if rnd else 0.0)
        if any(0 <= t - (e + lag) < width * step for e in events):
            v += 100.0
        pts.append((t, v))
    return pts


@settings(max_examples=40, deadline=None)
@given(st.integers(-8, 8), st.integers(0, 10_000), st.sampled_from([5.0, 15.0, 30.0]))
def test_event_lag_recovered(lag_steps, seed, step):
    rnd = random.Random(seed)
    n = 600
    events = sorted(rnd.uniform(20 * step, (n - 20) * step) for _ in range(8))
    lag = lag_steps * step
    pts = _latency(events, lag, step, n, width=1, rnd=rnd)
    r = event_series_lag(events, pts, max_lag=10 * step)
    assert r is not None
    assert r.lag == pytest.approx(lag, abs=step)
    assert r.correlation > 0.3
    if lag_steps >= 2:
        assert r.leader == "first" and r.precedes
    if lag_steps <= -2:
        assert r.leader == "second" and not r.precedes


def test_no_events_in_span_gives_none():
    pts = [(i * 10.0, float(i % 7)) for i in range(100)]
    assert event_series_lag([1e9], pts, 100) is None
    assert event_series_lag([50.0], pts[:3], 100) is None


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 6), st.integers(0, 10_000))
def test_series_lag_between_two_series(lag_steps, seed):
    rnd = random.Random(seed)
    step = 10.0
    base = [rnd.gauss(0, 1) for _ in range(400)]
    first = [(i * step, base[i]) for i in range(400)]
    second = [(i * step, base[i - lag_steps] if i >= lag_steps else 0.0) for i in range(400)]
    r = series_lag(first, second, max_lag=10 * step)
    assert r is not None and r.lag == pytest.approx(lag_steps * step)
    assert r.correlation > 0.9
