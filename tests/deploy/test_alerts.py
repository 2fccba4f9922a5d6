"""Alerts as data: deploy/ holds exactly what the rule catalogue generates, promtool accepts the rule
file, and promtool's unit tests (every alert fires on its example and stays quiet on healthy series)
pass."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusterdoctor.cli.rules_export import export_alerts
from clusterdoctor.report import prometheus_rules as pr
from clusterdoctor.rules.registry import load_all
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
RULE_FILE = REPO / "deploy/components/prometheus-config/clusterdoctor-rules.yaml"
OPERATOR_FILE = REPO / "deploy/components/prometheusrule/prometheusrule.yaml"
TEST_FILE = REPO / "deploy/prometheus-tests/clusterdoctor-rules.test.yaml"
GENERATED = {"prometheus": RULE_FILE, "prometheus-operator": OPERATOR_FILE, "promtool-tests": TEST_FILE}


def promtool() -> str:
    exe = shutil.which("promtool")
    if not exe:
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return exe


@pytest.mark.parametrize("fmt", sorted(GENERATED))
def test_deploy_files_are_what_the_catalogue_generates(fmt):
    assert GENERATED[fmt].read_text() == export_alerts(fmt, None, None, None), (
        f"{GENERATED[fmt].relative_to(REPO)} is stale: run `make deploy-generate`"
    )


def test_cli_prints_the_rule_file():
    r = run_cli("rules", "--format", "prometheus")
    assert r.code == 0, r.err
    assert r.out == RULE_FILE.read_text()
    one = run_cli(
        "rules", "ETCD001", "--format", "prometheus", "--runbook-url", "https://runbooks.example/cd"
    )
    assert one.code == 0
    doc = yaml.safe_load(one.out)
    assert [g["name"] for g in doc["groups"]] == ["clusterdoctor.control-plane"]
    assert {a["annotations"]["runbook_url"] for a in doc["groups"][0]["rules"]} == {
        "https://runbooks.example/cd/ETCD001"
    }
    bad = run_cli("rules", "--format", "nagios")
    assert bad.code == 2 and "--format" in bad.err


def test_every_rule_has_an_alert_with_the_required_fields():
    doc = yaml.safe_load(RULE_FILE.read_text())
    seen = {}
    for g in doc["groups"]:
        assert g["name"].startswith("clusterdoctor.")
        if g["name"] == "clusterdoctor.meta":
            continue  # alerts about the agent itself: test_meta_alerts
        for a in g["rules"]:
            assert set(a) == {"alert", "expr", "for", "labels", "annotations"}
            assert a["labels"]["severity"] in ("warning", "critical", "{{ $labels.severity }}")
            assert {"summary", "description", "runbook"} <= set(a["annotations"])
            assert a["annotations"]["runbook"] == f"clusterdoctor rules {a['labels']['rule']}"
            seen.setdefault(a["labels"]["rule"], []).append(a)
    assert set(seen) == {r.id for r in load_all()}
    # rules whose evidence is in Prometheus alert on it; the others on the agent's finding series
    for rid in ("ETCD001", "ETCD005", "CP001", "CP002", "CP003", "KUBELET003", "RDMA004"):
        assert all("clusterdoctor_finding" not in a["expr"] for a in seen[rid]), rid
    assert any("node_infiniband_" in a["expr"] for a in seen["RDMA004"])
    # GPU health (issue 12) on dcgm-exporter's series where it exports the evidence
    for rid in ("GPU001", "GPU004", "GPU005", "GPU006", "GPU007", "GPU008", "GPU012", "GPU014"):
        assert all("DCGM_FI_DEV_" in a["expr"] for a in seen[rid] if not a["alert"].endswith("KernelLog")), (
            rid
        )
    # ... and GPU001 on the agent's finding too: every Xid of the kernel log, on nodes without dcgm-exporter
    assert [a["alert"] for a in seen["GPU001"] if "clusterdoctor_finding" in a["expr"]] == [
        "ClusterdoctorGpuXidKernelLog"
    ]
    assert "clusterdoctor_finding" in seen["GPU002"][0]["expr"]
    for rid in ("NUMA002", "ETCD008", "COMM007"):
        assert "clusterdoctor_finding" in seen[rid][0]["expr"]


def test_alert_thresholds_are_the_rules_thresholds():
    from clusterdoctor.rules import control_plane, etcd, kubelet

    by_rule = {ca.rule_id: [] for ca in pr.catalog_alerts()}
    for ca in pr.catalog_alerts():
        by_rule[ca.rule_id].append(ca.alert.expr)
    assert any(e.endswith(f"> {etcd.FSYNC_DEGRADED.value:g}") for e in by_rule["ETCD001"])
    assert any(e.endswith(f"> {etcd.FSYNC_PAGING.value:g}") for e in by_rule["ETCD001"])
    assert any(f"> {control_plane.ATTEMPT_DEGRADED.value:g}" in e for e in by_rule["CP001"])
    assert any(f"> {kubelet.POD_START_SLOW.value:g}" in e for e in by_rule["KUBELET003"])


def test_promtool_check_rules():
    out = subprocess.run([promtool(), "check", "rules", str(RULE_FILE)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    n = sum(len(g["rules"]) for g in yaml.safe_load(RULE_FILE.read_text())["groups"])
    assert f"SUCCESS: {n} rules found" in out.stdout


def test_promtool_unit_tests_cover_every_alert_firing_and_quiet(tmp_path_factory):
    tests = yaml.safe_load(TEST_FILE.read_text())["tests"]
    rules = yaml.safe_load(RULE_FILE.read_text())
    entries = [(a["alert"], a["labels"].get("rule")) for g in rules["groups"] for a in g["rules"]]
    fires = [t for t in tests if t["name"].endswith(" fires")]
    quiet = [t for t in tests if "quiet on healthy" in t["name"]]
    assert len(fires) == len(quiet) == len(entries)
    for t in fires:
        assert t["alert_rule_test"][0]["exp_alerts"], t["name"]
    for t in quiet:
        assert t["alert_rule_test"][0]["exp_alerts"] == [], t["name"]
    # promtool evaluates every rule of its rule files in every test: the deploy test file run whole
    # takes ~40 s. The groups share nothing (no recording rules), so each group is run with its own
    # tests — the same rules and tests, split, ~10x less work.
    assert not any("record" in r for g in rules["groups"] for r in g["rules"])
    tool, tmp = promtool(), tmp_path_factory.mktemp("promtool")
    runs = []
    for g in rules["groups"]:
        names = {r["alert"] for r in g["rules"]}
        mine = [t for t in tests if t["alert_rule_test"][0]["alertname"] in names]
        assert mine, g["name"]
        (tmp / f"{g['name']}.rules.yaml").write_text(pr.to_yaml({"groups": [g]}))
        doc = {
            **yaml.safe_load(TEST_FILE.read_text()),
            "rule_files": [f"{g['name']}.rules.yaml"],
            "tests": mine,
        }
        (tmp / f"{g['name']}.test.yaml").write_text(pr.to_yaml(doc))
        runs.append((g["name"], len(mine)))
    assert sum(n for _, n in runs) == len(tests)  # every test in exactly one group
    procs = [
        (name, subprocess.Popen([tool, "test", "rules", f"{name}.test.yaml"], cwd=tmp, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True))
        for name, _ in runs
    ]  # fmt: skip
    for name, proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {out[-4000:]}"
        assert "SUCCESS" in out, name


def test_promtool_tests_can_fail(tmp_path):
    """A wrong expectation (an alert that does not fire on healthy series) is caught: the harness bites."""
    doc = pr.promtool_tests(str(RULE_FILE))
    quiet = next(t for t in doc["tests"] if "ETCD005" in t["name"] and "quiet" in t["name"])
    quiet["alert_rule_test"][0]["exp_alerts"] = [{"exp_labels": {"severity": "critical"}}]
    doc["tests"] = [quiet]
    f = tmp_path / "t.yaml"
    f.write_text(pr.to_yaml(doc))
    out = subprocess.run([promtool(), "test", "rules", str(f)], capture_output=True, text=True)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr


def test_yaml_writer_round_trips():
    doc = pr.rule_groups()
    assert yaml.safe_load(pr.to_yaml(doc)) == doc
    odd = {"a": ["yes", "1.5", "x: y", "multi\nline", "", "{{ $labels.x }}", 3, None, True, [], {}]}
    assert yaml.safe_load(pr.to_yaml(odd)) == odd


# --- meta-alerts, selector and cluster label (as kubernetes-mixin's _config) ----------------------------


def _alerts(doc):
    return {a["alert"]: a for g in doc["groups"] for a in g["rules"]}


def test_meta_alerts():
    doc = yaml.safe_load(RULE_FILE.read_text())
    meta = next(g for g in doc["groups"] if g["name"] == "clusterdoctor.meta")
    by = {a["alert"]: a for a in meta["rules"]}
    assert set(by) >= {
        "ClusterdoctorAgentDown",
        "ClusterdoctorAgentAbsent",
        "ClusterdoctorSourceDown",
        "ClusterdoctorPodResourcesDown",
        "ClusterdoctorDiagnosisStale",
    }
    assert by["ClusterdoctorAgentDown"]["expr"] == 'up{job="clusterdoctor-agent"} == 0'
    assert "clusterdoctor_source_up{job=" in by["ClusterdoctorSourceDown"]["expr"]
    assert "clusterdoctor_pod_resources_up{job=" in by["ClusterdoctorPodResourcesDown"]["expr"]
    assert all(a["labels"]["layer"] == "meta" and "rule" not in a["labels"] for a in meta["rules"])
    # only with the whole catalogue: one rule's file has no meta group
    one = yaml.safe_load(export_alerts("prometheus", None, "ETCD001", None))
    assert [g["name"] for g in one["groups"]] == ["clusterdoctor.control-plane"]


def test_every_agent_series_is_selected_and_every_aggregation_keeps_the_cluster():
    for name, a in _alerts(yaml.safe_load(RULE_FILE.read_text())).items():
        for m in re.finditer(r"\b(clusterdoctor_[a-z_]+)(\{[^}]*\})?", a["expr"]):
            if m.group(1).startswith("clusterdoctor_watch_"):
                continue  # the fail-slow probe, in the training job's own job label
            assert m.group(2) and 'job="clusterdoctor-agent"' in m.group(2), name
        for m in re.finditer(r"\b(?:by|on) \(([^)]*)\)", a["expr"]):
            assert m.group(1).split(", ")[0] == "cluster", name


def test_selector_and_cluster_label_are_configurable():
    out = export_alerts("prometheus", None, None, None, 'namespace="mon",job=~"cd-.*"', "k8s_cluster")
    alerts = _alerts(yaml.safe_load(out))
    assert alerts["ClusterdoctorAgentDown"]["expr"] == 'up{namespace="mon",job=~"cd-.*"} == 0'
    src = alerts["ClusterdoctorSourceDown"]["expr"]
    assert src.startswith("max by (k8s_cluster, node, instance, source)")
    assert 'clusterdoctor_source_up{namespace="mon",job=~"cd-.*"}' in src
    assert "clusterdoctor-agent" not in out.split("rules:", 1)[1].replace("clusterdoctor-agent pod", "")
    none = _alerts(yaml.safe_load(export_alerts("prometheus", None, None, None, "", "")))
    assert none["ClusterdoctorAgentDown"]["expr"] == "up == 0"
    assert none["ClusterdoctorSourceDown"]["expr"].startswith("max by (node, instance, source)")
    r = subprocess.run(
        [promtool(), "check", "rules", "/dev/stdin"], input=out, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_selector_options():
    ok = run_cli("rules", "--format", "prometheus", "--agent-selector", 'job="x"', "--cluster-label", "k")
    assert ok.code == 0 and 'up{job=\\"x\\"} == 0' in ok.out
    bad = run_cli("rules", "--format", "prometheus", "--agent-selector", "job=x}")
    assert bad.code == 2 and "--agent-selector" in bad.err and "Traceback" not in bad.err
    bad = run_cli("rules", "--format", "prometheus", "--cluster-label", "a-b")
    assert bad.code == 2 and "--cluster-label" in bad.err


def test_an_alert_overlapping_etcd_mixin_says_why():
    alerts = [a for g in yaml.safe_load(RULE_FILE.read_text())["groups"] for a in g["rules"]]
    fsync = [a for a in alerts if "etcd_disk_wal_fsync_duration_seconds" in a["expr"]]
    assert {a["labels"]["severity"] for a in fsync} == {"warning", "critical"}
    for a in fsync:
        assert "etcd-mixin's etcdHighFsyncDurations" in a["annotations"]["description"], a["labels"]
