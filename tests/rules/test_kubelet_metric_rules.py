"""KUBELET003 on the real AKS kubelet pod-start SLI dumps (expectations read from the files)."""

from __future__ import annotations

from clusterdoctor import diagnosis
from clusterdoctor.model import Severity
from tests.conftest import shared_fixture


def _findings(rel):
    obs = diagnosis.new_observations()
    refs = diagnosis.load_sources(obs, [shared_fixture(rel)])
    return [f for f in diagnosis.run(obs, refs).findings if f.rule == "KUBELET003"]


def test_fresh_node_all_six_pods_in_45_60s_bucket():
    # 6 observations, all between le="45" (0) and le="60" (6): p99 = 45 + 15 * 5.94/6 = 59.85 s
    (f,) = _findings("ctrl/kubelet_pod_start_sli_aks_before.prom")
    assert f.severity == Severity.CRITICAL
    assert abs(f.evidence[0].value - 59.85) < 0.01
    # one threshold, stated once: 30 s (not also "the SLO is 5 s")
    assert "30 s" in f.summary and "5 s" not in f.summary and "SLO" not in f.summary
    assert {e.threshold for e in f.evidence if e.threshold is not None} == {30.0}


def test_after_110_pods_tail_and_negative_sum_flagged():
    # 104 of 110 at or below 20 s, 6 in (45, 60]: p99 rank 108.9 -> 45 + 15 * 4.9/6 = 57.25 s; _sum negative
    (f,) = _findings("ctrl/kubelet_pod_start_sli_aks_after_110pods.prom")
    assert f.severity == Severity.WARNING
    assert abs(f.evidence[0].value - 57.25) < 0.01
    assert any("negative _sum" in e.description for e in f.evidence)
