"""The Grafana dashboard: generated with the Grafana Foundation SDK, one row per layer, current in deploy/.
(Every query runs against a real Prometheus in tests/live/test_live_promql.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy/components/grafana-dashboard/clusterdoctor.json"


def test_deploy_dashboard_is_what_the_sdk_generates():
    pytest.importorskip("grafana_foundation_sdk")
    from clusterdoctor.report.dashboard import to_json

    assert DASHBOARD.read_text() == to_json(), "deploy dashboard is stale: run `make deploy-generate`"


def test_one_row_per_layer_and_every_panel_queries():
    doc = json.loads(DASHBOARD.read_text())
    rows = [p["title"] for p in doc["panels"] if p["type"] == "row"]
    assert rows == ["Control plane", "GPU health", "RDMA / NIC", "NUMA placement", "Agent", "Fail-slow"]
    panels = [p for p in doc["panels"] if p["type"] != "row"]
    assert len(panels) >= 20
    for p in panels:
        assert p["targets"] and all(
            t["expr"] and t["datasource"]["uid"] == "${datasource}" for t in p["targets"]
        )
        assert p.get("description")
    # panels do not overlap on Grafana's 24-column grid
    cells = set()
    for p in doc["panels"]:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, p["title"]
                cells.add((x, y))
    names = [v["name"] for v in doc["templating"]["list"]]
    assert names == ["datasource", "node"]


def test_queries_extracts_every_target():
    from clusterdoctor.report.dashboard import queries

    doc = json.loads(DASHBOARD.read_text())
    n = sum(len(p.get("targets") or []) for p in doc["panels"])
    assert len(queries(doc)) == n
