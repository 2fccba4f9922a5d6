"""The LP bound on what any packing (any number of migrations) can allocate in the FGD protocol."""

from __future__ import annotations

import numpy as np
import pytest

from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.engine import FGD_TUNE, fgd_arrival_order, run_fgd_protocol
from clusterdoctor.sim.pack_bound import packing_bound, share_patterns
from tests.sim.test_sim_defrag import _pods, _random_trace

pytest.importorskip("scipy")


def _one_gpu():
    return Cluster([GpuNode("a", 16_000, 64_000, 1, "T4")])


def test_patterns_are_maximal_and_fit():
    pats = share_patterns([300, 500, 810])
    assert {tuple(sorted(p.items())) for p in pats} == {
        ((300, 3),),
        ((300, 1), (500, 1)),
        ((500, 2),),
        ((810, 1),),
    }
    assert all(sum(m * k for m, k in p.items()) <= 1000 for p in pats)


def test_two_halves_fill_a_gpu_two_bigger_pods_do_not():
    assert packing_bound(
        _one_gpu(), _pods([(1000, 100, 1, 500)] * 2), np.arange(2)
    ).bound_milli == pytest.approx(1000)
    assert packing_bound(
        _one_gpu(), _pods([(1000, 100, 1, 600)] * 2), np.arange(2)
    ).bound_milli == pytest.approx(600)


def test_forced_pods_stay_in():
    pods = _pods([(1000, 100, 1, 810), (1000, 100, 1, 1000)])
    assert packing_bound(_one_gpu(), pods, np.arange(2)).bound_milli == pytest.approx(1000)
    assert packing_bound(_one_gpu(), pods, np.arange(2), forced=1).bound_milli == pytest.approx(810)


def test_cpu_limits_the_bound():
    # 2 GPUs but CPU for one 1-GPU pod only
    cluster = Cluster([GpuNode("a", 8_000, 64_000, 2, "T4")])
    pods = _pods([(8000, 100, 1, 1000)] * 2)
    assert packing_bound(cluster, pods, np.arange(2)).bound_milli == pytest.approx(1000)


@pytest.mark.parametrize("seed", [1, 2])
def test_bound_is_above_what_fgd_and_defrag_reach(seed):
    cluster, pods = _random_trace(seed)
    order = fgd_arrival_order(pods, cluster.total_gpus, FGD_TUNE, np.random.default_rng(seed))
    b = packing_bound(cluster, pods, order)
    for pol in ("fgd", "defrag"):
        r = run_fgd_protocol(cluster, pods, pol, seed)
        assert r.used_milli[-1] <= b.bound_milli + 1e-6


def test_zero_milli_gpu_pods_and_cpu_only_pods_add_nothing():
    pods = _pods([(1000, 100, 1, 0), (1000, 100, 0, 0), (1000, 100, 1, 300)])
    assert packing_bound(_one_gpu(), pods, np.arange(3), forced=3).bound_milli == pytest.approx(300)
