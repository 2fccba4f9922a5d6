"""Reports render a real diagnosis (the hwloc snapshot + a real dump) in every format."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from clusterdoctor import diagnosis
from clusterdoctor.model import SCHEMA
from clusterdoctor.report.html import render_html
from clusterdoctor.report.json import render_json
from clusterdoctor.report.junit import render_junit
from clusterdoctor.report.text import render_text
from tests.conftest import shared_fixture


def _diag():
    obs = diagnosis.new_observations()
    refs = diagnosis.load_sources(obs, [shared_fixture("numa/hwloc/24em64t-2n6c2t-pci.xml")])
    return diagnosis.run(obs, refs)


def test_json_schema():
    doc = json.loads(render_json(_diag()))
    assert doc["schema"] == SCHEMA
    for key in ("host", "generated_at", "sources", "findings", "skipped"):
        assert key in doc
    scores = [f["score"] for f in doc["findings"]]
    assert scores == sorted(scores, reverse=True)
    f = doc["findings"][0]
    for key in (
        "rule",
        "title",
        "layer",
        "severity",
        "confidence",
        "score",
        "summary",
        "evidence",
        "fix",
        "verify",
    ):
        assert key in f
    # 2 of the 3 GPUs are on node 1, the only HCA (mlx4_0) on node 0: SYS paths flagged
    sys_findings = [x for x in doc["findings"] if x["rule"] == "PCIE001"]
    assert {x["subject"] for x in sys_findings} == {"GPU0", "GPU1", "GPU2"}
    assert {x["subject"] for x in sys_findings if x["severity"] == "critical"} == {"GPU1", "GPU2"}
    assert any(s["rule"].startswith("NUMA") for s in doc["skipped"])


def test_html_is_self_contained_with_heatmap_and_tables():
    html = render_html(_diag())
    assert html.startswith("<!doctype html>")
    assert "<svg" in html and "NUMA distance heatmap" in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "Process placement" in html and "Skipped rules" in html
    assert ">20<" in html  # the distance value from the XML's NUMALatency matrix


def test_junit_parses_and_counts():
    root = ET.fromstring(render_junit(_diag()))
    assert root.tag == "testsuite"
    assert int(root.get("failures")) >= 1
    assert int(root.get("tests")) == len(root.findall("testcase"))
    assert root.findall("testcase/skipped")


def test_text_lists_skipped_as_not_checked():
    out = render_text(_diag())
    assert "PCIE001" in out and "skipped (not checked" in out
