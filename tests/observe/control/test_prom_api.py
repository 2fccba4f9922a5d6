"""Prometheus API client: real responses (captured from Prometheus 2.42.0) served locally, errors.

The live test (tests/live) queries a real Prometheus; here a tiny local server replays what the
real one answered, and misbehaves on purpose (slow, not JSON, refused) to test the error paths.
"""

from __future__ import annotations

import http.server
import math
import socket
import threading
import time

import pytest

from clusterdoctor.errors import CollectError, InputError
from clusterdoctor.observe.control.prom_api import PromClient, collect_for_rules, default_step
from tests.conftest import TEST_DATA

D = TEST_DATA / "ctrl"


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, bytes]] = {}
    delay = 0.0

    def _serve(self):
        path = self.path.split("?")[0]
        # read the request body: closing with it unread resets the connection under the client
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.delay:
            time.sleep(self.delay)
        code, body = self.routes.get(path, (404, b"not found"))
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _serve
    do_POST = _serve

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    handler = type("H", (_Handler,), {"routes": {}, "delay": 0.0})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield handler, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_query_range_real_response(server):
    h, url = server
    h.routes["/api/v1/query_range"] = (
        200,
        (D / "prometheus_2.42.0_query_range_etcd_server_has_leader.json").read_bytes(),
    )
    (s,) = PromClient(url).query_range("etcd_server_has_leader", 1796028967, 1796029027, 5)
    assert s.name == "etcd_server_has_leader"
    assert s.labels == {"instance": "127.0.0.1:12379", "job": "etcd"}
    assert len(s.points) == 13 and s.points[0] == (1796028967.0, 1.0) and s.points[-1][0] == 1796029027.0


def test_instant_and_scalar_nan(server):
    h, url = server
    h.routes["/api/v1/query"] = (200, (D / "prometheus_2.42.0_query_up.json").read_bytes())
    res = PromClient(url).query("up")
    assert {s.labels["job"] for s in res} == {"etcd", "prometheus", "node"}
    h.routes["/api/v1/query"] = (200, (D / "prometheus_2.42.0_query_scalar_nan.json").read_bytes())
    (sc,) = PromClient(url).query("scalar(vector(NaN))")
    assert sc.name == "scalar" and math.isnan(sc.points[0][1])


def test_bad_query_is_input_error_one_line(server):
    h, url = server
    h.routes["/api/v1/query"] = (400, (D / "prometheus_2.42.0_query_bad_data.json").read_bytes())
    with pytest.raises(InputError) as e:
        PromClient(url).query("up(")
    assert "unclosed left parenthesis" in str(e.value) and "\n" not in str(e.value)


def test_not_json_and_http_errors_are_collect_errors(server):
    h, url = server
    h.routes["/api/v1/query"] = (200, b"# HELP up\nup 1\n")
    with pytest.raises(CollectError, match="not JSON"):
        PromClient(url).query("up")
    h.routes["/api/v1/query"] = (503, b"unavailable")
    with pytest.raises(CollectError, match="HTTP 503"):
        PromClient(url).query("up")


def test_timeout(server):
    h, url = server
    h.routes["/api/v1/query"] = (200, (D / "prometheus_2.42.0_query_up.json").read_bytes())
    h.delay = 3.0  # the answer comes, valid, after the client's timeout: raising proves it gave up
    with pytest.raises(CollectError, match="no answer within"):
        PromClient(url, timeout=0.2).query("up")


def test_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(CollectError, match="cannot connect"):
        PromClient(f"http://127.0.0.1:{port}", timeout=1).query("up")


@pytest.mark.parametrize("url", ["ftp://x", "127.0.0.1:9090", ""])
def test_bad_url(url):
    with pytest.raises(InputError):
        PromClient(url)


def test_collect_for_rules_queries_only_present_names(server):
    h, url = server
    h.routes["/api/v1/label/__name__/values"] = (
        200,
        b'{"status":"success","data":["etcd_server_has_leader","up"]}',
    )
    h.routes["/api/v1/query_range"] = (
        200,
        (D / "prometheus_2.42.0_query_range_etcd_server_has_leader.json").read_bytes(),
    )
    res = collect_for_rules(url, 60, 5, end=1796029027)
    assert res["present"] == ["up", "etcd_server_has_leader"]
    assert "etcd_disk_wal_fsync_duration_seconds" in res["missing"]
    w = res["window"]
    assert w.start == 1796028967 and w.end == 1796029027 and not w.is_snapshot
    assert w.has("etcd_server_has_leader")


def test_default_step():
    assert default_step(60) == 15
    assert default_step(24 * 3600) == 120


def test_scrape_window_real_dump_and_dead_endpoint(server, tmp_path):
    from clusterdoctor.observe.control.scrape import load_metrics_observations, scrape_window, sniff_metrics

    h, url = server
    dump = D / "etcd_3.4.23_3member_after_leader_stop_metrics.prom"
    h.routes["/metrics"] = (200, dump.read_bytes())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/metrics"
    w = scrape_window([f"{url}/metrics", dead], interval=0.2, timeout=30)  # the live one may be slow
    assert not w.is_snapshot and any("cannot connect" in x for x in w.warnings)
    ((labels, inc, resets),) = w.increase("etcd_server_leader_changes_seen_total")
    assert inc == 0 and resets == 0 and labels["instance"] == url.split("//")[1]  # same dump twice
    with pytest.raises(CollectError):
        scrape_window([dead], interval=0, timeout=1)
    assert sniff_metrics(dump.read_bytes()[:65536], dump.name)
    obs = load_metrics_observations(dump)
    assert set(obs) == {"metrics", "etcd_metrics", "described_as"} and obs["metrics"].is_snapshot
    assert obs["described_as"] == "Prometheus metrics dump (etcd)"
    with pytest.raises(InputError):
        load_metrics_observations(tmp_path / "missing.prom")


def test_collect_for_rules_finds_zone_labelled_latency(server):
    """Real answers of the Prometheus that labelled its targets with zones (tests/data/zones)."""
    z = TEST_DATA / "zones" / "throttled_1mbit"
    h, url = server
    h.routes["/api/v1/label/__name__/values"] = (
        200,
        (z / "prometheus_2.42.0_label_name_values.json").read_bytes(),
    )
    h.routes["/api/v1/series"] = (200, (z / "prometheus_2.42.0_series_destination_zone.json").read_bytes())
    h.routes["/api/v1/query_range"] = (
        200,
        (z / "prometheus_2.42.0_query_range_scrape_duration_zones.json").read_bytes(),
    )
    res = collect_for_rules(url, 60, 1, end=1796032002)
    assert not res["errors"], res["errors"]
    # the latency metrics among the 271 names of the zone-labelled series, summaries' parts excluded
    for n in ("scrape_duration_seconds", "node_scrape_collector_duration_seconds", "go_gc_duration_seconds"):
        assert n in res["present"]
    assert "go_gc_duration_seconds_sum" not in res["present"] and not res["errors"]
    assert res["window"].has("scrape_duration_seconds")


def test_series_from_saved_answer():
    from clusterdoctor.observe.control.prom_api import series_from_response

    raw = (
        TEST_DATA / "zones" / "throttled_1mbit" / "prometheus_2.42.0_query_range_scrape_duration_zones.json"
    ).read_bytes()
    ss = series_from_response(raw)
    assert len(ss) == 4 and {s.labels["destination_zone"] for s in ss} == {"zone-a", "zone-b"}
    assert all(s.name == "scrape_duration_seconds" and s.labels["source_zone"] == "zone-a" for s in ss)


def test_answer_over_input_limit_is_one_error(server, monkeypatch):
    h, url = server
    body = (
        TEST_DATA / "zones" / "throttled_1mbit" / "prometheus_2.42.0_query_range_scrape_duration_zones.json"
    ).read_bytes()
    h.routes["/api/v1/query_range"] = (200, body)
    monkeypatch.setenv("CLUSTERDOCTOR_MAX_INPUT_BYTES", "1K")
    with pytest.raises(CollectError, match="answer larger than the input limit of 1 KiB"):
        PromClient(url).query_range("scrape_duration_seconds", 1796031942, 1796032002, 1)
    monkeypatch.setenv("CLUSTERDOCTOR_MAX_INPUT_BYTES", str(len(body)))
    assert len(PromClient(url).query_range("scrape_duration_seconds", 1796031942, 1796032002, 1)) == 4
