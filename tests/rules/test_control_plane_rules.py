"""Scheduler and apiserver rules on the real v1.35.0 scheduler dump and across metric renames."""

from __future__ import annotations

import math

from clusterdoctor.analyze.metric_window import MetricWindow, detect_kube_version, observations_from_metrics
from clusterdoctor.model import Series, Severity
from clusterdoctor.observe.control.prom_text import parse_prom_text
from clusterdoctor.rules import control_plane as cp
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, Observations, run_rules
from tests.conftest import shared_fixture

RULES = [cp.scheduler_latency_tail, cp.scheduler_pending_pods, cp.apiserver_latency]


def run(data) -> dict[str, list]:
    findings, skipped, _ = run_rules(Observations(data), RULES)
    out: dict[str, list] = {"skipped": skipped}
    for f in findings:
        out.setdefault(f.rule, []).append(f)
    return out


def test_docstrings_and_threshold_sources():
    for r in RULES:
        assert set(REQUIRED_SECTIONS) <= set(r.sections()), r.id
        for t in r.thresholds:
            assert t.source


def test_scheduler_v135_dump():
    ms = parse_prom_text(shared_fixture("ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom").read_bytes())
    obs = observations_from_metrics(ms)
    assert set(obs) == {"metrics", "scheduler_metrics"}  # no apiserver_request_* in a scheduler dump
    assert detect_kube_version(obs["metrics"]) == (1, 35)
    got = run(obs)
    # file: pending_pods{queue="unschedulable"} 1; attempts scheduled 20, unschedulable 3
    (pending,) = got["CP002"]
    assert "1 pod unschedulable" in pending.summary and "3 of 23 attempts unschedulable" in pending.summary
    # file: attempts all <= 32 ms (fast); pod_scheduling_sli: 18 pods <= 1.28 s, 2 pods with
    # attempts="2" in (20.48, 40.96] -> e2e p99 = 20.48 + 20.48 * (19.8 - 18) / 2
    (tail,) = got["CP001"]
    assert "pod scheduling (end to end)" in tail.summary and "attempts are fast" in tail.summary
    p99 = tail.evidence[0].value
    assert abs(p99 - (20.48 + 20.48 * 1.8 / 2)) < 1e-3
    assert tail.severity == Severity.WARNING
    assert any(
        "scheduler_pod_scheduling_sli_duration_seconds" in e.description and "v1.35" in e.description
        for e in tail.evidence
    )
    assert any(e.description == "pods scheduled after 2 attempts" and e.value == 2 for e in tail.evidence)
    assert any("apiserver" in s.reason for s in got["skipped"] if s.rule == "CP003")


def _hist_series(name, labels, latency, n, t0=0.0, bounds=None):
    bounds = bounds or [0.001 * 2**k for k in range(15)] + [math.inf]
    out = []
    for b in bounds:
        lab = {**labels, "le": "+Inf" if math.isinf(b) else repr(b)}
        out.append(Series(f"{name}_bucket", lab, [(t0, 0.0), (t0 + 60, float(n if latency <= b else 0))]))
    out.append(Series(f"{name}_count", dict(labels), [(t0, 0.0), (t0 + 60, float(n))]))
    return out


def test_pre_123_e2e_name_used_when_it_is_all_there_is():
    # before 1.23 there was no attempt histogram, only scheduler_e2e_scheduling_duration_seconds
    s = _hist_series("scheduler_e2e_scheduling_duration_seconds", {"instance": "s1"}, 0.3, 100)
    s.append(Series("kubernetes_build_info", {"git_version": "v1.22.4", "instance": "s1"}, [(60.0, 1.0)]))
    got = run(observations_from_metrics(MetricWindow.from_series(s, 0, 60)))
    (f,) = got["CP001"]
    assert "scheduling attempt" in f.summary and f.severity == Severity.WARNING
    assert any(
        "scheduler_e2e_scheduling_duration_seconds" in e.description and "v1.22" in e.description
        for e in f.evidence
    )


def test_1_29_pod_scheduling_duration_name_and_paging_tier():
    s = _hist_series(
        "scheduler_pod_scheduling_duration_seconds",
        {"instance": "s1"},
        7.0,
        100,
        bounds=[0.01 * 2**k for k in range(20)] + [math.inf],
    )
    s += _hist_series("scheduler_scheduling_attempt_duration_seconds", {"instance": "s1"}, 6.0, 100)
    got = run(observations_from_metrics(MetricWindow.from_series(s, 0, 60)))
    # one finding per rule and instance: both histograms of s1 are in it, the attempt one as "also"
    (f,) = got["CP001"]
    assert f.subject == "s1" and f.severity == Severity.CRITICAL
    texts = [f.summary] + [e.description for e in f.evidence if e.description.startswith("also: ")]
    assert any("pod scheduling (end to end) p99 10.2 s" in t for t in texts)
    assert any("scheduling attempt p99 8.15 s" in t for t in texts)


def test_apiserver_latency_by_verb_and_resource():
    bounds = [
        0.005,
        0.025,
        0.05,
        0.1,
        0.2,
        0.4,
        0.6,
        0.8,
        1,
        1.25,
        1.5,
        2,
        3,
        4,
        5,
        6,
        8,
        10,
        15,
        20,
        30,
        45,
        60,
        math.inf,
    ]
    s = _hist_series(
        "apiserver_request_duration_seconds",
        {"verb": "GET", "resource": "pods", "scope": "resource"},
        2.5,
        100,
        bounds=bounds,
    )
    s += _hist_series(
        "apiserver_request_duration_seconds",
        {"verb": "LIST", "resource": "pods", "scope": "cluster"},
        2.5,
        100,
        bounds=bounds,
    )
    s += _hist_series(
        "apiserver_request_duration_seconds",
        {"verb": "WATCH", "resource": "pods", "scope": "cluster"},
        50,
        100,
        bounds=bounds,
    )
    s += _hist_series(
        "apiserver_request_duration_seconds",
        {"verb": "POST", "resource": "leases", "scope": "resource"},
        0.01,
        100,
        bounds=bounds,
    )
    got = run(observations_from_metrics(MetricWindow.from_series(s, 0, 60)))
    (f,) = got["CP003"]  # GET pods (1 s SLO) only: LIST cluster has 30 s; WATCH is skipped; POST fast
    assert "GET pods" in f.summary and f.severity == Severity.CRITICAL  # 100% slower than 1 s > 14.4%


def test_two_dumps_merge_into_one_diagnosis():
    from clusterdoctor.analyze.metric_window import merge_metric_observations

    sched = observations_from_metrics(
        parse_prom_text(shared_fixture("ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom").read_bytes())
    )
    etcd = observations_from_metrics(
        parse_prom_text(shared_fixture("ctrl/etcd_v3.6.6_minikube_metrics.prom").read_bytes())
    )
    obs = merge_metric_observations(dict(sched), etcd)
    assert {"metrics", "scheduler_metrics", "etcd_metrics"} <= set(obs)
    assert obs["scheduler_metrics"] is obs["metrics"] is obs["etcd_metrics"]
    assert obs["metrics"].has("etcd_server_has_leader") and obs["metrics"].has("scheduler_pending_pods")
    got = run(obs)
    assert "CP002" in got
