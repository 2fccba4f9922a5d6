"""etcd rules on real dumps (fixture, captures of a real 3-member cluster) and threshold tiers."""

from __future__ import annotations

import math

import pytest

from clusterdoctor.analyze.metric_window import MetricWindow, observations_from_metrics
from clusterdoctor.model import Series, Severity
from clusterdoctor.observe.control.etcd import (
    EtcdStatus,
    parse_endpoint_health,
    parse_endpoint_status,
    parse_etcdctl_errors,
)
from clusterdoctor.observe.control.prom_text import parse_prom_text
from clusterdoctor.rules import etcd as etcd_rules
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, Observations, run_rules
from tests.conftest import TEST_DATA, shared_fixture

RULES = [r for r in vars(etcd_rules).values() if hasattr(r, "fn") and hasattr(r, "requires")]


def run(obs_data: dict) -> dict[str, list]:
    findings, _, _ = run_rules(Observations(obs_data), RULES)
    out: dict[str, list] = {}
    for f in findings:
        out.setdefault(f.rule, []).append(f)
    return out


def test_docstrings_have_sections_and_thresholds_have_sources():
    assert len(RULES) == 9
    for r in RULES:
        assert set(REQUIRED_SECTIONS) <= set(r.sections()), r.id
        assert r.sections()["Verify"].count("`") >= 2
        for t in r.thresholds:
            assert t.source


def test_minikube_etcd_366_dump():
    ms = parse_prom_text(shared_fixture("ctrl/etcd_v3.6.6_minikube_metrics.prom").read_bytes())
    obs = observations_from_metrics(ms)
    assert set(obs) == {"metrics", "etcd_metrics"}
    got = run(obs)
    # etcd_server_slow_apply_total 1 in the file -> one slow apply since start
    (f,) = got["ETCD003"]
    assert "1 applies slower than 100 ms" in f.summary and f.severity == Severity.WARNING
    # fsync p99 ~7 ms < 10 ms, commit p99 ~11 ms < 25 ms: not degraded
    assert "ETCD001" not in got and "ETCD002" not in got
    # leader_changes_seen_total 1 = the initial election; has_leader 1; single member
    assert "ETCD004" not in got and "ETCD005" not in got and "ETCD006" not in got and "ETCD007" not in got


def test_real_three_member_cluster_after_leader_stop():
    path = TEST_DATA / "ctrl" / "etcd_3.4.23_3member_after_leader_stop_metrics.prom"
    got = run(observations_from_metrics(parse_prom_text(path.read_bytes())))
    (lc,) = got["ETCD004"]
    assert "1 leader change" in lc.summary  # the file: etcd_server_leader_changes_seen_total 2
    (pu,) = got["ETCD007"]
    assert "b66b2921ec552136" in pu.summary and "173" in pu.summary
    assert "ETCD005" not in got  # has_leader 1: member b became leader


def test_etcdctl_status_and_health_after_leader_stop():
    st = EtcdStatus(
        statuses=parse_endpoint_status(
            (TEST_DATA / "ctrl" / "etcdctl_3.4.23_endpoint_status_leader_stopped.json").read_text()
        ),
        health=parse_endpoint_health(
            (TEST_DATA / "ctrl" / "etcdctl_3.4.23_endpoint_health_leader_stopped.json").read_text()
        ),
        errors=parse_etcdctl_errors(
            (TEST_DATA / "ctrl" / "etcdctl_3.4.23_endpoint_status_leader_stopped.stderr").read_text()
        ),
    )
    got = run({"etcd_status": st})
    subjects = {f.subject for f in got["ETCD008"]}
    assert subjects == {"127.0.0.1:22379"}
    assert all(f.severity == Severity.CRITICAL for f in got["ETCD008"])


def test_healthy_etcdctl_status_no_finding():
    st = EtcdStatus(
        statuses=parse_endpoint_status(
            (TEST_DATA / "ctrl" / "etcdctl_3.4.23_endpoint_status_3member.json").read_text()
        )
    )
    assert "ETCD008" not in run({"etcd_status": st})


def _fsync_window(
    latency: float, n_steps: int = 10, per_step: int = 100, start: float = 1000.0
) -> MetricWindow:
    """Bucket counters of a WAL-fsync histogram where every observation takes ``latency`` s."""
    bounds = [0.001 * 2**k for k in range(14)] + [math.inf]
    series = []
    for b in bounds:
        pts = [(start + 15 * i, float(per_step * i if latency <= b else 0)) for i in range(n_steps)]
        series.append(
            Series(
                "etcd_disk_wal_fsync_duration_seconds_bucket",
                {"instance": "e1", "le": "+Inf" if math.isinf(b) else repr(b)},
                pts,
            )
        )
    series.append(
        Series("etcd_server_has_leader", {"instance": "e1"}, [(start + 15 * i, 1.0) for i in range(n_steps)])
    )
    return MetricWindow.from_series(series, start, start + 15 * (n_steps - 1), "test")


@pytest.mark.parametrize(
    ("latency", "severity"),
    [(0.003, None), (0.020, Severity.WARNING), (0.4, Severity.WARNING), (1.5, Severity.CRITICAL)],
)
def test_fsync_tiers(latency, severity):
    got = run(observations_from_metrics(_fsync_window(latency)))
    if severity is None:
        assert "ETCD001" not in got
        return
    (f,) = got["ETCD001"]
    assert f.severity == severity and f.subject == "e1"
    assert any(e.time == 1015.0 for e in f.evidence)  # first step above 10 ms


def test_leader_changes_over_window_and_no_leader():
    t0 = 1000.0
    pts = [(t0 + 15 * i, float(1 + (i >= 3) + (i >= 5) + (i >= 6) + (i >= 8))) for i in range(10)]
    has = [(t0 + 15 * i, 0.0 if i in (3, 4, 9) else 1.0) for i in range(10)]
    w = MetricWindow.from_series(
        [
            Series("etcd_server_leader_changes_seen_total", {"instance": "e1"}, pts),
            Series("etcd_server_has_leader", {"instance": "e1"}, has),
        ],
        t0,
        t0 + 135,
    )
    got = run(observations_from_metrics(w))
    (f,) = got["ETCD004"]
    assert f.severity == Severity.CRITICAL  # 4 changes in 135 s >= 4 per 15 min (etcd mixin)
    assert any(e.time == t0 + 45 for e in f.evidence)
    (nl,) = got["ETCD005"]
    assert any(e.time == t0 + 135 for e in nl.evidence)


def test_peer_rtt_against_heartbeat_interval():
    t0 = 0.0
    bounds = [0.0001 * 2**k for k in range(16)] + [math.inf]
    series = [
        Series(
            "etcd_network_peer_round_trip_time_seconds_bucket",
            {"instance": "e1", "To": "abc", "le": "+Inf" if math.isinf(b) else repr(b)},
            [(t0, 0.0), (t0 + 60, 50.0 if b >= 0.2 else 0.0)],
        )
        for b in bounds
    ]
    w = MetricWindow.from_series(series, t0, t0 + 60)
    (f,) = run(observations_from_metrics(w))["ETCD006"]
    assert f.severity == Severity.CRITICAL and "abc" in f.summary  # p99 ~0.2 s > 0.15 s (mixin)
    got = run({**observations_from_metrics(w), "etcd_heartbeat_interval": 0.5})
    assert "ETCD006" not in got


def test_periodic_fsync_stall_reports_its_period():
    """A 60 s disk stall every 600 s over 2 h: the finding names the period."""
    t0, step, n = 0.0, 15.0, 480
    bounds = [0.001 * 2**k for k in range(14)] + [math.inf]
    cum = dict.fromkeys(bounds, 0.0)
    pts: dict[float, list] = {b: [] for b in bounds}
    for i in range(n):
        t = t0 + i * step
        lat = 0.2 if (t % 600) < 60 else 0.002
        for b in bounds:
            cum[b] += 50 if lat <= b else 0
            pts[b].append((t, cum[b]))
    series = [
        Series(
            "etcd_disk_wal_fsync_duration_seconds_bucket",
            {"le": "+Inf" if math.isinf(b) else repr(b)},
            pts[b],
        )
        for b in bounds
    ]
    (f,) = run(observations_from_metrics(MetricWindow.from_series(series, t0, t0 + step * (n - 1))))[
        "ETCD001"
    ]
    (per,) = [e for e in f.evidence if "periodic" in e.description]
    assert per.value == pytest.approx(600, rel=0.05)
