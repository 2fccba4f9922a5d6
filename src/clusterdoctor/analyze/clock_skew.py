"""Clock skew between sources combined in one diagnosis (logs of different hosts, bundles).

Events from several files are only comparable in time when the clocks that stamped them agree.
Three checks, each naming the sources and an offset:

* **same event** (:func:`same_event_skews`): an etcd raft term change is one cluster-wide event;
  every member logs it (``lost leader``, ``elected leader``, ``changed leader``) within about an
  election timeout of the others — unless it was stalled or cut off, in which case it logs it late.
  For two sources of one cluster (their events name a common member id) sharing term changes, the offset is the difference of smallest magnitude over the
  shared terms (a stalled member is late in one term, not in all); when every shared term differs by
  more than :data:`SAME_EVENT_TOLERANCE` in the same direction, the clocks disagree by about that much.
* **future** (:func:`future_skews`): events stamped later than the time their source was collected
  (a bundle's ``finished_at``, or now) by more than :data:`FUTURE_TOLERANCE` come from a clock that
  runs ahead; the offset is at least the excess.
* **disjoint** (:func:`disjoint_skews`): two sources whose events do not overlap, one ending far
  more before the other starts than either lasts. Either they describe different incidents or a
  clock (often a time zone: whole hours) is off; events are not ordered across them.

:func:`align_events` shifts the events of sources whose offset the same-event check estimated onto
the clock of the largest group of agreeing sources, so that a causal chain can be built; the other
two checks only bound the skew, so events across those sources must not be ordered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clusterdoctor.model import Event, Threshold

__all__ = [
    "DISJOINT_MIN_GAP",
    "FUTURE_TOLERANCE",
    "SAME_EVENT_TOLERANCE",
    "ClockSkew",
    "SourceSpan",
    "align_events",
    "detect_skews",
    "disjoint_skews",
    "event_source",
    "future_skews",
    "same_event_skews",
    "source_spans",
]

SAME_EVENT_TOLERANCE = Threshold(
    "same_event_clock_tolerance",
    5.0,
    "s",
    "etcd tuning guide (etcd-io/website content/en/docs/v3.5/tuning.md): members replace a silent leader "
    "after the election timeout, default 1000 ms, so live members log a term change within about one "
    "election timeout of each other; clusterdoctor allows 5x that before calling the difference skew",
    "difference between two members' times for the same raft term change above which their clocks disagree",
)
FUTURE_TOLERANCE = Threshold(
    "future_event_tolerance",
    60.0,
    "s",
    "clusterdoctor default: a log cannot hold events after it was collected; one minute covers "
    "buffered writers and small NTP steps",
    "how far past its collection time a source's last event may lie",
)
DISJOINT_MIN_GAP = Threshold(
    "disjoint_sources_gap",
    3600.0,
    "s",
    "clusterdoctor default: sources an hour or more apart whose events each span less than a tenth of "
    "the gap are not one incident on agreeing clocks (a time-zone error shows as whole hours)",
    "gap between two sources' events above which they are reported as not comparable",
)

# Event kinds that are one cluster-wide event per raft term (the term is the new term).
_TERM_KINDS = ("etcd.lost_leader", "etcd.elected_leader", "etcd.leader_changed")


@dataclass(frozen=True)
class SourceSpan:
    """The times of one source's events."""

    source: str
    first: float
    last: float
    count: int


@dataclass(frozen=True)
class ClockSkew:
    """Source ``other``'s clock runs ``offset_s`` seconds ahead of ``reference``'s (negative: behind).

    ``basis``: ``same-event`` (offset estimated from ``n`` shared events), ``future`` (offset is a lower
    bound: events after the collection time) or ``disjoint`` (offset is the gap; direction unknown).
    """

    reference: str
    other: str
    offset_s: float
    basis: str
    n: int
    detail: str

    @property
    def estimated(self) -> bool:
        """Whether the offset is an estimate events can be corrected by (not just a bound)."""
        return self.basis == "same-event"

    def describe(self) -> str:
        """One line for a warning or an evidence entry."""
        d = _human(abs(self.offset_s))
        if self.basis == "same-event":
            way = "ahead of" if self.offset_s > 0 else "behind"
            return f"clock of {self.other} is ~{d} {way} {self.reference} ({self.detail})"
        if self.basis == "future":
            return f"clock of {self.other} is at least {d} ahead of {self.reference} ({self.detail})"
        return f"{self.other} and {self.reference} are {d} apart ({self.detail})"


def _human(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.3g} s"


def event_source(ev: Event) -> str:
    """The source (file, URL) an event came from; ``?`` when unknown."""
    return ev.source.location if ev.source is not None and ev.source.location else "?"


def source_spans(events: Iterable[Event]) -> dict[str, SourceSpan]:
    """First/last event time and event count per source (events without a time are ignored)."""
    acc: dict[str, list[float]] = {}
    for e in events:
        if e.time is not None and e.time == e.time:
            acc.setdefault(event_source(e), []).append(e.time)
    return {s: SourceSpan(s, min(ts), max(ts), len(ts)) for s, ts in acc.items()}


def _term_times(events: Iterable[Event]) -> dict[str, dict[str, float]]:
    """source → {term: earliest time the source logged the change to that term}."""
    out: dict[str, dict[str, float]] = {}
    for e in events:
        if e.kind not in _TERM_KINDS or e.time is None:
            continue
        term = dict(e.attrs).get("term")
        if not term:
            continue
        per = out.setdefault(event_source(e), {})
        if term not in per or e.time < per[term]:
            per[term] = e.time
    return out


def _member_ids(events: Iterable[Event]) -> dict[str, set[str]]:
    """source → the etcd member ids its term-change events name (itself, old and new leaders)."""
    out: dict[str, set[str]] = {}
    for e in events:
        if e.kind in _TERM_KINDS:
            a = dict(e.attrs)
            out.setdefault(event_source(e), set()).update(
                v for k in ("member", "leader", "old_leader") if (v := a.get(k))
            )
    return out


def _pair_offsets(events: Iterable[Event]) -> list[tuple[str, str, float, int, bool]]:
    """For each pair of sources sharing term changes: (a, b, offset b-a, shared, consistent sign).

    Term numbers restart in every cluster, so two sources are compared only when their events name
    a common member id (same cluster).
    """
    events = list(events)
    terms = _term_times(events)
    ids = _member_ids(events)
    srcs = sorted(terms)
    out = []
    for i, a in enumerate(srcs):
        for b in srcs[i + 1 :]:
            if not ids.get(a, set()) & ids.get(b, set()):
                continue
            shared = sorted(set(terms[a]) & set(terms[b]))
            if not shared:
                continue
            diffs = [terms[b][t] - terms[a][t] for t in shared]
            best = min(diffs, key=abs)
            same_sign = all(d > 0 for d in diffs) or all(d < 0 for d in diffs)
            out.append((a, b, best, len(shared), same_sign))
    return out


def same_event_skews(
    events: Iterable[Event], tolerance_s: float = float(SAME_EVENT_TOLERANCE.value)
) -> list[ClockSkew]:
    """Pairs of sources whose times for the same etcd term changes disagree (see the module docstring)."""
    out = []
    for a, b, off, n, same_sign in _pair_offsets(events):
        if abs(off) > tolerance_s and same_sign:
            out.append(
                ClockSkew(
                    a,
                    b,
                    off,
                    "same-event",
                    n,
                    f"{n} etcd term change(s) logged by both, closest pair {off:+.3f} s apart",
                )
            )
    return out


def future_skews(
    events: Iterable[Event],
    collected_at: dict[str, float] | float | None,
    tolerance_s: float = float(FUTURE_TOLERANCE.value),
) -> list[ClockSkew]:
    """Sources whose last event lies after their collection time by more than ``tolerance_s``.

    ``collected_at``: one time for every source (e.g. now), or per source (a bundle's finished_at
    for its files); sources not in the dict are not checked.
    """
    out = []
    for src, span in sorted(source_spans(events).items()):
        ref = collected_at.get(src) if isinstance(collected_at, dict) else collected_at
        if ref is None:
            continue
        excess = span.last - ref
        if excess > tolerance_s:
            out.append(
                ClockSkew(
                    "collection time",
                    src,
                    excess,
                    "future",
                    span.count,
                    f"last event {excess:.0f} s after the source was collected",
                )
            )
    return out


def disjoint_skews(
    events: Iterable[Event], min_gap_s: float = float(DISJOINT_MIN_GAP.value)
) -> list[ClockSkew]:
    """Pairs of sources whose events lie far apart relative to how long each lasts."""
    spans = sorted(source_spans(events).values(), key=lambda s: s.first)
    out = []
    for i, a in enumerate(spans):
        for b in spans[i + 1 :]:
            gap = b.first - a.last
            longest = max(a.last - a.first, b.last - b.first)
            if gap < min_gap_s or gap < 10 * longest:
                continue
            hours = round(gap / 3600)
            tz = hours >= 1 and abs(gap - 3600 * hours) <= max(60.0, 0.01 * gap)
            detail = (
                f"{a.source} ends {gap:.0f} s before {b.source} starts; each spans at most {longest:.0f} s"
            )
            if tz:
                detail += f"; the gap is ~{hours} whole hour(s), typical of a time-zone error"
            out.append(ClockSkew(a.source, b.source, gap, "disjoint", a.count + b.count, detail))
    return out


def detect_skews(
    events: Sequence[Event],
    collected_at: dict[str, float] | float | None = None,
) -> list[ClockSkew]:
    """Every skew the three checks find: same-event first; the future and disjoint checks run on the
    times after the same-event correction (a source already put right is not reported twice)."""
    same = same_event_skews(events)
    aligned, _ = align_events(events, same, collected_at)
    return [*same, *future_skews(aligned, collected_at), *disjoint_skews(aligned)]


def align_events(
    events: Sequence[Event],
    skews: Sequence[ClockSkew],
    collected_at: dict[str, float] | float | None = None,
) -> tuple[list[Event], dict[str, float]]:
    """Events with the times of each skewed source moved onto the reference clock.

    The reference is the source that agrees (within the tolerance) with the most others; among
    equals, one whose events do not lie after its collection time, then the one with most events.
    Offsets propagate along the estimated pairs. Only ``same-event`` skews are corrected. Returns the events
    (shifted copies where needed, order kept) and ``{source: seconds subtracted}``.
    """
    est = [s for s in skews if s.estimated]
    if not est:
        return list(events), {}
    # Offsets between every pair that shares term changes: agreeing pairs count as 0.
    edges: dict[str, dict[str, float]] = {}
    skewed = {(s.reference, s.other): s.offset_s for s in est}
    for a, b, _off, _n, _same in _pair_offsets(events):
        o = skewed.get((a, b), 0.0)
        edges.setdefault(a, {})[b] = o
        edges.setdefault(b, {})[a] = -o
    spans = source_spans(events)

    def agreeing(s: str) -> tuple[int, bool, int, str]:
        ref_t = collected_at.get(s) if isinstance(collected_at, dict) else collected_at
        plausible = ref_t is None or s not in spans or spans[s].last <= ref_t + float(FUTURE_TOLERANCE.value)
        return (
            sum(1 for o in edges.get(s, {}).values() if o == 0.0),
            plausible,
            spans[s].count if s in spans else 0,
            s,
        )

    ref = max(edges, key=agreeing)
    offset = {ref: 0.0}
    todo = [ref]
    while todo:
        cur = todo.pop()
        for nb, o in edges.get(cur, {}).items():
            if nb not in offset:
                offset[nb] = offset[cur] + o
                todo.append(nb)
    shifts = {s: o for s, o in offset.items() if o != 0.0}
    if not shifts:
        return list(events), {}
    out = []
    for e in events:
        o = shifts.get(event_source(e))
        out.append(e if o is None or e.time is None else dataclasses.replace(e, time=e.time - o))
    return out, shifts
