"""The thresholds of the etcd rules (:mod:`clusterdoctor.rules.etcd`) and the Prometheus alerts built
from them (``ETCD001_ALERTS`` … ``ETCD007_ALERTS``: the etcd mixin's, with the rules' thresholds,
each with a firing and a healthy example).

Two tiers where sources differ: **degraded** (warning) from etcd's own documentation (FAQ and tuning
guide) and **paging** (critical) from the etcd mixin alerts. :mod:`clusterdoctor.rules.etcd`
re-exports every name here.
"""

from __future__ import annotations

from clusterdoctor.model import Threshold
from clusterdoctor.rules.alerts import Alert, Example, hist, p99_above

ETCD_DOCS = "etcd-io/website content/en/docs/v3.5/faq.md and tuning.md"
ETCD_MIXIN = "etcd-io/etcd contrib/mixin/alerts/alerts.libsonnet @ 19a6baf2"

FSYNC_DEGRADED = Threshold(
    "wal_fsync_p99_degraded", 0.010, "s", ETCD_DOCS, "WAL fsync p99 should be below 10 ms"
)
FSYNC_PAGING = Threshold(
    "wal_fsync_p99_paging", 1.0, "s", ETCD_MIXIN, "etcdHighFsyncDurations critical: p99 > 1 s for 10m"
)
FSYNC_PAGING_WARN = Threshold(
    "wal_fsync_p99_mixin_warning", 0.5, "s", ETCD_MIXIN, "etcdHighFsyncDurations warning: p99 > 0.5 s"
)
COMMIT_DEGRADED = Threshold(
    "backend_commit_p99_degraded", 0.025, "s", ETCD_DOCS, "backend commit p99 should be below 25 ms"
)
COMMIT_PAGING = Threshold(
    "backend_commit_p99_paging", 0.25, "s", ETCD_MIXIN, "etcdHighCommitDurations: p99 > 0.25 s for 10m"
)
APPLY_EXPECTED = Threshold(
    "apply_expected_duration",
    0.100,
    "s",
    "etcd server/etcdserver/util.go (expected-duration 100ms); " + ETCD_DOCS,
    "applies slower than 100 ms are counted in etcd_server_slow_apply_total and logged 'apply request took too long'",
)
LEADER_CHANGES_PAGING = Threshold(
    "leader_changes_15m", 4, "changes", ETCD_MIXIN, "etcdHighNumberOfLeaderChanges: increase over 15m >= 4"
)
LEADER_CHANGES_DEGRADED = Threshold(
    "leader_changes_degraded",
    1,
    "changes",
    ETCD_DOCS + " (leader elections stall writes for an election timeout)",
    "any leader change after the initial election",
)
HEARTBEAT_DEFAULT = Threshold(
    "heartbeat_interval_default",
    0.100,
    "s",
    ETCD_DOCS,
    "default --heartbeat-interval; should be about 0.5-1.5x peer RTT",
)
PEER_RTT_PAGING = Threshold(
    "peer_rtt_p99_paging", 0.15, "s", ETCD_MIXIN, "etcdMemberCommunicationSlow: p99 peer RTT > 0.15 s for 10m"
)
PEER_FAILURE_RATE = Threshold(
    "peer_sent_failures_rate",
    0.01,
    "1/s",
    ETCD_MIXIN,
    "etcdMembersDown: rate(etcd_network_peer_sent_failures_total[120s]) > 0.01",
)


# --- alerts over etcd's own metrics (the etcd mixin's, with the rules' thresholds) -------------------
_E = 'job="etcd",instance="10.0.0.11:2379"'
_EL = {"job": "etcd", "instance": "10.0.0.11:2379"}
_FSYNC = "etcd_disk_wal_fsync_duration_seconds"
_COMMIT = "etcd_disk_backend_commit_duration_seconds"
_FAST = (("0.004", 100), ("0.008", 100), ("0.016", 100), ("+Inf", 100))  # p99 under 4 ms


def _tier_alerts(metric, what, degraded, paging, slow, very_slow) -> tuple[Alert, ...]:
    def one(th, sev, buckets, also=()):
        return Alert(
            expr=p99_above(metric, "job, instance", th.value),
            severity=sev,
            for_="10m",
            source="etcd",
            summary=f"etcd {{{{ $labels.instance }}}}: {what} p99 above {th.value * 1000:g} ms for 10 minutes",
            description=(
                f"{what} p99 over 5 minutes has stayed above {th.value * 1000:g} ms ({th.meaning}; {th.source}). "
                "Writes wait for the disk: apiserver latency rises and leaders may change. Check the etcd data "
                "disk (dedicated SSD/NVMe, IOPS limits, other I/O on it)."
            ),
            fires=Example(hist(metric, _E, buckets), _EL, also=also),
            healthy=Example(hist(metric, _E, _FAST)),
        )

    return (one(degraded, "warning", slow), one(paging, "critical", very_slow, ("warning",)))


ETCD001_ALERTS = _tier_alerts(
    _FSYNC, "WAL fsync", FSYNC_DEGRADED, FSYNC_PAGING,
    (("0.008", 0), ("0.016", 100), ("+Inf", 100)),  # p99 ~ 16 ms
    (("1", 0), ("2", 100), ("+Inf", 100)),  # p99 ~ 2 s
)  # fmt: skip
ETCD002_ALERTS = _tier_alerts(
    _COMMIT, "backend commit", COMMIT_DEGRADED, COMMIT_PAGING,
    (("0.016", 0), ("0.032", 100), ("+Inf", 100)),  # p99 ~ 32 ms
    (("0.256", 0), ("0.512", 100), ("+Inf", 100)),  # p99 ~ 0.5 s
)  # fmt: skip
ETCD003_ALERTS = (
    Alert(
        expr=(
            "sum by (job, instance) (increase(etcd_server_slow_apply_total[10m])) > 0 "
            "or sum by (job, instance) (increase(etcd_server_heartbeat_send_failures_total[10m])) > 0"
        ),
        severity="warning",
        for_="5m",
        source="etcd",
        summary="etcd {{ $labels.instance }} applies requests slower than 100 ms or misses heartbeats",
        description=(
            f"etcd_server_slow_apply_total or etcd_server_heartbeat_send_failures_total grew in the last 10 "
            f"minutes ({APPLY_EXPECTED.meaning}). Check disk latency first, then CPU, then expensive range requests."
        ),
        fires=Example(
            (
                (f"etcd_server_slow_apply_total{{{_E}}}", "0+2x30"),
                (f"etcd_server_heartbeat_send_failures_total{{{_E}}}", "0x30"),
            ),
            _EL,
        ),
        healthy=Example(
            (
                (f"etcd_server_slow_apply_total{{{_E}}}", "3x30"),  # old slow applies, none new
                (f"etcd_server_heartbeat_send_failures_total{{{_E}}}", "0x30"),
            )
        ),
    ),
)
ETCD004_ALERTS = (
    Alert(
        expr=f"increase(etcd_server_leader_changes_seen_total[15m]) >= {LEADER_CHANGES_DEGRADED.value:g}",
        severity="warning",
        for_="1m",
        source="etcd",
        summary="etcd {{ $labels.instance }} saw a leader change in the last 15 minutes",
        description=(
            "A new leader was elected: writes stalled for an election timeout. Find why the old leader went "
            "quiet (disk, CPU, restart, network) before it happens again. A member restart also counts one."
        ),
        fires=Example(
            ((f"etcd_server_leader_changes_seen_total{{{_E}}}", "1x15 2x15"),), _EL, eval_time="20m"
        ),
        healthy=Example(((f"etcd_server_leader_changes_seen_total{{{_E}}}", "1x30"),)),
    ),
    Alert(
        expr=f"increase(etcd_server_leader_changes_seen_total[15m]) >= {LEADER_CHANGES_PAGING.value:g}",
        severity="critical",
        for_="5m",
        source="etcd",
        summary="etcd {{ $labels.instance }}: 4 or more leader changes in 15 minutes",
        description=f"{LEADER_CHANGES_PAGING.meaning} ({LEADER_CHANGES_PAGING.source}). The cluster spends its time electing.",
        fires=Example(
            ((f"etcd_server_leader_changes_seen_total{{{_E}}}", "1+1x30"),), _EL, also=("warning",)
        ),
        healthy=Example(((f"etcd_server_leader_changes_seen_total{{{_E}}}", "1x30"),)),
    ),
)
ETCD005_ALERTS = (
    Alert(
        expr="etcd_server_has_leader == 0",
        severity="critical",
        for_="1m",
        source="etcd",
        summary="etcd {{ $labels.instance }} has no leader",
        description="The member sees no leader: writes through it fail. Quorum is lost or an election is stuck.",
        fires=Example(((f"etcd_server_has_leader{{{_E}}}", "1x10 0x20"),), _EL),
        healthy=Example(((f"etcd_server_has_leader{{{_E}}}", "1x30"),)),
    ),
)
_RTT = "etcd_network_peer_round_trip_time_seconds"
_P = _E + ',To="8e9e05c52164694d"'
_PL = {**_EL, "To": "8e9e05c52164694d"}
ETCD006_ALERTS = (
    Alert(
        expr=p99_above(_RTT, "job, instance, To", HEARTBEAT_DEFAULT.value),
        severity="warning",
        for_="10m",
        source="etcd",
        summary="etcd {{ $labels.instance }} -> peer {{ $labels.To }}: round trip p99 above the 100 ms heartbeat",
        description=(
            "Peer round-trip p99 exceeds the default --heartbeat-interval (100 ms): followers time out and "
            "start elections. Keep members on a low-latency network or raise heartbeat and election timeouts together."
        ),
        fires=Example(hist(_RTT, _P, (("0.1", 0), ("0.125", 100), ("+Inf", 100))), _PL),  # p99 ~ 125 ms
        healthy=Example(hist(_RTT, _P, (("0.0032", 100), ("0.0064", 100), ("+Inf", 100)))),
    ),
    Alert(
        expr=p99_above(_RTT, "job, instance, To", PEER_RTT_PAGING.value),
        severity="critical",
        for_="10m",
        source="etcd",
        summary="etcd {{ $labels.instance }} -> peer {{ $labels.To }}: round trip p99 above 150 ms",
        description=f"{PEER_RTT_PAGING.meaning} ({PEER_RTT_PAGING.source}).",
        fires=Example(
            hist(_RTT, _P, (("0.2048", 0), ("0.4096", 100), ("+Inf", 100))), _PL, also=("warning",)
        ),
        healthy=Example(hist(_RTT, _P, (("0.0032", 100), ("0.0064", 100), ("+Inf", 100)))),
    ),
)
ETCD007_ALERTS = (
    Alert(
        expr=f"rate(etcd_network_peer_sent_failures_total[2m]) > {PEER_FAILURE_RATE.value:g}",
        severity="warning",
        for_="10m",
        source="etcd",
        summary="etcd {{ $labels.instance }} cannot send to peer {{ $labels.To }}",
        description="Messages to this peer keep failing: it is down or port 2380 is blocked. The cluster runs with less fault tolerance.",
        fires=Example(((f"etcd_network_peer_sent_failures_total{{{_P}}}", "0+30x30"),), _PL),
        healthy=Example(((f"etcd_network_peer_sent_failures_total{{{_P}}}", "4x30"),)),
    ),
)
