"""The rule catalogue as Prometheus alerting rules, a PrometheusRule object and promtool unit tests.

``clusterdoctor rules --format prometheus`` (a rule file: ``groups:``), ``--format prometheus-operator``
(the same groups in a ``monitoring.coreos.com/v1`` PrometheusRule) and ``--format promtool-tests``
(``promtool test rules`` cases: every alert fires on its example and stays quiet on healthy series).
deploy/ holds the three generated files; tests/deploy fails when they differ from the catalogue.

One group per layer. Rules that declare ``alerts=`` alert on their own evidence; every other rule
alerts on the agent's ``clusterdoctor_finding`` series. Every alert carries ``rule``, ``layer`` and
``severity`` labels and ``summary``, ``description`` and ``runbook`` (``clusterdoctor rules ID``; plus
``runbook_url`` when a base URL is given) annotations.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from clusterdoctor.rules.alerts import Alert, Example, camel, finding_alert_expr

__all__ = [
    "CatalogAlert",
    "catalog_alerts",
    "prometheus_rule_object",
    "promtool_tests",
    "rule_groups",
    "to_yaml",
]

NAME_PREFIX = "Clusterdoctor"
FINDING_FOR = "5m"  # a finding present on every scrape for 5 minutes (10 scrapes at 30 s)
_TEMPLATE = re.compile(r"\{\{\s*\$labels\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


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
            "rule": self.rule_id,
            "layer": self.layer,
            **dict(self.alert.labels),
        }

    def annotations(self, runbook_base: str | None = None) -> dict[str, str]:
        out = {
            "summary": self.alert.summary,
            "description": self.alert.description,
            "runbook": f"clusterdoctor rules {self.rule_id}",
        }
        if runbook_base:
            out["runbook_url"] = f"{runbook_base.rstrip('/')}/{self.rule_id}"
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
    base = {"node": "gpu-node-7", "instance": "10.0.3.7:9877", "rule": rid, "subject": "example-subject"}
    lab = ",".join(f'{k}="{v}"' for k, v in base.items() if k != "rule")
    fires = Example(
        series=(
            (
                f'clusterdoctor_finding{{rule="{rid}",severity="warning",layer="{rule.layer}",{lab}}}',
                "1.6x30",
            ),
        ),
        labels={**base, "severity": "warning"},
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


def catalog_alerts(rules: list[Any] | None = None) -> list[CatalogAlert]:
    """Every rule's alerts, in catalogue order."""
    from clusterdoctor.rules.registry import load_all

    out = []
    for r in rules if rules is not None else load_all():
        if r.alerts:
            for a in r.alerts:
                out.append(CatalogAlert(r.id, r.layer, a, a.name or NAME_PREFIX + camel(r.name), True))
        else:
            out.append(CatalogAlert(r.id, r.layer, finding_alert(r), NAME_PREFIX + camel(r.name), False))
    return out


def alert_entry(ca: CatalogAlert, runbook_base: str | None = None) -> dict[str, Any]:
    """One alerting rule as Prometheus reads it (alert, expr, for, labels, annotations)."""
    return {
        "alert": ca.name,
        "expr": ca.alert.expr,
        "for": ca.alert.for_,
        "labels": ca.labels(),
        "annotations": ca.annotations(runbook_base),
    }


def rule_groups(runbook_base: str | None = None, rules: list[Any] | None = None) -> dict[str, Any]:
    """A Prometheus rule file (``{"groups": [...]}``), one group per layer."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for ca in catalog_alerts(rules):
        groups.setdefault(f"clusterdoctor.{ca.layer}", []).append(alert_entry(ca, runbook_base))
    return {"groups": [{"name": name, "rules": rules_} for name, rules_ in groups.items()]}


def prometheus_rule_object(
    runbook_base: str | None = None, name: str = "clusterdoctor", rules: list[Any] | None = None
) -> dict[str, Any]:
    """The same groups as a Prometheus Operator ``PrometheusRule``."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": "clusterdoctor", "app.kubernetes.io/component": "alerts"},
        },
        "spec": rule_groups(runbook_base, rules),
    }


def expand(template: str, labels: dict[str, str]) -> str:
    """``{{ $labels.x }}`` substitution as Prometheus does it for these templates (missing → empty)."""
    return _TEMPLATE.sub(lambda m: labels.get(m.group(1), ""), template)


def promtool_tests(rule_file: str, rules: list[Any] | None = None) -> dict[str, Any]:
    """``promtool test rules`` cases: each alert fires on its example, and nothing of that name on
    its healthy series."""
    cas = catalog_alerts(rules)
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
                "name": f"{ca.rule_id} {ca.name} ({sev}) fires",
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in a.fires.series],
                "alert_rule_test": [
                    {"eval_time": a.fires.eval_time, "alertname": ca.name, "exp_alerts": [e for _, e in exp]}
                ],
            }
        )
        tests.append(
            {
                "name": f"{ca.rule_id} {ca.name} ({sev}) quiet on healthy series",
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in a.healthy.series],
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
