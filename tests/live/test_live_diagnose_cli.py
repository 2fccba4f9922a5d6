"""`clusterdoctor diagnose` against the real etcd / Prometheus / node exporter the live stack starts."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.live


def test_diagnose_prometheus_and_scrape(stack):
    etcd_metrics = stack["etcd"].client_url + "/metrics"
    r = run_cli(
        "diagnose",
        "--prometheus",
        stack["prometheus_url"],
        "--since",
        "5m",
        "--scrape",
        etcd_metrics,
        "--scrape-interval",
        "1",
        "--format",
        "json",
    )
    assert r.code in (0, 1), r.err
    doc = json.loads(r.out)
    kinds = {s["kind"] for s in doc["sources"]}
    assert {"prometheus", "scrape"} <= kinds
    # etcd metrics were present, so etcd rules ran rather than being skipped
    assert any(rule.startswith("ETCD") for rule in doc["rules_run"])


def test_diagnose_unreachable_prometheus_is_one_line(stack):
    r = run_cli("diagnose", "--prometheus", "http://127.0.0.1:9", "--since", "5m")
    assert r.code == 2
    assert "Traceback" not in r.err and r.err.strip().count("\n") == 0


def test_diagnose_bad_since():
    r = run_cli("diagnose", "--prometheus", "http://127.0.0.1:9", "--since", "soon")
    assert r.code == 2 and "--since" in r.err


def test_html_report_draws_heatmap_from_two_scrapes(stack, tmp_path):
    out = tmp_path / "r.html"
    etcd_metrics = stack["etcd"].client_url + "/metrics"
    r = run_cli(
        "diagnose", "--scrape", etcd_metrics, "--scrape-interval", "1", "--format", "html", "-o", str(out)
    )
    assert r.code in (0, 1), r.err
    html = out.read_text()
    assert "etcd WAL fsync latency — heatmap" in html and "heatmap" in html and "<svg" in html


def test_html_timeline_of_real_logs(tmp_path):
    from tests.conftest import shared_fixture

    out = tmp_path / "t.html"
    log = shared_fixture("ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log")
    r = run_cli("diagnose", str(log), "--format", "html", "-o", str(out))
    assert r.code in (0, 1), r.err
    html = out.read_text()
    assert "Timeline of correlated events" in html and html.count("<circle") >= 3
