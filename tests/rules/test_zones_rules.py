"""ZONE001 (cross-zone vs same-zone latency) on real zone-labelled captures (tests/data/zones).

Expectations are the ranges read from the captures (tests/data/zones/README.md): with the zone-b
path limited to 1 Mbit/s, zone-a scrapes take 5.1-12.6 ms and zone-b scrapes 40.9-80.2 ms; with
1 Gbit/s all four targets take 4.4-16.0 ms (zone-b at most 12.5 ms).
"""

from __future__ import annotations

import json

import pytest

from clusterdoctor.analyze.metric_window import MetricWindow
from clusterdoctor.model import Series, Severity
from clusterdoctor.observe.control.prom_api import series_from_response
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, Observations
from tests.conftest import TEST_DATA

Z = TEST_DATA / "zones"


@pytest.fixture
def zones():
    """The rule module, imported when a test runs: until registry.RULE_MODULES lists it, importing it
    at collection would add ZONE001 to the registry behind the catalog tests' back."""
    from clusterdoctor.rules import zones as mod

    return mod


RANGE = "prometheus_2.42.0_query_range_scrape_duration_zones.json"


def window(run: str) -> MetricWindow:
    raw = (Z / run / RANGE).read_bytes()
    return MetricWindow.from_series(series_from_response(raw, run), source=f"{run}/{RANGE}")


def obs_with(w: MetricWindow, **extra) -> Observations:
    obs = Observations()
    obs.put("metrics", w)
    for k, v in extra.items():
        obs.put(k, v)
    return obs


def test_documented_with_sourced_thresholds(zones):
    r = zones.cross_zone_latency
    assert set(REQUIRED_SECTIONS) <= set(r.sections())
    assert r.finding("x").verify
    assert "300%" in zones.CROSS_ZONE_P99_RATIO.source


def test_throttled_cross_zone_path_is_reported_with_ratio(zones):
    (f,) = zones.cross_zone_latency.fn(obs_with(window("throttled_1mbit")))
    assert f.severity == Severity.WARNING and f.subject == "zone-a→zone-b"
    assert f.summary.startswith("scrape_duration_seconds: cross-zone p99")
    ev = {e.description.split(" (")[0]: e for e in f.evidence}
    same = ev["scrape_duration_seconds: same-zone p99"].value
    cross = ev["scrape_duration_seconds: cross-zone p99"].value
    assert 5.1 <= same <= 12.6 and 40.9 <= cross <= 80.2  # ms, from the files
    ratio = ev["cross-zone / same-zone p99"]
    assert ratio.value == pytest.approx(cross / same, rel=0.01) and ratio.value >= ratio.threshold == 3.0
    assert "2 series" in ev["scrape_duration_seconds: same-zone p99"].description


def test_unthrottled_path_is_not_reported(zones):
    w = window("unthrottled_1gbit")
    assert list(zones.cross_zone_latency.fn(obs_with(w))) == []
    (sp,) = zones.zone_latency_splits(w)
    assert sp["same_series"] == sp["cross_series"] == 2
    assert sp["ratio"] < 3.0 and 4.4e-3 <= sp["cross_p99"] <= 12.5e-3


def test_federate_snapshot_has_too_few_points(zones):
    from clusterdoctor.observe.control.scrape import load_metrics_observations

    obs = load_metrics_observations(
        Z / "throttled_1mbit" / "prometheus_2.42.0_federate_scrape_duration_zones.prom"
    )
    (sp,) = zones.zone_latency_splits(obs["metrics"])
    assert sp["same_n"] == sp["cross_n"] == 2  # one sample per target
    assert list(zones.cross_zone_latency.fn(Observations(dict(obs)))) == []


def test_node_names_joined_with_node_zones(zones):
    """Transformation of the real capture: the zone labels replaced by node names (one node per target,
    the scraper on node "prom-0"), and the zones given as node → zone, as ``kubectl get nodes -o json``
    would give them (no real NodeList is among the fixtures)."""
    series = []
    node_zones = {"prom-0": "zone-a"}
    for s in window("throttled_1mbit").select("scrape_duration_seconds"):
        node = "node-" + s.labels["instance"].rsplit(":", 1)[1]
        node_zones[node] = s.labels["destination_zone"]
        labels = {k: v for k, v in s.labels.items() if not k.endswith("_zone")}
        series.append(Series(s.name, {**labels, "source_node": "prom-0", "destination_node": node}, s.points))
    w = MetricWindow.from_series(series)
    assert list(zones.cross_zone_latency.fn(obs_with(w))) == []  # no zones known
    (f,) = zones.cross_zone_latency.fn(obs_with(w, node_zones=node_zones))
    assert f.subject == "zone-a→zone-b"


def test_nodes_json_loader(tmp_path):
    """Loader shape only: a minimal document in the form of `kubectl get nodes -o json` output, written
    here (no real NodeList is among the fixtures); not a capture."""
    from clusterdoctor.observe.event_sources import load_event_observations, sniff_events

    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "a"}},
            },
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2", "labels": {}}},
        ],
    }
    p = tmp_path / "nodes.json"
    p.write_text(json.dumps(doc, indent=4))
    assert sniff_events(p.read_bytes(), p.name)
    assert load_event_observations(p)["node_zones"] == {"n1": "a"}


def test_series_from_response_rejects_non_answers():
    from clusterdoctor.errors import InputError

    with pytest.raises(InputError):
        series_from_response(b"{not json", "x")
    with pytest.raises(InputError):
        series_from_response((TEST_DATA / "ctrl" / "prometheus_2.42.0_query_bad_data.json").read_bytes(), "x")


def test_saved_api_answer_loads_as_metrics(zones):
    from clusterdoctor.observe.detect import load_path

    what, data = load_path(Z / "throttled_1mbit" / RANGE)
    assert what == "Prometheus query answer (scrape_duration_seconds)"
    assert not data["metrics"].is_snapshot
    (f,) = zones.cross_zone_latency.fn(obs_with(data["metrics"]))
    assert f.subject == "zone-a→zone-b"


def test_cli_reports_cross_zone_latency():
    from clusterdoctor.rules.registry import RULE_MODULES
    from tests.conftest import run_cli

    if "clusterdoctor.rules.zones" not in RULE_MODULES:
        pytest.skip("rules.zones is not in registry.RULE_MODULES yet")
    r = run_cli("diagnose", "--format", "json", str(Z / "throttled_1mbit" / RANGE))
    assert r.code in (0, 1), r.err
    found = [f for f in json.loads(r.out)["findings"] if f["rule"] == "ZONE001"]
    assert len(found) == 1 and found[0]["subject"] == "zone-a→zone-b"
