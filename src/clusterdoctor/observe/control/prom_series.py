"""The series of a saved Prometheus dump, streamed (issue 26, sixth round): what ``diagnose`` reads
a ``/metrics`` file with (:func:`read_series`, used by
:func:`clusterdoctor.observe.control.scrape.load_metrics_observations`).

The file is read in blocks by :mod:`~clusterdoctor.observe.control.prom_stream`; each distinct
series ``(name, labels)`` keeps its :class:`Points`, the ``(time, value)`` list a
``MetricWindow`` series holds, in two ``array('d')`` with consecutive equal points stored once and
counted: nothing is kept per sample. Memory is the distinct series and the distinct consecutive
points of each, whatever the file's length when its values repeat (dumps put together).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from itertools import chain, repeat
from math import copysign
from operator import sub

from clusterdoctor.observe.control.prom_metrics import MetricSet
from clusterdoctor.observe.control.prom_stream import Index, Sink, open_file, paused_gc, stream_into

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

    from clusterdoctor.observe.control.prom_metrics import Labels


class Points:
    """The ``(time, value)`` points of one series, read as the list of tuples a
    :class:`clusterdoctor.model.Series` holds (length, indexing, slices, iteration, ``==`` with a
    list, ``repr``), stored in two ``array('d')``; consecutive equal points (a dump repeated, several
    scrapes of a value that did not change) are one run, counted. ``append`` adds a point."""

    __slots__ = ("_t", "_v", "_ends", "_n")

    def __init__(self, points: Iterable[tuple[float, float]] = ()) -> None:
        self._t = array("d")
        self._v = array("d")
        self._ends: array[int] | None = None  # cumulative count at the end of each run, once one repeats
        self._n = 0
        for t, v in points:
            self.add(t, v)

    def add(self, t: float, v: float) -> None:
        """One more point (``float`` time and value)."""
        tt, vv = self._t, self._v
        if tt and tt[-1] == t and vv[-1] == v and (v or copysign(1.0, v) == copysign(1.0, vv[-1])):
            ends = self._ends
            if ends is None:
                ends = self._ends = array("q", range(1, len(tt) + 1))
            ends[-1] += 1
        else:
            tt.append(t)
            vv.append(v)
            if self._ends is not None:
                self._ends.append(self._n + 1)
        self._n += 1

    def append(self, point: tuple[float, float]) -> None:
        self.add(*point)

    def runs(self) -> int:
        """How many runs are stored (at most ``len(self)``)."""
        return len(self._t)

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[tuple[float, float]]:
        pairs = zip(self._t, self._v)
        ends = self._ends
        if ends is None:
            return pairs
        return chain.from_iterable(map(repeat, pairs, map(sub, ends, chain((0,), ends))))

    def __reversed__(self) -> Iterator[tuple[float, float]]:
        return reversed(list(self))

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        n = self._n
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("point index out of range")
        if self._ends is not None:
            i = bisect_right(self._ends, i)
        return (self._t[i], self._v[i])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Points):
            return len(self) == len(other) and list(self) == list(other)
        if isinstance(other, list):
            return len(self) == len(other) and list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


class SeriesSink(Sink):
    """Per distinct ``(name, labels)`` its :class:`Points` (time 0.0 for an untimed sample, as a
    ``MetricWindow`` stamps one); whether any sample had a timestamp; the series of the first
    :data:`FIRST` samples (what a dump is checked for ``instance`` labels by)."""

    FIRST = 2000

    def __init__(self) -> None:
        self.index = Index()
        self.points: list[Points] = []
        self.timed = False
        self.n = 0
        self.first: list[int] = []

    def __len__(self) -> int:
        return self.n

    def add(self, keys: list[tuple[str, Labels]], values: list[float], times: Iterable[float | None]) -> None:
        n = len(keys)
        if not n:
            return
        sids = self.index.numbers(keys)
        pts = self.points
        for _ in range(len(self.index.keys) - len(pts)):
            pts.append(Points())
        if self.n < self.FIRST:
            self.first += sids[: self.FIRST - self.n]
        self.n += n
        if type(times) is repeat:
            times = repeat(0.0)
        else:
            times = list(times)
            if None not in times:
                self.timed = True
            elif times.count(None) < n:
                self.timed = True
                times = [0.0 if t is None else t for t in times]
            else:
                times = repeat(0.0)
        for p, t, v in zip(map(pts.__getitem__, sids), times, values):
            p.add(t, v)


def read_series(path: str) -> tuple[MetricSet, SeriesSink] | None:
    """A saved exposition as its series (:class:`SeriesSink`) beside a :class:`MetricSet` holding its
    families and warnings (no samples), read in blocks; None when the plain pass refuses the file or
    it holds nothing (then read it whole)."""
    ms = MetricSet(path=path)
    sink = SeriesSink()
    cm, size = open_file(path)
    with cm as f:
        if not paused_gc(stream_into, f, size, sink, ms):
            return None
    return ms, sink
