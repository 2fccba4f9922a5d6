"""Declaring and running rules.

A rule is a function ``fn(obs: Observations) -> Iterable[Finding]`` decorated with :func:`rule`.
It names the observation kinds it ``requires``; :func:`run_rules` runs every rule whose inputs are
present and records the others as skipped with the missing input, so "not checked" is never shown
as healthy. A rule never reads files or the system: it looks only at :class:`Observations`.

Each rule's docstring has **Symptom**, **Why**, **Fix** and **Verify** sections (checked by a test),
and each threshold it uses is a :class:`~clusterdoctor.model.Threshold` with its source.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.model import Evidence, Finding, Severity, Skipped, Threshold
from clusterdoctor.rules.alerts import Alert

# Modules that hold rules, in catalog order. Importing one registers its rules.
RULE_MODULES = (
    "clusterdoctor.rules.numa",
    "clusterdoctor.rules.pcie",
    "clusterdoctor.rules.pcie_contention",
    "clusterdoctor.rules.etcd",
    "clusterdoctor.rules.control_plane",
    "clusterdoctor.rules.k8s_components",
    "clusterdoctor.rules.etcd_log",
    "clusterdoctor.rules.etcd_fsync_tail",
    "clusterdoctor.rules.zones",
    "clusterdoctor.rules.kubelet",
    "clusterdoctor.rules.rdma",
    "clusterdoctor.rules.rdma_qp",
    "clusterdoctor.rules.rdma_ports",
    "clusterdoctor.rules.rdma_rails",
    "clusterdoctor.rules.rdma_perftest",
    "clusterdoctor.rules.rdma_netns",
    "clusterdoctor.rules.rdma_fabric",
    "clusterdoctor.rules.storage",
    "clusterdoctor.rules.app",
    "clusterdoctor.rules.comm",
    "clusterdoctor.rules.comm_bandwidth",
    "clusterdoctor.rules.comm_hangs",
    "clusterdoctor.rules.failslow",
    "clusterdoctor.rules.gpu",
    "clusterdoctor.rules.messages",
)

# What each observation kind is and how a user provides it (shown when a rule is skipped).
INPUT_HINTS: dict[str, str] = {
    "topology": "no NUMA/PCI topology (give a sysfs root, hwloc XML, nvidia-smi topo -m, NCCL topo XML or numactl -H)",
    "multi_numa": "no topology with more than one NUMA node was given (cross-node placement needs one)",
    "gpus": "no GPU in the topology",
    "nics": "no RDMA/network adapter in the topology",
    "gpu_nic_paths": "no GPU-to-NIC path classes (needs nvidia-smi topo -m, NCCL topo XML, hwloc XML or sysfs with GPUs and NICs)",
    "processes": "no processes audited (run on the node, or pass --pid / --match)",
    "gpu_processes": "no audited process uses a GPU",
    "metrics": "no Prometheus metrics (pass --prometheus URL, --scrape URL or a saved /metrics dump)",
    "etcd_metrics": "no etcd metrics (scrape etcd's /metrics or pass a dump)",
    "scheduler_metrics": "no kube-scheduler metrics",
    "apiserver_metrics": "no kube-apiserver metrics",
    "kubelet_metrics": "no kubelet metrics",
    "events": "no logs or events (pass etcd/kubelet/containerd logs)",
    "rdma": "no RDMA/NIC counters (/sys/class/infiniband, rdma statistic, ethtool -S, DPDK xstats)",
    "app": "no application data (Flink checkpoints, Kafka lag, pod phases)",
    "comm": "no NCCL logs, nccl-tests output, traces or flight-recorder dumps",
    "pod_resources": "no kubelet pod-resources API reading (run in the agent pod, or pass --pod-resources-socket)",
}


# Kinds computed from other observations just before the rules run (e.g. "which GPUs state ECC
# counters"): kind -> fn(obs) returning (value or None, reason when absent).
_DERIVED: dict[str, Callable[[Observations], tuple[Any, str | None]]] = {}


def register_derived(kind: str, fn: Callable[[Observations], tuple[Any, str | None]], hint: str) -> None:
    """Declare a kind derived from other observations; ``fn`` returns ``(value, reason)`` and runs
    once per diagnosis, before the rules (its reason is what a skipped rule shows)."""
    _DERIVED[kind] = fn
    INPUT_HINTS.setdefault(kind, hint)


def derive(obs: Observations) -> None:
    """Fill the derived kinds not already present (see :func:`register_derived`)."""
    for kind, fn in _DERIVED.items():
        if kind in obs.data or kind in obs.absent_reasons:
            continue
        value, reason = fn(obs)
        if value is not None and (not isinstance(value, (list, dict, set, tuple)) or value):
            obs.put(kind, value)
        elif reason:
            obs.absent_reasons[kind] = reason


def register_input(kind: str, hint: str) -> None:
    """Declare an observation kind and the hint shown when a rule needing it is skipped.

    Rule modules call this at import time for kinds of their own.
    """
    INPUT_HINTS.setdefault(kind, hint)


@dataclass
class Observations:
    """Everything observed for one diagnosis, by kind. Rules read it; only collectors fill it."""

    data: dict[str, Any] = field(default_factory=dict)
    # A kind that is known to be absent for a specific reason (e.g. single NUMA node).
    absent_reasons: dict[str, str] = field(default_factory=dict)

    def has(self, kind: str) -> bool:
        v = self.data.get(kind)
        if v is None:
            return False
        if isinstance(v, (list, tuple, dict, set)) and not v:
            return False
        return True

    def get(self, kind: str, default: Any = None) -> Any:
        return self.data.get(kind, default)

    def put(self, kind: str, value: Any) -> None:
        self.data[kind] = value

    def missing_reason(self, kind: str) -> str:
        return self.absent_reasons.get(kind) or INPUT_HINTS.get(kind, f"no {kind} input")


class NotJudged:
    """What a rule yields instead of a finding when its input is present but cannot be judged (a
    histogram with NaN or negative counts): recorded as skipped, with ``reason``, so that an input the
    rule could not trust is never shown as healthy."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


RuleFn = Callable[[Observations], Iterable["Finding | NotJudged"]]


@dataclass
class Rule:
    """A catalog entry: identity, layer, inputs, thresholds and the function that checks."""

    id: str
    name: str
    layer: str
    title: str
    requires: tuple[str, ...]
    thresholds: tuple[Threshold, ...]
    fn: RuleFn
    severity: Severity
    requires_any: tuple[str, ...] = ()  # and at least one of these (a rule that joins several sources)
    # Prometheus alerts over the rule's own evidence (rules/alerts.py); none: the rule alerts through
    # the agent's clusterdoctor_finding series.
    alerts: tuple[Alert, ...] = ()
    # incident-corpus cause classes its findings name unless a finding says otherwise
    causes: tuple[str, ...] = ()

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip()

    def sections(self) -> dict[str, str]:
        """The docstring's Symptom/Why/Fix/Verify sections (``**Name**: text`` or ``Name:`` headed)."""
        return parse_sections(self.doc)

    def finding(
        self,
        summary: str,
        *,
        evidence: Iterable[Evidence] = (),
        severity: Severity | None = None,
        confidence: float = 0.8,
        subject: str | None = None,
        fix: str | None = None,
        verify: Iterable[str] | None = None,
        score: float | None = None,
        causes: Iterable[str] | None = None,
    ) -> Finding:
        """Make a finding of this rule; fix/verify default to the docstring's sections."""
        sev = severity if severity is not None else self.severity
        sec = self.sections()
        f = Finding(
            rule=self.id,
            title=self.title,
            layer=self.layer,
            severity=sev,
            summary=summary,
            evidence=list(evidence),
            fix=fix if fix is not None else _one_paragraph(sec.get("Fix", "")),
            verify=list(verify) if verify is not None else _commands(sec.get("Verify", "")),
            confidence=confidence,
            subject=subject,
            causes=tuple(causes) if causes is not None else self.causes,
        )
        f.score = score if score is not None else float(sev) * confidence
        return f


_SECTION_RE = re.compile(r"^\s*\*\*(Symptom|Why|Fix|Verify)\*\*\s*:?\s*(.*)$")
REQUIRED_SECTIONS = ("Symptom", "Why", "Fix", "Verify")


def parse_sections(doc: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in doc.splitlines():
        m = _SECTION_RE.match(line)
        if m:
            current = m.group(1)
            out[current] = [m.group(2)] if m.group(2) else []
        elif current is not None:
            out[current].append(line.strip())
    return {k: "\n".join(v).strip() for k, v in out.items()}


def _one_paragraph(text: str) -> str:
    """A docstring section as one line; reST ``literal`` marks become the `literal` of the rest."""
    return re.sub(r"``([^`]+)``", r"`\1`", " ".join(line for line in text.splitlines() if line).strip())


def _commands(text: str) -> list[str]:
    """Verify sections list commands in backticks (single or reST double); each span is one command."""
    cmds = re.findall(r"`([^`]+)`", re.sub(r"``([^`]+)``", r"`\1`", text))
    return cmds or ([_one_paragraph(text)] if text else [])


_REGISTRY: dict[str, Rule] = {}


def rule(
    *,
    id: str,
    name: str,
    layer: str,
    title: str,
    requires: tuple[str, ...],
    thresholds: tuple[Threshold, ...] = (),
    severity: Severity = Severity.WARNING,
    requires_any: tuple[str, ...] = (),
    alerts: tuple[Alert, ...] = (),
    causes: tuple[str, ...] = (),
) -> Callable[[RuleFn], Rule]:
    """Register ``fn`` as a rule. The decorated name becomes the :class:`Rule` (call ``.fn``).

    It runs when every kind in ``requires`` is present and, if ``requires_any`` is given, at least
    one of those (a rule that judges whichever of several sources the user has).

    ``alerts``: PromQL alerts over the same evidence where it lives in Prometheus (etcd, scheduler,
    apiserver, kubelet, node exporter, dcgm-exporter, the fail-slow probe); `clusterdoctor rules
    --format prometheus` turns them, and a finding alert for every other rule, into rule groups.
    """

    def deco(fn: RuleFn) -> Rule:
        if id in _REGISTRY and _REGISTRY[id].fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"duplicate rule id {id}")
        r = Rule(
            id,
            name,
            layer,
            title,
            tuple(requires),
            tuple(thresholds),
            fn,
            severity,
            tuple(requires_any),
            tuple(alerts),
            tuple(causes),
        )
        _REGISTRY[id] = r
        return r

    return deco


def load_all() -> list[Rule]:
    """Import every rule module (those that exist) and return the catalog in id order."""
    for mod in RULE_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:  # a real missing dependency inside the module
                raise
    return sorted(_REGISTRY.values(), key=lambda r: (_module_order(r), r.id))


# Modules split from one listed above keep its place in the catalog (rules/gpu.py imports them).
_PART_OF = {
    f"clusterdoctor.rules.gpu_{part}": "clusterdoctor.rules.gpu"
    for part in ("xid", "memory", "clocks", "nvlink", "pcie", "dcgm", "recovery", "versions")
}


def _module_order(r: Rule) -> int:
    mod = _PART_OF.get(r.fn.__module__, r.fn.__module__)
    return RULE_MODULES.index(mod) if mod in RULE_MODULES else len(RULE_MODULES)


def get_rule(rule_id: str) -> Rule | None:
    load_all()
    key = rule_id.strip()
    for r in _REGISTRY.values():
        if r.id.lower() == key.lower() or r.name == key:
            return r
    return None


def run_rules(
    obs: Observations, rules: Iterable[Rule] | None = None
) -> tuple[list[Finding], list[Skipped], list[str]]:
    """Run the catalog: findings ranked by score, skipped rules with reasons, ids of rules run."""
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    ran: list[str] = []
    catalog = list(rules) if rules is not None else load_all()
    derive(obs)
    for r in catalog:
        missing = [k for k in r.requires if not obs.has(k)]
        if r.requires_any and not any(obs.has(k) for k in r.requires_any):
            missing.append("|".join(r.requires_any))
        if missing:
            reasons = [
                obs.missing_reason(k)
                if "|" not in k
                else "any one of these would do, none is present: "
                + "; ".join(obs.missing_reason(x) for x in k.split("|"))
                for k in missing
            ]
            skipped.append(Skipped(r.id, "; ".join(reasons)))
            continue
        ran.append(r.id)
        for x in r.fn(obs):
            if isinstance(x, NotJudged):
                skipped.append(Skipped(r.id, f"not judged: {x.reason}"))
            else:
                findings.append(x)
    findings = fold_symptoms(merge_same_subject(findings))
    findings.sort(key=rank_key)
    return findings, skipped, ran


def rank_key(f: Finding) -> tuple:
    """The order of findings: score, then the strongest action (a reboot or an RMA before an
    application fix), then severity; rule id and subject last, so that ties never fall to the order in
    which inputs were given."""
    return (-round(f.score, 6), -int(f.action), -int(f.severity), f.rule, f.subject or "")


# Which layers' causes explain a symptom of a layer, nearest first: a collective timeout (comm) is
# explained by a GPU that fell off the bus or an RDMA port that went down; an application's failed
# checkpoint by a full disk or an etcd outage. Any other layer: only its own.
EXPLAINED_BY: dict[str, tuple[str, ...]] = {
    "comm": ("comm", "gpu", "rdma", "network", "pcie", "numa", "storage", "failslow"),
    "failslow": ("failslow", "comm", "gpu", "rdma", "network", "storage"),
    "app": ("app", "storage", "comm", "gpu", "control-plane", "etcd", "kubelet"),
    "storage": ("storage", "control-plane", "kubelet"),
    "kubelet": ("kubelet", "control-plane", "etcd", "gpu"),
    "control-plane": ("control-plane", "etcd"),
    "gpu": ("gpu", "pcie"),
    "rdma": ("rdma", "network"),
}


def fold_symptoms(findings: list[Finding]) -> list[Finding]:
    """A symptom (``role == "symptom"``: a watchdog timeout, a generic "unhandled error") that a cause
    found in the same run explains is evidence of that cause, not a finding of its own: when a cause
    of the same layer at warning or above is present, each symptom becomes one evidence line of the
    best-ranked such cause. Symptoms with no cause beside them stay (they are all there is)."""
    causes = sorted(
        (f for f in findings if f.role != "symptom" and f.severity >= Severity.WARNING), key=rank_key
    )
    if not causes:
        return findings
    out: list[Finding] = []
    for f in findings:
        if f.role != "symptom":
            out.append(f)
            continue
        layers = EXPLAINED_BY.get(f.layer, (f.layer,))
        host = next((c for layer in layers for c in causes if c.layer == layer and c is not f), None)
        if host is None:
            out.append(f)
            continue
        where = f" [{f.subject}]" if f.subject else ""
        host.evidence.append(Evidence(f"explains {f.rule} {f.title}{where}: {f.summary}"))
    return out


def _evidence_key(e: Evidence) -> tuple:
    return (e.description, repr(e.value), e.source, e.time)


def merge_same_subject(findings: list[Finding]) -> list[Finding]:
    """One finding per rule and subject: findings of one rule about the same subject — the same
    member seen in a dump, in Prometheus and in a log; a target dumped before and after — become
    the most severe one, carrying the others' summaries and evidence. Findings without a subject
    are left alone."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    order: list[Finding | tuple[str, str]] = []
    for f in findings:
        if not f.subject:
            order.append(f)
            continue
        key = (f.rule, f.subject)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(f)
    out: list[Finding] = []
    for item in order:
        if isinstance(item, Finding):
            out.append(item)
            continue
        fs = groups[item]
        if len(fs) == 1:
            out.append(fs[0])
            continue
        ranked = sorted(fs, key=lambda f: (-int(f.severity), -f.score))
        primary = ranked[0]
        seen = {_evidence_key(e) for e in primary.evidence}
        evidence = list(primary.evidence)
        for other in ranked[1:]:
            if other.summary != primary.summary:
                evidence.append(Evidence(f"also: {other.summary}"))
            for e in other.evidence:
                k = _evidence_key(e)
                if k not in seen:
                    seen.add(k)
                    evidence.append(e)
        merged = Finding(
            rule=primary.rule,
            title=primary.title,
            layer=primary.layer,
            severity=primary.severity,
            summary=primary.summary,
            evidence=evidence,
            fix=primary.fix,
            verify=list(primary.verify),
            confidence=max(f.confidence for f in fs),
            score=max(f.score for f in fs),
            subject=primary.subject,
            action=max(f.action for f in fs),
            role=primary.role,
            causes=tuple(dict.fromkeys(c for f in fs for c in f.causes)),
        )
        out.append(merged)
    return out
