"""Live: `diagnose --prometheus` reads dcgm-exporter's series too (the fleet queries of `gpu health`),
so a GPU that dcgm-exporter reports sick is a finding of the whole-cluster diagnosis, not only of
`gpu health`. The Prometheus and its dumps are tests/live/test_live_gpu_fleet.py's fixture (node-sick
carries faults that test writes into a real dump; see its docstring)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.live.test_live_gpu_fleet import fleet  # noqa: F401  # the module-scoped fixture

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]


def test_diagnose_prometheus_has_the_gpu_findings(fleet):  # noqa: F811
    r = run_cli("diagnose", "--prometheus", fleet, "--since", "10m", "--format", "json", timeout=120)
    assert r.code in (0, 1), r.err
    doc = json.loads(r.out)
    gpu = [f for f in doc["findings"] if f["rule"].startswith("GPU")]
    assert gpu, [f["rule"] for f in doc["findings"]]
    assert all("node-sick" in json.dumps(f) for f in gpu if f["severity"] == "critical")
    assert {"GPU001", "GPU006"} & {f["rule"] for f in gpu}
    src = next(s for s in doc["sources"] if s.get("kind") == "prometheus" or "prometheus" in json.dumps(s))
    assert "dcgm-exporter" in json.dumps(src)
