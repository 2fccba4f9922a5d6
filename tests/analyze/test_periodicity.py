"""Period and strength of a series (properties)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.periodicity import detect_period


@settings(max_examples=40, deadline=None)
@given(st.floats(60, 900), st.floats(5, 30), st.integers(0, 10_000), st.floats(0, 0.3))
def test_sinusoid_period_recovered(period, step, seed, noise):
    n = int(period * 6 / step)
    if n > 4000 or n < 40:
        return
    rnd = random.Random(seed)
    pts = [
        (i * step, 100 + 10 * math.sin(2 * math.pi * i * step / period) + noise * 10 * rnd.gauss(0, 1))
        for i in range(n)
    ]
    p = detect_period(pts)
    assert p is not None
    assert p.period == pytest.approx(period, rel=0.06, abs=step)
    assert p.strength > 0.5
    assert p.cycles == pytest.approx(n * step / p.period, rel=0.01)


@settings(max_examples=30, deadline=None)
@given(st.floats(120, 600), st.integers(0, 10_000))
def test_periodic_spikes_on_a_trend(period, seed):
    """Spiky degradation (like a checkpoint every `period` s) on top of a slow drift."""
    rnd = random.Random(seed)
    step = 10.0
    pts = []
    for i in range(int(period * 8 / step)):
        t = i * step
        spike = 50.0 if (t % period) < 30 else 0.0
        pts.append((t, 5 + t * 0.001 + spike + rnd.random()))
    p = detect_period(pts)
    assert p is not None and p.period == pytest.approx(period, rel=0.06, abs=step)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_white_noise_has_no_strong_period(seed):
    rnd = random.Random(seed)
    pts = [(i * 15.0, rnd.gauss(0, 1)) for i in range(600)]
    p = detect_period(pts, min_strength=0.5)
    assert p is None


def test_constant_and_short_series():
    assert detect_period([(i, 3.0) for i in range(100)]) is None
    assert detect_period([(0, 1.0), (1, 2.0)]) is None
    assert detect_period([]) is None


def test_irregular_sampling_is_resampled():
    rnd = random.Random(1)
    ts = sorted(rnd.uniform(0, 3600) for _ in range(500))
    pts = [(t, math.sin(2 * math.pi * t / 300)) for t in ts]
    p = detect_period(pts)
    assert p is not None and p.period == pytest.approx(300, rel=0.06)
