"""Live: our clients against a real etcd, node exporter and Prometheus on 127.0.0.1, and a real
degradation — a 3-member etcd cluster whose leader is killed — diagnosed by the etcd rules."""

from __future__ import annotations

import time
import urllib.request

import pytest

from clusterdoctor.analyze.metric_window import MetricWindow, metric_events, observations_from_metrics
from clusterdoctor.model import Severity
from clusterdoctor.observe.control.etcd import collect_etcd_status
from clusterdoctor.observe.control.prom_api import PromClient, collect_for_rules
from clusterdoctor.observe.control.prom_text import parse_prom_text
from clusterdoctor.observe.control.scrape import scrape_once, scrape_window
from clusterdoctor.rules.registry import Observations, run_rules
from clusterdoctor.testing import comparable_samples, prom_client_samples
from tests.live.conftest import ETCDCTL, Services, need, start_etcd_cluster

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]


def test_live_scrapes_parse_like_prometheus_client(stack):
    urls = [
        f"{stack['etcd'].client_url}/metrics",
        stack["node_exporter_url"],
        f"{stack['prometheus_url']}/metrics",
    ]
    for url in urls:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        assert comparable_samples(parse_prom_text(text)) == prom_client_samples(text), url


def test_live_query_and_query_range(stack):
    c = PromClient(stack["prometheus_url"], timeout=5)
    up = c.query("up")
    assert {s.labels["job"] for s in up} == {"etcd", "node", "prometheus"}
    assert all(s.points[0][1] == 1 for s in up)
    deadline = time.monotonic() + 10
    while True:  # Prometheus scrapes every second; wait until it holds a few points
        now = c.server_time()  # the server's clock: the test may run under faketime
        (s,) = c.query_range('up{job="etcd"}', now - 5, now, 1)
        if len(s.points) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(s.points) >= 3 and all(v == 1 for _, v in s.points)
    names = c.metric_names()
    assert "etcd_server_has_leader" in names and "node_cpu_seconds_total" in names

    res = collect_for_rules(stack["prometheus_url"], 30, 1, timeout=5)
    assert not res["errors"]
    assert "etcd_disk_wal_fsync_duration_seconds" in res["present"]
    assert "scheduler_pending_pods" in res["missing"]
    obs = observations_from_metrics(res)
    assert {"metrics", "etcd_metrics"} <= set(obs)
    assert "scheduler_metrics" not in obs
    _, skipped, ran = run_rules(Observations(obs))
    assert "ETCD004" in ran and "ETCD001" in ran
    assert any(s.rule == "CP001" for s in skipped)


def test_live_scrape_window_and_etcdctl_status(stack):
    w = scrape_window(
        [f"{stack['etcd'].client_url}/metrics", "http://127.0.0.1:9/metrics"], interval=1, timeout=2
    )
    assert not w.is_snapshot
    assert any("127.0.0.1:9" in x for x in w.warnings)  # the dead endpoint is a warning, not a failure
    (labels, value, _), *_ = w.latest("etcd_server_has_leader")
    assert value == 1 and labels["instance"] == stack["etcd"].client_url.split("//")[1]
    need(ETCDCTL, "etcd-client")
    st = collect_etcd_status([stack["etcd"].client_url], ETCDCTL, timeout=3)
    assert len(st.statuses) == 1 and st.statuses[0].is_leader
    assert st.health and st.health[0].healthy


def test_live_leader_killed_is_diagnosed(live_tmp):
    need(ETCDCTL, "etcd-client")
    services = Services()
    (live_tmp / "three").mkdir()
    try:
        members = start_etcd_cluster(live_tmp / "three", 3, services)
        urls = [m.client_url for m in members]
        deadline = time.monotonic() + 15
        leader = None
        while leader is None and time.monotonic() < deadline:
            st = collect_etcd_status(urls, ETCDCTL, timeout=2)
            leaders = st.leader_endpoints()
            leader = leaders[0] if leaders else None
            if leader is None:
                time.sleep(0.2)
        assert leader is not None
        before, errors = scrape_once([f"{u}/metrics" for u in urls], timeout=3)
        assert not errors
        dead = next(m for m in members if m.client_url.endswith(leader))
        t_kill = time.time()
        dead.proc.stop(kill=True)
        alive = [m for m in members if m is not dead]
        deadline = time.monotonic() + 15
        new_leader = None
        while new_leader is None and time.monotonic() < deadline:
            st = collect_etcd_status([m.client_url for m in alive], ETCDCTL, timeout=2)
            found = st.leader_endpoints()
            new_leader = found[0] if found else None
            if new_leader is None:
                time.sleep(0.2)
        assert new_leader is not None and new_leader != leader
        time.sleep(0.5)  # let the survivors count a few failed sends to the dead member
        after, errors = scrape_once([f"{m.client_url}/metrics" for m in alive], timeout=3)
        assert not errors
        w = MetricWindow.from_metricsets(before + after, source="live etcd cluster")
        status = collect_etcd_status(urls, ETCDCTL, timeout=2)

        obs = Observations({**observations_from_metrics(w), "etcd_status": status})
        findings, _, _ = run_rules(obs)
        by_rule: dict[str, list] = {}
        for f in findings:
            by_rule.setdefault(f.rule, []).append(f)
        # the leader change is one event of the cluster (its ID from etcdctl), seen by both survivors
        (change,) = by_rule.get("ETCD004", [])
        cluster = format(status.statuses[0].cluster_id, "x")
        assert change.subject == f"etcd cluster {cluster}" and "1 leader change" in change.summary
        ids = {format(s.member_id, "x") for s in status.statuses}  # the survivors answer etcdctl
        assert all(i in change.summary for i in ids)
        times = [e.time for e in change.evidence if e.time is not None]
        assert len(times) == 2 and all(t >= t_kill - 1 for t in times)
        # the dead member is named by etcdctl (by its endpoint: it no longer answers with its ID)
        dead_addr = dead.client_url.split("//")[1]
        assert any(dead_addr in f.summary and f.severity == Severity.CRITICAL for f in by_rule["ETCD008"])
        assert by_rule.get("ETCD007")
        # and the leader change is an event the correlation step can order
        kinds = {e.kind for e in metric_events(w)}
        assert "etcd.leader_changed" in kinds
    finally:
        services.stop_all()
