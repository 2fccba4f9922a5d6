"""Evidence chains across layers, cause ranking by precedence, and periodic-candidate matching.

* :func:`build_chain` lines timed events up along the known cascade of a Kubernetes control-plane
  incident — etcd disk/CPU stall → slow apply → leader loss → API-server/lease timeouts → CNI/CRI
  timeouts → sandbox failures → slow pod starts (reference/ctrl.md §6, kubernetes#122938) — and
  keeps the stages whose first occurrence follows the previous stage's within a window
  (allowing ``skew_s`` of clock skew between sources). Each link carries its timestamps.
* :func:`rank_causes` scores candidate causes against a symptom's times: a candidate whose events
  precede the symptom (within ``window_s``) ranks above one whose events follow it.
* :func:`event_period` estimates the period of recurring events; :func:`match_periods` names the
  periodic candidates (checkpoint interval, compaction interval, cron schedule) whose period — or a
  small multiple of it — matches.

Times are epoch seconds. An event's *onset* is its time minus the duration it reports
(``took_s``/``exceeded_s``): a stalled etcd leader logs its heartbeat warning when it runs again,
after its followers have already lost it, but the stall began ``exceeded_s`` earlier.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from clusterdoctor.model import Event

__all__ = [
    "STAGES",
    "GpuCauseChain",
    "gpu_cause_chain",
    "rank_cause_chain",
    "CauseRank",
    "Chain",
    "ChainLink",
    "Stage",
    "build_chain",
    "cron_periods",
    "episodes",
    "event_period",
    "match_periods",
    "onset",
    "rank_causes",
]

SLOW_POD_START_S = 30.0  # a pod start above this joins the chain (issue 3; kubelet SLI bucket edge)


@dataclass(frozen=True)
class Stage:
    """One step of the cascade: a name, a description and the event kinds that show it."""

    name: str
    description: str
    kinds: tuple[str, ...]


STAGES: tuple[Stage, ...] = (
    Stage(
        "etcd-member-down",
        "an etcd member stopped and did not come back (ETCD009)",
        ("etcd.member_down",),
    ),
    Stage(
        "etcd-stall",
        "etcd disk or CPU stall (slow fdatasync, late heartbeats)",
        ("etcd.slow_fdatasync", "etcd.heartbeat_slow"),
    ),
    Stage("etcd-slow-apply", "etcd requests applied too slowly", ("etcd.slow_apply",)),
    Stage(
        "etcd-leader-loss",
        "etcd leader lost / re-elected",
        ("etcd.election", "etcd.lost_leader", "etcd.leader_changed"),
    ),
    Stage(
        "apiserver-timeouts",
        "API server and lease timeouts",
        (
            "etcd.request_timeout",
            "etcd.client_timeout",
            "apiserver.timeout",
            "k8s.lease_renew_failed",
            "k8s.leader_election_lost",
            "etcd.lease_not_found",
        ),
    ),
    Stage("cni-cri-timeouts", "CNI / CRI (containerd socket) timeouts", ("cni.timeout", "cri.timeout")),
    Stage(
        "sandbox-failures",
        "pod sandbox create/stop failures",
        ("sandbox.create_failed", "sandbox.stop_failed"),
    ),
    Stage("slow-pod-starts", f"pod starts above {SLOW_POD_START_S:g} s", ("kubelet.pod_startup",)),
)


def _f(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        return None


def onset(ev: Event) -> float | None:
    """When what the event reports began: time minus the duration it carries (see module docstring)."""
    if ev.time is None:
        return None
    a = dict(ev.attrs)
    if ev.kind == "kubelet.pod_startup":
        c = _f(a.get("created"))
        return c if c is not None else ev.time
    for k in ("exceeded_s", "took_s"):
        d = _f(a.get(k))
        if d is not None and 0 <= d < 86400:
            return ev.time - d
    return ev.time


def _in_stage(ev: Event, st: Stage) -> bool:
    if ev.kind not in st.kinds:
        return False
    if ev.kind == "kubelet.pod_startup":
        slo = _f(dict(ev.attrs).get("slo_s"))
        return slo is not None and slo > SLOW_POD_START_S
    if ev.kind == "etcd.election":
        # "starting a new election at term 0/1" is the cluster's first election at bootstrap, not a loss
        term = _f(dict(ev.attrs).get("term"))
        return term is None or term >= 2
    return True


@dataclass
class ChainLink:
    """One stage present in the data: its first onset, last time and the events behind it."""

    stage: Stage
    first: float | None
    last: float | None
    events: list[Event] = field(default_factory=list)
    extra: int = 0  # events of the stage a bounded log store counted but did not keep

    @property
    def count(self) -> int:
        return len(self.events) + self.extra


@dataclass
class Chain:
    """Stages in causal order that also follow each other in time; plus the stages that did not fit."""

    links: list[ChainLink]
    unlinked: list[ChainLink] = field(default_factory=list)
    window_s: float = 600.0

    def __len__(self) -> int:
        return len(self.links)

    def describe(self) -> str:
        """``a (t) → b (t+Δ) → …`` with UTC times and offsets from the first link."""
        import datetime as _dt

        parts = []
        t0 = next((lk.first for lk in self.links if lk.first is not None), None)
        for lk in self.links:
            if lk.first is None:
                parts.append(f"{lk.stage.name} (time unknown, {lk.count}×)")
                continue
            ts = (
                _dt.datetime.fromtimestamp(lk.first, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
                + "Z"
            )
            off = "" if t0 is None or lk.first == t0 else f", +{lk.first - t0:.3g} s"
            parts.append(f"{lk.stage.name} ({ts}{off}, {lk.count}×)")
        return " → ".join(parts)


def build_chain(events: Iterable[Event], window_s: float = 600.0, skew_s: float = 2.0) -> Chain:
    """Line events up along :data:`STAGES` (see the module docstring).

    A stage joins the chain when its first onset is no earlier than the previous linked stage's
    first onset minus ``skew_s`` and no later than its last time plus ``window_s``. Stages seen
    only without timestamps (``kubectl describe`` ages) join by causal order alone, after the
    timed ones. Stages that break the order are returned in ``unlinked``.
    """
    evs = list(events)
    links: list[ChainLink] = []
    for st in STAGES:
        mine = [e for e in evs if _in_stage(e, st)]
        if not mine:
            continue
        times = [t for t in (onset(e) for e in mine) if t is not None]
        lasts = [e.time for e in mine if e.time is not None]
        links.append(ChainLink(st, min(times) if times else None, max(lasts) if lasts else None, mine))
    chain: list[ChainLink] = []
    unlinked: list[ChainLink] = []
    prev: ChainLink | None = None
    for lk in links:
        if lk.first is None:
            continue
        if prev is None:
            chain.append(lk)
            prev = lk
            continue
        assert prev.first is not None
        upper = (prev.last if prev.last is not None else prev.first) + window_s
        if prev.first - skew_s <= lk.first <= upper:
            chain.append(lk)
            prev = lk
        else:
            unlinked.append(lk)
    chain.extend(lk for lk in links if lk.first is None)
    return Chain(chain, unlinked, window_s)


@dataclass(frozen=True)
class CauseRank:
    """How a candidate cause relates to a symptom in time."""

    name: str
    precede_fraction: float  # symptom times with a candidate event in [t - window, t]
    follow_fraction: float  # symptom times with candidate events only in (t, t + window]
    median_lead_s: float | None  # median of (symptom time - latest preceding candidate time)
    score: float


def rank_causes(
    candidates: dict[str, Sequence[float]], symptom_times: Sequence[float], window_s: float = 600.0
) -> list[CauseRank]:
    """Rank candidate causes of a symptom: preceding-and-close ranks first (best first).

    ``score = precede_fraction - follow_fraction``, in [-1, 1]; ties broken by the shorter lead.
    """
    sym = sorted(t for t in symptom_times if t == t)
    out = []
    for name, times in candidates.items():
        ts = sorted(t for t in times if t == t)
        if not sym or not ts:
            out.append(CauseRank(name, 0.0, 0.0, None, 0.0))
            continue
        pre = fol = 0
        leads = []
        import bisect

        for s in sym:
            i = bisect.bisect_right(ts, s)
            before = ts[i - 1] if i > 0 else None
            after = ts[i] if i < len(ts) else None
            if before is not None and s - before <= window_s:
                pre += 1
                leads.append(s - before)
            elif after is not None and after - s <= window_s:
                fol += 1
        n = len(sym)
        out.append(
            CauseRank(name, pre / n, fol / n, statistics.median(leads) if leads else None, (pre - fol) / n)
        )
    out.sort(
        key=lambda r: (-r.score, r.median_lead_s if r.median_lead_s is not None else float("inf"), r.name)
    )
    return out


def event_period(times: Sequence[float], min_events: int = 4) -> tuple[float, float] | None:
    """(period, strength) of recurring events from their inter-arrival times, or None.

    period = median gap; strength = 1 - median absolute deviation of the gaps / period, in [0, 1]
    (1 = perfectly regular). Needs ``min_events`` events with positive gaps.
    """
    ts = sorted(t for t in times if t == t)
    gaps = [b - a for a, b in zip(ts, ts[1:]) if b - a > 0]
    if len(gaps) < max(1, min_events - 1):
        return None
    med = statistics.median(gaps)
    if med <= 0:
        return None
    mad = statistics.median(abs(g - med) for g in gaps)
    return med, max(0.0, min(1.0, 1.0 - mad / med))


def match_periods(
    period_s: float, candidates: dict[str, float], tolerance: float = 0.1, max_multiple: int = 4
) -> list[tuple[str, float, int]]:
    """Candidates whose period matches ``period_s`` or a small multiple/divisor of it.

    Returns ``(name, candidate_period, k)`` where ``period ≈ k × candidate`` (k > 0) or
    ``candidate ≈ |k| × period`` (k < 0), within ``tolerance`` relative error; best matches first.
    """
    out = []
    if not period_s > 0:
        return out
    for name, cp in candidates.items():
        if not cp or cp <= 0:
            continue
        best = None
        for k in range(1, max_multiple + 1):
            for kk, expect, actual in ((k, k * cp, period_s), (-k, k * period_s, cp)):
                err = abs(actual - expect) / expect
                if err <= tolerance and (best is None or err < best[0]):
                    best = (err, kk)
        if best is not None:
            out.append((best[0], name, cp, best[1]))
    out.sort(key=lambda x: (abs(x[3]) != 1, x[0]))
    return [(n, cp, k) for _, n, cp, k in out]


def episodes(times: Sequence[float], gap_s: float = 5.0) -> list[float]:
    """Start times of bursts: times closer than ``gap_s`` to the previous one join its burst."""
    out: list[float] = []
    last = None
    for t in sorted(x for x in times if x == x):
        if last is None or t - last > gap_s:
            out.append(t)
        last = t
    return out


def cron_periods(owners: Iterable[str | None]) -> dict[str, float]:
    """Periods of CronJobs seen through their Jobs' names (``<cronjob>-<scheduled minute>``).

    The CronJob controller names each Job after its scheduled time in minutes since the epoch; two
    or more Jobs of one CronJob give its period (median gap, seconds).
    """
    import re

    minutes: dict[str, set[int]] = {}
    for o in owners:
        if not o or not o.startswith("Job/"):
            continue
        m = re.match(r"^(.+)-(\d{8,10})$", o[4:])
        if m:
            minutes.setdefault(m.group(1), set()).add(int(m.group(2)))
    out = {}
    for name, ms in minutes.items():
        if len(ms) >= 2:
            s = sorted(ms)
            out[f"cronjob {name}"] = 60.0 * statistics.median(b - a for a, b in zip(s, s[1:]))
    return out


# -- a sick GPU as the cause of a straggling rank ------------------------------------------------------


@dataclass
class GpuCauseChain:
    """Cause → symptom across layers: a GPU fault on the node (or GPU) of the rank a timing analysis
    names as the straggler (the traces' COMM007, or the fail-slow detector's FS001-FS006) → what that
    rank does (``symptom``) → what the other ranks suffer (``consequence``).

    ``match`` says how the rank was tied to the GPU: ``"gpu"`` (the rank runs on that GPU: placement
    audit, NVML/nvidia-smi pids, NCCL ``Init COMPLETE`` bus ids, the probe's GPU label) or ``"node"``
    (only the node is known).
    """

    rank: int
    match: str
    causes: list[tuple[str, str, str, float | None]]  # (subject, title, rule, first time)
    symptom: str
    consequence: str = "every other rank waits in those collectives"
    late_count: int = 0  # COMM007's counts, when the straggler came from traces
    matched: int = 0
    mean_late_us: float = 0.0

    def describe(self) -> str:
        import datetime as _dt

        def t(x: float | None) -> str:
            if x is None:
                return "time unknown"
            return _dt.datetime.fromtimestamp(x, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

        cause = "; ".join(f"{rule} {title} on {subj} ({t(when)})" for subj, title, rule, when in self.causes)
        where = "its GPU" if self.match == "gpu" else "a GPU of its node"
        return f"cause: {cause} → rank {self.rank} ({where}) {self.symptom} → {self.consequence}"


def _causes(
    gpu_findings: Sequence[object], rank_gpus: Sequence[str], node_gpus: Sequence[str]
) -> tuple[list[tuple[str, str, str, float | None]], str] | None:
    mine = [f for f in gpu_findings if getattr(f, "subject", None) in set(rank_gpus)]
    match = "gpu"
    if not mine:
        mine = [f for f in gpu_findings if getattr(f, "subject", None) in set(node_gpus)]
        match = "node"
    if not mine:
        return None
    causes = []
    for f in mine:
        times = [e.time for e in getattr(f, "evidence", []) if getattr(e, "time", None) is not None]
        causes.append((str(f.subject), str(f.title), str(f.rule), min(times) if times else None))  # type: ignore[attr-defined]
    return causes, match


def gpu_cause_chain(
    straggler: object, gpu_findings: Sequence[object], rank_gpus: Sequence[str], node_gpus: Sequence[str]
) -> GpuCauseChain | None:
    """Tie GPU findings to a straggler of the traces (``analyze.comm.Straggler``): findings about the
    rank's own GPUs (labels in ``rank_gpus``) first, else about any GPU of its node (``node_gpus``).
    None when no GPU finding is on that rank's GPU or node. Findings carry ``subject``, ``rule``,
    ``title``, ``evidence``."""
    got = _causes(gpu_findings, rank_gpus, node_gpus)
    if got is None:
        return None
    late, matched = int(straggler.late_count), int(straggler.matched)  # type: ignore[attr-defined]
    mean = float(straggler.mean_late_us)  # type: ignore[attr-defined]
    return GpuCauseChain(
        rank=int(straggler.rank),  # type: ignore[attr-defined]
        match=got[1],
        causes=got[0],
        symptom=f"starts {late} of {matched} collectives last, {mean / 1000:.2f} ms late on average",
        late_count=late,
        matched=matched,
        mean_late_us=mean,
    )


def rank_cause_chain(
    rank: int,
    symptom: str,
    consequence: str,
    gpu_findings: Sequence[object],
    rank_gpus: Sequence[str],
    node_gpus: Sequence[str],
) -> GpuCauseChain | None:
    """The same for a straggler of the fail-slow detector: the rank, what it does and what it costs."""
    got = _causes(gpu_findings, rank_gpus, node_gpus)
    if got is None:
        return None
    return GpuCauseChain(rank=rank, match=got[1], causes=got[0], symptom=symptom, consequence=consequence)
