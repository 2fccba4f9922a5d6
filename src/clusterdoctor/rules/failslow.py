"""Fail-slow rules: the straggler of a running (or recorded) job, its class, onset and cost.

Input kind ``watch``: a :class:`~clusterdoctor.analyze.failslow.StepTable` (from the probe's
files, its Prometheus series or per-rank profiler traces). The detector
(:func:`~clusterdoctor.analyze.failslow.detect`) runs once per Observations; each rule reports the
episodes of its class. Findings name the rank, host, GPU and NIC (the NIC from the topology when
one for that host was given, else what the probe saw), onset time and step, slowdown factor, the
steps the job lost and the detector's confidence.

Joined to GPU health when GPU sources are in the same Observations (``clusterdoctor watch --gpu``):
the rank's GPU is found by host and GPU index (:func:`clusterdoctor.analyze.gpu_health.gpus_of_rank`)
and the per-GPU rules' findings on it (or on its whole node) are named in the evidence ("GPU2 on
this host: HW power brake active (GPU009, ...)"), or its checked state when it is healthy. A GPU
finding that can cause the class (any for a compute straggler or a silent rank, PCIe/NVLink for a
slow link) becomes the first stage of the finding's evidence chain, the summary says so
("compute-bound, GPU clock down") and the fix starts with the GPU's; GPU019 reports the join.

:data:`FS001_ALERTS` and :data:`FS006_ALERTS` are the Prometheus alerts over the probe's metrics, as
data; ``clusterdoctor rules --format prometheus`` renders them into deploy/ with the catalogue's others.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator
from typing import Any

from clusterdoctor.analyze.failslow_params import (
    MIN_FACTOR,
    PERIODIC_MIN_EPISODES,
    SLOW_LINK_RATIO,
    THRESHOLDS,
)
from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.alerts import Alert, Example
from clusterdoctor.rules.failslow_input import failslow_analysis, straggler_explains
from clusterdoctor.rules.registry import Observations, rule

__all__ = ["FS001_ALERTS", "FS006_ALERTS", "failslow_analysis", "failslow_rules", "run_failslow_rules",
           "straggler_explains"]  # fmt: skip

STRAGGLER_FOR = Threshold(
    "failslow_alert_for",
    "5m",
    "",
    "clusterdoctor default: kubernetes-mixin alerts wait 5-15 minutes (`for:`) before paging; 5 minutes "
    "is ~300 steps of a 1 s step, well past the detector's 10-step delay",
    "how long a straggler must be present before the alert fires",
)
STRAGGLER_RATIO = Threshold(
    "failslow_alert_lateness_ratio",
    0.2,
    "x median step",
    "clusterdoctor default: the others waiting a fifth of a step for one rank costs the job 20% "
    "(Greyhound, ATC'25: fail-slows delay jobs 1.34x on average)",
    "lateness of the slowest rank, as a fraction of the median step, that the alert calls a straggler",
)

_PER_STEP = "rate(clusterdoctor_watch_{0}_seconds_total[2m]) / rate(clusterdoctor_watch_steps_total[2m])"
_WAIT, _STALL, _STEP = (_PER_STEP.format(m) for m in ("collective_wait", "stall", "step"))
# How long the others waited for a rank: it waited less than the median rank in the collectives,
# plus the time its process did not run while the others' did (per step, 2-minute rates).
LATENESS_EXPR = (
    f"(quantile by (job) (0.5, {_WAIT}) - on(job) group_right() ({_WAIT}))\n"
    f"  + (({_STALL}) - on(job) group_left() quantile by (job) (0.5, {_STALL}))"
)


# Prometheus alerts over the probe's series (labels job, rank, host, gpu), in the catalogue's form
# (rules/alerts.py): `clusterdoctor rules --format prometheus` renders them into deploy/ with the
# others, and its promtool tests check each fires on its example and stays quiet on a healthy job.
def _probe_series(rank: int, wait: str, stall: str = "0x40", last: str = "0+60x40") -> list[tuple[str, str]]:
    """One rank of job "llm" for promtool (1-minute samples): one 1-second step a second."""
    lab = f'job="llm",rank="{rank}",host="h{rank}",gpu="0"'
    return [
        (f"clusterdoctor_watch_steps_total{{{lab}}}", "0+60x40"),
        (f"clusterdoctor_watch_step_seconds_total{{{lab}}}", "0+60x40"),
        (f"clusterdoctor_watch_collective_wait_seconds_total{{{lab}}}", wait),
        (f"clusterdoctor_watch_stall_seconds_total{{{lab}}}", stall),
        (f"clusterdoctor_watch_last_step_timestamp_seconds{{{lab}}}", last),
    ]


# three ranks: the others wait 0.5 s a step in the collectives, rank 2 only 0.1 s (they wait for it)
_STRAGGLING = tuple(s for r in range(3) for s in _probe_series(r, "0+6x40" if r == 2 else "0+30x40"))
_EVEN = tuple(s for r in range(3) for s in _probe_series(r, "0+30x40"))
_RANK2 = {"job": "llm", "rank": "2", "host": "h2", "gpu": "0"}
FS001_ALERTS = (
    Alert(
        name="TrainingStragglerPresent",
        expr=(
            f"{LATENESS_EXPR}\n  > on(job) group_left() {STRAGGLER_RATIO.value} * quantile by (job) (0.5, {_STEP})"
        ),
        severity="warning",
        for_=str(STRAGGLER_FOR.value),
        source="failslow-probe",
        summary="Rank {{ $labels.rank }} of job {{ $labels.job }} on {{ $labels.host }} is a straggler",
        description=(
            "For 5 minutes the other ranks of {{ $labels.job }} have waited for rank {{ $labels.rank }} "
            f"(host {{{{ $labels.host }}}}, GPU {{{{ $labels.gpu }}}}) more than {STRAGGLER_RATIO.value:g} of a "
            "step. `clusterdoctor watch --prometheus URL --job {{ $labels.job }}` names its class and onset."
        ),
        fires=Example(_STRAGGLING, _RANK2),
        healthy=Example(_EVEN),
    ),
)
FS006_ALERTS = (
    Alert(
        name="TrainingRankSilent",
        expr=(
            "max by (job) (clusterdoctor_watch_last_step_timestamp_seconds)\n"
            "  - on(job) group_right() clusterdoctor_watch_last_step_timestamp_seconds > 60"
        ),
        severity="critical",
        for_="2m",
        source="failslow-probe",
        summary="Rank {{ $labels.rank }} of job {{ $labels.job }} stopped reporting steps",
        description=(
            "Rank {{ $labels.rank }} on {{ $labels.host }} is more than 60 s behind the job's newest step: "
            "hung, dead or frozen."
        ),
        # rank 2's last step stays at minute 10 while the others go on
        fires=Example(
            tuple(
                s
                for r in range(3)
                for s in _probe_series(r, "0+30x40", last="0+60x10 600x30" if r == 2 else "0+60x40")
            ),
            _RANK2,
        ),
        healthy=Example(_EVEN),
    ),
)


def _when(t: float | None) -> str:
    if t is None:
        return "an unknown time"
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _where(obs: Observations, rank: int | None) -> dict[str, Any]:
    """Host, GPU, NIC and local rank of ``rank``: from the probe, the NIC joined to the topology."""
    if rank is None:
        return {}
    table = obs.get("watch")
    ident = table.identities.get(rank) if table is not None else None
    out: dict[str, Any] = {"rank": rank}
    if ident is not None:
        out.update(host=ident.host, gpu=ident.gpu, nic=ident.nic, local_rank=ident.local_rank)
    topo = obs.get("topology")
    if topo is not None and ident is not None and ident.gpu not in (None, "cpu"):
        if topo.hostname is None or ident.host is None or topo.hostname == ident.host:
            # the probe labels a GPU by its CUDA index: GPU<index> in nvidia-smi / NCCL topology names
            gpu = next((g for g in topo.gpus if re.sub(r"\D", "", g.name) == str(ident.gpu)), None)
            if gpu is not None:
                out["gpu_device"] = gpu.name
                best = topo.best_nic_for(gpu, topo.nics)
                if best is not None:
                    out["nic"] = best[0].name
                    out["gpu_nic_path"] = best[1]
    # the GPU's health, when GPU sources (nvidia-smi, dcgm-exporter, kernel logs, ...) were given
    if obs.has("gpu_health"):
        from clusterdoctor.rules.gpu import rank_gpu_health

        out["gpu_health"] = rank_gpu_health(obs, rank)
    return {k: v for k, v in out.items() if v is not None}


def _subject(where: dict[str, Any]) -> str:
    parts = [f"rank {where['rank']}"]
    if where.get("host"):
        parts.append(f"host {where['host']}")
    if where.get("gpu") not in (None, "cpu"):
        parts.append(f"GPU {where['gpu']}")
    return ", ".join(parts)


def _unit(table: Any) -> str:
    return "step" if table is None or table.unit == "step" else "sample"


def _common_evidence(ep: Any, table: Any, source: str) -> list[Evidence]:
    u = _unit(table)
    what = f"change point in {'step' if u == 'step' else 'sampled step'} time"
    if ep.detail.get("onset_from_last_to_be_ready"):  # a gradual onset (analyze.failslow._onset_of_last)
        what = (
            f"it began to be the last rank ready; its lateness from step {ep.detail['lateness_onset_step']}"
        )
    ev = [
        Evidence(
            f"onset ({what})",
            f"step {ep.onset_step} at {_when(ep.onset_t)}",
            source=source,
            time=ep.onset_t,
        ),
        Evidence(
            "detected",
            f"step {ep.detect_step} ({_steps(ep.detect_step - ep.onset_step)} after onset)",
            source=source,
        ),
        Evidence(
            "job step time before -> during", f"{ep.baseline_s * 1000:.1f} ms -> {ep.during_s * 1000:.1f} ms"
        ),
        Evidence("slowdown factor", ep.factor, float(_factor_threshold()), "x", source),
        Evidence("steps the job lost", ep.steps_lost, unit="steps", source=source),
    ]
    if ep.end_col is None:
        ev.append(Evidence("still going at the end of the data", True, source=source))
    return ev


def _factor_threshold() -> float:
    return float(MIN_FACTOR.value)


def _source(obs: Observations) -> str:
    return str(obs.get("watch_source") or "fail-slow probe")


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def _severity(ep: Any) -> Severity:
    """From what the episode cost the job (the detector's level: a recovered transient is info)."""
    return Severity.parse(getattr(ep, "level", "warning") or "warning")


def _why(ep: Any, src: str) -> list[Evidence]:
    """Why this rank (or link, or the whole job) and not its peers."""
    return [Evidence("why this one and not its peers", ep.why, source=src)] if getattr(ep, "why", "") else []


def _episodes(obs: Observations, kind: str) -> list[Any]:
    return [e for e in failslow_analysis(obs).episodes if e.kind == kind]


def _where_evidence(where: dict[str, Any], source: str) -> list[Evidence]:
    ev = []
    for key, label in (("host", "host"), ("gpu", "GPU"), ("nic", "NIC"), ("gpu_nic_path", "GPU-NIC path")):
        if where.get(key) is None:
            continue
        if key == "gpu" and str(where[key]) == "cpu":  # the probe's label for a rank on the CPU
            ev.append(Evidence("device", "CPU (no GPU)", source=source))
        else:
            ev.append(Evidence(label, where[key], source=source))
    h = where.get("gpu_health")
    if h is not None:
        ev.append(Evidence(h.title, h.text, source="GPU health"))
        if h.note:
            ev.append(Evidence("GPU data tied to this host", h.note, source="GPU health"))
    return ev


def _gpu_cause(
    obs: Observations, rank: int | None, kind: str, what: str, cost: str, src: str
) -> tuple[list[Finding], list[Evidence]]:
    """(the GPU findings that can make ``rank`` slow the way class ``kind`` is slow, the evidence-chain
    entry that puts them first); ([], []) without a rank, without GPU data or when no GPU finding fits."""
    if rank is None or not obs.has("gpu_health"):
        return [], []
    from clusterdoctor.rules.gpu import failslow_gpu_chain

    chain, h = failslow_gpu_chain(obs, rank, kind, what, cost)
    if chain is None:
        return [], []
    subjects = {c[0] for c in chain.causes}
    gpu = [f for f in h.faults if f.subject in subjects]
    return gpu, [Evidence("evidence chain", chain.describe(), source="GPU health + " + src)]


def _with_gpu_fix(f: Finding, gpu: list[Finding], where: dict[str, Any]) -> Finding:
    """When a GPU finding is the cause, the fix and verify start with the GPU's own."""
    if gpu:
        host = where.get("host") or "its host"
        f.fix = (
            f"Its GPU is the likely cause ({gpu[0].rule}): {gpu[0].fix} Meanwhile move the job off {host} "
            "(cordon it and restart from the last checkpoint without it) so the other ranks stop waiting."
        )
        f.verify = [*gpu[0].verify, *f.verify]
    return f


@rule(
    id="FS001",
    name="compute-straggler",
    layer="failslow",
    title="One rank is a compute straggler",
    requires=("watch",),
    thresholds=(*THRESHOLDS, STRAGGLER_RATIO, STRAGGLER_FOR),
    severity=Severity.CRITICAL,
    alerts=FS001_ALERTS,
)
def compute_straggler(obs: Observations) -> Iterator[Finding]:
    """One rank's own work (or its process not running) makes every other rank wait at the collectives.

    **Symptom**: the job's step time jumps; one rank enters the collectives last (or stalls) step after
    step while the others' collective wait grows by the same amount.
    **Why**: in synchronous data/tensor/pipeline parallelism the slowest rank sets the pace of all: a
    GPU at reduced clocks (thermal, power cap), a CPU-throttled or frozen process (cgroup limit, noisy
    neighbour, host stalls) makes thousands of GPUs wait for one.
    **Fix**: move the job off the node (cordon it and restart from the last checkpoint without it);
    check the GPU's clocks and throttle reasons, the pod's CPU limit (throttling) and the host's other
    tenants; reseat or reset the GPU if its clocks stay low.
    **Verify**: `nvidia-smi -q -d PERFORMANCE,CLOCK,TEMPERATURE` on the host and
    `cat /sys/fs/cgroup/cpu/cpu.stat` for the pod (nr_throttled), then
    `clusterdoctor watch --prometheus <URL> --job <job> --once` (no straggler).
    """
    table = obs.get("watch")
    src = _source(obs)
    for ep in _episodes(obs, "compute"):
        yield _straggler_finding(compute_straggler, obs, ep, table, src)


def _straggler_finding(r: Any, obs: Observations, ep: Any, table: Any, src: str) -> Finding:
    where = _where(obs, ep.rank)
    d = ep.detail
    stall = d.get("stall_s") or 0.0
    late_ms = d["lateness_s"] * 1000
    gpu, chain_ev = _gpu_cause(
        obs,
        ep.rank,
        ep.kind,
        f"finishes its own work late since step {ep.onset_step}, {late_ms:.1f} ms a step",
        f"every other rank waits for it; the job is {ep.factor:.2f}x slower",
        src,
    )
    if ep.kind == "data":
        what = "its data loader kept it waiting"
    elif ep.kind == "storage":
        what = (
            f"its own storage I/O ({d.get('io_bytes_per_step', 0) / (1 << 20):.1f} MiB a step) kept it busy"
        )
    elif stall >= 0.5 * d["lateness_s"]:
        what = f"its process did not run for {stall * 1000:.1f} ms a step (CPU-throttled or frozen)"
        if gpu:
            what += f"; its GPU also shows {_gpu_words(gpu[0])}"
    elif gpu:
        what = f"it finished its own work late: compute-bound, {_gpu_words(gpu[0])}"
    else:
        what = "it finished its own work late"
    if d.get("frozen_in_collective"):
        waits = (
            "it stops inside the collectives too, so every rank's collectives stretch and the job's step "
            f"grew {(ep.during_s - ep.baseline_s) * 1000:.1f} ms"
        )
    else:
        waits = f"the other ranks wait {d['lateness_s'] * 1000:.1f} ms a step for it"
    became = (
        f"makes the job {ep.factor:.2f}x slower from its first step"
        if ep.onset_col == 0
        else f"became {ep.factor:.2f}x slower at {_when(ep.onset_t)} (step {ep.onset_step})"
    )
    summary = f"{_subject(where)} {became}: {what}; {waits}. The job lost {ep.steps_lost:.1f} steps so far."
    if ep.end_col is not None:
        summary += f" It recovered at step {ep.detail.get('end_step', '?')}."
    ev = (
        _where_evidence(where, src)
        + _why(ep, src)
        + [
            Evidence("others wait for it, per step", round(d["lateness_s"] * 1000, 2), unit="ms", source=src),
            Evidence("how often it was the last rank", d.get("consistency"), source=src),
        ]
    )
    if stall > 0:
        ev.append(
            Evidence("its process stalls grew by", round(stall * 1000, 2), unit="ms a step", source=src)
        )
    if ep.kind == "data":
        ev.append(
            Evidence("its data-loader wait grew by", round(d["data_wait_s"] * 1000, 2), unit="ms", source=src)
        )
    if d.get("also_late"):
        ev.append(Evidence("other ranks also late", d["also_late"], source=src))
    if d.get("frozen_together"):
        ev.append(Evidence("other ranks frozen at the same time", d["frozen_together"], source=src))
    ev += _common_evidence(ep, table, src) + chain_ev
    f = _with_gpu_fix(
        r.finding(
            summary, evidence=ev, severity=_severity(ep), confidence=ep.confidence, subject=_subject(where)
        ),
        gpu,
        where,
    )
    return _fit_to_cpu(f) if str(where.get("gpu")) == "cpu" and not gpu else f


def _fit_to_cpu(f: Finding) -> Finding:
    """A rank that runs on the CPU has no GPU to check: its advice names the CPU's causes only."""
    f.fix = (
        "move the job off the node (cordon it and restart from the last checkpoint without it); this rank "
        "runs on the CPU: check the pod's CPU limit (throttling), the process's CPU affinity and the "
        "host's other tenants (a noisy neighbour)."
    )
    keep = [v for v in f.verify if "nvidia-smi" not in v]
    again = [v for v in keep if v.startswith("clusterdoctor ")]  # the re-check stays last
    cgroup2 = "grep -E 'nr_throttled|throttled_usec' /sys/fs/cgroup/cpu.stat"
    f.verify = [*(v for v in keep if v not in again), cgroup2, *again]
    return f


def _gpu_words(f: Finding) -> str:
    """ "GPU clock down (HW power brake active, GPU009)" for clock findings, else the finding's words."""
    from clusterdoctor.rules.gpu import fault_phrase

    if f.rule in ("GPU009", "GPU010"):
        return f"GPU clock down ({fault_phrase(f)}, {f.rule})"
    return f"a sick GPU ({fault_phrase(f)}, {f.rule})"


@rule(
    id="FS002",
    name="communication-straggler",
    layer="failslow",
    title="Collectives became slow (communication straggler)",
    requires=("watch",),
    thresholds=(*THRESHOLDS, SLOW_LINK_RATIO),
    severity=Severity.CRITICAL,
)
def communication_straggler(obs: Observations) -> Iterator[Finding]:
    """Every rank enters the collectives on time but the collectives take longer.

    **Symptom**: step time grows, no rank is late; the collective wait of every rank grows together.
    When the probe's link test ran, the transfers to and from one rank are slower than the others'.
    **Why**: a NIC that trained at a lower rate, a flapping or congested link, a switch port with
    errors, or NCCL falling back to a slower transport slows the ring/tree for everyone.
    **Fix**: move the job off the localised host (or exclude its NIC with `NCCL_IB_HCA`); check the
    link's speed and error counters, reseat the cable/transceiver; if no rank is localised, check
    the transport NCCL chose (`NCCL_DEBUG=INFO`) and the fabric's congestion.
    **Verify**: `ethtool <nic>` / `ibstat` (rate), `clusterdoctor diagnose` on the host (RDMA counters),
    and an nccl-tests `all_reduce_perf` between the suspect host and a healthy one.
    """
    table = obs.get("watch")
    src = _source(obs)
    for ep in _episodes(obs, "communication"):
        where = _where(obs, ep.rank)
        d = ep.detail
        at = _subject(where) if where else "not localised to a rank"
        summary = (
            f"Collectives became {ep.factor:.2f}x slower at {_when(ep.onset_t)} (step {ep.onset_step}); every "
            f"rank arrives on time. Localised: {d.get('localised', 'no per-link data')} ({at})."
        )
        ev = (
            _where_evidence(where, src)
            + _why(ep, src)
            + [
                Evidence(
                    "collective time grew by", round(d["collective_s"] * 1000, 2), unit="ms", source=src
                ),
            ]
        )
        if ep.link is not None:
            ev.append(Evidence("slowest link (src -> dst rank)", f"{ep.link[0]} -> {ep.link[1]}", source=src))
        if d.get("link_scores"):
            ev.append(Evidence("link time by rank (touching / not touching)", d["link_scores"], source=src))
        ev += _common_evidence(ep, table, src)
        gpu, chain_ev = _gpu_cause(
            obs,
            ep.rank,
            "communication",
            f"its transfers are slow since step {ep.onset_step}",
            f"every collective of the job is {ep.factor:.2f}x slower",
            src,
        )
        if gpu:
            summary += f" Its GPU's link is faulty: {_gpu_words(gpu[0])}."
        ev += chain_ev
        yield _with_gpu_fix(
            communication_straggler.finding(
                summary,
                evidence=ev,
                severity=_severity(ep),
                confidence=ep.confidence,
                subject=_subject(where) if where else "collectives",
            ),
            gpu,
            where,
        )


@rule(
    id="FS003",
    name="data-loader-straggler",
    layer="failslow",
    title="One rank's data loader keeps the job waiting",
    requires=("watch",),
    thresholds=THRESHOLDS,
    severity=Severity.CRITICAL,
)
def data_loader_straggler(obs: Observations) -> Iterator[Finding]:
    """One rank waits for its data loader, and the others wait for it.

    **Symptom**: one rank's loader wait (time blocked in ``next(loader)``) grows; it enters the
    collectives late and the other ranks' collective wait grows by the same amount.
    **Why**: its loader workers are starved: too few workers for the host's CPUs, CPU-throttled or
    crowded out by a neighbour, a slow local disk or remote storage shard, workers on the wrong NUMA node.
    **Fix**: raise `num_workers`/`prefetch_factor` on that host, bind the workers near the GPU
    (`clusterdoctor.training.NumaDataLoader`), move the job off a node whose storage or CPUs are slow.
    **Verify**: `clusterdoctor numa check --pid <rank pid>` and `pidstat -t -p <worker pid> 1`, then
    `clusterdoctor watch --from <dir> --once` shows no data-loader finding.
    """
    table = obs.get("watch")
    src = _source(obs)
    for ep in _episodes(obs, "data"):
        yield _straggler_finding(data_loader_straggler, obs, ep, table, src)


@rule(
    id="FS007",
    name="storage-straggler",
    layer="failslow",
    title="One rank's storage I/O keeps the job waiting",
    requires=("watch",),
    thresholds=THRESHOLDS,
    severity=Severity.WARNING,
)
def storage_straggler(obs: Observations) -> Iterator[Finding]:
    """One rank reads or writes storage in some steps (a checkpoint, a log or trace flush, a dataset
    shard) and the other ranks wait for it in those steps.

    **Symptom**: spikes in the job's step time at a regular spacing (every N steps), each one rank late;
    the probe's I/O counters (/proc/self/io) show that rank moving megabytes of storage in those steps
    while its peers do not.
    **Why**: a synchronous checkpoint (``torch.save`` + fsync) on the training thread, or a slow disk or
    network filesystem under one rank's checkpoint shard; every other rank waits at the next collective.
    **Fix**: checkpoint asynchronously (``torch.distributed.checkpoint.async_save``, or a background
    thread that writes a CPU copy), spread shards over ranks, or write to faster local storage and copy
    it out later; check that rank's disk (``iostat -x 1``) for a failing or saturated device.
    **Verify**: `iostat -x 1` on the host during a checkpoint, then
    `clusterdoctor watch --from <dir> --once` shows no storage finding.
    """
    table = obs.get("watch")
    src = _source(obs)
    for ep in _episodes(obs, "storage"):
        where = _where(obs, ep.rank)
        d = ep.detail
        if ep.recurrences > 1:
            period = f"{ep.period_s:.1f} s" if ep.period_s else f"{ep.period_steps:.0f} steps"
            summary = (
                f"{_subject(where)}: every {period} ({ep.recurrences} times since step {ep.onset_step}) "
                f"its storage I/O keeps the others waiting {d.get('spike_s', 0) * 1000:.0f} ms; "
                f"{ep.steps_lost:.1f} steps lost."
            )
        else:
            summary = (
                f"{_subject(where)} makes the job {ep.factor:.2f}x slower since step {ep.onset_step}: "
                f"it moves {d.get('io_bytes_per_step', 0) / (1 << 20):.1f} MiB of storage a step and the others "
                f"wait {d['lateness_s'] * 1000:.1f} ms a step for it."
            )
        ev = (
            _where_evidence(where, src)
            + _why(ep, src)
            + [Evidence("steps with storage I/O among its spikes", d.get("io_spikes"), source=src)]
            + _common_evidence(ep, table, src)
        )
        yield storage_straggler.finding(
            summary, evidence=ev, severity=_severity(ep), confidence=ep.confidence, subject=_subject(where)
        )


@rule(
    id="FS004",
    name="whole-job-slowdown",
    layer="failslow",
    title="The whole job became slower together",
    requires=("watch",),
    thresholds=THRESHOLDS,
    severity=Severity.WARNING,
)
def whole_job_slowdown(obs: Observations) -> Iterator[Finding]:
    """Every rank's own work grew at the same time: no straggler, no slow collective.

    **Symptom**: step time of all ranks rises together at one moment; nobody waits for anybody.
    **Why**: something every rank shares: the storage the job reads or checkpoints to, the control
    plane, a shared CPU or power cap, a data pipeline, a code or configuration change at that step.
    **Fix**: look at what changed at the onset time (the evidence chain starts there): checkpoint
    writes, storage latency, node-level CPU limits, other jobs on the same nodes.
    **Verify**: `clusterdoctor diagnose --prometheus <URL> --since 1h` around the onset time.
    """
    table = obs.get("watch")
    src = _source(obs)
    for ep in _episodes(obs, "job"):
        d = ep.detail
        summary = (
            f"All {table.shape[0]} ranks became {ep.factor:.2f}x slower together at {_when(ep.onset_t)} "
            f"(step {ep.onset_step}); no rank is late and the collectives did not slow. The job lost "
            f"{ep.steps_lost:.1f} steps."
        )
        ev = (
            _why(ep, src)
            + [
                Evidence(
                    "own work of the median rank grew by",
                    round(d["common_own_s"] * 1000, 2),
                    unit="ms",
                    source=src,
                ),
                Evidence(
                    "process stalls of the median rank grew by",
                    round(d["common_stall_s"] * 1000, 2),
                    unit="ms",
                ),
            ]
            + _common_evidence(ep, table, src)
        )
        yield whole_job_slowdown.finding(
            summary, evidence=ev, severity=_severity(ep), confidence=ep.confidence, subject="job"
        )


@rule(
    id="FS005",
    name="periodic-slowdown",
    layer="failslow",
    title="Slowdowns that recur with a period",
    requires=("watch",),
    thresholds=(*THRESHOLDS, PERIODIC_MIN_EPISODES),
    severity=Severity.WARNING,
)
def periodic_slowdown(obs: Observations) -> Iterator[Finding]:
    """The same slowdown (same rank, same class) comes back at a regular interval.

    **Symptom**: step time rises and falls back again and again; each time the same rank (or the
    whole job) is the cause.
    **Why**: something on a timer: a cron job or backup on one node, periodic checkpoints or
    evaluation, a thermal cycle, a neighbour's batch job, log rotation, a periodic health check.
    **Fix**: find what runs with that period on the named host (crontab, systemd timers, other pods)
    and move it or the job; if it is the job's own checkpoint, make it asynchronous.
    **Verify**: `systemctl list-timers`, `crontab -l` on the host, and
    `clusterdoctor watch --from <dir> --once` after the change.
    """
    table = obs.get("watch")
    src = _source(obs)
    for ep in _episodes(obs, "periodic"):
        where = _where(obs, ep.rank)
        period = f"{ep.period_s:.1f} s" if ep.period_s else f"{ep.period_steps:.0f} steps"
        who = _subject(where) if where else "the whole job"
        summary = (
            f"{who}: a {ep.periodic_of} slowdown of {ep.factor:.2f}x recurs every {period} "
            f"({ep.recurrences} times since {_when(ep.onset_t)}, step {ep.onset_step}); "
            f"{ep.steps_lost:.1f} steps lost."
        )
        ev = (
            _where_evidence(where, src)
            + _why(ep, src)
            + [
                Evidence("period", period, source=src),
                Evidence("recurrences", ep.recurrences, int(PERIODIC_MIN_EPISODES.value), source=src),
                Evidence("class of each recurrence", ep.periodic_of, source=src),
                Evidence("onset steps", ep.detail.get("onset_steps"), source=src),
            ]
            + _common_evidence(ep, table, src)
        )
        gpu, chain_ev = _gpu_cause(
            obs,
            ep.rank,
            ep.periodic_of or "",
            f"slows down every {period} since step {ep.onset_step}",
            f"every other rank waits for it; the job is {ep.factor:.2f}x slower while it lasts",
            src,
        )
        if gpu:
            summary += f" Its GPU: {_gpu_words(gpu[0])} (a thermal or power cycle recurs)."
        ev += chain_ev
        yield _with_gpu_fix(
            periodic_slowdown.finding(
                summary,
                evidence=ev,
                severity=_severity(ep),
                confidence=ep.confidence,
                subject=who,
            ),
            gpu,
            where,
        )


@rule(
    id="FS006",
    name="rank-silent",
    layer="failslow",
    title="A rank stopped reporting",
    requires=("watch",),
    thresholds=THRESHOLDS,
    severity=Severity.CRITICAL,
    alerts=FS006_ALERTS,
)
def rank_silent(obs: Observations) -> Iterator[Finding]:
    """A rank's last step is far behind the other ranks' (or every rank stopped, live).

    **Symptom**: one rank's step counter and timestamps stop advancing while the others' go on
    (then the others hang at the next collective), or the whole job stops reporting.
    **Why**: the process died, hung (deadlock, stuck I/O, a GPU fault), was frozen, or its host
    lost the network; the probe's exporter or file stopped with it.
    **Fix**: look at that rank's log and its host (`dmesg` for Xid errors / OOM kills); restart the
    job without the node if the host is at fault.
    **Verify**: `clusterdoctor comm analyze <flight-recorder dumps>` (which collective it stopped in),
    `kubectl logs <pod>`, `dmesg -T | tail` on the host.
    """
    res = failslow_analysis(obs)
    src = _source(obs)
    for s in res.silent:
        where = _where(obs, s.rank)
        summary = (
            f"rank {s.rank} silent since {_when(s.last_t)} (last step {s.last_step}; the others reached step "
            f"{s.others_step} by {_when(s.others_t)})."
        )
        ev = _where_evidence(where, src) + [
            Evidence("last step", s.last_step, source=src, time=s.last_t),
            Evidence("seconds behind the newest rank", round(s.others_t - s.last_t, 1), unit="s", source=src),
        ]
        gpu, chain_ev = _gpu_cause(
            obs, s.rank, "silent", f"stopped reporting after step {s.last_step}", "the job waits for it", src
        )
        if gpu:
            summary += f" Its GPU: {_gpu_words(gpu[0])}."
        ev += chain_ev
        yield _with_gpu_fix(
            rank_silent.finding(summary, evidence=ev, confidence=0.9, subject=_subject(where)), gpu, where
        )
    if res.job_silent_since is not None:
        yield rank_silent.finding(
            f"every rank silent since {_when(res.job_silent_since)}: the job stopped, hung or finished.",
            evidence=[Evidence("newest step of any rank", _when(res.job_silent_since), source=src)],
            confidence=0.7,
            subject="job",
        )


def failslow_rules() -> list[Any]:
    """FS001-FS007 and GPU019 (a sick GPU as the cause of a straggler; skipped without GPU data)."""
    from clusterdoctor.rules.registry import load_all

    return [r for r in load_all() if r.layer == "failslow" or r.id == "GPU019"]


def run_failslow_rules(obs: Observations) -> tuple[list[Finding], list[Any], list[str]]:
    """Run only the fail-slow rules (and GPU019): (findings ranked by score, skipped, ids run)."""
    from clusterdoctor.rules.registry import run_rules

    return run_rules(obs, failslow_rules())
