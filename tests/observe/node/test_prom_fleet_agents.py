"""The agents as `gpu health` / `watch --prometheus` read them (observe.node.prom_fleet.agent_fleet,
cli.watch.add_agents). The Prometheus answers are synthetic here (label sets as the agent exports
them, serve/agent.py); the same paths run against real agents in
tests/live/test_live_gpu_watch_agents.py."""

from __future__ import annotations

from types import SimpleNamespace

from clusterdoctor.model import Series
from clusterdoctor.observe.node.prom_fleet import AgentFinding, agent_fleet, is_gpu_finding


class Answers:
    """Instant queries answered by the metric and whether the expression looks back over a window."""

    def __init__(self, findings_peak, findings_now, sources_seen, sources_now, names=None):
        self.a = {
            ("clusterdoctor_finding", True): findings_peak,
            ("clusterdoctor_finding", False): findings_now,
            ("clusterdoctor_source_up", True): sources_seen,
            ("clusterdoctor_source_up", False): sources_now,
        }
        self.names = names or {"clusterdoctor_finding", "clusterdoctor_source_up"}

    def query(self, expr, at):
        metric = "clusterdoctor_finding" if "clusterdoctor_finding" in expr else "clusterdoctor_source_up"
        return [Series(metric, dict(lab), [(at, v)]) for lab, v in self.a[(metric, "_over_time" in expr)]]

    def metric_names(self):
        return self.names

    def server_time(self):
        return 1000.0


def _f(node, rule, layer, subject="GPU 0000:3b:00.0", sev="critical"):
    return {"node": node, "rule": rule, "layer": layer, "subject": subject, "severity": sev}


def _src(node, source):
    return {"node": node, "source": source}


FLEET = Answers(
    findings_peak=[
        (_f("n7", "GPU001", "gpu"), 0.9),
        (_f("n7", "STOR001", "storage", "/"), 0.8),
        (_f("n9", "GPU001", "gpu"), 0.9),
        (_f("n6", "GPU001", "gpu"), 0.5),
    ],
    findings_now=[(_f("n7", "GPU001", "gpu"), 0.9), (_f("n9", "GPU001", "gpu"), 0.9)],
    sources_seen=[(_src(n, s), 1) for n in ("n6", "n7", "n8", "n9") for s in ("rdma-sysfs", "kernel-log")],
    sources_now=[
        (_src("n7", "rdma-sysfs"), 1),
        (_src("n7", "kernel-log"), 1),
        (_src("n8", "rdma-sysfs"), 1),
        (_src("n8", "kernel-log"), 0),
        (_src("n9", "kernel-log"), 1),
    ],  # n6's agent stopped inside the window
)


def test_gpu_findings_sources_down_and_agents_gone():
    fl = agent_fleet(FLEET, 600, 1000.0)
    assert [(f.node, f.rule, f.current) for f in fl.findings] == [
        ("n7", "GPU001", True),
        ("n9", "GPU001", True),
        ("n6", "GPU001", False),
    ]  # STOR001 is not a GPU finding
    assert fl.down() == [("n8", "kernel-log")] and fl.gone() == ["n6"]
    assert fl.gpu_checked() == ["n7", "n9"] and fl.nodes == ["n6", "n7", "n8", "n9"]
    ws = fl.warnings()
    assert any(w.startswith("agent on n8: source kernel-log down") and "GPU health not read" in w for w in ws)
    assert any(w.startswith("agent on n6: no longer exported") for w in ws)
    assert "STOR001" in {f.rule for f in agent_fleet(FLEET, 600, 1000.0, gpu_only=False).findings}


def test_which_findings_are_gpu_findings():
    def a(rule, layer):
        return AgentFinding("n", rule, "critical", layer, "", 1.0, True)

    assert is_gpu_finding(a("NVML003", "gpu")) and is_gpu_finding(a("CUDA010", "gpu"))
    assert not is_gpu_finding(a("GPU001", "storage"))  # the layer label decides where there is one
    assert is_gpu_finding(a("DCGM002", "")) and not is_gpu_finding(a("RDMA004", ""))


def _tables(*hosts):
    idents = {i: SimpleNamespace(host=h) for i, h in enumerate(hosts)}
    return {"job": SimpleNamespace(identities=idents)}


def test_watch_shows_the_job_hosts_and_counts_the_others():
    from clusterdoctor.cli.watch import add_agents

    rep = {"findings": [], "warnings": []}
    add_agents(rep, FLEET, 600, _tables("n7", "n8"), "http://prom")
    assert [f["subject"] for f in rep["findings"]] == ["n7: GPU 0000:3b:00.0"]
    assert any("n8" in w and "kernel-log down" in w for w in rep["warnings"])
    assert not any("agent on n6" in w for w in rep["warnings"])  # outside the job: one line
    assert any("outside the job (2): GPU findings not shown (2)" in w for w in rep["warnings"]), rep[
        "warnings"
    ]
    assert rep["agents"]["joined_to_job_hosts"] and rep["agents"]["other_nodes"] == ["n6", "n9"]


def test_watch_without_a_matching_host_shows_every_agent():
    from clusterdoctor.cli.watch import add_agents

    rep = {"findings": [], "warnings": []}
    add_agents(rep, FLEET, 600, _tables("train-pod-0", "train-pod-1"), "http://prom")
    assert sorted(f["subject"].split(":")[0] for f in rep["findings"]) == ["n6", "n7", "n9"]
    assert any(
        "no agent's node is one of the job's hosts (train-pod-0, train-pod-1)" in w for w in rep["warnings"]
    )


def test_watch_with_no_agent_series_is_unchanged():
    from clusterdoctor.cli.watch import add_agents

    rep = {"findings": [], "warnings": ["w"]}
    add_agents(rep, Answers([], [], [], [], names={"up"}), 600, _tables("n7"), "http://prom")
    assert rep == {"findings": [], "warnings": ["w"]}
