"""Application-layer rules: Flink checkpoints and Kafka consumer lag.

Inputs: ``flink_checkpoints`` (:mod:`clusterdoctor.observe.app.flink`), ``kafka_lag``
(:mod:`clusterdoctor.observe.app.kafka`) and, to place checkpoint failures after control-plane trouble,
``events`` (:mod:`clusterdoctor.observe.control.logs`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Event, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.etcd_log import utc
from clusterdoctor.rules.registry import Observations, register_derived, register_input, rule

register_input(
    "flink_checkpoints", "no Flink checkpoint statistics (GET /jobs/<id>/checkpoints or job metrics JSON)"
)
register_input(
    "kafka_lag", "no Kafka consumer lag (kafka-consumer-groups --describe or kafka_exporter metrics)"
)


def _flink_jobs(obs: Observations) -> tuple[Any, str | None]:
    """One record per job: the checkpoints, metrics and details files of a job joined (observe.app.flink)."""
    from clusterdoctor.observe.app.flink import join_jobs

    parts = obs.get("flink_checkpoints") or []
    return (join_jobs(list(parts)) or None), (None if parts else INPUT_FLINK)


def _jobs(obs: Observations) -> list[Any]:
    """The joined jobs (derived once per diagnosis; joined here when a caller ran a rule alone)."""
    jobs = obs.get("flink_jobs")
    return jobs if jobs is not None else (_flink_jobs(obs)[0] or [])


INPUT_FLINK = "no Flink checkpoint statistics (GET /jobs/<id>/checkpoints or job metrics JSON)"
register_derived("flink_jobs", _flink_jobs, INPUT_FLINK)

ALIGNMENT_SHARE = Threshold(
    "flink_alignment_share",
    0.5,
    "fraction",
    "Flink docs 'Monitoring Checkpointing' / 'Tuning checkpoints': long alignment or start delay means "
    "backpressure delays the barriers; clusterdoctor flags it when it is more than half of the checkpoint duration",
    "share of checkpoint duration spent on barrier alignment/start delay",
)
CHECKPOINT_FAIL_SHARE = Threshold(
    "flink_checkpoint_failed_share",
    0.5,
    "fraction",
    "clusterdoctor default: with tolerable-failed-checkpoints at its default (0 in recent Flink), every failure "
    "counts; more than half failing means recovery will replay from an old checkpoint",
    "share of failed checkpoints that is critical",
)
LAG_HIGH = Threshold(
    "kafka_lag_high",
    10000,
    "messages",
    "clusterdoctor default for a single reading (growth needs two readings); Burrow/kminion alert on lag growth "
    "rather than on a level, so treat this as a prompt to take a second reading",
    "total group lag worth a second reading",
)
CORRELATION_WINDOW = Threshold(
    "checkpoint_after_leader_change_window",
    600,
    "s",
    "Flink checkpoint timeout default is 10 min (execution.checkpointing.timeout), so a control-plane stall "
    "up to 10 min before a failure can be the cause",
    "how far before a checkpoint failure a leader change or lease loss is considered",
)


@rule(
    id="APP001",
    name="flink-alignment-dominates",
    layer="app",
    title="Flink checkpoint time dominated by barrier alignment (backpressure)",
    requires=("flink_checkpoints",),
    thresholds=(ALIGNMENT_SHARE,),
)
def flink_alignment_dominates(obs: Observations) -> Iterator[Finding]:
    """Most of a checkpoint's duration is barrier alignment or start delay, not state upload.

    **Symptom**: checkpoints take long or time out although the state is small; ``checkpointAlignmentTime``
    or ``checkpointStartDelayNanos`` are high; tasks report backpressure.
    **Why**: an aligned checkpoint waits until the barrier reaches every input; under backpressure the
    barrier queues behind buffered records. The checkpoint is slow because the pipeline is, and a
    slow network (RDMA/TCP congestion) or a slow sink shows up here first.
    **Fix**: remove the backpressure (scale the slow operator, fix the sink, the network), or enable
    unaligned checkpoints (`execution.checkpointing.unaligned: true`) / buffer debloating.
    **Verify**: `curl -s <jobmanager>:8081/jobs/<id>/checkpoints` (end_to_end_duration) and
    `curl -s '<jobmanager>:8081/jobs/<id>/vertices/<vertex>/subtasks/metrics?get=checkpointStartDelayNanos,backPressuredTimeMsPerSecond'`
    """
    for fc in _jobs(obs):
        e2e = fc.end_to_end_ms
        waits = {
            k: v
            for k, v in (("alignment", fc.alignment_ms), ("start delay", fc.start_delay_ms))
            if v is not None
        }
        if not e2e or not waits:
            continue
        name, worst = max(waits.items(), key=lambda kv: kv[1])
        share = worst / e2e
        if share <= ALIGNMENT_SHARE.value:
            continue
        where = f" (checkpoint {fc.checkpoint_id}" if fc.checkpoint_id is not None else " ("
        where += f", subtask {fc.slow_subtask} waited longest)" if fc.slow_subtask is not None else ")"
        where = "" if where == " ()" else where
        src = fc.wait_source or fc.source
        ev = [
            Evidence(f"checkpoint {name}", round(worst, 3), unit="ms", source=src),
            Evidence("checkpoint end-to-end duration", round(e2e, 3), unit="ms", source=src),
            Evidence(f"{name} share", round(share, 3), ALIGNMENT_SHARE.value, source=src),
        ]
        if len(fc.parts) > 1:
            ev.append(Evidence(f"joined from {len(fc.parts)} files of the job", ", ".join(fc.parts[:6])))
        yield flink_alignment_dominates.finding(
            f"{fc.job_name or fc.job_id or fc.source}: {name} {worst:.0f} ms of a {e2e:.0f} ms checkpoint "
            f"({share:.0%}){where}.",
            evidence=ev,
            severity=Severity.CRITICAL if share > 0.9 else Severity.WARNING,
            confidence=0.75,
            subject=fc.job_id or fc.source,
        )


@rule(
    id="APP002",
    name="flink-checkpoint-failures",
    layer="app",
    title="Flink checkpoints fail",
    requires=("flink_checkpoints",),
    thresholds=(CHECKPOINT_FAIL_SHARE,),
)
def flink_checkpoint_failures(obs: Observations) -> Iterator[Finding]:
    """Some or most of a job's checkpoints failed (``counts.failed`` > 0).

    **Symptom**: ``numberOfFailedCheckpoints`` grows; after a restart the job replays far back; exactly-once
    sinks stall because transactions only commit on completed checkpoints.
    **Why**: a checkpoint fails on timeout (barriers held up by backpressure, slow state upload to storage),
    on a task failure, or when the job manager loses leadership/HA state (Kubernetes HA uses ConfigMap
    leases that depend on the API server and etcd).
    **Fix**: read `latest.failed.failure_message`; for timeouts fix backpressure or storage throughput; for
    leadership loss fix the control plane (see the etcd findings). Raise the timeout only as a stop-gap.
    **Verify**: `curl -s <jobmanager>:8081/jobs/<id>/checkpoints | jq '.counts, .latest.failed'`.
    """
    for fc in _jobs(obs):
        if fc.failed <= 0 or fc.total <= 0:
            continue
        share = fc.failed / fc.total
        failed_in_history = [c for c in fc.history if c.status.upper() == "FAILED"]
        ev = [
            Evidence("failed checkpoints", fc.failed, source=fc.source),
            Evidence("all checkpoints", fc.total, source=fc.source),
            Evidence("failed share", round(share, 3), CHECKPOINT_FAIL_SHARE.value, source=fc.source),
        ]
        note = ""
        if fc.latest_failed is not None and fc.latest_failed.failure_message:
            ev.append(
                Evidence(
                    "latest failure",
                    fc.latest_failed.failure_message,
                    source=fc.source,
                    time=fc.latest_failed.failure_time,
                )
            )
        if not failed_in_history and fc.latest_failed is None:
            note = " The history lists no failed checkpoint and no failure message, so when and why they failed is not in this data."
        yield flink_checkpoint_failures.finding(
            f"{fc.job_id or fc.source}: {fc.failed} of {fc.total} checkpoints failed ({share:.0%}).{note}",
            evidence=ev,
            severity=Severity.CRITICAL if share > CHECKPOINT_FAIL_SHARE.value else Severity.WARNING,
            confidence=0.9,
            subject=fc.job_id or fc.source,
        )


@rule(
    id="APP003",
    name="checkpoint-failures-after-control-plane",
    layer="app",
    title="Checkpoint failures follow etcd leader changes or lease loss",
    requires=("flink_checkpoints", "events"),
    thresholds=(CORRELATION_WINDOW,),
    severity=Severity.CRITICAL,
)
def checkpoint_after_control_plane(obs: Observations) -> Iterator[Finding]:
    """Checkpoints failed shortly after etcd lost its leader or a lease expired.

    **Symptom**: checkpoint timeouts cluster around control-plane incidents, not around load peaks.
    **Why**: Flink's Kubernetes HA keeps leadership and checkpoint pointers in ConfigMaps; when etcd has no
    leader or the API server stalls, lease renewals and checkpoint metadata writes wait, and checkpoints
    time out or the job manager loses leadership.
    **Fix**: fix the control plane first (etcd disk/CPU, see the etcd findings); meanwhile raise
    `high-availability.kubernetes.leader-election.lease-duration` and the checkpoint timeout.
    **Verify**: compare `jobs/<id>/checkpoints` failure timestamps with `etcdctl endpoint status` raft term
    changes and etcd's `lost leader` log lines.
    """
    from clusterdoctor.analyze.correlate import rank_causes

    cp_events = [
        e
        for e in obs.get("events") or []
        if isinstance(e, Event)
        and e.kind
        in (
            "etcd.lost_leader",
            "etcd.leader_changed",
            "etcd.lease_not_found",
            "k8s.lease_renew_failed",
            "k8s.leader_election_lost",
        )
        and e.time is not None
    ]
    if not cp_events:
        return
    for fc in _jobs(obs):
        fails = [c for c in fc.history if c.status.upper() == "FAILED"]
        if fc.latest_failed is not None:
            fails.append(fc.latest_failed)
        times = sorted(
            {
                c.failure_time or c.trigger_time
                for c in fails
                if (c.failure_time or c.trigger_time) is not None
            }
        )
        if not times:
            continue
        ranks = rank_causes(
            {"control-plane": [e.time for e in cp_events if e.time is not None]},
            times,
            float(CORRELATION_WINDOW.value),
        )
        r = ranks[0]
        if r.precede_fraction <= 0 or r.score <= 0:
            continue
        first = min(cp_events, key=lambda e: e.time or 0)
        yield checkpoint_after_control_plane.finding(
            f"{fc.job_id or fc.source}: {r.precede_fraction:.0%} of checkpoint failures came within "
            f"{CORRELATION_WINDOW.value:g} s after a control-plane event (median lead {r.median_lead_s:.3g} s; first {first.kind} at {utc(first.time)}).",
            evidence=[
                Evidence(
                    "failures preceded by a leader change or lease loss",
                    round(r.precede_fraction, 3),
                    source=fc.source,
                ),
                Evidence("median lead of the control-plane event", round(r.median_lead_s or 0, 3), unit="s"),
                Evidence(first.kind, utc(first.time), time=first.time),
            ],
            confidence=0.7 + 0.2 * r.precede_fraction,
            subject=fc.job_id or fc.source,
        )


@rule(
    id="APP004",
    name="flink-checkpointing-disabled",
    layer="app",
    title="Flink job runs without periodic checkpoints",
    requires=("flink_checkpoints",),
    severity=Severity.INFO,
)
def flink_checkpointing_disabled(obs: Observations) -> Iterator[Finding]:
    """The job's checkpoint interval is unset (Long.MAX_VALUE) and it has taken no checkpoint.

    **Symptom**: after a failure the job restarts from the beginning (or its last savepoint); no checkpoint
    statistics.
    **Why**: without `execution.checkpointing.interval` Flink takes no periodic checkpoints, so there is no
    state to recover from and checkpoint-based rules cannot judge the job.
    **Fix**: set `execution.checkpointing.interval` (and a timeout), unless the job is stateless by design.
    **Verify**: `curl -s <jobmanager>:8081/jobs/<id>/checkpoints/config | jq .interval`.
    """
    for fc in _jobs(obs):
        if fc.interval_ms is None and fc.total == 0 and "interval" not in fc.metrics and fc.counts:
            state = f" (job state {fc.job_state})" if fc.job_state else ""
            yield flink_checkpointing_disabled.finding(
                f"{fc.job_id or fc.source}: periodic checkpoints are off and no checkpoint was taken{state}.",
                evidence=[Evidence("checkpoints taken", 0, source=fc.source)],
                confidence=0.8,
                subject=fc.job_id or fc.source,
            )


@rule(
    id="APP005",
    name="kafka-lag-with-consumers-up",
    layer="app",
    title="Kafka consumer lag grows while consumers are up",
    requires=("kafka_lag",),
    thresholds=(LAG_HIGH,),
)
def kafka_lag_with_consumers_up(obs: Observations) -> Iterator[Finding]:
    """A consumer group lags (and, with two readings, the lag grows) although its consumers are assigned.

    **Symptom**: end-to-end latency of a streaming pipeline rises steadily; the group's lag grows while
    ``kafka-consumer-groups --describe`` lists active consumers.
    **Why**: with consumers up, growing lag means they process slower than producers write: a slow
    downstream (sink, checkpoints, network), too few partitions/consumers, or one hot partition. Lag on
    partitions with no consumer is a different cause (no active members).
    **Fix**: find the slow stage (sink latency, Flink backpressure, GC), add consumers up to the partition
    count, rebalance hot keys; idle members (0 partitions) mean more consumers than partitions.
    **Verify**: `kafka-consumer-groups.sh --bootstrap-server <b> --describe --group <g>` twice, a minute
    apart (LAG per partition), and `--describe --members` (#PARTITIONS per member).
    """
    snaps = obs.get("kafka_lag") or []
    groups: dict[str, list] = {}
    unnamed: dict[str, str] = {}  # key -> the topics it covers, for the subject
    for s in snaps:
        for g in s.groups() or [None]:
            if g:
                groups.setdefault(g, []).append(s)
                continue
            # `--describe` of one group prints no GROUP column: files of unnamed groups are told apart by
            # the partitions they cover (the same partitions: two readings of one group), never pooled
            parts = sorted({(p.topic, p.partition) for p in s.partitions if p.group is None})
            key = "\0unnamed:" + ",".join(f"{t}[{n}]" for t, n in parts)
            unnamed[key] = ", ".join(sorted({t for t, _ in parts}))
            groups.setdefault(key, []).append(s)
        for cid, n in s.member_partitions.items():
            if n == 0:
                yield kafka_lag_with_consumers_up.finding(
                    f"consumer {cid} is a member without partitions (idle): more consumers than partitions, or an uneven assignor.",
                    evidence=[Evidence("#PARTITIONS", 0, source=s.source)],
                    severity=Severity.INFO,
                    confidence=0.8,
                    subject=cid,
                )
    for g, ss in groups.items():
        timed = sorted((s for s in ss if s.time is not None), key=lambda s: s.time)
        latest = timed[-1] if timed else ss[-1]
        gname = None if g in unnamed else g
        label = f"unnamed group ({unnamed[g]})" if g in unnamed else f"group {g}"
        lag = latest.total_lag(gname)
        active = latest.active_consumers(gname)
        members = latest.members.get(g, 0) if gname else 0
        up = len(active) or members
        if not up:
            continue
        if len(timed) >= 2:
            first = timed[0]
            growth = lag - first.total_lag(gname)
            dt = (latest.time or 0) - (first.time or 0)
            if growth <= 0 or dt <= 0:
                continue
            yield kafka_lag_with_consumers_up.finding(
                f"{label}: lag grew by {growth} messages in {dt:.0f} s ({growth / dt:.3g}/s) to {lag} "
                f"while {up} consumer(s) were up.",
                evidence=[
                    Evidence("lag growth", growth, 0, "messages", latest.source, latest.time),
                    Evidence("lag now", lag, unit="messages", source=latest.source, time=latest.time),
                    Evidence("consumers up", up, source=latest.source),
                ],
                severity=Severity.CRITICAL,
                confidence=0.85,
                subject=g if g not in unnamed else f"{label} in {latest.source}",
            )
            continue
        if lag < LAG_HIGH.value:
            continue
        parts = sorted(
            (p for p in latest.partitions if p.lag and (gname is None or p.group == gname)),
            key=lambda p: -(p.lag or 0),
        )
        ev = [
            Evidence("total lag", lag, LAG_HIGH.value, "messages", latest.source),
            Evidence("consumers up", up, source=latest.source),
        ]
        ev += [
            Evidence(
                f"{p.topic}[{p.partition}] lag ({p.consumer or 'no consumer'})",
                p.lag,
                unit="messages",
                source=latest.source,
            )
            for p in parts[:3]
        ]
        yield kafka_lag_with_consumers_up.finding(
            f"{label}: lag {lag} messages while {up} consumer(s) are up; one reading only, "
            "so whether it grows is unknown — take a second reading.",
            evidence=ev,
            severity=Severity.WARNING,
            confidence=0.6,
            # the larger lag first: +1 per decade above the threshold, at most +3
            score=float(Severity.WARNING) * 0.6 + min(3.0, math.log10(lag / LAG_HIGH.value)),
            subject=g if g not in unnamed else f"{label} in {latest.source}",
        )
