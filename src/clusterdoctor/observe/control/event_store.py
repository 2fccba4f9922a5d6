"""Bounded storage of the events one log yields (issue 26: memory flat whatever the log's size).

A long etcd log can hold millions of events (slow applies, late heartbeats). Keeping each costs
~0.5 KB, so a 1 GB log held ~1.5 GB of them. :class:`EventStore` keeps, per *key* (kind, writing
member, raft term, peer, whether the request failed with a deadline):

* the first :data:`HEAD` events of the key in full (file order), which is every event of an
  ordinary log;
* past that, only the key's notable events: the earliest onset (time minus the duration it
  reports), the earliest and the latest time and the longest duration (``took_s``/``exceeded_s``), each replaced
  when a later event beats it;
* a count of the events it dropped (:class:`DroppedEvents`, one record per key) and, for the kinds
  that dropped any, the bursts of their onsets (intervals whose points lie no more than
  :data:`BURST_GAP_S` apart, exact in any order), so counts, firsts, lasts, worsts and periodic
  bursts read from the store equal those of the full list.

Memory is bounded by the number of keys and bursts, not by the lines. What is not kept: the
events in the middle of an overflowing key (the report's timeline shows the first 500 by time).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from clusterdoctor.model import Event

__all__ = ["BURST_GAP_S", "HEAD", "DroppedEvents", "EventBursts", "EventStore", "event_onset"]

HEAD = 1000  # events kept in full per key
BURST_GAP_S = 5.0  # = analyze.correlate.episodes' default gap


def bounded(kind: str) -> bool:
    """Kinds the store bounds: etcd's own log events. The client timeouts (counted within a
    minute of a member stopping, rules/etcd.py) and other components' events are kept whole."""
    return kind.startswith("etcd.") and kind != "etcd.client_timeout"


_LEADER_KINDS = frozenset(("etcd.lost_leader", "etcd.leader_changed", "etcd.elected_leader", "etcd.election"))


@dataclass(frozen=True)
class DroppedEvents:
    """Events of one key a log held beyond what was kept (``events_dropped`` observation)."""

    source: str  # the file
    kind: str
    writer: str | None  # hex ID of the member that logged them (local_member), when known
    term: str | None  # raft term, for leader-change kinds
    peer: str | None
    failed: bool  # a request that failed with a deadline (slow applies)
    count: int


@dataclass(frozen=True)
class EventBursts:
    """Bursts of one kind's onsets in one log (``event_bursts`` observation), all its events
    counted, kept or not: ``(first, last)`` onset of each burst, in time order."""

    source: str
    kind: str
    spans: tuple[tuple[float, float], ...]


def _f(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        return None


def event_onset(kind: str, time: float | None, a: dict[str, str]) -> float | None:
    """When what an event reports began (as ``analyze.correlate.onset``)."""
    if time is None:
        return None
    if kind == "kubelet.pod_startup":
        c = _f(a.get("created"))
        return c if c is not None else time
    for k in ("exceeded_s", "took_s"):
        d = _f(a.get(k))
        if d is not None and 0 <= d < 86400:
            return time - d
    return time


class _Spans:
    """Exact bursts of points added in any order (consecutive sorted points ≤ gap apart)."""

    __slots__ = ("s", "e")

    def __init__(self) -> None:
        self.s: list[float] = []
        self.e: list[float] = []

    def add(self, t: float) -> None:
        s, e = self.s, self.e
        if not s or t >= s[-1]:  # the common case: a log in time order
            if s and t <= e[-1] + BURST_GAP_S:
                if t > e[-1]:
                    e[-1] = t
            else:
                s.append(t)
                e.append(t)
            return
        i = bisect_right(s, t) - 1  # last burst starting at or before t (-1: none)
        left = i >= 0 and t <= e[i] + BURST_GAP_S
        right = s[i + 1] - t <= BURST_GAP_S
        if left and right:
            e[i] = max(e[i], e[i + 1])
            del s[i + 1], e[i + 1]
        elif left:
            e[i] = max(e[i], t)
        elif right:
            s[i + 1] = t
        else:
            s.insert(i + 1, t)
            e.insert(i + 1, t)


class _Key:
    __slots__ = ("head", "first", "early", "last", "worst", "n")

    def __init__(self) -> None:
        self.head: list[tuple[int, Event]] = []
        self.first: tuple[float, int, Event] | None = None  # (onset, seq, event)
        self.early: tuple[float, int, Event] | None = None  # (time, seq, event)
        self.last: tuple[float, int, Event] | None = None
        self.worst: tuple[float, int, Event] | None = None
        self.n = 0


class EventStore:
    """Events of one log, bounded (see the module docstring). ``add`` in file order, then
    :meth:`events`, :meth:`dropped` and :meth:`bursts`."""

    def __init__(self, head: int | None = None) -> None:
        self._head = HEAD if head is None else head
        self._keys: dict[tuple, _Key] = {}
        self._spans: dict[str, _Spans] = {}
        self._seq = 0
        self._all: list[tuple[int, Event]] = []  # kinds kept whole

    def add(self, ev: Event) -> None:
        self._seq += 1
        seq = self._seq
        kind = ev.kind
        if not bounded(kind):
            self._all.append((seq, ev))
            return
        a = dict(ev.attrs)
        key = (
            kind,
            a.get("local-member-id"),
            a.get("term") if kind in _LEADER_KINDS else None,
            a.get("peer"),
            "deadline" in (a.get("error") or ""),
        )
        k = self._keys.get(key)
        if k is None:
            k = self._keys[key] = _Key()
        k.n += 1
        on = event_onset(kind, ev.time, a)
        if on is not None:
            sp = self._spans.get(kind)
            if sp is None:
                sp = self._spans[kind] = _Spans()
            sp.add(on)
        if len(k.head) < self._head:
            k.head.append((seq, ev))
            return
        if on is not None and (k.first is None or on < k.first[0]):
            k.first = (on, seq, ev)
        if ev.time is not None and (k.early is None or ev.time < k.early[0]):
            k.early = (ev.time, seq, ev)
        if ev.time is not None and (k.last is None or ev.time > k.last[0]):
            k.last = (ev.time, seq, ev)
        d = _f(a.get("exceeded_s")) if "exceeded_s" in a else _f(a.get("took_s"))
        if d is not None and (k.worst is None or d > k.worst[0]):
            k.worst = (d, seq, ev)

    def _kept(self) -> dict[tuple, dict[int, Event]]:
        """Per key, the kept events by sequence number: its head and its notable ones."""
        out = {}
        for key, k in self._keys.items():
            kept = dict(k.head)
            for slot in (k.first, k.early, k.last, k.worst):
                if slot is not None:
                    kept[slot[1]] = slot[2]
            out[key] = kept
        return out

    def events(self) -> list[Event]:
        """The kept events, in file order."""
        kept: dict[int, Event] = dict(self._all)
        for v in self._kept().values():
            kept.update(v)
        return [kept[s] for s in sorted(kept)]

    def dropped(self, source: str, owner: str | None) -> list[DroppedEvents]:
        """One record per key that dropped events; ``owner``: the member that wrote the file, the
        writer of its etcd events that name none (as ``local_member`` is set on the kept ones)."""
        kept = self._kept()
        out = []
        for key, k in self._keys.items():
            n = k.n - len(kept[key])
            if n <= 0:
                continue
            kind, lm, term, peer, failed = key
            writer = lm
            if writer is None and kind.startswith("etcd.") and kind != "etcd.client_timeout":
                writer = owner
            out.append(DroppedEvents(source, kind, writer, term, peer, failed, n))
        return out

    def bursts(self, source: str) -> list[EventBursts]:
        """The onset bursts of each kind that dropped events (the kept ones show the others')."""
        kept = self._kept()
        kinds = {key[0] for key, k in self._keys.items() if k.n > len(kept[key])}
        return [
            EventBursts(source, kind, tuple(zip(sp.s, sp.e)))
            for kind, sp in sorted(self._spans.items())
            if kind in kinds
        ]
