"""etcd WAL fsyncs that stall for half a second or more, when the p99 alone looks fine.

Input: ``etcd_metrics`` (``etcd_disk_wal_fsync_duration_seconds``). ETCD001 judges the p99; a disk that
is fast almost always but stalls now and then (a burstable cloud volume out of credits, a noisy
neighbour on a shared disk) keeps its p99 in a few milliseconds while a few hundred fsyncs take 0.5-1 s.
Each such fsync holds the leader's raft loop, so no heartbeat leaves for that long: with the default
100 ms heartbeat and 1 s election timeout, followers start elections and the cluster loses its leader.
"""

from __future__ import annotations

from collections.abc import Iterable

from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, rule

FSYNC_STALL = Threshold(
    "wal_fsync_stall",
    0.5,
    "s",
    "etcd-io/etcd contrib/mixin (etcdHighFsyncDurations warning at 0.5 s) and etcd tuning.md (default "
    "heartbeat 100 ms, election timeout 1000 ms)",
    "a WAL fsync this long blocks the leader's heartbeats for half an election timeout",
)
FSYNC_STALL_COUNT = Threshold(
    "wal_fsync_stalls",
    10,
    "fsyncs",
    "clusterdoctor default: a handful is a blip; ten or more in one counter's life are a disk that stalls",
    "fsyncs at or above the stall duration before the tail is a finding",
)
_FSYNC = "etcd_disk_wal_fsync_duration_seconds"


@rule(
    id="ETCD010",
    name="etcd-wal-fsync-stalls",
    layer="control-plane",
    title="etcd WAL fsyncs stall for half a second or more (a disk that stalls now and then)",
    requires=("etcd_metrics",),
    thresholds=(FSYNC_STALL, FSYNC_STALL_COUNT),
    severity=Severity.WARNING,
    causes=("etcd.slow-disk",),
)
def etcd_fsync_stalls(obs: Observations) -> Iterable[Finding]:
    """The WAL fsync histogram has ten or more observations at or above 0.5 s.

    **Symptom**: leader elections ("lost leader", "leader changed") while the fsync p99 is a few ms;
    the histogram's 0.512 s and 1.024 s buckets hold observations the lower ones do not.
    **Why**: every raft entry is fsynced before the leader goes on; an fsync of 0.5-1 s stops its
    heartbeats for that long, and followers whose election timeout (1 s by default) runs out elect
    another leader. A burstable volume (AWS gp2 out of I/O credits) or a shared disk stalls like this.
    **Fix**: put the WAL on a dedicated disk with provisioned IOPS (gp3/io2, local NVMe), keep other I/O
    off it; raise --election-timeout only as a stopgap.
    **Verify**: `curl -s <etcd>:2379/metrics | grep wal_fsync_duration_seconds_bucket` shows the 0.512 s
    bucket equal to the total count over a day; `etcdctl check perf`.
    """
    w = obs.get("etcd_metrics")
    if w is None:
        return
    for key, h in sorted(w.merged_histogram(_FSYNC, by=("instance",)).items()):
        if not h.buckets:
            continue
        total = h.buckets[-1][1]
        # observations above the first bucket bound at or past the stall surely took longer than it
        bounds = [(le, c) for le, c in h.buckets if le >= FSYNC_STALL.value and le != float("inf")]
        if not bounds:
            continue
        bound, at = bounds[0]
        stalls = total - at
        if stalls < FSYNC_STALL_COUNT.value:
            continue
        slowest = min((le for le, c in h.buckets if c >= total), default=float("inf"))
        inst = key[0] or "etcd"
        upto = f"up to {slowest:g} s" if slowest != float("inf") else "some beyond the last bucket"
        yield etcd_fsync_stalls.finding(
            f"{inst}: {stalls:g} of {total:g} WAL fsyncs took over {bound:g} s ({upto}): each blocks the "
            "leader's heartbeats for that long, enough to cost the cluster its leader",
            evidence=[
                Evidence(
                    f"WAL fsyncs above {FSYNC_STALL.value:g} s ({_FSYNC})",
                    value=stalls,
                    threshold=FSYNC_STALL_COUNT.value,
                    source=w.source_for({"instance": key[0]}) or None,
                ),
                Evidence("histogram bound counted from", value=bound, threshold=FSYNC_STALL.value, unit="s"),
            ],
            subject=inst,
            confidence=0.7,
        )
