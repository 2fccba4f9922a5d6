"""DVFS model (sim.dvfs) and its use by the timed engine: monotone in the clock (Hypothesis), the
Hsu-Feng beta slowdown, the slack clock policy, and small end-to-end timed runs on synthetic jobs
(generated here, not real data: these test the mechanics)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.sim import dvfs
from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.engine import run_timed
from clusterdoctor.sim.power import CATALOG, GENERIC, power_model
from clusterdoctor.sim.traces import PodTrace

MODELS = sorted(CATALOG)
clock = st.floats(0.0, 1.2, allow_nan=False)
beta = st.floats(0.0, 1.0, allow_nan=False)


@given(st.sampled_from(MODELS), clock, clock, beta)
def test_lower_clock_never_raises_power_nor_speeds_up(model, a, b, bt):
    gp = CATALOG[model]
    lo, hi = sorted((a, b))
    assert dvfs.power_factor(gp, lo) <= dvfs.power_factor(gp, hi) + 1e-12
    assert dvfs.busy_watts(gp, lo) <= dvfs.busy_watts(gp, hi) + 1e-9
    assert dvfs.speed_factor(gp, lo, bt) <= dvfs.speed_factor(gp, hi, bt) + 1e-12


@given(st.sampled_from(MODELS), clock, beta)
def test_factors_stay_in_their_bounds(model, x, bt):
    gp = CATALOG[model]
    assert gp.idle_w <= dvfs.busy_watts(gp, x) <= gp.peak_w + 1e-9
    assert 0.0 < dvfs.speed_factor(gp, x, bt) <= 1.0
    assert dvfs.UNCLOCKED_SHARE <= dvfs.power_factor(gp, x) <= 1.0 + 1e-12


@given(st.sampled_from(MODELS), beta, st.floats(0.0, 1.0, allow_nan=False))
def test_slack_clock_keeps_the_slowdown_cap(model, bt, cap):
    gp = CATALOG[model]
    x = dvfs.ClockPolicy("slack", cap).clock(gp, bt, waiting=0)
    assert dvfs.min_clock_rel(gp) - 1e-12 <= x <= 1.0
    assert 1.0 / dvfs.speed_factor(gp, x, bt) <= 1.0 + cap + 1e-9
    # never more clock-dependent energy for the job's work than at the top clock
    assert dvfs.power_factor(gp, x) / dvfs.speed_factor(gp, x, bt) <= 1.0 + 1e-12


def test_top_clock_is_the_old_model_and_ranges_come_from_the_catalogue():
    a100 = CATALOG["A100-SXM4"]
    assert dvfs.busy_watts(a100, 1.0) == a100.peak_w
    assert dvfs.speed_factor(a100, 1.0, 1.0) == 1.0
    assert dvfs.min_clock_rel(a100) == pytest.approx(210 / 1410)
    assert dvfs.voltage_rel(a100, 0.0) == dvfs.V_MIN_REL  # clamped to the range's bottom
    # beta model: compute-bound throughput ~ f, memory-bound unaffected, half-and-half in between
    assert dvfs.speed_factor(a100, 0.5, 1.0) == pytest.approx(0.5)
    assert dvfs.speed_factor(a100, 0.5, 0.0) == 1.0
    assert dvfs.speed_factor(a100, 0.5, 0.5) == pytest.approx(1 / 1.5)
    # no range known (openb's undisclosed models): the clock cannot move
    assert dvfs.busy_watts(GENERIC, 0.3) == GENERIC.peak_w
    assert dvfs.ClockPolicy("slack").clock(GENERIC, 0.0, 0) == 1.0


def test_slack_policy_runs_at_top_clock_when_jobs_wait_and_memory_bound_goes_lower():
    h = CATALOG["H100-SXM5"]
    pol = dvfs.ClockPolicy("slack", 0.10)
    assert pol.clock(h, 1.0, waiting=3) == 1.0
    assert dvfs.ClockPolicy("max").clock(h, 0.2, waiting=0) == 1.0
    x_compute, x_memory = pol.clock(h, 1.0, 0), pol.clock(h, 0.2, 0)
    assert x_compute == pytest.approx(1 / 1.1)  # the cap binds for compute-bound work
    assert x_memory < x_compute
    with pytest.raises(ValueError, match="unknown clock policy"):
        dvfs.get_clock_policy("turbo")


def _pods(n, num_gpu=1, milli=1000):
    return PodTrace([f"j{i}" for i in range(n)], [1000] * n, [1000] * n, [num_gpu] * n, [milli] * n, [""] * n)


def test_timed_run_with_slack_clocks_saves_busy_energy_and_stretches_jobs():
    c = Cluster([GpuNode("a", 64000, 256000, 8, "A100-SXM4")])
    pods = _pods(4)
    arr = np.array([0.0, 10.0, 20.0, 30.0])
    dur = np.full(4, 1000.0)
    top = run_timed(c, pods, "best-fit", arrivals=arr, durations=dur)
    low = run_timed(c, pods, "best-fit", arrivals=arr, durations=dur, clock="slack", beta=1.0)
    assert top.jct_s.tolist() == [1000.0] * 4 and top.clock_policy == "max" and top.mean_clock_rel == 1.0
    assert low.jct_s == pytest.approx([1100.0] * 4)  # 10 % slowdown cap, compute-bound
    assert low.mean_clock_rel == pytest.approx(1 / 1.1)
    assert low.busy_energy_kwh < top.busy_energy_kwh
    assert low.useful_tflop == pytest.approx(top.useful_tflop)  # the same work, done slower
    mem = run_timed(c, pods, "best-fit", arrivals=arr, durations=dur, clock="slack", beta=0.0)
    assert mem.jct_s.tolist() == [1000.0] * 4  # memory-bound: no slowdown, and less power
    assert mem.busy_energy_kwh < low.busy_energy_kwh
    d = low.as_dict()
    assert d["clock_policy"] == "slack" and d["energy_kwh_busy_above_idle"] > 0


def test_queued_jobs_start_at_the_top_clock():
    c = Cluster([GpuNode("a", 64000, 256000, 1, "A100-SXM4")])
    pods = _pods(2)
    r = run_timed(c, pods, "first-fit", arrivals=np.array([0.0, 1.0]), durations=np.array([100.0, 100.0]),
                  clock="slack", beta=1.0)  # fmt: skip
    # job 0 alone: 110 s at the capped clock; job 1 waited, so it runs at the top clock: 100 s
    assert sorted(r.jct_s.tolist()) == pytest.approx([110.0, 209.0])
    assert power_model("A100").dvfs_mhz == (210, 1410)


def test_assumed_range_lets_unknown_models_move_and_bad_caps_are_refused():
    c = Cluster([GpuNode("g", 64000, 256000, 2, "G2")])  # openb's undisclosed model: no stored range
    pods = _pods(1)
    kw = {"arrivals": np.array([0.0]), "durations": np.array([100.0]), "beta": 1.0}
    stored = run_timed(c, pods, "best-fit", clock="slack", **kw)
    assumed = run_timed(c, pods, "best-fit", clock=dvfs.get_clock_policy("slack", 0.1, (135, 1530)), **kw)
    assert stored.jct_s.tolist() == [100.0] and stored.mean_clock_rel == 1.0
    assert assumed.jct_s == pytest.approx([110.0]) and assumed.busy_energy_kwh < stored.busy_energy_kwh
    with pytest.raises(ValueError, match="max slowdown"):
        dvfs.get_clock_policy("slack", -0.1)


def test_end_to_end_loaded_synthetic_run_trades_busy_energy_for_jct():
    from clusterdoctor.sim.synthetic import synthetic_cluster, synthetic_jobs

    c = synthetic_cluster(64)
    pods, arr, dur = synthetic_jobs(400, c, seed=5, load=1.2)  # synthetic, overloaded: queues form
    top = run_timed(c, pods, "fgd", 1, arrivals=arr, durations=dur)
    slack = run_timed(c, pods, "fgd", 1, arrivals=arr, durations=dur, clock="slack", beta=0.5)
    assert top.finished == slack.finished == 400
    assert slack.busy_energy_kwh < top.busy_energy_kwh
    assert slack.useful_tflop == pytest.approx(top.useful_tflop, rel=1e-9)
    # jobs that waited ran at the top clock: the mean clock is above the capped one, below 1
    cap_clock = dvfs.clock_for_slowdown(power_model("H100-SXM5"), 0.5, 0.10)
    assert cap_clock < slack.mean_clock_rel < 1.0
