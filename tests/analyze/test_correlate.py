"""Chains, cause ranking and periodic-candidate matching (properties and real logs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.correlate import build_chain, event_period, match_periods, onset, rank_causes
from clusterdoctor.model import Event
from clusterdoctor.observe.control.logs import parse_logs
from tests.conftest import TEST_DATA

times = st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=30)


@given(times, st.floats(min_value=1, max_value=500), st.floats(min_value=0.5, max_value=1000))
def test_preceding_cause_ranks_above_following(sym, lead, window):
    lead = min(lead, window / 2)  # well inside the window (no float edge at lead == window)
    before = [t - lead for t in sym]
    after = [t + lead for t in sym]
    ranks = rank_causes({"before": before, "after": after}, sym, window)
    assert ranks[0].name == "before"
    assert ranks[0].score > ranks[1].score
    assert ranks[0].precede_fraction == 1.0
    assert -1.0 <= ranks[1].score <= 1.0


@given(times, st.floats(min_value=1, max_value=100))
def test_rank_scores_bounded(sym, window):
    (r,) = rank_causes({"x": sym}, sym, window)
    assert r.precede_fraction == 1.0  # every time is preceded (at lead 0) by itself
    assert 0.0 <= r.median_lead_s <= window


def test_rank_handles_empty():
    (r,) = rank_causes({"x": []}, [1.0, 2.0])
    assert r.score == 0 and r.median_lead_s is None


@settings(max_examples=100)
@given(st.floats(min_value=1, max_value=1e5), st.integers(4, 50), st.floats(min_value=0, max_value=1e6))
def test_event_period_regular(period, n, t0):
    p, strength = event_period([t0 + i * period for i in range(n)])
    assert p == pytest.approx(period, rel=1e-6)
    assert strength == pytest.approx(1.0)


def test_event_period_needs_events():
    assert event_period([1.0, 2.0]) is None


@given(st.floats(min_value=1, max_value=1e5), st.integers(1, 4))
def test_match_periods_multiples(cp, k):
    # 4.9 x cp is more than 10 % away from every j*k and k/j with j, k in 1..4
    m = match_periods(cp * k, {"checkpoint": cp, "unrelated": cp * 4.9})
    assert m and m[0][0] == "checkpoint" and m[0][2] == k
    assert all(name != "unrelated" for name, _, _ in m)


def test_onset_subtracts_reported_duration():
    ev = Event(100.0, "etcd.heartbeat_slow", "x", attrs=(("exceeded_s", "2.5"),))
    assert onset(ev) == 97.5
    assert onset(Event(None, "etcd.slow_apply", "x")) is None


def test_chain_on_captured_stall_and_out_of_order():
    d = TEST_DATA / "etcd_stall" / "zap"
    evs = [e for i in range(3) for e in parse_logs((d / f"etcd-m{i}.log").read_bytes()).events]
    chain = build_chain(evs)
    assert [lk.stage.name for lk in chain.links] == ["etcd-stall", "etcd-leader-loss"]
    assert chain.links[0].first < chain.links[1].first
    assert "→" in chain.describe()
    # a CNI timeout an hour before the stall does not link (it cannot be caused by it)
    t = chain.links[0].first
    chain2 = build_chain(
        evs + [Event(t + 3600, "cni.timeout", "late"), Event(t - 3600, "sandbox.create_failed", "early")]
    )
    assert [lk.stage.name for lk in chain2.links] == ["etcd-stall", "etcd-leader-loss"]
    assert {lk.stage.name for lk in chain2.unlinked} == {"cni-cri-timeouts", "sandbox-failures"}
