"""Alerts as data: the PromQL a rule declares for evidence that lives in Prometheus.

A rule declares ``alerts=(Alert(...), ...)`` on :func:`~clusterdoctor.rules.registry.rule` when its
evidence is scraped by Prometheus anyway (etcd, kube-scheduler, kube-apiserver and kubelet metrics,
node exporter, dcgm-exporter, the fail-slow probe, or the agent's own derived gauges). Every other
rule alerts through the agent's ``clusterdoctor_finding{rule=…}`` series (:func:`finding_alert`).
``clusterdoctor rules --format prometheus`` renders both (:mod:`clusterdoctor.report.prometheus_rules`).

Each alert carries two promtool unit-test examples: ``fires`` (input series that must raise it,
with the labels it must carry) and ``healthy`` (series of a healthy system that must not). The
thresholds in ``expr`` are the rule's own :class:`~clusterdoctor.model.Threshold` values, so the
alert and the rule cannot drift apart. Templates use ``{{ $labels.x }}`` only (no ``$value``), so the
expected annotations of the unit tests are exact.

Hook for GPU health (dcgm-exporter ``DCGM_FI_DEV_XID_ERRORS``, row remapping, clock events …) and
fail-slow/straggler rules (the probe's step-time series): declare ``alerts=`` on those rules the same
way; nothing else needs to change for them to reach deploy/ and the promtool tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["SOURCES", "Alert", "Example", "camel", "finding_alert_expr"]

# Where an alert's evidence comes from (documentation, dashboard rows, live test scrape jobs).
SOURCES = (
    "etcd",
    "kube-scheduler",
    "kube-apiserver",
    "kubelet",
    "node-exporter",
    "dcgm-exporter",
    "failslow-probe",
    "clusterdoctor-agent",
)


@dataclass(frozen=True)
class Example:
    """promtool ``input_series`` (``(series, values)`` in promtool's expanding notation, 1m apart)
    and, for a firing example, the labels of the alert instance it must raise. ``also``: severities
    of same-named alerts (another tier of the rule) that fire on these series too."""

    series: tuple[tuple[str, str], ...]
    labels: dict[str, str] = field(default_factory=dict)
    eval_time: str = "25m"
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class Alert:
    expr: str
    severity: str  # warning | critical | a template such as "{{ $labels.severity }}"
    summary: str
    description: str
    source: str
    fires: Example
    healthy: Example
    for_: str = "10m"
    name: str | None = None  # default: the rule's name in CamelCase
    labels: tuple[tuple[str, str], ...] = ()  # static labels beyond severity/rule/layer

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"alert source {self.source!r} not in {SOURCES}")
        if "$value" in self.summary + self.description:
            raise ValueError("alert templates use $labels only (exact promtool expectations)")


def camel(rule_name: str) -> str:
    """``etcd-slow-wal-fsync`` → ``EtcdSlowWalFsync``."""
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", rule_name) if p)


def finding_alert_expr(rule_id: str) -> str:
    """A finding of ``rule_id`` at warning or above in the agent's series, one alert per subject."""
    return (
        "max by (node, instance, rule, subject, severity) "
        f'(clusterdoctor_finding{{rule="{rule_id}",severity=~"warning|critical"}}) > 0'
    )


def hist(
    metric: str, labels: str, buckets: tuple[tuple[str, int], ...], count: bool = False
) -> tuple[tuple[str, str], ...]:
    """promtool input for a histogram growing by ``n`` observations a minute in each cumulative
    bucket ``(le, n)`` (``+Inf`` last), optionally with ``_count``."""
    out = [(f'{metric}_bucket{{{labels},le="{le}"}}', f"0+{n}x30") for le, n in buckets]
    if count:
        out.append((f"{metric}_count{{{labels}}}", f"0+{buckets[-1][1]}x30"))
    return tuple(out)


def p99_above(metric: str, by: str, threshold: float, window: str = "5m", selector: str = "") -> str:
    """PromQL: the per-``by`` p99 of a histogram over ``window`` above ``threshold`` (seconds)."""
    sel = f"{{{selector}}}" if selector else ""
    return (
        f"histogram_quantile(0.99, sum by ({by}, le) (rate({metric}_bucket{sel}[{window}]))) > {threshold:g}"
    )


def counter_rates(metric_names: tuple[str, ...], window: str = "5m", label: str = "counter") -> str:
    """``rate()`` of several counters that share their other labels, each tagged ``label=<name>``.

    ``rate({__name__=~"a|b"})`` drops the metric name and then holds two series with one label set,
    which Prometheus refuses ("vector cannot contain metrics with the same labelset").
    """
    return " or ".join(f'label_replace(rate({m}[{window}]), "{label}", "{m}", "", "")' for m in metric_names)
