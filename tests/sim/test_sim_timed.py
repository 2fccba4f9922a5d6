"""Timed engine: queueing, JCT, energy accounting and tidal's day-time reclaim, on small synthetic
workloads (generated here, not real data: these test the engine's mechanics)."""

from __future__ import annotations

import numpy as np
import pytest

from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.engine import run_timed
from clusterdoctor.sim.policies.tidal import DAY_START_H, MIGRATION_PENALTY_S, tidal_score
from clusterdoctor.sim.power import power_model
from clusterdoctor.sim.synthetic import synthetic_cluster, synthetic_jobs
from clusterdoctor.sim.traces import PodTrace


def _pods(rows, prio=None):
    n = len(rows)
    return PodTrace(
        [f"j{i}" for i in range(n)],
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [r[3] for r in rows],
        [""] * n,
        prio or [1] * n,
    )


def test_queueing_and_jct_on_a_full_node():
    c = Cluster([GpuNode("a", 64000, 256000, 2, "A100-SXM4")])
    pods = _pods([(1000, 10, 2, 1000), (1000, 10, 2, 1000), (1000, 10, 1, 1000)])
    arr = np.array([0.0, 10.0, 20.0])
    dur = np.array([100.0, 50.0, 30.0])
    r = run_timed(c, pods, "first-fit", arrivals=arr, durations=dur)
    assert r.finished == 3
    # job 1 waits for job 0 (finishes at 100), job 2 waits for job 1 (finishes at 150)
    assert sorted(r.queue_delay_s.tolist()) == [0.0, 90.0, 130.0]
    assert sorted(r.jct_s.tolist()) == [100.0, 140.0, 160.0]
    assert r.makespan_s == 180.0
    # GPU-hours: 2 GPUs x 100 s + 2 x 50 s + 1 x 30 s
    assert r.gpu_hours == pytest.approx((200 + 100 + 30) / 3600)
    pm = power_model("A100-SXM4")
    busy_j = (pm.peak_w - pm.idle_w) * (200 + 100 + 30)
    idle_j = pm.idle_w * 2 * 180
    assert r.energy_kwh == pytest.approx((busy_j + idle_j) / 3.6e6 * 1.2)


def test_tidal_reclaims_low_priority_work_in_the_day():
    c = Cluster([GpuNode("a", 64000, 256000, 8, "H100-SXM5")])
    day = DAY_START_H * 3600.0 + 60
    pods = _pods([(1000, 10, 8, 1000), (1000, 10, 8, 1000)], prio=[0, 2])
    arr = np.array([day, day + 5])
    dur = np.array([10_000.0, 100.0])
    r = run_timed(c, pods, "tidal", arrivals=arr, durations=dur)
    assert r.preemptions == 1 and r.finished == 2
    # the high-priority job waited at most until the next 30-s re-score
    assert max(r.queue_delay_s) <= 30.0
    # the reclaimed job pays the migration penalty
    assert r.makespan_s >= 10_000 + MIGRATION_PENALTY_S
    r_ff = run_timed(c, pods, "first-fit", arrivals=arr, durations=dur)
    assert r_ff.preemptions == 0 and max(r_ff.queue_delay_s) > 9000


def test_tidal_does_not_reclaim_at_night():
    c = Cluster([GpuNode("a", 64000, 256000, 8, "H100-SXM5")])
    night = 2 * 3600.0
    pods = _pods([(1000, 10, 8, 1000), (1000, 10, 8, 1000)], prio=[0, 2])
    r = run_timed(
        c, pods, "tidal", arrivals=np.array([night, night + 5]), durations=np.array([1000.0, 100.0])
    )
    assert r.preemptions == 0


def test_tidal_score_formula():
    assert tidal_score(0, 0, 1, 1) == pytest.approx(1.0)
    assert tidal_score(1, 1, 0, 3) == 0.0
    assert tidal_score(0.5, 0.5, 0.5, 2) == pytest.approx(1.0)


def test_synthetic_run_is_deterministic_and_conserves_jobs():
    c = synthetic_cluster(64)
    pods, arr, dur = synthetic_jobs(400, c, seed=5, load=1.2)
    a = run_timed(c, pods, "fgd", 3, arrivals=arr, durations=dur)
    b = run_timed(c, pods, "fgd", 3, arrivals=arr, durations=dur)
    assert a.finished == 400 and (a.jct_s == b.jct_s).all()
    assert (a.queue_delay_s >= 0).all() and a.timeline_used_milli.max() <= 64 * 1000
    assert a.as_dict()["idle_share_pct"] == pytest.approx(100 - a.as_dict()["mean_allocation_pct"])


def test_day_night_workload_follows_the_clock_and_reports_per_priority():
    from clusterdoctor.sim.synthetic import day_night_jobs

    c = synthetic_cluster(64)
    pods, arr, dur = day_night_jobs(2, c, seed=2)
    hours = (arr % 86400) // 3600
    hi = np.asarray(pods.priority) == 2
    day = (hours >= 8) & (hours < 20)
    assert (hi & day).sum() > 2 * (hi & ~day).sum()  # day load 0.8 vs night 0.2
    r = run_timed(c, pods, "tidal", 1, arrivals=arr, durations=dur)
    by = r.as_dict()["queue_delay_s_by_priority"]
    assert set(by) == {"0", "2"} and all(v["p50"] is not None for v in by.values())
