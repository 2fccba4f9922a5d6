"""The rule catalogue as Prometheus alerting rules, a PrometheusRule object and promtool unit tests.

``clusterdoctor rules --format prometheus`` (a rule file: ``groups:``), ``--format prometheus-operator``
(the same groups in a ``monitoring.coreos.com/v1`` PrometheusRule) and ``--format promtool-tests``
(``promtool test rules`` cases: every alert fires on its example and stays quiet on healthy series).
deploy/ holds the three generated files; tests/deploy fails when they differ from the catalogue.

One group per layer. Rules that declare ``alerts=`` alert on their own evidence; every other rule
alerts on the agent's ``clusterdoctor_finding`` series. Every alert carries ``rule``, ``layer`` and
``severity`` labels and ``summary``, ``description`` and ``runbook`` (``clusterdoctor rules ID``; plus
``runbook_url`` when a base URL is given) annotations.

Meta-alerts (group ``clusterdoctor.meta``, :func:`meta_alerts`): an agent down or gone, a source or
the pod-resources API down, a diagnosis that stopped: without them a dead agent resolves every
alert silently. As in kubernetes-mixin, :class:`AlertConfig` sets the selector of the agent's series
(``job="clusterdoctor-agent"``: the scrape job, the ServiceMonitor and the PodMonitor's ``jobLabel``
all give it) and the cluster label kept by every aggregation (``cluster``; absent in a one-cluster
Prometheus, where it changes nothing). Alerts that overlap a mixin's say so in their description
(:data:`MIXIN_OVERLAP`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from clusterdoctor.rules.alerts import Alert, Example, camel, finding_alert_expr

__all__ = [
    "AlertConfig",
    "CatalogAlert",
    "configure_expr",
    "meta_alerts",
    "catalog_alerts",
    "prometheus_rule_object",
    "promtool_tests",
    "rule_groups",
    "to_yaml",
]

NAME_PREFIX = "Clusterdoctor"
FINDING_FOR = "5m"  # a finding present on every scrape for 5 minutes (10 scrapes at 30 s)
_TEMPLATE = re.compile(r"\{\{\s*\$labels\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
AGENT_JOB = "clusterdoctor-agent"
# Rules with alerts on another exporter's series whose evidence the agent also finds itself: they
# alert on the agent's finding too (GPU001: dcgm-exporter's DCGM_FI_DEV_XID_ERRORS holds only the last
# Xid and needs dcgm-exporter; the agent reads every Xid from the kernel log).
ALSO_ON_FINDING = {"GPU001": "KernelLog"}
# Alerts that overlap a mixin's, and why they are kept (appended to their description).
MIXIN_OVERLAP = {
    ("ETCD001", "warning"): (
        "Overlaps etcd-mixin's etcdHighFsyncDurations (warning at p99 > 0.5 s): this one warns at "
        "etcd's documented 10 ms on purpose, long before leader elections start; it is a capacity "
        "warning, not the mixin's page."
    ),
    ("ETCD001", "critical"): (
        "Duplicates etcd-mixin's etcdHighFsyncDurations critical (p99 > 1 s for 10m, the same "
        "threshold): kept for clusters without etcd-mixin; with it installed, inhibit one of the two "
        "(Alertmanager inhibit_rules on alertname)."
    ),
}


@dataclass(frozen=True)
class AlertConfig:
    """What kubernetes-mixin's ``_config`` holds for its alerts: the agent's selector and the label
    that tells clusters apart (added to every ``by``/``on`` list; empty: none)."""

    agent_selector: str = f'job="{AGENT_JOB}"'
    cluster_label: str = "cluster"


DEFAULT_CONFIG = AlertConfig()
_AGENT_METRIC = re.compile(r"\b(clusterdoctor_(?!watch_)[a-z_]+)(\{)?")  # not the fail-slow probe's
_GROUPING = re.compile(r"\b(by|on)\s*\(")


def configure_expr(expr: str, cfg: AlertConfig = DEFAULT_CONFIG) -> str:
    """``expr`` with the agent selector on every ``clusterdoctor_*`` selector and the cluster label in
    every ``by (…)`` / ``on (…)``."""
    if cfg.agent_selector:

        def sel(m: re.Match[str]) -> str:
            return (
                f"{m.group(1)}{{{cfg.agent_selector},"
                if m.group(2)
                else f"{m.group(1)}{{{cfg.agent_selector}}}"
            )

        expr = _AGENT_METRIC.sub(sel, expr)
        expr = expr.replace(",}", "}")
    if cfg.cluster_label:
        expr = _GROUPING.sub(lambda m: f"{m.group(1)} ({cfg.cluster_label}, ", expr).replace(", )", ")")
    return expr


@dataclass(frozen=True)
class CatalogAlert:
    rule_id: str
    layer: str
    alert: Alert
    name: str
    native: bool  # declared by the rule (its own evidence) rather than the finding series

    def labels(self) -> dict[str, str]:
        return {
            "severity": self.alert.severity,
            **({"rule": self.rule_id} if self.rule_id else {}),
            "layer": self.layer,
            **dict(self.alert.labels),
        }

    def annotations(self, runbook_base: str | None = None) -> dict[str, str]:
        desc = self.alert.description
        note = MIXIN_OVERLAP.get((self.rule_id, self.alert.severity))
        if note:
            desc = f"{desc} {note}"
        out = {
            "summary": self.alert.summary,
            "description": desc,
            "runbook": f"clusterdoctor rules {self.rule_id}" if self.rule_id else META_RUNBOOK,
        }
        if runbook_base:
            out["runbook_url"] = f"{runbook_base.rstrip('/')}/{self.rule_id or self.name}"
        return out


def _sentence(text: str) -> str:
    flat = " ".join(text.split())
    m = re.match(r"(.+?[.;])(\s|$)", flat)
    s = (m.group(1) if m else flat).rstrip(";").rstrip(".")
    s = s[:1].upper() + s[1:]
    return s.replace("{{", "{ {").replace("}}", "} }")


def finding_alert(rule: Any) -> Alert:
    """The alert of a rule without PromQL of its own: its finding in the agent's series."""
    sec = rule.sections()
    rid = rule.id
    base = {
        "job": AGENT_JOB,
        "node": "gpu-node-7",
        "instance": "10.0.3.7:9877",
        "rule": rid,
        "subject": "example-subject",
    }
    lab = ",".join(f'{k}="{v}"' for k, v in base.items() if k != "rule")
    fires = Example(
        series=(
            (
                f'clusterdoctor_finding{{rule="{rid}",severity="warning",layer="{rule.layer}",{lab}}}',
                "1.6x30",
            ),
        ),
        labels={k: v for k, v in base.items() if k != "job"} | {"severity": "warning"},
    )
    healthy = Example(
        series=(
            # an informational finding of this rule and a warning of another: neither raises this alert
            (f'clusterdoctor_finding{{rule="{rid}",severity="info",layer="{rule.layer}",{lab}}}', "0.4x30"),
            (f'clusterdoctor_finding{{rule="OTHER001",severity="critical",layer="other",{lab}}}', "2.7x30"),
        )
    )
    return Alert(
        expr=finding_alert_expr(rid),
        severity="{{ $labels.severity }}",
        summary=f"{rule.title}: {{{{ $labels.subject }}}} on {{{{ $labels.node }}}}",
        description=(
            f"clusterdoctor rule {rid} ({rule.name}) has reported {{{{ $labels.subject }}}} on node "
            f"{{{{ $labels.node }}}} for 5 minutes. {_sentence(sec.get('Symptom', ''))}. "
            f"Fix: {_sentence(sec.get('Fix', ''))}. Evidence: `clusterdoctor diagnose` in that node's agent pod."
        ),
        source="clusterdoctor-agent",
        fires=fires,
        healthy=healthy,
        for_=FINDING_FOR,
    )


def catalog_alerts(rules: list[Any] | None = None, meta: bool = False) -> list[CatalogAlert]:
    """Every rule's alerts, in catalogue order (then the meta-alerts with ``meta``)."""
    from clusterdoctor.rules.registry import load_all

    out = []
    for r in rules if rules is not None else load_all():
        if r.alerts:
            for a in r.alerts:
                out.append(CatalogAlert(r.id, r.layer, a, a.name or NAME_PREFIX + camel(r.name), True))
            if r.id in ALSO_ON_FINDING:
                name = NAME_PREFIX + camel(r.name) + ALSO_ON_FINDING[r.id]
                out.append(CatalogAlert(r.id, r.layer, finding_alert(r), name, False))
        else:
            out.append(CatalogAlert(r.id, r.layer, finding_alert(r), NAME_PREFIX + camel(r.name), False))
    if meta:
        out += meta_alerts()
    return out


META_RUNBOOK = "docs/kubernetes.md, section Alerts about the agent"


def meta_alerts() -> list[CatalogAlert]:
    """Alerts about the agent itself (see the module docstring)."""
    lab = f'job="{AGENT_JOB}",instance="10.0.3.7:9877",node="gpu-node-7"'
    labels = {"job": AGENT_JOB, "instance": "10.0.3.7:9877", "node": "gpu-node-7"}
    agent = "clusterdoctor-agent"

    def ca(name: str, a: Alert) -> CatalogAlert:
        return CatalogAlert("", "meta", a, NAME_PREFIX + name, False)

    return [
        ca(
            "AgentDown",
            Alert(
                expr="up == 0",
                severity="warning",
                for_="5m",
                source=agent,
                summary="clusterdoctor agent {{ $labels.instance }} on {{ $labels.node }} is down",
                description=(
                    "Prometheus cannot scrape the clusterdoctor agent on {{ $labels.node }}: every "
                    "finding of that node has gone with it, so its alerts resolved without the cause "
                    "being fixed. `kubectl -n clusterdoctor get pods -o wide` and the pod's log."
                ),
                fires=Example(((f"up{{{lab}}}", "1x5 0x30"),), labels),
                healthy=Example(((f"up{{{lab}}}", "1x30"),)),
            ),
        ),
        ca(
            "AgentAbsent",
            Alert(
                expr="absent(up == 1)",
                severity="critical",
                for_="15m",
                source=agent,
                summary="No clusterdoctor agent is being scraped",
                description=(
                    "Not one clusterdoctor agent target is up in Prometheus (none discovered, or all "
                    "down): no clusterdoctor alert can fire. Check the DaemonSet and the "
                    "ServiceMonitor/PodMonitor or scrape job (and its release label)."
                ),
                fires=Example(((f"up{{{lab}}}", "0x30"),), {}),
                healthy=Example(((f"up{{{lab}}}", "1x30"),)),
            ),
        ),
        ca(
            "SourceDown",
            Alert(
                expr="max by (node, instance, source) (clusterdoctor_source_up) == 0",
                severity="warning",
                for_="15m",
                source=agent,
                summary="clusterdoctor agent on {{ $labels.node }}: source {{ $labels.source }} is down",
                description=(
                    "The agent on {{ $labels.node }} has not read {{ $labels.source }} for 15 minutes "
                    "(an unreadable kernel log, a missing mount, a source slower than --source-timeout): "
                    'the rules that need it are skipped, which is not "healthy". The agent\'s log says why.'
                ),
                fires=Example(
                    ((f'clusterdoctor_source_up{{{lab},source="kernel-log"}}', "0x30"),),
                    {**{k: v for k, v in labels.items() if k != "job"}, "source": "kernel-log"},
                ),
                healthy=Example(((f'clusterdoctor_source_up{{{lab},source="kernel-log"}}', "1x30"),)),
            ),
        ),
        ca(
            "PodResourcesDown",
            Alert(
                expr="max by (node, instance) (clusterdoctor_pod_resources_up) == 0",
                severity="warning",
                for_="15m",
                source=agent,
                summary="clusterdoctor agent on {{ $labels.node }} cannot read the kubelet pod-resources API",
                description=(
                    "Findings on {{ $labels.node }} name pod UIDs instead of pods and the extender "
                    "gets no free-GPU count: the pod-resources socket is missing or refused "
                    '(clusterdoctor_kubernetes_warning{source="pod-resources"}, the agent\'s log).'
                ),
                fires=Example(
                    ((f"clusterdoctor_pod_resources_up{{{lab}}}", "0x30"),),
                    {k: v for k, v in labels.items() if k != "job"},
                ),
                healthy=Example(((f"clusterdoctor_pod_resources_up{{{lab}}}", "1x30"),)),
            ),
        ),
        ca(
            "DiagnosisStale",
            Alert(
                expr="time() - max by (node, instance) (clusterdoctor_diagnosis_timestamp_seconds) > 600",
                severity="warning",
                for_="10m",
                source=agent,
                summary="clusterdoctor agent on {{ $labels.node }} has not diagnosed for 10 minutes",
                description=(
                    "The agent answers scrapes but its diagnosis timer has stopped (the last round is "
                    "over 10 minutes old): its findings are stale. Restart the pod; the log says why."
                ),
                fires=Example(
                    ((f"clusterdoctor_diagnosis_timestamp_seconds{{{lab}}}", "60x30"),),
                    {k: v for k, v in labels.items() if k != "job"},
                ),
                # the timestamp moves with time (1m steps in promtool: 60 s a step)
                healthy=Example(((f"clusterdoctor_diagnosis_timestamp_seconds{{{lab}}}", "0+60x30"),)),
            ),
        ),
    ]


def alert_entry(
    ca: CatalogAlert, runbook_base: str | None = None, cfg: AlertConfig = DEFAULT_CONFIG
) -> dict[str, Any]:
    """One alerting rule as Prometheus reads it (alert, expr, for, labels, annotations)."""
    expr = ca.alert.expr
    if ca.layer == "meta" and cfg.agent_selector:
        expr = re.sub(r"\bup\b", f"up{{{cfg.agent_selector}}}", expr)
    return {
        "alert": ca.name,
        "expr": configure_expr(expr, cfg),
        "for": ca.alert.for_,
        "labels": ca.labels(),
        "annotations": ca.annotations(runbook_base),
    }


def rule_groups(
    runbook_base: str | None = None,
    rules: list[Any] | None = None,
    cfg: AlertConfig = DEFAULT_CONFIG,
    meta: bool = True,
) -> dict[str, Any]:
    """A Prometheus rule file (``{"groups": [...]}``), one group per layer, the meta-alerts last."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for ca in catalog_alerts(rules, meta):
        groups.setdefault(f"clusterdoctor.{ca.layer}", []).append(alert_entry(ca, runbook_base, cfg))
    return {"groups": [{"name": name, "rules": rules_} for name, rules_ in groups.items()]}


def prometheus_rule_object(
    runbook_base: str | None = None,
    name: str = "clusterdoctor",
    rules: list[Any] | None = None,
    cfg: AlertConfig = DEFAULT_CONFIG,
    meta: bool = True,
) -> dict[str, Any]:
    """The same groups as a Prometheus Operator ``PrometheusRule``."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": "clusterdoctor", "app.kubernetes.io/component": "alerts"},
        },
        "spec": rule_groups(runbook_base, rules, cfg, meta),
    }


def expand(template: str, labels: dict[str, str]) -> str:
    """``{{ $labels.x }}`` substitution as Prometheus does it for these templates (missing → empty)."""
    return _TEMPLATE.sub(lambda m: labels.get(m.group(1), ""), template)


def _with_job(series: str) -> str:
    """An example series of the agent's metrics carries the agent's job (the default selector)."""
    if (
        series.startswith("clusterdoctor_")
        and not series.startswith("clusterdoctor_watch_")
        and "job=" not in series
    ):
        name, brace, rest = series.partition("{")
        return f'{name}{{job="{AGENT_JOB}"' + (f",{rest}" if brace and rest != "}" else "}")
    return series


def promtool_tests(rule_file: str, rules: list[Any] | None = None, meta: bool = True) -> dict[str, Any]:
    """``promtool test rules`` cases: each alert fires on its example, and nothing of that name on
    its healthy series (for the rule file of the default :class:`AlertConfig`)."""
    cas = catalog_alerts(rules, meta)
    by_name: dict[str, list[CatalogAlert]] = {}
    for ca in cas:
        by_name.setdefault(ca.name, []).append(ca)
    tests = []
    for ca in cas:
        a = ca.alert
        sev = expand(a.severity, a.fires.labels)
        exp = []
        for other in by_name[ca.name]:
            osev = expand(other.alert.severity, a.fires.labels)
            if other is ca or (other.alert.severity in a.fires.also):
                labels = {
                    **a.fires.labels,
                    **{k: expand(v, a.fires.labels) for k, v in other.labels().items()},
                }
                labels["alertname"] = ca.name
                ann = {k: expand(v, a.fires.labels) for k, v in other.annotations().items()}
                exp.append((osev, {"exp_labels": dict(sorted(labels.items())), "exp_annotations": ann}))
        exp.sort(key=lambda x: x[0])
        tests.append(
            {
                "name": f"{ca.rule_id or 'meta'} {ca.name} ({sev}) fires",
                "interval": "1m",
                "input_series": [{"series": _with_job(s), "values": v} for s, v in a.fires.series],
                "alert_rule_test": [
                    {"eval_time": a.fires.eval_time, "alertname": ca.name, "exp_alerts": [e for _, e in exp]}
                ],
            }
        )
        tests.append(
            {
                "name": f"{ca.rule_id or 'meta'} {ca.name} ({sev}) quiet on healthy series",
                "interval": "1m",
                "input_series": [{"series": _with_job(s), "values": v} for s, v in a.healthy.series],
                "alert_rule_test": [
                    {"eval_time": a.healthy.eval_time, "alertname": ca.name, "exp_alerts": []}
                ],
            }
        )
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}


# --- a small YAML writer (block style, deterministic; PyYAML is not a runtime dependency) ----------

_PLAIN = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_./-]*|[0-9]+[smhdwy])$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    return json.dumps(s, ensure_ascii=False)


def _emit(v: Any, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(v, dict):
        if not v:
            out[-1] += " {}"
            return
        for k, x in v.items():
            key = _scalar(k)
            if isinstance(x, (dict, list)) and x:
                out.append(f"{pad}{key}:")
                _emit(x, indent + 2, out)
            elif isinstance(x, str) and "\n" in x:
                out.append(f"{pad}{key}: |-")
                out.extend(f"{pad}  {line}" if line else "" for line in x.split("\n"))
            else:
                out.append(
                    f"{pad}{key}: {_scalar(x) if not isinstance(x, (dict, list)) else ('{}' if isinstance(x, dict) else '[]')}"
                )
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, dict) and x:
                sub: list[str] = [""]
                _emit(x, indent + 2, sub)
                first = sub[1].lstrip()
                out.append(f"{pad}- {first}")
                out.extend(sub[2:])
            elif isinstance(x, list) and x:
                out.append(f"{pad}-")
                _emit(x, indent + 2, out)
            else:
                out.append(
                    f"{pad}- {_scalar(x) if not isinstance(x, (dict, list)) else ('{}' if isinstance(x, dict) else '[]')}"
                )
    else:
        out.append(f"{pad}{_scalar(v)}")


def to_yaml(doc: Any, header: str = "") -> str:
    """Deterministic block-style YAML for dicts/lists/scalars (strings quoted as JSON when needed)."""
    out: list[str] = []
    _emit(doc, 0, out)
    head = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) if header else ""
    return head + "\n".join(out) + "\n"
