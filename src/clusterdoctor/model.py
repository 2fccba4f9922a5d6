"""The shared vocabulary: samples and series, events, evidence, findings and the diagnosis.

Plain dataclasses, no behaviour beyond (de)serialisation, so a finding from the simulator, the
agent or a trace looks the same in every report. Topology types live in
:mod:`clusterdoctor.topology.model` and are re-exported here.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterdoctor.topology.gpu import GpuEvent, GpuReport, GpuState
    from clusterdoctor.topology.model import Device, NumaNode, PathInfo, Topology

_TOPOLOGY_TYPES = ("Device", "NumaNode", "PathInfo", "Topology")
# the GPU health model (clusterdoctor.topology.gpu), re-exported the same way
_GPU_TYPES = ("GpuEvent", "GpuReport", "GpuState", "NvLinkState", "PcieLink", "Reading")


def __getattr__(name: str) -> Any:
    """The topology types, re-exported here but imported only when asked for (keeps imports fast)."""
    if name in _TOPOLOGY_TYPES:
        from clusterdoctor.topology import model as topology_model

        return getattr(topology_model, name)
    if name in _GPU_TYPES:
        from clusterdoctor.topology import gpu as gpu_model

        return getattr(gpu_model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Action",
    "Device",
    "Diagnosis",
    "Event",
    "Evidence",
    "Finding",
    "GpuEvent",
    "GpuReport",
    "GpuState",
    "Histogram",
    "NumaNode",
    "PathInfo",
    "Sample",
    "Series",
    "Severity",
    "Skipped",
    "SourceRef",
    "Threshold",
    "Topology",
]


class Severity(enum.IntEnum):
    """How bad a finding is. Ordered: ``info < warning < critical``."""

    INFO = 10
    WARNING = 20
    CRITICAL = 30

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (expected info, warning or critical)") from None


class Action(enum.IntEnum):
    """What it takes to remove a cause, from the weakest to the strongest. The ranking's tie-break: of
    two findings with the same score, the one that needs the node rebooted or the board replaced leads
    the one the application can fix (an Xid 94 before an Xid 31)."""

    NONE = 0
    OBSERVE = 1  # nothing to do now: watch it
    FIX_PROGRAM = 2  # a bug or misuse in the training program
    RESTART_JOB = 3  # rerun the job
    CONFIGURE = 4  # change a setting, a limit, an environment variable, a manifest
    RESTART_SERVICE = 5  # restart a daemon (kubelet, containerd, fabric manager, etcd member)
    RESET_DEVICE = 6  # reset the GPU or the HCA
    REBOOT_NODE = 7  # drain and reboot the node
    REPLACE_HARDWARE = 8  # reseat, RMA, replace a cable or a board

    def __str__(self) -> str:
        return self.name.lower().replace("_", "-")


@dataclass(frozen=True, slots=True)
class SourceRef:
    """Where an observation came from: a file, a live path, a URL or a command."""

    kind: str  # e.g. "sysfs", "hwloc-xml", "nvidia-smi-topo", "procfs", "prometheus"
    location: str  # path, URL or command line
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Threshold:
    """A named threshold with the source that justifies its value."""

    name: str
    value: float | str
    unit: str
    source: str
    meaning: str = ""

    def display(self) -> str:
        v = f"{self.value:g}" if isinstance(self.value, (int, float)) else str(self.value)
        return f"{v} {self.unit}".strip()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Sample:
    """One value of one series at one time (seconds since the epoch, or None when untimed)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp: float | None = None


@dataclass
class Series:
    """A time series: (timestamp, value) points of one metric with one label set."""

    name: str
    labels: dict[str, str]
    points: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class Histogram:
    """A cumulative histogram: upper bounds (the last may be +Inf) with cumulative counts."""

    name: str
    labels: dict[str, str]
    buckets: list[tuple[float, float]]
    count: float | None = None
    sum: float | None = None
    timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened at a time: a log line of interest, a leader change, a restart."""

    time: float | None
    kind: str
    message: str
    source: SourceRef | None = None
    attrs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Evidence:
    """One fact a finding rests on: what was observed, against which threshold, from where."""

    description: str
    value: Any = None
    threshold: Any = None
    unit: str | None = None
    source: str | None = None
    time: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Finding:
    """A ranked root cause (or risk) with its evidence, fix and the commands that verify it."""

    rule: str
    title: str
    layer: str
    severity: Severity
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    fix: str = ""
    verify: list[str] = field(default_factory=list)
    confidence: float = 0.8
    score: float = 0.0
    subject: str | None = None  # what the finding is about: a pid, a GPU, a node
    action: Action = Action.NONE  # what its fix takes (the ranking's tie-break)
    # "cause", or "symptom": a consequence (a timeout, a generic failure) that a cause found in the same
    # run explains; a symptom is folded into that cause's evidence instead of ranking on its own
    role: str = "cause"
    # the incident-corpus cause classes this finding names (tests/data/incidents/causes/*.toml)
    causes: tuple[str, ...] = ()

    def acting(self, action: Action) -> Finding:
        """This finding with what its fix takes (the ranking's tie-break), for use in a ``yield``."""
        self.action = action
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "title": self.title,
            "layer": self.layer,
            "severity": str(self.severity),
            "confidence": round(self.confidence, 3),
            "score": round(self.score, 3),
            "subject": self.subject,
            "summary": self.summary,
            "evidence": [e.as_dict() for e in self.evidence],
            "fix": self.fix,
            "verify": list(self.verify),
            **({"action": str(self.action)} if self.action else {}),
        }


@dataclass(frozen=True)
class Skipped:
    """A rule that did not run, and why (the missing input). Never shown as healthy."""

    rule: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "reason": self.reason}


SCHEMA = "clusterdoctor.diagnosis/1"


@dataclass
class Diagnosis:
    """The result of one run of the rule catalog: ranked findings and skipped rules."""

    host: str
    generated_at: str
    sources: list[SourceRef] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rules_run: list[str] = field(default_factory=list)
    # Context the HTML report draws (topology, placement table); not part of the finding list.
    topology: Topology | None = None
    placement: list[dict[str, Any]] = field(default_factory=list)
    # Prepared plot data (the pipeline computes it; reports only draw): latency heatmaps
    # [{"title", "times", "bounds", "counts"}] and the timeline of correlated events.
    heatmaps: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[Event] = field(default_factory=list)
    # per-GPU health grid (GPUs x checks, analyze.gpu_health.health_grid); empty without GPU sources
    gpu_grid: list[dict[str, Any]] = field(default_factory=list)
    # per-rank step time and fail-slow onsets (analyze.step_plot.step_plot); empty without step data
    step_times: dict[str, Any] = field(default_factory=dict)

    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), default=None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "host": self.host,
            "generated_at": self.generated_at,
            "sources": [s.as_dict() for s in self.sources],
            "rules_run": list(self.rules_run),
            "findings": [f.as_dict() for f in self.findings],
            "skipped": [s.as_dict() for s in self.skipped],
            "warnings": list(self.warnings),
            **({"gpu_health": list(self.gpu_grid)} if self.gpu_grid else {}),
        }
