"""NUMA007 and the probe-result loader.

No GPU exists on the machines this suite runs on, so the probe result below is CONSTRUCTED in the
shape `clusterdoctor numa probe --json` writes (schema clusterdoctor.numa-probe/1); its numbers
reproduce the published P100 case of reference/numa.md section 5 (pinned H2D 12.2 GB/s local vs
3.8 GB/s remote, gearshifft#82). It tests the rule's logic, not a measurement.
"""

from __future__ import annotations

import json

from tests.conftest import run_cli


def _probe(tmp_path, ran=True):
    doc = {
        "schema": "clusterdoctor.numa-probe/1",
        "ran": ran,
        "reason": None if ran else "no CUDA GPU",
        "cpu_model": "Intel(R) Xeon(R) CPU E5-2680 v4",
        "gpus": [
            {
                "name": "GPU0",
                "model": "Tesla P100-PCIE-16GB",
                "numa_node": 0,
                "local_h2d_gbps": 12.151,
                "local_latency_us": 2.1,
                "remote_local_ratio": 3.783 / 12.151,
                "per_node": {"0": {"h2d_gbps": 12.151}, "1": {"h2d_gbps": 3.783}},
            },
        ],
    }
    f = tmp_path / "probe.json"
    f.write_text(json.dumps(doc))
    return f


def test_remote_penalty_is_flagged(tmp_path):
    r = run_cli("diagnose", str(_probe(tmp_path)), "--format", "json")
    doc = json.loads(r.out)
    f = [x for x in doc["findings"] if x["rule"] == "NUMA007"]
    assert f and f[0]["subject"] == "GPU0"
    assert any(
        e["description"] == "remote/local H2D bandwidth" and e["value"] < 0.35 for e in f[0]["evidence"]
    )


def test_probe_that_did_not_run_is_a_warning_not_a_finding(tmp_path):
    r = run_cli("diagnose", str(_probe(tmp_path, ran=False)), "--format", "json")
    doc = json.loads(r.out)
    assert not [x for x in doc["findings"] if x["rule"] == "NUMA007"]
    assert any("did not run" in w for w in doc["warnings"])
