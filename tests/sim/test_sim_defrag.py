"""Defrag: budgeted migration in the FGD protocol (issue 24)."""

from __future__ import annotations

import numpy as np
import pytest

from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.defrag import Defragmenter
from clusterdoctor.sim.engine import _Sim, run_fgd_protocol
from clusterdoctor.sim.policies import get_policy
from clusterdoctor.sim.traces import PodTrace, load_openb_nodes, load_openb_pods
from tests.conftest import shared_fixture


def _pods(rows):
    n = len(rows)
    return PodTrace([f"p{i:03d}" for i in range(n)], [r[0] for r in rows], [r[1] for r in rows],
                    [r[2] for r in rows], [r[3] for r in rows], [""] * n, [1] * n)  # fmt: skip


def _two_nodes():
    return Cluster([GpuNode("a", 16_000, 64_000, 1, "T4"), GpuNode("b", 16_000, 64_000, 1, "T4")])


def _sim(pods, **kw):
    pol = get_policy("defrag", **kw)
    sim = _Sim(_two_nodes(), pods, pol, np.random.default_rng(0), typical_from=pods)
    return sim, Defragmenter(sim, **pol.defrag)


def test_one_migration_makes_room_for_a_whole_gpu_pod():
    pods = _pods([(1000, 100, 1, 400), (1000, 100, 1, 500), (2000, 100, 1, 1000)])
    sim, d = _sim(pods, per_100=100, repack_every=0)
    for p, node in ((0, 0), (1, 1)):
        s = int(sim.pod_spec[p])
        d.placed_pod(p, node, s, sim.place(node, s))
    s_big = int(sim.pod_spec[2])
    assert sim.choose(s_big) == -1
    node = d.try_admit(2, s_big)
    assert node == 0  # the 0.4 pod moved next to the 0.5 one, GPU 0 of node a is free
    assert d.stats.migrations == 1 and d.stats.admitted == 1
    assert d.stats.moves == [(0, 0, 1)]
    assert sim.state.gl[1, 0] == 100 and sim.state.gl[0, 0] == 1000
    assert d.stats.gpu_seconds_lost == pytest.approx(120.0 * 0.4)


def test_no_migration_without_budget():
    pods = _pods([(1000, 100, 1, 400), (1000, 100, 1, 500), (2000, 100, 1, 1000)])
    sim, d = _sim(pods, per_100=1, repack_every=0)  # 2 placed pods: 0.02 migrations allowed
    for p, node in ((0, 0), (1, 1)):
        s = int(sim.pod_spec[p])
        d.placed_pod(p, node, s, sim.place(node, s))
    assert d.try_admit(2, int(sim.pod_spec[2])) == -1
    assert d.stats.migrations == 0 and sim.state.gl[0, 0] == 600


def test_failed_move_leaves_state_unchanged():
    # the 0.6 pod on b cannot go anywhere: nothing may change
    pods = _pods([(1000, 100, 1, 600), (1000, 100, 1, 600), (2000, 100, 1, 1000)])
    sim, d = _sim(pods, per_100=100, repack_every=0)
    for p, node in ((0, 0), (1, 1)):
        s = int(sim.pod_spec[p])
        d.placed_pod(p, node, s, sim.place(node, s))
    before = (sim.state.gl.copy(), sim.state.cpu_left.copy(), sim.state.used_milli, sim.matrix.copy())
    assert d.try_admit(2, int(sim.pod_spec[2])) == -1
    assert (sim.state.gl == before[0]).all() and (sim.state.cpu_left == before[1]).all()
    assert sim.state.used_milli == before[2] and (sim.matrix == before[3]).all()


def _random_trace(seed, n=300):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        kind = rng.integers(4)
        if kind == 0:
            rows.append((int(rng.integers(1, 8)) * 1000, 1000, 0, 0))
        elif kind == 1:
            rows.append((int(rng.integers(1, 8)) * 1000, 1000, 1, int(rng.choice([250, 400, 500, 750]))))
        else:
            rows.append((int(rng.integers(1, 8)) * 1000, 1000, int(rng.choice([1, 2, 4])), 1000))
    nodes = [GpuNode(f"n{i}", 32_000, 256_000, 4 if i % 2 else 8, "T4") for i in range(24)]
    return Cluster(nodes), _pods(rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_budget_kept_and_pods_never_lost(seed):
    cluster, pods = _random_trace(seed)
    res = run_fgd_protocol(
        cluster, pods, get_policy("defrag", per_100=5, start_alloc=0.0, min_frag_gain=0), seed
    )
    placed = res.pods_arrived - res.pods_failed
    assert res.migrations <= placed * 5 // 100
    assert (np.diff(res.used_milli) >= 0).all()  # a migration moves a pod, never drops one


@pytest.mark.parametrize("seed", [1, 2])
def test_zero_budget_is_fgd(seed):
    cluster, pods = _random_trace(seed)
    a = run_fgd_protocol(cluster, pods, "fgd", seed)
    b = run_fgd_protocol(cluster, pods, get_policy("defrag", per_100=0), seed)
    assert a.allocation_curve == b.allocation_curve and b.migrations == 0


def test_bad_parameters_rejected():
    with pytest.raises(ValueError):
        get_policy("defrag", per_100=-1)


def test_openb_seed42_beats_fgd():
    nodes = load_openb_nodes(shared_fixture("sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv"))
    pods = load_openb_pods(shared_fixture("sched/alibaba_gpu_v2023/openb_pod_list_default.csv"))
    fgd = run_fgd_protocol(nodes, pods, "fgd", 42)
    dfg = run_fgd_protocol(nodes, pods, "defrag", 42)
    placed = dfg.pods_arrived - dfg.pods_failed
    assert 0 < dfg.migrations <= placed // 100
    assert dfg.final_allocation > fgd.final_allocation + 0.1
    zero = run_fgd_protocol(nodes, pods, get_policy("defrag", per_100=0), 42)
    assert zero.allocation_curve == fgd.allocation_curve and zero.migrations == 0
    assert zero.first_failed == fgd.first_failed and zero.pods_failed == fgd.pods_failed


def test_consolidate_frees_a_whole_gpu():
    pods = _pods([(1000, 1000, 1, 300), (1000, 1000, 1, 500)])
    sim, dfg = _sim(pods, per_100=100, repack_every=0, mode="consolidate", max_left=1000, min_cpu_left=0)
    for p, node in ((0, 0), (1, 1)):
        s = int(sim.pod_spec[p])
        dfg.placed_pod(p, node, s, sim.place(node, s))
    used = sim.state.used_milli
    assert dfg.consolidate()
    assert sim.state.used_milli == used and dfg.stats.migrations == 1
    assert sorted(int(sim.state.gl[n, 0]) for n in (0, 1)) == [200, 1000]  # one GPU whole again


def _drive(cluster, pods, seed, **kw):
    """The protocol loop of run_fgd_protocol, with the defragmenter in reach, checking after every
    arrival that the cluster's free resources equal capacity minus the pods the table says are there."""
    from clusterdoctor.sim.engine import FGD_TUNE, fgd_arrival_order

    rng = np.random.default_rng(seed)
    order = fgd_arrival_order(pods, cluster.total_gpus, FGD_TUNE, rng)
    pol = get_policy("defrag", **kw)
    sim = _Sim(cluster, pods, pol, rng, typical_from=pods)
    d = Defragmenter(sim, **pol.defrag)
    st, sp = sim.state, sim.specs
    for p in order:
        s = int(sim.pod_spec[p])
        node = sim.choose(s)
        if node >= 0:
            d.placed_pod(int(p), node, s, sim.place(node, s))
        elif (node := d.try_admit(int(p), s)) >= 0:
            d.placed_pod(int(p), node, s, sim.place(node, s))
        valid = d.pod >= 0
        cpu = np.where(valid, sp.cpu[d.spec], 0).sum(axis=1)
        mem = np.where(valid, sp.mem[d.spec], 0).sum(axis=1)
        gpu = (np.where(valid, sp.milli[d.spec], 0)[:, :, None] * d.mask).sum(axis=1)
        assert (st.cpu_left == st.cpu_cap - cpu).all() and (st.cpu_left >= 0).all()
        assert (st.mem_left == st.mem_cap - mem).all() and (st.mem_left >= 0).all()
        assert (st.gl == np.where(st.gpu_exists, 1000, 0) - gpu).all() and (st.gl >= 0).all()
        assert d.stats.migrations <= d.placed * kw.get("per_100", 1) // 100
    return d


@pytest.mark.parametrize("mode", ["repack", "both"])
def test_migrations_never_break_capacity(mode):
    cluster, pods = _random_trace(3)
    d = _drive(cluster, pods, 3, per_100=10, start_alloc=0.0, min_frag_gain=0, repack_every=2, mode=mode,
               max_left=1000, min_cpu_left=0)  # fmt: skip
    assert d.stats.migrations > 0


def test_first_failed_is_the_first_pod_that_fits_nowhere():
    pods = _pods([(1000, 100, 1, 1000), (1000, 100, 1, 1000), (1000, 100, 1, 1000), (1000, 100, 1, 500)])
    r = run_fgd_protocol(_two_nodes(), pods, "fgd", 0, tune=0)
    assert r.pods_failed == 2 and r.first_failed == 2
    r = run_fgd_protocol(_two_nodes(), _pods([(1000, 100, 1, 500)]), "fgd", 0, tune=0)
    assert r.pods_failed == 0 and r.first_failed == -1
