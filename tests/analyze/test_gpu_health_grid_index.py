"""health_grid finds a GPU's findings by its label and its node's (node-wide findings), and the
worst of equal ones is the first in the findings' order, as before they were indexed by subject.
The GPUs and findings are synthetic, built here."""

from __future__ import annotations

from clusterdoctor.analyze.gpu_health import GpuFleet, health_grid
from clusterdoctor.model import Finding, Severity
from clusterdoctor.topology.gpu import GpuState


def _f(rule: str, subject: str, sev: Severity, summary: str, score: float = 1.0) -> Finding:
    return Finding(rule, rule, "gpu", sev, summary, score=score, subject=subject)


def test_gpu_and_node_findings_reach_the_grid_in_findings_order() -> None:
    a0 = GpuState(node="node-a", index=0, bus_id="0000:18:00.0")
    a1 = GpuState(node="node-a", index=1, bus_id="0000:29:00.0")
    b0 = GpuState(node="node-b", index=0, bus_id="0000:18:00.0")
    fleet = GpuFleet(gpus=[a0, a1, b0])
    findings = [
        _f("GPU009", "node-a", Severity.WARNING, "node-a: same throttle on every GPU"),
        _f("GPU001", a1.label(), Severity.CRITICAL, "first Xid"),
        _f("GPU009", a1.label(), Severity.WARNING, "GPU1's own throttle"),
        _f("GPU002", a1.label(), Severity.CRITICAL, "second, same severity and score"),
    ]
    rows = {r["gpu"]: r["checks"] for r in health_grid(fleet, findings)}
    assert rows[a0.label()]["clocks"]["detail"] == "node-a: same throttle on every GPU"
    assert rows[a0.label()]["xid"]["status"] not in ("warning", "critical")
    assert rows[a1.label()]["xid"] == {
        "status": "critical",
        "detail": "first Xid",
        "rules": ["GPU001", "GPU002"],
    }
    assert rows[a1.label()]["clocks"]["detail"] == "node-a: same throttle on every GPU"
    assert rows[a1.label()]["clocks"]["rules"] == ["GPU009"]
    assert rows[b0.label()]["clocks"]["status"] not in ("warning", "critical")
