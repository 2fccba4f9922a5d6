"""Engine, frag maths and policies: determinism, the FGD fragmentation against a plain reference, and
the reproduction of the published FGD numbers on one seed (all seeds: bench/sim_fgd_reproduce.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.engine import _Sim, fgd_arrival_order, run_fgd_protocol
from clusterdoctor.sim.frag import TypicalPods, node_frag, typical_pods
from clusterdoctor.sim.metrics import discrete_curve, percentile
from clusterdoctor.sim.policies import get_policy
from clusterdoctor.sim.reproduce import mean_curve, parse_published
from clusterdoctor.sim.traces import PodTrace, load_openb_nodes, load_openb_pods
from tests.conftest import shared_fixture

OPENB = "sched/alibaba_gpu_v2023"


def _pods(rows):
    """rows: (cpu, mem, num_gpu, gpu_milli)"""
    n = len(rows)
    return PodTrace(
        [f"p{i:03d}" for i in range(n)],
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [r[3] for r in rows],
        [""] * n,
        [1] * n,
    )


def _ref_frag(cpu_left, gl, tp_rows, cpu_only_freq):
    """Plain-Python FGD fragmentation of one node (utils/frag.go NodeGpuShareFragAmount semantics)."""
    total = sum(gl)
    frag = cpu_only_freq * total
    for c, m, k, f in tp_rows:
        can_host = sum(1 for x in gl if x >= m) >= k
        if can_host and cpu_left >= c:
            frag += f * sum(x for x in gl if x < m)
        else:
            frag += f * total
    return frag


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 1000), min_size=8, max_size=8),
    st.integers(0, 100_000),
    st.lists(
        st.tuples(st.integers(100, 60_000), st.integers(1, 1000), st.integers(1, 4), st.floats(0.01, 1.0)),
        min_size=1,
        max_size=6,
    ),
    st.floats(0.0, 0.5),
)
def test_vectorised_frag_equals_reference(gl, cpu_left, tp_rows, cpu_f):
    tp = TypicalPods(
        np.array([r[0] for r in tp_rows]),
        np.array([r[1] for r in tp_rows]),
        np.array([r[2] for r in tp_rows]),
        np.array([r[3] for r in tp_rows]),
        np.ones((len(tp_rows), 1), dtype=bool),
        cpu_f,
    )
    got = node_frag(np.array([cpu_left]), np.array([gl]), np.array([0]), tp)[0]
    assert got == pytest.approx(_ref_frag(cpu_left, gl, tp_rows, cpu_f), rel=1e-9, abs=1e-6)


def test_fgd_scores_equal_explicit_recomputation():
    c = load_openb_nodes(shared_fixture(f"{OPENB}/openb_node_list_gpu_node.csv"))
    pods = load_openb_pods(shared_fixture(f"{OPENB}/openb_pod_list_default.csv"))
    rng = np.random.default_rng(3)
    pol = get_policy("fgd")
    sim = _Sim(c, pods, pol, rng)
    for p in fgd_arrival_order(pods, c.total_gpus, 1.3, rng)[:2500]:
        s = int(sim.pod_spec[p])
        n = sim.choose(s)
        if n >= 0:
            sim.place(n, s)
    st_, sp, tp = sim.state, sim.specs, sim.typical
    rows = np.arange(0, st_.n, 97)
    now, after, gpu = pol.frag_after(rows)
    for i, r in enumerate(rows):
        for s in range(sp.n_score):
            k, m, cp = int(sp.s_num[s]), int(sp.s_milli[s]), int(sp.s_cpu[s])
            gl = st_.gl[r].copy()
            if k and m >= 1000:
                free = np.flatnonzero(gl == 1000)[:k]
                if len(free) < k:
                    continue
                gl[free] = 0
            elif k:
                if gpu[i, s] < 0:
                    assert (gl < m).all()
                    continue
                gl[gpu[i, s]] -= m
            ref = node_frag(np.array([st_.cpu_left[r] - cp]), gl[None, :], st_.type_id[[r]], tp)[0]
            assert after[i, s] == pytest.approx(ref, abs=1e-6)


def test_typical_pods_cover_95_percent_and_sum_to_one():
    pods = load_openb_pods(shared_fixture(f"{OPENB}/openb_pod_list_default.csv"))
    tp = typical_pods(pods, ["G2"])
    assert tp.freq.sum() + tp.cpu_only_freq == pytest.approx(1.0)
    # most frequent spec in the file: 1047 pods of (3152 milli CPU, 810 milli GPU, 1 GPU)
    assert (tp.cpu[0], tp.milli[0], tp.num[0]) == (3152, 810, 1)


def test_arrival_order_reaches_tune_and_is_deterministic():
    pods = load_openb_pods(shared_fixture(f"{OPENB}/openb_pod_list_default.csv"))
    a = fgd_arrival_order(pods, 6212, 1.3, np.random.default_rng(42))
    b = fgd_arrival_order(pods, 6212, 1.3, np.random.default_rng(42))
    c = fgd_arrival_order(pods, 6212, 1.3, np.random.default_rng(43))
    assert (a == b).all() and not (a[:8152] == c[:8152]).all()
    assert sorted(a[:8152].tolist()) == list(range(8152))  # the whole trace, shuffled, comes first
    req = np.asarray(pods.num_gpu)[a] * np.asarray(pods.gpu_milli)[a]
    assert 1.29 * 6212000 < req.sum() <= 1.3 * 6212000


def test_protocol_is_deterministic_for_a_seed():
    c = load_openb_nodes(shared_fixture(f"{OPENB}/openb_node_list_gpu_node.csv"))
    pods = load_openb_pods(shared_fixture(f"{OPENB}/openb_pod_list_default.csv"))
    r1 = run_fgd_protocol(c, pods, "best-fit", 7, limit=3000)
    r2 = run_fgd_protocol(c, pods, "best-fit", 7, limit=3000)
    assert (r1.used_milli == r2.used_milli).all() and r1.allocation_curve == r2.allocation_curve


@pytest.mark.slow
@pytest.mark.parametrize(
    "policy,label", [("fgd", "06-FGD"), ("best-fit", "05-BestFit"), ("random", "01-Random")]
)
def test_one_seed_reproduces_published_curve_within_one_point(policy, label):
    c = load_openb_nodes(shared_fixture(f"{OPENB}/openb_node_list_gpu_node.csv"))
    pods = load_openb_pods(shared_fixture(f"{OPENB}/openb_pod_list_default.csv"))
    pub = parse_published(
        shared_fixture("sched/fgd_expected_results/analysis_allo_discrete.csv").read_bytes()
    )
    published = mean_curve(pub["openb_pod_list_default"][label])
    ours = run_fgd_protocol(c, pods, policy, 42).allocation_curve
    assert set(published) <= set(ours)
    worst = max(abs(ours[k] - published[k]) for k in published)
    assert worst < 1.0, (policy, worst)


def _tiny_cluster():
    return Cluster(
        [
            GpuNode("a", 64000, 256000, 8, "G2"),
            GpuNode("b", 64000, 256000, 8, "G2"),
            GpuNode("c", 16000, 64000, 2, "T4"),
        ]
    )


def test_policies_prefer_what_they_claim():
    pods = _pods([(4000, 1000, 1, 500), (4000, 1000, 1, 1000), (4000, 1000, 0, 0), (32000, 1000, 8, 1000)])
    for name in ("gpu-packing", "best-fit", "fgd", "first-fit", "gpu-clustering", "dot-product"):
        sim = _Sim(_tiny_cluster(), pods, get_policy(name), np.random.default_rng(0))
        sim.state.place(0, 4000, 1000, 500, [0], 0)  # node a: GPU 0 half used by a shared pod
        sim.changed(0)
        n = sim.choose(0)  # another 500-milli shared pod
        if name in ("gpu-packing", "fgd", "gpu-clustering"):
            assert n == 0, name  # joins the half-used GPU
        gpus = sim.place(n, 0)
        if name in ("gpu-packing", "fgd") and n == 0:
            assert gpus == [0], name  # the same GPU: fills it to 1000
    sim = _Sim(_tiny_cluster(), pods, get_policy("best-fit"), np.random.default_rng(0))
    assert sim.choose(1) == 2  # a whole GPU goes to the smallest node (least left over)


def test_random_policy_spreads():
    pods = _pods([(1000, 100, 1, 1000)])
    picks = set()
    for seed in range(12):
        sim = _Sim(_tiny_cluster(), pods, get_policy("random"), np.random.default_rng(seed))
        picks.add(sim.choose(0))
    assert picks == {0, 1, 2}


def test_discrete_curve_matches_hand_computation():
    # 1 GPU cluster (1000 milli): arrived 4 %, 6 %, 100 %, 101 % ; used 4 %, 6 %, 50 %, 50 %
    arrived = np.array([40, 60, 1000, 1010])
    used = np.array([40, 60, 500, 500])
    c = discrete_curve(arrived, used, 1, max_pct=101)
    assert c[4] == 4.0 and c[6] == 6.0 and c[100] == 50.0 and c[101] == 50.0
    assert c[5] == 5.0  # no event rounds to 5: mean of events at 4..6
    assert 50 not in c


def test_percentile_ignores_nan():
    assert percentile([1.0, float("nan"), 3.0], 50) == 2.0 and percentile([], 50) is None


def test_fgd_cpu_sends_cpu_pods_to_gpu_busy_nodes_on_ties():
    pods = _pods([(1000, 100, 0, 0), (4000, 1000, 1, 500), (4000, 1000, 1, 1000)])
    fgd_picks = set()
    for seed in range(6):  # whatever the node order
        picks = {}
        for name in ("fgd", "fgd-cpu"):
            sim = _Sim(_tiny_cluster(), pods, get_policy(name), np.random.default_rng(seed))
            sim.state.place(0, 8000, 1000, 1000, list(range(8)), 2)  # node a: every GPU in use
            sim.changed(0)
            picks[name] = sim.choose(0)
        assert picks["fgd-cpu"] == 0
        fgd_picks.add(picks["fgd"])
    assert fgd_picks != {0}  # plain FGD ties these nodes and follows the node order
