"""etcd rules: slow disk (WAL fsync, backend commit), slow apply, leader loss and changes, peers.

Two tiers where sources differ: **degraded** (warning) from etcd's own documentation (FAQ and
tuning guide: WAL fsync p99 < 10 ms, backend commit p99 < 25 ms, apply < 100 ms, heartbeat
interval around the member round-trip time) and **paging** (critical) from the etcd mixin alerts
(fsync p99 > 1 s, commit p99 > 250 ms, ≥ 4 leader changes in 15 min, no leader, peer RTT p99 >
150 ms). Inputs: ``etcd_metrics`` (a :class:`~clusterdoctor.analyze.metric_window.MetricWindow`)
and ``etcd_status`` (parsed ``etcdctl endpoint status/health -w json``). The thresholds and the
Prometheus alerts built from them are :mod:`clusterdoctor.rules.etcd_alerts`, re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from clusterdoctor.analyze.etcd_members import MemberDirectory, member_directory, member_subject
from clusterdoctor.analyze.metric_window import MetricWindow, earlier_dump_evidence
from clusterdoctor.analyze.quantile import quantile_of, validate_histogram
from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.etcd_alerts import (  # the thresholds and alerts: moved, still importable from here
    APPLY_EXPECTED,
    COMMIT_DEGRADED,
    COMMIT_PAGING,
    ETCD001_ALERTS,
    ETCD002_ALERTS,
    ETCD003_ALERTS,
    ETCD004_ALERTS,
    ETCD005_ALERTS,
    ETCD006_ALERTS,
    ETCD007_ALERTS,
    ETCD_MIXIN,
    FSYNC_DEGRADED,
    FSYNC_PAGING,
    FSYNC_PAGING_WARN,
    HEARTBEAT_DEFAULT,
    LEADER_CHANGES_DEGRADED,
    LEADER_CHANGES_PAGING,
    PEER_FAILURE_RATE,
    PEER_RTT_PAGING,
)
from clusterdoctor.rules.etcd_alerts import ETCD_DOCS as ETCD_DOCS
from clusterdoctor.rules.etcd_status import APPLIED_INDEX_LAG, etcd_endpoint_status  # noqa: F401 (ETCD008)
from clusterdoctor.rules.registry import NotJudged, Observations, register_input, rule

register_input("etcd_status", "no etcdctl endpoint status/health output (pass etcdctl ... -w json files)")
register_input("etcd_heartbeat_interval", "etcd --heartbeat-interval not known (default 100 ms assumed)")


def _instance(labels: dict[str, str], default: str = "etcd") -> str:
    return labels.get("instance") or labels.get("pod") or labels.get("member") or default


# histogram problems (analyze.quantile.validate_histogram) that make any quantile of it meaningless
_UNJUDGEABLE = ("NaN bucket count", "negative bucket count", "no le=", "bucket le=")


class _Names:
    """How the findings of one rule run name members: subject (short) and summary (long) forms."""

    def __init__(self, obs: Observations) -> None:
        self.obs = obs
        self.d: MemberDirectory = member_directory(obs)

    def subject(self, inst: str) -> str:
        return member_subject(self.obs, inst, self.d)

    def cluster(self, inst: str) -> str:
        """The subject of a finding about the cluster a member belongs to (a leader change)."""
        w = self.obs.get("etcd_metrics")
        canon = w.canonical(inst) if w is not None and hasattr(w, "canonical") else inst
        m = self.d.resolve(inst) or self.d.resolve(canon)
        if m is None:
            return self.subject(inst)
        return self.d.cluster_label(m)

    def describe(self, inst: str) -> str:
        """``member m0 (ID …, peer …, client …)`` when known, else the instance as the source named it."""
        w = self.obs.get("etcd_metrics")
        canon = w.canonical(inst) if w is not None and hasattr(w, "canonical") else inst
        m = self.d.resolve(inst) or self.d.resolve(canon)
        return f"member {m.describe()}" if m is not None else self.subject(inst)


def _tail_findings(
    rule_obj,
    obs: Observations,
    w: MetricWindow,
    metric: str,
    what: str,
    degraded: Threshold,
    paging: Threshold,
    warn_mixin: Threshold | None = None,
) -> Iterable[Finding]:
    names = _Names(obs)
    for key, h in sorted(w.merged_histogram(metric, by=("instance",)).items()):
        inst = key[0] or "etcd"
        problems = validate_histogram(h)
        fatal = [p for p in problems if p.startswith(_UNJUDGEABLE)]
        if fatal:  # a quantile of it would be a guess: say so instead of reporting nothing
            yield NotJudged(f"{names.subject(inst)}: {metric} cannot be trusted ({'; '.join(fatal)})")
            continue
        q = quantile_of(0.99, h.buckets)
        p99 = q.value
        if math.isnan(p99):
            yield NotJudged(f"{names.subject(inst)}: {metric} has no observations to take a p99 of")
            continue
        if p99 <= degraded.value:
            continue
        n = h.buckets[-1][1] if h.buckets else 0
        sev = Severity.CRITICAL if p99 > paging.value else Severity.WARNING
        tier = "paging" if sev is Severity.CRITICAL else "degraded"
        span = w.span_for({"instance": key[0]})
        ev = [
            Evidence(
                f"{what} p99 {span} ({n:g} observations), {metric}",
                value=round(p99, 6),
                threshold=degraded.value,
                unit="s",
                source=w.source_for({"instance": key[0]}) or None,
            )
        ]
        if warn_mixin is not None and p99 > warn_mixin.value and sev is Severity.WARNING:
            ev.append(
                Evidence(
                    "above the etcd mixin warning threshold",
                    value=round(p99, 6),
                    threshold=warn_mixin.value,
                    unit="s",
                )
            )
        if sev is Severity.CRITICAL:
            ev.append(
                Evidence(
                    "above the etcd mixin paging threshold",
                    value=round(p99, 6),
                    threshold=paging.value,
                    unit="s",
                )
            )
        first = _first_crossing(w, metric, degraded.value, instance=key[0])
        if first is not None:
            ev.append(
                Evidence(
                    f"first step with {what} p99 above {degraded.value * 1000:g} ms",
                    value=round(first[1], 6),
                    unit="s",
                    time=first[0],
                )
            )
        per = _periodic(w, metric, key[0])
        if per is not None:
            ev.append(
                Evidence(
                    f"{what} p99 is periodic: every {per.period:.0f} s (strength {per.strength:.2f}, "
                    f"{per.cycles:.1f} cycles in the window) — look for a job on that schedule",
                    value=round(per.period, 1),
                    unit="s",
                )
            )
        for p in problems + q.problems:
            ev.append(Evidence(f"histogram check: {p}"))
        ev += earlier_dump_evidence(w, key[0], histogram=metric, what=what)
        yield rule_obj.finding(
            f"etcd {names.describe(inst)}: {what} p99 {p99 * 1000:.1f} ms > {degraded.value * 1000:g} ms ({tier})",
            evidence=ev,
            severity=sev,
            subject=names.subject(inst),
            confidence=0.9 if n >= 20 else 0.6,
        )


def _periodic(w: MetricWindow, metric: str, instance: str = ""):
    """Period of the per-step p99 (None for a snapshot or a short/aperiodic window)."""
    if w.snapshot_for({"instance": instance}):
        return None
    match = {"instance": instance} if instance else {}
    steps = [(t, v) for t, v in w.quantile_steps(metric, 0.99, **match) if v == v]
    if len(steps) < 24:
        return None
    from clusterdoctor.analyze.periodicity import detect_period

    return detect_period(steps, min_strength=0.5)


def _first_crossing(
    w: MetricWindow, metric: str, threshold: float, instance: str = ""
) -> tuple[float, float] | None:
    if w.snapshot_for({"instance": instance}):
        return None
    match = {"instance": instance} if instance else {}
    for t, v in w.quantile_steps(metric, 0.99, **match):
        if v == v and v > threshold:
            return t, v
    return None


@rule(
    id="ETCD001",
    name="etcd-slow-wal-fsync",
    layer="control-plane",
    title="etcd WAL fsync is slow (disk latency)",
    requires=("etcd_metrics",),
    thresholds=(FSYNC_DEGRADED, FSYNC_PAGING_WARN, FSYNC_PAGING),
    alerts=ETCD001_ALERTS,
    causes=("etcd.slow-disk",),
)
def etcd_slow_wal_fsync(obs: Observations) -> Iterable[Finding]:
    """etcd's write-ahead-log fsync p99 is above what etcd needs.

    **Symptom**: `etcd_disk_wal_fsync_duration_seconds` p99 above 10 ms; apiserver writes slow down,
    "apply request took too long" and heartbeat-failure warnings appear, leaders may change.
    **Why**: every raft entry is fsynced to the WAL before it is acknowledged; a slow or shared disk
    (or a throttled cloud volume) stalls the whole cluster. etcd's FAQ asks for p99 < 10 ms.
    **Fix**: put the etcd data dir (at least the WAL, `--wal-dir`) on a dedicated low-latency SSD/NVMe,
    keep other I/O off it, raise its I/O priority (`ionice -c2 -n0 -p $(pgrep etcd)`), and check the
    volume's IOPS/throughput limits.
    **Verify**: `etcdctl check perf` and `fio --rw=write --ioengine=sync --fdatasync=1 --directory=<etcd data dir> --size=22m --bs=2300 --name=etcd-fsync`
    """
    w: MetricWindow = obs.get("etcd_metrics")
    yield from _tail_findings(
        etcd_slow_wal_fsync,
        obs,
        w,
        "etcd_disk_wal_fsync_duration_seconds",
        "WAL fsync",
        FSYNC_DEGRADED,
        FSYNC_PAGING,
        FSYNC_PAGING_WARN,
    )


@rule(
    id="ETCD002",
    name="etcd-slow-backend-commit",
    layer="control-plane",
    title="etcd backend commit is slow (disk latency)",
    requires=("etcd_metrics",),
    thresholds=(COMMIT_DEGRADED, COMMIT_PAGING),
    alerts=ETCD002_ALERTS,
    causes=("etcd.slow-disk",),
)
def etcd_slow_backend_commit(obs: Observations) -> Iterable[Finding]:
    """etcd's bbolt backend commit p99 is above what etcd needs.

    **Symptom**: `etcd_disk_backend_commit_duration_seconds` p99 above 25 ms; writes and compaction slow.
    **Why**: the backend periodically commits batched writes to bbolt with fsync; a slow disk makes
    each commit hold the backend lock longer. etcd's FAQ asks for p99 < 25 ms.
    **Fix**: faster dedicated disk for the data dir; defragment a fragmented database
    (`etcdctl defrag`, one member at a time); keep the database small (compaction, quota).
    **Verify**: `etcdctl endpoint status -w table` and `curl -s http://127.0.0.1:2381/metrics | grep etcd_disk_backend_commit_duration_seconds`
    """
    w: MetricWindow = obs.get("etcd_metrics")
    yield from _tail_findings(
        etcd_slow_backend_commit,
        obs,
        w,
        "etcd_disk_backend_commit_duration_seconds",
        "backend commit",
        COMMIT_DEGRADED,
        COMMIT_PAGING,
    )


@rule(
    id="ETCD003",
    name="etcd-slow-apply-metric",
    layer="control-plane",
    title="etcd applies requests slower than 100 ms / misses heartbeats",
    requires=("etcd_metrics",),
    thresholds=(APPLY_EXPECTED,),
    alerts=ETCD003_ALERTS,
    causes=("etcd.slow-disk",),
)
def etcd_slow_apply(obs: Observations) -> Iterable[Finding]:
    """etcd counted slow applies or failed heartbeats.

    **Symptom**: `etcd_server_slow_apply_total` or `etcd_server_heartbeat_send_failures_total` grew;
    logs show "apply request took too long" (expected-duration 100ms) or "failed to send out
    heartbeat on time ... likely from slow disk".
    **Why**: applies longer than 100 ms mean the server is overloaded — slow disk first, then CPU
    starvation, then expensive range requests; late heartbeats make followers start elections.
    **Fix**: check disk latency first (WAL fsync, backend commit), then CPU (give etcd dedicated cores,
    performance governor), then large range/list requests from clients.
    **Verify**: `etcdctl endpoint status -w table` and `journalctl -u etcd | grep -E 'took too long|heartbeat'`
    """
    w: MetricWindow = obs.get("etcd_metrics")
    names = _Names(obs)
    for metric, what in (
        ("etcd_server_slow_apply_total", "applies slower than 100 ms"),
        ("etcd_server_heartbeat_send_failures_total", "heartbeats not sent on time"),
        ("etcd_server_slow_read_indexes_total", "slow linearizable read-index requests"),
    ):
        for labels, inc, resets in w.increase(metric):
            if inc <= 0:
                continue
            inst = _instance(labels)
            span = w.span_for(labels)
            ev = [
                Evidence(
                    f"{metric} increase {span}",
                    value=inc,
                    threshold=0,
                    source=w.source_for(labels, metric) or None,
                )
            ]
            if resets:
                ev.append(Evidence("counter resets in the window (restarts)", value=resets))
            ev += earlier_dump_evidence(w, labels.get("instance", ""), counter=metric)
            sev = Severity.WARNING if (metric != "etcd_server_slow_read_indexes_total") else Severity.INFO
            yield etcd_slow_apply.finding(
                f"etcd {names.describe(inst)}: {inc:g} {what} {span}",
                evidence=ev,
                severity=sev,
                subject=names.subject(inst),
                confidence=0.7 if w.snapshot_for(labels) else 0.85,
            )


@rule(
    id="ETCD004",
    name="etcd-leader-changes",
    layer="control-plane",
    title="etcd leader changed (elections stall writes)",
    requires=("etcd_metrics",),
    thresholds=(LEADER_CHANGES_DEGRADED, LEADER_CHANGES_PAGING),
    alerts=ETCD004_ALERTS,
)
def etcd_leader_changes(obs: Observations) -> Iterable[Finding]:
    """etcd elected a new leader after the initial election.

    **Symptom**: `etcd_server_leader_changes_seen_total` grew; requests fail with "etcdserver: request
    timed out, possibly due to previous leader failure" or "leader changed"; apiserver latency spikes.
    **Why**: a leader change happens when followers miss heartbeats for an election timeout: the
    leader was stopped or partitioned, its disk stalled, or heartbeat/election settings are below the
    network RTT. Writes stall until a new leader is elected.
    **Fix**: find why the old leader went quiet (disk latency, CPU, a restart, the network); keep
    `--heartbeat-interval` near the peer RTT and `--election-timeout` at least 10x it; do not restart
    members in quick succession.
    **Verify**: `etcdctl endpoint status --cluster -w table` and `journalctl -u etcd | grep -E 'elected leader|lost leader|starting a new election'`
    """
    w: MetricWindow = obs.get("etcd_metrics")
    names = _Names(obs)
    name = "etcd_server_leader_changes_seen_total"
    seen: dict[str, list] = {}
    for labels, inc, resets in w.increase(name):
        inst = _instance(labels)
        snapshot = w.snapshot_for(labels)
        if snapshot:
            changes = inc - 1  # the first value is the initial election seen at start-up
            span = "since the process started (the initial election not counted)"
        else:
            changes = inc
            span = "over the window"
        if changes < LEADER_CHANGES_DEGRADED.value:
            continue
        window_s = (w.end - w.start) if (w.end is not None and w.start is not None) else None
        per_15m = changes if window_s is None or window_s <= 900 else changes * 900 / window_s
        sev = (
            Severity.CRITICAL
            if (not snapshot and per_15m >= LEADER_CHANGES_PAGING.value)
            else Severity.WARNING
        )
        subject = names.subject(inst)
        ev = [
            Evidence(
                f"{subject}: {name} {span}",
                value=changes,
                threshold=LEADER_CHANGES_DEGRADED.value,
                source=w.source_for(labels, name) or None,
            )
        ]
        t = _first_increase_time(w, name, labels)
        if t is not None:
            ev.append(Evidence(f"{subject}: first leader change in the window", value=changes, time=t))
        if resets:
            ev.append(Evidence(f"{subject}: counter resets (member restarts) in the window", value=resets))
        ev += earlier_dump_evidence(w, labels.get("instance", ""), counter=name, what=f"{subject}: {name}")
        seen.setdefault(names.cluster(inst), []).append((subject, changes, span, sev, ev))
    # a leader change is one event of the cluster, seen by each member: one finding per cluster
    for cluster, rows in seen.items():
        most = max(r[1] for r in rows)
        spans = sorted({r[2] for r in rows})
        per: dict[str, float] = {}
        for r in rows:
            per[r[0]] = max(per.get(r[0], 0.0), r[1])
        by = ", ".join(f"{k}: {v:g}" for k, v in sorted(per.items()))
        yield etcd_leader_changes.finding(
            f"{cluster}: {most:g} leader change{'s' if most != 1 else ''} {' / '.join(spans)} (seen by {by})",
            evidence=[e for r in rows for e in r[4]],
            severity=max(r[3] for r in rows),
            subject=cluster,
            confidence=0.9,
        )


def _first_increase_time(w: MetricWindow, name: str, labels: dict[str, str]) -> float | None:
    for s in w.select(name, **labels):
        prev = None
        for t, v in s.points:
            if prev is not None and v > prev:
                return t
            prev = v
    return None


@rule(
    id="ETCD005",
    name="etcd-no-leader",
    layer="control-plane",
    title="etcd member has no leader",
    requires=("etcd_metrics",),
    severity=Severity.CRITICAL,
    thresholds=(
        Threshold("has_leader", 0, "bool", ETCD_MIXIN, "etcdNoLeader: etcd_server_has_leader == 0 for 1m"),
    ),
    alerts=ETCD005_ALERTS,
    causes=("etcd.member-down",),
)
def etcd_no_leader(obs: Observations) -> Iterable[Finding]:
    """An etcd member reports no leader: the cluster cannot accept writes through it.

    **Symptom**: `etcd_server_has_leader` is 0; clients see "etcdserver: no leader"; the apiserver
    returns 5xx/timeouts.
    **Why**: quorum is lost (too many members down or partitioned) or an election is in progress.
    **Fix**: bring members back until a quorum ((n+1)/2) can talk to each other; check peer port 2380
    reachability, disk and clock on each member.
    **Verify**: `etcdctl endpoint status --cluster -w table` and `etcdctl endpoint health --cluster -w table`
    """
    w: MetricWindow = obs.get("etcd_metrics")
    names = _Names(obs)
    for labels, v, t in w.latest("etcd_server_has_leader"):
        inst = _instance(labels)
        snapshot = w.snapshot_for(labels)
        zero_since = None
        for s in w.select("etcd_server_has_leader", **labels):
            for pt, pv in s.points:
                if pv == 0 and zero_since is None:
                    zero_since = pt
                elif pv != 0:
                    zero_since = None
        if v == 0 or zero_since is not None:
            ev = [
                Evidence(
                    "etcd_server_has_leader",
                    value=v,
                    threshold=1,
                    source=w.source_for(labels, "etcd_server_has_leader") or None,
                    time=t if not snapshot else None,
                )
            ]
            if zero_since is not None and not snapshot:
                ev.append(Evidence("no leader since", value=0, time=zero_since))
            yield etcd_no_leader.finding(
                f"etcd {names.describe(inst)}: no leader",
                evidence=ev,
                subject=names.subject(inst),
                confidence=0.95,
            )


@rule(
    id="ETCD006",
    name="etcd-peer-rtt-vs-heartbeat",
    layer="control-plane",
    title="etcd peer round-trip time is too long for the heartbeat interval",
    requires=("etcd_metrics",),
    thresholds=(HEARTBEAT_DEFAULT, PEER_RTT_PAGING),
    alerts=ETCD006_ALERTS,
)
def etcd_peer_rtt(obs: Observations) -> Iterable[Finding]:
    """Peer round-trip time p99 exceeds the heartbeat interval (or the mixin's 150 ms).

    **Symptom**: `etcd_network_peer_round_trip_time_seconds` p99 above `--heartbeat-interval`
    (default 100 ms); followers time out and start elections; leader changes.
    **Why**: etcd's tuning guide sets the heartbeat interval around the member RTT (0.5-1.5x) and the
    election timeout at least 10x the RTT; when RTT is longer, heartbeats arrive late.
    **Fix**: keep members in one low-latency network (same region/zone group), prioritise peer
    traffic (`tc` priority for port 2380), or raise `--heartbeat-interval` and `--election-timeout`
    together on every member.
    **Verify**: `curl -s http://127.0.0.1:2381/metrics | grep etcd_network_peer_round_trip_time_seconds` and `ping -c 20 <peer ip>`
    """
    w: MetricWindow = obs.get("etcd_metrics")
    names = _Names(obs)
    hb = obs.get("etcd_heartbeat_interval") or HEARTBEAT_DEFAULT.value
    for (inst, to), h in sorted(
        w.merged_histogram("etcd_network_peer_round_trip_time_seconds", by=("instance", "To")).items()
    ):
        q = quantile_of(0.99, h.buckets)
        p99 = q.value
        if math.isnan(p99) or p99 <= hb:
            continue
        sev = Severity.CRITICAL if p99 > PEER_RTT_PAGING.value else Severity.WARNING
        inst = inst or "etcd"
        src = w.source_for({"instance": inst}) or None
        yield etcd_peer_rtt.finding(
            f"etcd {names.describe(inst)} -> peer {names.d.describe(to)}: RTT p99 {p99 * 1000:.1f} ms "
            f"> heartbeat interval {hb * 1000:g} ms",
            evidence=[
                Evidence("peer RTT p99", value=round(p99, 6), threshold=hb, unit="s", source=src),
                Evidence("heartbeat interval used", value=hb, unit="s"),
            ],
            severity=sev,
            subject=f"{names.subject(inst)} -> {names.d.label(to)}",
        )


@rule(
    id="ETCD007",
    name="etcd-peer-unreachable",
    layer="control-plane",
    title="etcd cannot send to a peer (member down or partitioned)",
    requires=("etcd_metrics",),
    thresholds=(PEER_FAILURE_RATE,),
    alerts=ETCD007_ALERTS,
    causes=("etcd.member-down",),
)
def etcd_peer_unreachable(obs: Observations) -> Iterable[Finding]:
    """Messages to a peer fail: that member is down or unreachable.

    **Symptom**: `etcd_network_peer_sent_failures_total{To=<member id>}` grows; the member is missing
    from `etcdctl endpoint status`; the cluster runs with reduced fault tolerance.
    **Why**: the peer process stopped, its host is down, or port 2380 is blocked between members.
    **Fix**: restart or replace the member (`etcdctl member list`, `etcdctl member remove/add`), and
    check the network path on port 2380.
    **Verify**: `etcdctl member list -w table` and `etcdctl endpoint health --cluster -w table`
    """
    w: MetricWindow = obs.get("etcd_metrics")
    names = _Names(obs)
    dur = (w.end - w.start) if (w.end is not None and w.start is not None and w.end > w.start) else None
    by_peer: dict[str, list[tuple[str, float, float | None, dict[str, str]]]] = {}
    for labels, inc, _ in w.increase("etcd_network_peer_sent_failures_total"):
        if inc <= 0:
            continue
        snapshot = w.snapshot_for(labels)
        rate_v = inc / dur if dur and not snapshot else None
        if rate_v is not None and rate_v <= PEER_FAILURE_RATE.value:
            continue
        to = labels.get("To", "?")
        by_peer.setdefault(names.d.label(to), []).append((to, inc, rate_v, labels))
    # one finding per peer that cannot be reached, with what each sender saw
    for peer, rows in sorted(by_peer.items()):
        ev = []
        senders = []
        for _to, inc, rate_v, labels in rows:
            sender = names.subject(_instance(labels))
            senders.append(sender)
            ev.append(
                Evidence(
                    f"etcd_network_peer_sent_failures_total from {sender} to {peer} "
                    + w.span_for(labels).replace("over the window", "increase over the window"),
                    value=inc,
                    threshold=0,
                    source=w.source_for(labels, "etcd_network_peer_sent_failures_total") or None,
                )
            )
            if rate_v is not None:
                ev.append(
                    Evidence(
                        f"failure rate from {sender}",
                        value=round(rate_v, 4),
                        threshold=PEER_FAILURE_RATE.value,
                        unit="1/s",
                    )
                )
        total = sum(r[1] for r in rows)
        who = sorted(set(senders))
        yield etcd_peer_unreachable.finding(
            f"etcd member {names.d.describe(rows[0][0])} cannot be reached: {total:g} failed sends from "
            f"{', '.join(who)}",
            evidence=ev,
            severity=Severity.WARNING,
            subject=peer,
            confidence=0.7 if all(w.snapshot_for(r[3]) for r in rows) else 0.9,
        )


UP_DOWN = Threshold(
    "up_down",
    0,
    "",
    "Prometheus docs, 'Jobs and instances': up is 1 when the target is healthy (the scrape succeeded), "
    "0 when the scrape failed; etcd mixin etcdMembersDown counts members with up == 0",
    "a target whose scrapes fail until the end of the data",
)
ELECTION_TIMEOUT = Threshold(
    "election_timeout_default",
    1.0,
    "s",
    "etcd tuning guide: --election-timeout default 1000 ms (etcd-io/website content/en/docs/v3.5/tuning.md)",
    "followers elect a new leader this long after the leader goes silent",
)
DOWN_RANK_BONUS = 10.0  # a dead member is the cause: it ranks above the symptoms it causes
REMOVED_MEMBER_CODE = "ETCD120"  # rules/catalog/etcd.py: this member was removed from the cluster


def _removed_member_logs(obs: Observations) -> set[str]:
    """The logs whose own member says it was removed from the cluster: a peer it cannot reach there
    refuses a removed member, it is not down."""
    return {h.path for h in obs.get("messages") or [] if h.code == REMOVED_MEMBER_CODE}


@rule(
    id="ETCD009",
    name="etcd-member-down",
    layer="control-plane",
    title="etcd member stopped (the cause of what follows)",
    requires=(),
    requires_any=("events", "etcd_metrics", "metrics", "etcd_status"),
    thresholds=(UP_DOWN, ELECTION_TIMEOUT),
    severity=Severity.CRITICAL,
    causes=("etcd.member-down",),
)
def etcd_member_down(obs: Observations) -> Iterable[Finding]:
    """An etcd member stopped and did not come back: the cause, not one more symptom.

    **Symptom**: Prometheus `up == 0` for the member's target; its peers log `lost TCP streaming
    connection with remote peer`, `peer became inactive`, `failed to reach the peer URL ... connection
    refused`; `etcdctl endpoint health` says false for its endpoint; its own log stops. When it was
    the leader its followers log `lost leader` and elect another, and clients see `context deadline
    exceeded` / `request timed out` until they do.
    **Why**: a dead member leaves the cluster one failure from losing quorum (3 members → 2: one more
    and writes stop); when it was the leader, every write waits an election timeout (default 1 s)
    for a new one, and requests in flight fail. The leader change, failed proposals and slow or failed
    requests that follow are symptoms of this one cause.
    **Fix**: find why it stopped on its host — `journalctl -u etcd` (its last lines), `dmesg -T | grep -i
    -E 'oom|killed process'` (OOM kill), a full disk (`df -h <data dir>`), a crash loop — and restart it;
    if it cannot come back, replace it: `etcdctl member remove <ID>`, then `etcdctl member add` a new
    member with an empty data dir.
    **Verify**: `etcdctl member list -w table` and `etcdctl endpoint health --cluster -w table` (every
    member true); `curl -sG http://<prometheus>:9090/api/v1/query --data-urlencode 'query=up{job=~".*etcd.*"} == 0'`
    returns no series.
    """
    from clusterdoctor.analyze.etcd_members import members_down
    from clusterdoctor.rules.etcd_log import utc

    d = member_directory(obs)
    removed = _removed_member_logs(obs)
    for down in members_down(obs, d):
        m = down.member
        if removed and all((s.source or "").rsplit(":", 1)[0] in removed for s in down.signals):
            continue  # its peers refuse a removed member: the log's own member is the cause (ETCD120)
        timed = [s for s in down.signals if s.time is not None and s.strong]
        ev: list[Evidence] = []
        if down.stopped_at is not None:
            first = min(timed, key=lambda s: s.time)
            ev.append(
                Evidence(f"stopped: {first.what}", utc(down.stopped_at), source=first.source, time=first.time)
            )
        if down.last_alive is not None:
            ev.append(
                Evidence(
                    f"last sign of life: {down.last_alive_basis}", utc(down.last_alive), time=down.last_alive
                )
            )
        grouped: dict[str, list] = {}
        for s in down.signals:
            grouped.setdefault(s.what, []).append(s)
        for what, ss in grouped.items():
            t0 = min((s.time for s in ss if s.time is not None), default=None)
            ev.append(
                Evidence(
                    what + ("" if s.strong else " (supporting)"),
                    len(ss) if len(ss) > 1 else None,
                    source=ss[0].source,
                    time=t0,
                )
            )
        if down.was_leader:
            ev.append(Evidence(f"it was the leader: {down.leader_basis}", down.term, time=down.stopped_at))
            if down.new_leader:
                ev.append(Evidence("new leader elected", down.new_leader, time=down.elected_at))
        symptoms = _symptoms_after(obs, down.stopped_at)
        ev.extend(symptoms)
        bases = down.bases
        conf = {1: 0.8, 2: 0.9}.get(len(bases), 0.95)
        when = (
            f"at {utc(down.stopped_at)}" if down.stopped_at is not None else "(time unknown: untimed sources)"
        )
        lead = ""
        if down.was_leader:
            lead = (
                f" It was the leader: its followers lost it at term {down.term or '?'}"
                + (f" and elected {down.new_leader}" if down.new_leader else "")
                + (f" at {utc(down.elected_at)}" if down.elected_at is not None else "")
                + " — that leader change, and the failed requests around it, follow from this."
            )
        seen_by = {
            "up": "Prometheus up",
            "peers": "its peers' logs",
            "etcdctl": "etcdctl",
            "metrics": "peers' metrics",
        }
        yield etcd_member_down.finding(
            f"etcd member {m.describe()} stopped {when} and did not come back "
            f"(seen by {', '.join(seen_by.get(b, b) for b in bases)}).{lead}",
            evidence=ev,
            subject=m.label(),
            confidence=conf,
            score=float(Severity.CRITICAL) * conf + DOWN_RANK_BONUS,
        )


def _symptoms_after(obs: Observations, t: float | None) -> list[Evidence]:
    """Client timeouts and failed proposals after the member stopped (within a minute)."""
    if t is None:
        return []
    out = []
    clients = [
        e
        for e in obs.get("events") or []
        if e.kind == "etcd.client_timeout" and e.time is not None and t <= e.time <= t + 60
    ]
    if clients:
        first = min(clients, key=lambda e: e.time)
        src = first.source.location if first.source else None
        out.append(
            Evidence(
                "symptom: client requests failed after it stopped (deadline exceeded / timed out)",
                len(clients),
                source=src,
                time=first.time,
            )
        )
    w = obs.get("etcd_metrics")
    if w is not None and hasattr(w, "select"):
        for s in w.select("etcd_server_proposals_failed_total"):
            prev = None
            for pt, v in s.points:
                if prev is not None and v > prev and t <= pt <= t + 60:
                    out.append(
                        Evidence(
                            f"symptom: proposals failed on {member_subject(obs, s.labels.get('instance', ''))}",
                            v - prev,
                            source=w.source_for(s.labels, "etcd_server_proposals_failed_total") or None,
                            time=pt,
                        )
                    )
                    break
                prev = v
    return out
