"""The extender's bounded paths (issue 25) and its health-aware signals (issue 21 item 5): the
Prometheus answer parser on any JSON, FGD's linear scoring against the per-candidate reference, the
FGD deadline falling back to tidal (injected clock), sick GPUs filtered or scored down, and free
GPUs counted with DRA and MIG allocations."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.serve import extender as E
from clusterdoctor.serve.signals import NodeSignal, PrometheusSignals, SignalsError, parse_vector
from tests.hostile.test_r25_servers import HostilePrometheus, vector

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["status", "data", "result", "resultType", "metric", "value", "node", "state"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(doc=JSON)
def test_parse_vector_takes_any_json(doc):
    for wrapped in (doc, {"status": "success", "data": {"result": doc}}):
        try:
            out = parse_vector(json.dumps(wrapped).encode())
        except SignalsError as e:
            assert str(e)
            continue
        for m, x in out:
            assert isinstance(m, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in m.items()
            )
            assert np.isfinite(x)


def _reference_fgd(n: E.NodeView, p: E.PodRequest) -> int:
    """The per-candidate evaluation the extender did before issue 25 (one node_frag per candidate)."""
    from clusterdoctor.sim.frag import node_frag

    tp = E._typical()
    gl = np.array([n.gpu_free], dtype=np.int64)
    t0 = np.array([0])
    before = node_frag(np.array([n.cpu_free]), gl, t0, tp)[0]
    cpu_after = np.array([n.cpu_free - p.cpu_milli])
    best = 0
    for v in np.unique(gl[0][gl[0] >= p.gpu_milli]):
        g = gl.copy()
        g[0, int(np.flatnonzero(gl[0] == v)[0])] -= p.gpu_milli
        after = node_frag(cpu_after, g, t0, tp)[0]
        best = max(best, int(1.0 / (1.0 + np.exp(-(before - after) / 1000.0)) * 100))
    return best


@settings(max_examples=150, deadline=None)
@given(
    shares=st.lists(st.sampled_from([0, 1000]) | st.integers(0, 1000), min_size=1, max_size=16),
    milli=st.integers(1, 999),
    cpu_free=st.integers(0, 96_000),
    cpu_req=st.integers(0, 32),
)
def test_linear_fgd_equals_the_per_candidate_reference(shares, milli, cpu_free, cpu_req):
    ann = {
        "clusterdoctor.io/gpu-free-milli": ",".join(map(str, shares)),
        "clusterdoctor.io/cpu-free-milli": str(cpu_free),
    }
    n = E.NodeView(
        {"metadata": {"name": "n", "annotations": ann}, "status": {"allocatable": {"memory": "1Ti"}}}
    )
    p = E.PodRequest({
        "metadata": {"annotations": {"clusterdoctor.io/gpu-milli": str(milli)}},
        "spec": {"containers": [{"resources": {"requests": {"cpu": str(cpu_req)}}}]},
    })  # fmt: skip
    assert E.fgd_node_score(n, p) == _reference_fgd(n, p)


def _node(name: str, gpus: str = "8") -> dict:
    return {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "96", "memory": "1Ti"}}}  # fmt: skip


POD = {
    "metadata": {"name": "p"},
    "spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
}


def test_fgd_past_its_deadline_scores_the_rest_with_tidal():
    t = [0.0]

    def clock() -> float:
        t[0] += 0.4  # each reading: 0.4 s later
        return t[0]

    body = {"pod": POD, "nodes": {"items": [_node(f"n{i}") for i in range(6)]}}
    fgd = E.Extender("fgd", deadline_s=1.0, clock=clock)
    got = fgd.prioritize(body)
    tidal = E.Extender("tidal").prioritize(body)
    full = E.Extender("fgd", deadline_s=1e9).prioritize(body)
    assert [h["host"] for h in got] == [f"n{i}" for i in range(6)]
    assert got[:2] == full[:2] and got[2:] == tidal[2:]  # past 1 s from the third node on
    assert fgd.counts["fgd_fallbacks"] == 1 and fgd.counts["fgd_fallback_nodes"] == 4
    assert "clusterdoctor_extender_fgd_fallbacks_total 1" in fgd.metrics()


@pytest.mark.parametrize(
    ("alloc", "allocated", "free", "usable"),
    [(8, 2, 6, 6), (8, 3, 7, 5), (8, 8, 2, 0), (8, None, 6, 6), (None, 2, 6, 6), (7, 0, None, 7)],
)
def test_free_gpus_never_exceed_allocatable_minus_allocated(alloc, allocated, free, usable):
    """A MIG device or a DRA claim the agent counts as allocated is not offered as free."""
    s = NodeSignal("n", free_gpus=free, allocatable_gpus=alloc, allocated_gpus=allocated)
    assert s.usable_free() == usable


def test_sick_gpus_filtered_or_scored_down_and_allocations_counted():
    """Xid 79 (critical): filtered out; a row-remap warning: half the score; node-c's agent reads
    8 allocatable, 3 allocated (one through DRA) and reports 7 free: 5 are offered."""
    prom = HostilePrometheus()
    findings = [
        ({"node": "node-a", "rule": "GPU001", "subject": "GPU-0 Xid 79", "severity": "critical", "layer": "gpu"}, 1),
        ({"node": "node-b", "rule": "GPU012", "subject": "GPU-3 row remap failure", "severity": "warning", "layer": "gpu"}, 1),
        ({"node": "node-b", "rule": "ETCD001", "subject": "x", "severity": "critical", "layer": "control"}, 1),
    ]  # fmt: skip
    gpus = [
        ({"node": "node-c", "state": "allocatable"}, 8),
        ({"node": "node-c", "state": "allocated"}, 3),
        ({"node": "node-c", "state": "free"}, 7),
    ]
    prom.mode = "bad"
    sig = PrometheusSignals(prom.url, timeout_s=2, ttl_s=3600)
    try:
        prom.answer = vector(findings + gpus)  # both queries get every series; each reads its own
        sig.start()
        assert sig.error is None
        ext = E.Extender("tidal", sig)
        nodes = {"items": [_node("node-a"), _node("node-b"), _node("node-c")]}
        res = ext.filter({"pod": POD, "nodes": nodes})
        assert [n["metadata"]["name"] for n in res["nodes"]["items"]] == ["node-b", "node-c"]
        assert "Xid 79" in res["failedNodes"]["node-a"]
        six = json.loads(json.dumps(POD).replace('"1"', '"6"'))
        assert ext.filter({"pod": six, "nodes": nodes})["failedNodes"]["node-c"].startswith(
            "insufficient GPU: 5 GPU(s)"
        )
        plain = {h["host"]: h["score"] for h in E.Extender("tidal").prioritize({"pod": POD, "nodes": nodes})}
        scores = {h["host"]: h["score"] for h in ext.prioritize({"pod": POD, "nodes": nodes})}
        assert scores["node-a"] == 0 and scores["node-b"] == int(plain["node-b"] * 0.5) < plain["node-b"]
        # nodeCacheCapable (names only): the sick node is still filtered out
        res = ext.filter({"pod": POD, "nodenames": ["node-a", "node-b", "node-c"]})
        assert res["nodenames"] == ["node-b", "node-c"] and "Xid 79" in res["failedNodes"]["node-a"]
    finally:
        sig.stop()
        prom.close()
