"""Rules over etcd and control-plane **log events** (the metric rules are in ``rules/etcd.py``).

Inputs: ``events`` (:mod:`clusterdoctor.observe.control.logs`). The cross-layer cascade rule lives here
too because the chain it reports starts at etcd; its order and timing come from
:mod:`clusterdoctor.analyze.correlate`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator

from clusterdoctor.analyze.clock_skew import DISJOINT_MIN_GAP as DISJOINT_SKEW
from clusterdoctor.analyze.clock_skew import FUTURE_TOLERANCE as FUTURE_SKEW
from clusterdoctor.analyze.clock_skew import SAME_EVENT_TOLERANCE as SAME_EVENT_SKEW
from clusterdoctor.analyze.clock_skew import ClockSkew
from clusterdoctor.model import Event, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, rule

APPLY_EXPECTED = Threshold(
    "etcd_apply_expected",
    0.1,
    "s",
    "etcd logs 'apply request took too long' above its expected-duration of 100 ms (etcd server/etcdserver/util.go; "
    "etcd FAQ: apply should normally take < 50 ms, warn when > 100 ms)",
    "apply duration above which etcd itself warns",
)
ELECTION_TIMEOUT_DEFAULT = Threshold(
    "etcd_election_timeout_default",
    1.0,
    "s",
    "etcd tuning guide: --election-timeout default 1000 ms (etcd-io/website content/en/docs/v3.5/tuning.md)",
    "a leader silent for longer than this is replaced by its followers",
)
FSYNC_WARN = Threshold(
    "etcd_slow_fdatasync",
    1.0,
    "s",
    "etcd wal.go warnSyncDuration = 1 s: 'slow fdatasync' is logged above it",
    "WAL fdatasync duration etcd logs as slow",
)
LEADER_CHANGES_PAGING = Threshold(
    "etcd_leader_changes_15m",
    4,
    "changes/15 min",
    "etcd mixin etcdHighNumberOfLeaderChanges: increase(leader_changes_seen_total[15m]) >= 4 "
    "(etcd-io/etcd contrib/mixin/alerts/alerts.libsonnet)",
    "leader changes within 15 minutes at which the etcd mixin pages",
)
STAMP_RESOLUTION_S = 1.0  # capnslog's time stamps have whole seconds (etcd 3.4 and older)
CHAIN_WINDOW = Threshold(
    "chain_window",
    600,
    "s",
    "clusterdoctor default: two stages link when the later starts within 10 min of the earlier's last event "
    "(k8s leader-election renew deadline is 10 s and pod-start SLO windows are minutes; reference/ctrl.md §2)",
    "largest gap between linked stages of a cascade",
)


def _ev(obs: Observations, *kinds: str) -> list[Event]:
    return [e for e in obs.get("events") or [] if isinstance(e, Event) and e.kind in kinds]


def _dropped(obs: Observations, *kinds: str) -> list:
    """What the bounded event store dropped of these kinds (``DroppedEvents`` records of long logs:
    observe/control/event_store.py); the counts below add them to the kept events'."""
    return [x for x in obs.get("events_dropped") or [] if getattr(x, "kind", None) in kinds]


def _n_dropped(obs: Observations, *kinds: str, who: str | None = None, d=None, **match) -> int:
    """How many events of ``kinds`` were dropped, of the writer ``who`` (a label as ``_writer``
    gives it) and with the fields ``match`` (``term=``, ``failed=``) when given."""
    n = 0
    for x in _dropped(obs, *kinds):
        if who is not None and (d.label(x.writer) if x.writer else x.source) != who:
            continue
        if any(getattr(x, k) != v for k, v in match.items()):
            continue
        n += x.count
    return n


def _a(e: Event, k: str) -> str | None:
    return dict(e.attrs).get(k)


def _fl(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def utc(t: float | None) -> str:
    """Epoch seconds → ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (or ``time unknown``)."""
    if t is None:
        return "time unknown"
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _src(e: Event) -> str | None:
    if e.source is None:
        return None
    return f"{e.source.location}:{(e.source.detail or '').replace('line ', '')}".rstrip(":")


def _directory(obs: Observations):
    from clusterdoctor.analyze.etcd_members import member_directory

    return member_directory(obs)


def _writer(e: Event, d) -> str:
    """Who logged ``e``: the etcd member (``m0 (8e9e05c52164694d)``) or, when unknown, the file."""
    lm = _a(e, "local_member") or _a(e, "local-member-id")
    if lm:
        return d.label(lm)
    return e.source.location if e.source is not None else "a log"


def _by_writer(evs: list[Event], d) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = {}
    for e in evs:
        out.setdefault(_writer(e, d), []).append(e)
    return out


def _who(evs: list[Event], d) -> str:
    names = sorted({_a(e, "member_label") or _writer(e, d) for e in evs})
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


_STALL = ("etcd.heartbeat_slow", "etcd.slow_fdatasync", "etcd.slow_apply")


@rule(
    id="ETCDLOG001",
    name="etcd-leader-lost",
    layer="etcd",
    title="etcd lost its leader (elections in the logs)",
    requires=("events",),
    thresholds=(LEADER_CHANGES_PAGING,),
    severity=Severity.WARNING,
)
def etcd_leader_lost(obs: Observations) -> Iterator[Finding]:
    """etcd members logged ``lost leader`` / ``changed leader`` / new elections.

    **Symptom**: API requests stall or fail with ``etcdserver: request timed out`` / ``leader changed``
    for seconds; controllers and the scheduler lose their leases; pods start slowly.
    **Why**: while a raft cluster has no leader, no write (and no linearizable read) completes. A leader
    is replaced when its followers hear no heartbeat for an election timeout — usually because the
    leader's disk (WAL fsync) or CPU stalled, less often because of the network.
    **Fix**: put the etcd data dir on a dedicated low-latency disk, give etcd CPU and I/O priority
    (`ionice -c2 -n0`, no co-located noisy jobs), keep heartbeat ≈ peer RTT and election timeout ≥ 10×
    heartbeat; look at what the old leader logged just before (slow fdatasync, late heartbeats).
    **Verify**: `etcdctl endpoint status -w table` (one leader, raft term stable) and
    `etcdctl check perf`; `curl -s localhost:2379/metrics | grep etcd_server_leader_changes_seen_total`.
    """
    evs = sorted(
        _ev(obs, "etcd.lost_leader", "etcd.leader_changed"),
        key=lambda e: e.time if e.time is not None else float("inf"),
    )
    if not evs:
        return
    d = _directory(obs)
    by_term: dict[str, list[Event]] = {}
    for e in evs:
        by_term.setdefault(_a(e, "term") or "?", []).append(e)
    # leader changes within any 15-minute window (distinct terms), over the whole cluster
    term_first = sorted(
        min((e.time for e in es if e.time is not None), default=float("inf")) for es in by_term.values()
    )
    worst = 0
    for i, t in enumerate(term_first):
        worst = max(worst, sum(1 for u in term_first[i:] if u - t <= 900))
    sev = Severity.CRITICAL if worst >= LEADER_CHANGES_PAGING.value else Severity.WARNING
    from clusterdoctor.analyze.etcd_members import members_down

    down = {x.member.hex_id: x for x in members_down(obs, d)}
    # one finding per leader that was lost: that member is what the finding is about
    by_leader: dict[str, list[tuple[str, list[Event]]]] = {}
    for term, es in sorted(by_term.items(), key=lambda kv: min(e.time or 0 for e in kv[1])):
        old = _a(es[0], "leader") if es[0].kind == "etcd.lost_leader" else _a(es[0], "old_leader")
        by_leader.setdefault(old or "?", []).append((term, es))
    for old, terms in by_leader.items():
        evidence = []
        times = []
        for term, es in terms:
            lost = [e for e in es if e.kind == "etcd.lost_leader"]
            members = sorted({d.label(_a(e, "member")) if _a(e, "member") else _writer(e, d) for e in es})
            t0 = min((e.time for e in es if e.time is not None), default=None)
            if t0 is not None:
                times.append(t0)
            t_key = None if term == "?" else term
            n_lost = len(lost) + _n_dropped(obs, "etcd.lost_leader", term=t_key)
            n_es = len(es) + _n_dropped(obs, "etcd.lost_leader", "etcd.leader_changed", term=t_key)
            evidence.append(
                Evidence(
                    f"term {term}: leader {d.label(old)} lost (seen by {', '.join(members)})",
                    n_lost or n_es,
                    unit="members",
                    source=_src(es[0]),
                    time=t0,
                )
            )
        hb = _ev(obs, *_STALL)
        if hb:
            first = min((e for e in hb if e.time is not None), key=lambda e: e.time, default=hb[0])
            evidence.append(
                Evidence(
                    f"also in the logs: {first.kind} ({len(hb) + _n_dropped(obs, *_STALL)}×) — see the stall rules",
                    source=_src(first),
                    time=first.time,
                )
            )
        cause = ""
        if old in down:
            x = down[old]
            cause = f" The old leader had stopped at {utc(x.stopped_at)}: see ETCD009, the cause."
            evidence.append(
                Evidence("the old leader stopped (ETCD009)", utc(x.stopped_at), time=x.stopped_at)
            )
        yield etcd_leader_lost.finding(
            f"etcd leader {d.describe(old)} lost in {len(terms)} term(s), first at "
            f"{utc(min(times) if times else None)}; up to {worst} leader change(s) within 15 min "
            f"in the cluster.{cause}",
            evidence=evidence,
            severity=sev,
            confidence=0.9,
            subject=d.label(old),
        )


@rule(
    id="ETCDLOG002",
    name="etcd-heartbeat-late",
    layer="etcd",
    title="etcd leader sent heartbeats late (overloaded, likely slow disk)",
    requires=("events",),
    thresholds=(ELECTION_TIMEOUT_DEFAULT,),
    severity=Severity.WARNING,
    causes=("etcd.slow-disk",),
)
def etcd_heartbeat_late(obs: Observations) -> Iterator[Finding]:
    """The etcd leader logged ``failed to send out heartbeat on time``.

    **Symptom**: followers start elections; API latency spikes; the leader logs late heartbeats with an
    ``exceeded-duration``.
    **Why**: the leader's raft loop could not run for longer than two heartbeat intervals — it was
    blocked on a slow WAL fsync or starved of CPU (etcd: "server is overloaded likely from slow disk").
    A stall longer than the election timeout gets the leader replaced.
    **Fix**: dedicated SSD/NVMe for the etcd data dir, `ionice -c2 -n0` for etcd, no CPU limits that
    throttle it, keep co-located jobs off its cores; if the network is the cause, raise
    --heartbeat-interval towards the peer RTT.
    **Verify**: `etcdctl check perf` and `curl -s localhost:2379/metrics | grep -E 'wal_fsync|heartbeat_send_failures'`.
    """
    d = _directory(obs)
    for who, evs in sorted(_by_writer(_ev(obs, "etcd.heartbeat_slow"), d).items()):
        n = len(evs) + _n_dropped(obs, "etcd.heartbeat_slow", who=who, d=d)
        exceeded = [x for x in (_fl(_a(e, "exceeded_s")) for e in evs) if x is not None]
        worst = max(exceeded) if exceeded else None
        sev = (
            Severity.CRITICAL
            if worst is not None and worst >= ELECTION_TIMEOUT_DEFAULT.value
            else Severity.WARNING
        )
        first = min(evs, key=lambda e: e.time if e.time is not None else float("inf"))
        ev = [
            Evidence("late heartbeats logged", n, source=_src(first), time=first.time),
        ]
        if worst is not None:
            worst_e = max(evs, key=lambda e: _fl(_a(e, "exceeded_s")) or 0)
            ev.append(
                Evidence(
                    "longest heartbeat delay (exceeded-duration)",
                    round(worst, 6),
                    ELECTION_TIMEOUT_DEFAULT.value,
                    "s",
                    _src(worst_e),
                    worst_e.time,
                )
            )
        lm = _a(first, "local_member") or _a(first, "local-member-id")
        yield etcd_heartbeat_late.finding(
            f"{n} late heartbeat(s) from the etcd leader {d.describe(lm) if lm else who}"
            + (f", the longest {worst:.3g} s late" if worst is not None else "")
            + (
                " — longer than the default election timeout, so followers elect a new leader."
                if sev == Severity.CRITICAL
                else "."
            ),
            evidence=ev,
            severity=sev,
            confidence=0.85,
            subject=who,
        )


@rule(
    id="ETCDLOG003",
    name="etcd-slow-apply",
    layer="etcd",
    title="etcd applied requests too slowly",
    requires=("events",),
    thresholds=(APPLY_EXPECTED, FSYNC_WARN),
    severity=Severity.WARNING,
    causes=("etcd.slow-disk",),
)
def etcd_slow_apply(obs: Observations) -> Iterator[Finding]:
    """etcd logged ``apply request took too long`` (or ``slow fdatasync``).

    **Symptom**: slow or timed-out API requests (``context deadline exceeded``); apiserver request latency
    tail; leases not renewed in time.
    **Why**: etcd applies each committed entry to its backend; above 100 ms it warns. Causes, in order of
    likelihood (etcd FAQ): slow disk, CPU starvation, expensive requests (large ranges).
    **Fix**: faster dedicated disk for etcd, CPU and I/O priority for etcd, defragment a fragmented
    backend, avoid large range requests (paginate lists, use watch caches).
    **Verify**: `etcdctl check perf`; `curl -s localhost:2379/metrics | grep -E 'backend_commit|apply_duration|slow_apply'`.
    """
    d = _directory(obs)
    for who, evs in sorted(_by_writer(_ev(obs, "etcd.slow_apply", "etcd.slow_fdatasync"), d).items()):
        yield from _slow_apply_one(obs, d, who, evs)


def _slow_apply_one(obs: Observations, d, who: str, evs: list[Event]) -> Iterator[Finding]:
    took = [(x, e) for e in evs if (x := _fl(_a(e, "took_s"))) is not None]
    worst = max(took, key=lambda p: p[0]) if took else None
    failed = [e for e in evs if "deadline" in (_a(e, "error") or "")]
    fsync = [e for e in evs if e.kind == "etcd.slow_fdatasync"]
    sev = Severity.CRITICAL if failed or fsync else Severity.WARNING
    kinds = ("etcd.slow_apply", "etcd.slow_fdatasync")
    n_apply = len(evs) - len(fsync) + _n_dropped(obs, "etcd.slow_apply", who=who, d=d)
    n_failed = len(failed) + _n_dropped(obs, *kinds, who=who, d=d, failed=True)
    n_fsync = len(fsync) + _n_dropped(obs, "etcd.slow_fdatasync", who=who, d=d)
    ev = [Evidence("slow applies logged", n_apply, source=_src(evs[0]), time=evs[0].time)]
    if worst is not None:
        ev.append(
            Evidence(
                "slowest apply", round(worst[0], 6), APPLY_EXPECTED.value, "s", _src(worst[1]), worst[1].time
            )
        )
    if failed:
        ev.append(
            Evidence(
                "requests that failed with context deadline exceeded",
                n_failed,
                source=_src(failed[0]),
                time=failed[0].time,
            )
        )
    if fsync:
        ev.append(
            Evidence("slow WAL fdatasync", n_fsync, FSYNC_WARN.value, "s", _src(fsync[0]), fsync[0].time)
        )
    lm = _a(evs[0], "local_member") or _a(evs[0], "local-member-id")
    yield etcd_slow_apply.finding(
        f"etcd {('member ' + d.describe(lm)) if lm else who} applied {n_apply} request(s) "
        "slower than 100 ms"
        + (f" (slowest {worst[0]:.3g} s)" if worst else "")
        + (f"; {n_failed} failed with a deadline" if failed else "")
        + ".",
        evidence=ev,
        severity=sev,
        confidence=0.85,
        subject=who,
    )


@rule(
    id="CHAIN001",
    name="control-plane-cascade",
    layer="control-plane",
    title="Cross-layer cascade: the first stage is the likely cause",
    requires=("events",),
    thresholds=(CHAIN_WINDOW, SAME_EVENT_SKEW, ELECTION_TIMEOUT_DEFAULT),
    severity=Severity.CRITICAL,
)
def control_plane_cascade(obs: Observations) -> Iterator[Finding]:
    """Events of two or more layers follow each other in the known cascade order.

    **Symptom**: symptoms in several layers at once — etcd elections, API timeouts, CNI/CRI timeouts,
    ``FailedCreatePodSandBox``, slow pod starts — each of which alone points somewhere else.
    **Why**: a stall low in the stack propagates up: a slow etcd disk delays apply, the leader is lost,
    the API server times out, CNI plugins that call the API time out, sandboxes fail and pods start late.
    The stage that starts first (by onset) and precedes the others is the cause; the later stages are
    symptoms and need no fix of their own.
    **Fix**: fix the first stage of the chain (see that stage's finding); the later stages recover with it.
    **Verify**: `clusterdoctor diagnose --format json <logs…>` after the fix shows no chain; `etcdctl check perf`.
    """
    from clusterdoctor.analyze.correlate import build_chain

    evs = [e for e in obs.get("events") or [] if isinstance(e, Event)]
    skews = _skews(obs, evs)
    aligned, shifts = _align(obs, evs, skews)
    d = _directory(obs)
    aligned = aligned + _member_down_events(obs, d)
    # times are corrected for clock skew above (or the order is flagged by _unordered_links), so a
    # later stage may start before the previous one by no more than the timestamps' resolution:
    # capnslog stamps to the second. A stalled leader that logs its late heartbeat only 1.4 s after
    # its followers lost it, with a short exceeded-duration, does not show the stall came first.
    chain = build_chain(aligned, window_s=float(CHAIN_WINDOW.value), skew_s=STAMP_RESOLUTION_S)
    for lk in [*chain.links, *chain.unlinked]:
        lk.extra = sum(x.count for x in _dropped(obs, *lk.stage.kinds) if _dropped_in_stage(x))
    timed = [lk for lk in chain.links if lk.first is not None]
    if len(chain.links) < 2 or not timed:
        return
    root = chain.links[0]
    evidence = []
    for lk in chain.links:
        first = min(lk.events, key=lambda e: e.time if e.time is not None else float("inf"))
        evidence.append(
            Evidence(
                f"{lk.stage.name}: {lk.stage.description} ({lk.count}×)",
                utc(lk.first),
                source=_src(first),
                time=lk.first,
            )
        )
    for lk in chain.unlinked:
        evidence.append(
            Evidence(
                f"not linked (out of order or too far apart): {lk.stage.name}", utc(lk.first), time=lk.first
            )
        )
    untimed = [lk for lk in chain.links if lk.first is None]
    conf = 0.85 if len(timed) >= 2 and not untimed else 0.6
    clock_note = ""
    if shifts:
        conf *= 0.9
        for src, off in sorted(shifts.items()):
            evidence.append(
                Evidence(
                    f"clock skew corrected: times of {src} moved by {-off:+.3f} s onto the other members' "
                    "clock (estimated from etcd term changes both logged)",
                    round(-off, 3),
                    float(SAME_EVENT_SKEW.value),
                    "s",
                )
            )
        clock_note = f" Times of {len(shifts)} source(s) were corrected for clock skew (see evidence)."
    unordered = _unordered_links(timed, skews, shifts)
    for a, b, why in unordered:
        evidence.append(Evidence(f"order of {a.stage.name} → {b.stage.name} not established: {why}"))
    if unordered:
        conf = min(conf, 0.3)
        clock_note += (
            f" The order of {len(unordered)} step(s) is not established because the sources' clocks "
            "disagree by more than the gap between them."
        )
    yield control_plane_cascade.finding(
        f"Chain: {chain.describe()}. The first stage, {root.stage.name}, started first and is the likely cause."
        + clock_note,
        evidence=evidence,
        confidence=conf,
        subject=f"{root.stage.name}: {_who(root.events, d)}",
        score=float(Severity.CRITICAL) * conf + len(chain.links),
        causes=CHAIN_ROOT_CAUSES.get(root.stage.name, ()),
    )


# the cause class a cascade names by its first stage (tests/data/incidents/causes/control.toml); a root
# stage whose cause is not one thing (a leader loss, API timeouts) names none
CHAIN_ROOT_CAUSES: dict[str, tuple[str, ...]] = {
    "etcd-member-down": ("etcd.member-down",),
    "etcd-stall": ("etcd.slow-disk",),
    "etcd-slow-apply": ("etcd.slow-disk",),
}


def _dropped_in_stage(x) -> bool:
    """As ``analyze.correlate``'s stage test: an election at term 0/1 is the bootstrap's."""
    t = _fl(x.term) if x.kind == "etcd.election" and x.term is not None else None
    return t is None or t >= 2


def _member_down_events(obs: Observations, d) -> list[Event]:
    """The members that stopped (ETCD009's analysis) as events of the cascade's first stage."""
    from clusterdoctor.analyze.etcd_members import members_down
    from clusterdoctor.model import SourceRef

    out = []
    for x in members_down(obs, d):
        if x.stopped_at is None:
            continue
        first = min((s for s in x.signals if s.time == x.stopped_at), key=lambda s: s.time, default=None)
        loc, _, line = (first.source or "").rpartition(":") if first and first.source else ("", "", "")
        if not line.isdigit():
            loc, line = (first.source if first else "") or "", ""
        out.append(
            Event(
                x.stopped_at,
                "etcd.member_down",
                f"etcd member {x.member.label()} stopped ({x.stopped_basis})",
                SourceRef("analysis", loc or "ETCD009", f"line {line}" if line else None),
                (("member_label", x.member.label()),),
            )
        )
    return out


def _collection_times(obs: Observations, evs: list[Event]) -> dict[str, float]:
    """When each event source was collected: a bundle's finish time, otherwise the time the
    diagnosis ran (``obs["now"]``, set from the caller's clock; a rule never reads the clock)."""
    from clusterdoctor.analyze.clock_skew import event_source

    known: dict[str, float] = {}
    for item in obs.get("collection_times") or []:
        try:
            src, t = item
            known[str(src)] = float(t)
        except (TypeError, ValueError):
            continue
    now = obs.get("now")
    return {s: t for s in {event_source(e) for e in evs} if (t := known.get(s, now)) is not None}


def _skews(obs: Observations, evs: list[Event]) -> list[ClockSkew]:
    from clusterdoctor.analyze.clock_skew import detect_skews

    return detect_skews(evs, _collection_times(obs, evs))


def _align(
    obs: Observations, evs: list[Event], skews: list[ClockSkew]
) -> tuple[list[Event], dict[str, float]]:
    from clusterdoctor.analyze.clock_skew import align_events

    return align_events(evs, skews, _collection_times(obs, evs))


def _first_source(lk) -> str:
    from clusterdoctor.analyze.clock_skew import event_source
    from clusterdoctor.analyze.correlate import onset

    timed = [(onset(e), e) for e in lk.events if onset(e) is not None]
    return event_source(min(timed, key=lambda p: p[0])[1]) if timed else "?"


def _unordered_links(timed: list, skews: list[ClockSkew], shifts: dict[str, float]) -> list[tuple]:
    """Consecutive chain links from different sources whose order the clocks cannot support.

    A source whose clock runs ahead by at least B (``future``) makes a later link of its own
    unreliable (its events happened earlier than stamped; how much earlier is unknown). Sources far
    apart (``disjoint``) are not ordered at all. After a same-event correction the offset is known to
    about one election timeout: a gap within that is not an order.
    """
    ahead = {s.other: s.offset_s for s in skews if s.basis == "future"}
    apart = {frozenset((s.reference, s.other)) for s in skews if s.basis == "disjoint"}
    out = []
    for a, b in zip(timed, timed[1:]):
        sa, sb = _first_source(a), _first_source(b)
        if sa == sb:
            continue
        gap = b.first - a.first
        if sb in ahead and sa not in ahead:
            out.append(
                (
                    a,
                    b,
                    f"the clock of {sb} runs at least {ahead[sb]:.0f} s ahead (events after it was collected)",
                )
            )
        elif frozenset((sa, sb)) in apart:
            out.append((a, b, f"{sa} and {sb} lie far apart in time (clock or time zone)"))
        elif (sa in shifts or sb in shifts) and abs(gap) <= float(ELECTION_TIMEOUT_DEFAULT.value):
            # members log one term change up to about an election timeout apart: the corrected
            # offset is known to that precision only
            out.append(
                (
                    a,
                    b,
                    f"after correcting clock skew the gap ({gap:.3g} s) is within the estimate's precision "
                    f"(one election timeout, {ELECTION_TIMEOUT_DEFAULT.value:g} s)",
                )
            )
    return out


@rule(
    id="CLOCK001",
    name="clock-skew-between-sources",
    layer="control-plane",
    title="Clocks of the sources disagree: events are not comparable across them as stamped",
    requires=("events",),
    thresholds=(SAME_EVENT_SKEW, FUTURE_SKEW, DISJOINT_SKEW),
    severity=Severity.WARNING,
)
def clock_skew_between_sources(obs: Observations) -> Iterator[Finding]:
    """Logs of different hosts (or a bundle) carry timestamps from clocks that disagree.

    **Symptom**: the same etcd leader change appears seconds or minutes apart in the members' logs;
    a log holds events later than it was collected; two logs of one incident do not overlap.
    **Why**: each host stamps its own log lines. Without NTP/chrony in sync (or with a log written in
    local time but read as UTC) an effect can appear to precede its cause, and a causal chain built on
    the raw times is wrong. etcd itself depends on roughly agreeing clocks only for lease TTL checks,
    so skewed members can run for a long time unnoticed.
    **Fix**: synchronise the clocks (chrony/ntpd on every node; node exporter's NodeClockSkewDetected
    alert); give logs with explicit UTC offsets. clusterdoctor corrects the offset it can estimate
    (from the same event seen by several members) and refuses to order the rest.
    **Verify**: `chronyc tracking` (or `timedatectl timesync-status`) on each host; `date -u` on each
    node side by side; `curl -s localhost:9100/metrics | grep node_timex_offset_seconds`.
    """
    evs = [e for e in obs.get("events") or [] if isinstance(e, Event)]
    skews = _skews(obs, evs)
    if not skews:
        return
    _, shifts = _align(obs, evs, skews)
    evidence = [
        Evidence(
            s.describe(),
            round(s.offset_s, 3),
            {"same-event": SAME_EVENT_SKEW, "future": FUTURE_SKEW}.get(s.basis, DISJOINT_SKEW).value,
            "s",
            source=s.other,
        )
        for s in skews
    ]
    for src, off in sorted(shifts.items()):
        evidence.append(
            Evidence(
                f"event times of {src} corrected by {-off:+.3f} s for the chain", round(-off, 3), unit="s"
            )
        )
    # Per corrected source, against the members whose clocks agree; then what only bounds the skew.
    agreeing = sorted({x for s in skews if s.estimated for x in (s.reference, s.other)} - set(shifts))
    parts = [
        f"clock of {src} is ~{_human_s(abs(off))} {'ahead of' if off > 0 else 'behind'} "
        f"{', '.join(agreeing) or 'the other members'} (same etcd term changes)"
        for src, off in sorted(shifts.items(), key=lambda kv: -abs(kv[1]))
    ]
    parts += [s.describe() for s in skews if not s.estimated]
    subject = max(shifts, key=lambda k: abs(shifts[k])) if shifts else skews[0].other
    yield clock_skew_between_sources.finding(
        f"Clock skew between sources: {'; '.join(parts)}. Events are not ordered across these sources "
        "as stamped" + (" (the estimated offsets are corrected for the cascade)." if shifts else "."),
        evidence=evidence,
        confidence=0.9 if shifts else 0.6,
        subject=subject,
        # estimated from the etcd term changes the members logged: the etcd members' clocks differ
        causes=("etcd.clock-skew",) if any(sk.estimated for sk in skews) else ("k8s.clock-skew",),
    )


def _burst_starts(points: list[float], spans: list[tuple[float, float]]) -> list[float]:
    """``analyze.correlate.episodes`` over the points and the bursts a bounded log store kept of
    the events it dropped (each burst's points lie within 5 s of each other: exact)."""
    from clusterdoctor.analyze.correlate import episodes

    if not spans:
        return episodes(points)
    out: list[float] = []
    end = None
    for a, b in sorted([*((p, p) for p in points if p == p), *spans]):
        if end is None or a - end > 5.0:
            out.append(a)
            end = b
        else:
            end = max(end, b)
    return out


def _human_s(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.3g} s"


PERIODIC_MIN_EPISODES = Threshold(
    "periodic_min_episodes",
    4,
    "episodes",
    "clusterdoctor default: three or more equal gaps are needed before a period is more than coincidence",
    "degradation bursts needed to call it periodic",
)
PERIODIC_MIN_STRENGTH = Threshold(
    "periodic_min_strength",
    0.7,
    "",
    "clusterdoctor default: 1 - MAD/median of the gaps between bursts (analyze/correlate.event_period)",
    "regularity above which the bursts are periodic",
)
_DEGRADATION = (
    "etcd.slow_apply",
    "etcd.heartbeat_slow",
    "etcd.slow_fdatasync",
    "etcd.lost_leader",
    "etcd.request_timeout",
    "apiserver.timeout",
    "cni.timeout",
    "cri.timeout",
    "sandbox.create_failed",
    "k8s.lease_renew_failed",
)


@rule(
    id="CHAIN002",
    name="periodic-degradation",
    layer="control-plane",
    title="Degradation recurs with a period (matched to periodic jobs)",
    requires=("events",),
    thresholds=(PERIODIC_MIN_EPISODES, PERIODIC_MIN_STRENGTH),
    severity=Severity.WARNING,
)
def periodic_degradation(obs: Observations) -> Iterator[Finding]:
    """Slow applies, leader losses or timeouts come back at a regular interval.

    **Symptom**: latency spikes every N minutes; dashboards show a saw-tooth; nothing is wrong between
    the spikes.
    **Why**: something periodic competes for the same disk, CPU or network: checkpoints of a streaming
    job, etcd compaction/defragmentation, backups and other CronJobs, log rotation. The period of the
    degradation names the job when it matches (or is a small multiple of) that job's period.
    **Fix**: move the matching periodic job off the etcd disk/nodes, stagger or rate-limit it (e.g.
    Flink checkpoint interval and storage throttling, compaction at quiet hours), or give etcd I/O priority.
    **Verify**: `kubectl get cronjobs -A` (schedules), `curl -s <jobmanager>:8081/jobs/<id>/checkpoints/config`
    (interval) and etcd's `--auto-compaction-retention`; the spikes stop when the job is moved.
    """
    from clusterdoctor.analyze.correlate import cron_periods, event_period, match_periods, onset

    evs = [e for e in _ev(obs, *_DEGRADATION) if e.time is not None]
    eps = _burst_starts(
        [t for t in (onset(e) for e in evs) if t is not None],
        [sp for b in obs.get("event_bursts") or [] if b.kind in _DEGRADATION for sp in b.spans],
    )
    if len(eps) < PERIODIC_MIN_EPISODES.value:
        return
    est = event_period(eps, int(PERIODIC_MIN_EPISODES.value))
    if est is None:
        return
    period, strength = est
    if strength < PERIODIC_MIN_STRENGTH.value:
        return
    cands: dict[str, float] = {}
    for fc in obs.get("flink_checkpoints") or []:
        if fc.interval_ms:
            cands[f"Flink checkpoint interval ({fc.job_id or fc.source})"] = fc.interval_ms / 1000.0
    cands.update(cron_periods(getattr(p, "owner", None) for p in obs.get("pod_starts") or []))
    extra = obs.get("periodic_candidates") or {}
    if isinstance(extra, dict):
        cands.update({str(k): float(v) for k, v in extra.items()})
    matches = match_periods(period, cands)
    ev = [
        Evidence("degradation bursts", len(eps), PERIODIC_MIN_EPISODES.value, time=eps[0]),
        Evidence("period (median gap)", round(period, 3), unit="s"),
        Evidence("regularity", round(strength, 3), PERIODIC_MIN_STRENGTH.value),
    ]
    for name, cp, k in matches:
        rel = "same period" if k == 1 else (f"{k}× its period" if k > 0 else f"1/{-k} of its period")
        ev.append(Evidence(f"matches {name}: {rel}", round(cp, 3), unit="s"))
    if matches:
        tail = f" Matching periodic job: {matches[0][0]} ({matches[0][1]:g} s)."
    elif cands:
        tail = (
            " None of the known periodic jobs ("
            + ", ".join(f"{n} {p:g} s" for n, p in cands.items())
            + ") matches."
        )
    else:
        tail = " No periodic job was given to compare with (CronJob pods, Flink checkpoint config)."
    yield periodic_degradation.finding(
        f"{len(eps)} degradation bursts recur every {period:.4g} s (regularity {strength:.2f}).{tail}",
        evidence=ev,
        confidence=0.6 + 0.3 * strength * (1.0 if matches else 0.5),
        subject=matches[0][0] if matches else f"recurring degradation: {_who(evs, _directory(obs))}",
    )
