"""What a Prometheus exposition holds once read: :class:`PromSample` rows, metric :class:`Family`
declarations, OpenMetrics :class:`Exemplar` records, the :class:`MetricSet` of one dump with its
lookups, and the grouping of ``_bucket``/``_sum``/``_count`` rows into
:class:`clusterdoctor.model.Histogram` objects (:func:`histograms_from_samples`).

The parser that builds these is :mod:`clusterdoctor.observe.control.prom_text` (which re-exports
every name here). Plain classes, not dataclasses, and :mod:`clusterdoctor.model` imported only where
histograms are built: a process that reads one dump pays for what it uses (issue 26).
"""

from __future__ import annotations

from operator import itemgetter

TYPE_CHECKING = False  # typing is not imported at run time: ~5-10 ms of a fresh process (issue 26)

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

    from clusterdoctor.model import Histogram

Labels = tuple[tuple[str, str], ...]


class PromSample(tuple):  # type: ignore[type-arg]
    """One exposed sample. ``labels`` keeps the order of the exposition; ``timestamp`` in seconds.

    Fields: ``name: str``, ``labels: Labels``, ``value: float``, ``timestamp: float | None``.
    A named tuple written out (``collections.namedtuple`` would import ``collections``, ~1.5-5 ms
    of a fresh process, issue 26): the same fields, ``_fields``, ``_make``, ``_replace``,
    ``_asdict``, repr and pickling."""

    __slots__ = ()
    _fields = ("name", "labels", "value", "timestamp")

    def __new__(cls, name: str, labels: Labels, value: float, timestamp: float | None) -> PromSample:
        return tuple.__new__(cls, (name, labels, value, timestamp))

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> PromSample:
        t = tuple.__new__(cls, iterable)
        if len(t) != 4:
            raise TypeError(f"Expected 4 arguments, got {len(t)}")
        return t

    def _replace(self, **kw: Any) -> PromSample:
        out = self._make(map(kw.pop, self._fields, self))
        if kw:
            raise ValueError(f"Got unexpected field names: {list(kw)!r}")
        return out

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._fields, self))

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        name, labels, value, timestamp = self
        return f"PromSample(name={name!r}, labels={labels!r}, value={value!r}, timestamp={timestamp!r})"

    name = property(itemgetter(0), doc="the sample name")
    labels = property(itemgetter(1), doc="label pairs in exposition order")
    value = property(itemgetter(2), doc="the value")
    timestamp = property(itemgetter(3), doc="seconds, or None")


class _Record:
    """``__init__`` by field order with defaults, ``==`` by fields, ``repr`` as a dataclass has."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _defaults: tuple[Any, ...] = ()

    def __init__(self, *args: Any, **kw: Any) -> None:
        names = self._fields
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes at most {len(names)} arguments")
        vals = dict(zip(names[len(names) - len(self._defaults) :], self._defaults))
        vals.update(zip(names, args))
        for k, v in kw.items():
            if k not in names or k in dict(zip(names, args)):
                raise TypeError(f"{type(self).__name__}() got an unexpected or repeated argument {k!r}")
            vals[k] = v
        for k in names:
            if k not in vals:
                raise TypeError(f"{type(self).__name__}() missing argument {k!r}")
            object.__setattr__(self, k, vals[k])

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in self._fields)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{type(self).__name__}({body})"


class Exemplar(_Record):
    """An OpenMetrics exemplar attached to a sample (``# {trace_id="…"} 0.5 1700000000.1``)."""

    __slots__ = ("labels", "value", "timestamp")
    _fields = ("labels", "value", "timestamp")
    _defaults = (None,)
    labels: Labels
    value: float
    timestamp: float | None

    def __setattr__(self, k: str, v: Any) -> None:
        raise AttributeError(f"cannot assign to field {k!r}")  # frozen

    def __hash__(self) -> int:
        return hash(self._key())


class Family(_Record):
    """A metric family: its name (without ``_bucket``/``_sum``/… suffixes), TYPE, HELP and UNIT."""

    __slots__ = ("name", "type", "help", "unit")
    _fields = ("name", "type", "help", "unit")
    _defaults = ("untyped", None, None)
    name: str
    type: str
    help: str | None
    unit: str | None

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __init__(
        self, name: str, type: str = "untyped", help: str | None = None, unit: str | None = None
    ) -> None:  # one per family of a dump: spelled out, the generic one is 3x slower
        self.name, self.type, self.help, self.unit = name, type, help, unit


# Suffixes of the series that belong to a family, by family type.
_SUFFIXES = {
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("_sum", "_count", "_created", ""),
    "counter": ("_total", "_created", ""),
    "info": ("_info",),
}
_ANY_SUFFIX = ("_bucket", "_sum", "_count", "_total", "_created", "_gsum", "_gcount", "_info")


def _warning_list() -> list[str]:
    from clusterdoctor.observe.warning_list import WarningList

    return WarningList(100)


class MetricSet:
    """Everything read from one exposition.

    ``samples`` in file order; ``families`` by family name; ``exemplars`` by sample index;
    ``warnings`` name the line of every skipped or suspicious line.
    """

    __slots__ = (
        "_samples",
        "columns",
        "families",
        "exemplars",
        "warnings",
        "path",
        "openmetrics",
        "_by_name",
    )
    _FIELDS = ("samples", "families", "exemplars", "warnings", "path", "openmetrics")

    def __init__(
        self,
        samples: list[PromSample] | None = None,
        families: dict[str, Family] | None = None,
        exemplars: dict[int, Exemplar] | None = None,
        warnings: list[str] | None = None,
        path: str | None = None,
        openmetrics: bool = False,
    ) -> None:
        self._samples: list[PromSample] | None = [] if samples is None else samples
        # a file read in blocks (prom_stream.ColumnSink): the samples as columns until ``samples`` is read
        self.columns: Any = None
        self.families: dict[str, Family] = {} if families is None else families
        self.exemplars: dict[int, Exemplar] = {} if exemplars is None else exemplars
        # bounded (observe.warning_list.WarningList): one warning per bad line, at most 100 kept, the rest counted
        self.warnings: list[str] = _warning_list() if warnings is None else warnings
        self.path = path
        self.openmetrics = openmetrics
        self._by_name: dict[str, list[PromSample]] | None = None

    @property
    def samples(self) -> list[PromSample]:
        """Every sample in file order (built from :attr:`columns` on first use)."""
        if self._samples is None:
            self._samples = self.columns.samples()
            self.columns = None
        return self._samples

    @samples.setter
    def samples(self, rows: list[PromSample]) -> None:
        self._samples, self.columns = rows, None

    def __len__(self) -> int:
        """The number of samples (without building them)."""
        return len(self._samples) if self._samples is not None else len(self.columns)

    def __bool__(self) -> bool:
        return True  # a MetricSet is true even when empty, as before it had a length

    def __eq__(self, other: object) -> bool:
        if type(other) is not MetricSet:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self._FIELDS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "MetricSet(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS) + ")"

    # -- lookups -------------------------------------------------------------------------------
    def by_name(self) -> dict[str, list[PromSample]]:
        """Samples grouped by sample name (built once, on first use)."""
        if self._by_name is None:
            idx: dict[str, list[PromSample]] = {}
            for s in self.samples:
                lst = idx.get(s.name)
                if lst is None:
                    idx[s.name] = [s]
                else:
                    lst.append(s)
            self._by_name = idx
        return self._by_name

    def names(self) -> set[str]:
        """Every sample name present."""
        return set(self.by_name())

    def has(self, name: str) -> bool:
        """Whether samples named ``name`` (or a histogram/summary family ``name``) are present."""
        idx = self.by_name()
        return name in idx or f"{name}_bucket" in idx or f"{name}_count" in idx

    def get(self, name: str, **match: str) -> list[PromSample]:
        """Samples named ``name`` whose labels include every ``match`` pair."""
        rows = self.by_name().get(name, [])
        if not match:
            return list(rows)
        want = match.items()
        return [s for s in rows if want <= dict(s.labels).items()]

    def value(self, name: str, **match: str) -> float | None:
        """The value of the single sample ``name{match}``; None when absent or ambiguous."""
        rows = self.get(name, **match)
        return rows[0].value if len(rows) == 1 else None

    def family_of(self, sample_name: str) -> Family | None:
        """The family a sample name belongs to (``x_bucket`` → family ``x``), if declared."""
        fam = self.families.get(sample_name)
        if fam is not None:
            return fam
        for suf in _ANY_SUFFIX:
            if sample_name.endswith(suf):
                fam = self.families.get(sample_name[: -len(suf)])
                if fam is not None and suf in _SUFFIXES.get(fam.type, (suf,)):
                    return fam
        return None

    def type_of(self, sample_name: str) -> str:
        """The declared type of the family of ``sample_name`` (``untyped`` when undeclared)."""
        fam = self.family_of(sample_name)
        return fam.type if fam is not None else "untyped"

    def histogram_names(self) -> list[str]:
        """Base names that have ``_bucket`` series with an ``le`` label."""
        out = []
        for name, rows in self.by_name().items():
            if name.endswith("_bucket") and rows and any(k == "le" for k, _ in rows[0].labels):
                out.append(name[:-7])
        return sorted(out)

    def histograms(self, name: str) -> list[Histogram]:
        """Histograms ``name`` grouped by their labels without ``le``; buckets sorted by bound.

        Bucket layouts are taken from the data. A bucket whose ``le`` is not a number is skipped
        with a warning added to :attr:`warnings`.
        """
        return histograms_from_samples(
            name,
            self.by_name().get(f"{name}_bucket", ()),
            self.by_name().get(f"{name}_sum", ()),
            self.by_name().get(f"{name}_count", ()),
            self.warnings,
        )

    def summaries(
        self, name: str
    ) -> list[tuple[dict[str, str], dict[float, float], float | None, float | None]]:
        """Summary ``name`` grouped by labels: ``(labels, {quantile: value}, sum, count)``."""
        groups: dict[Labels, tuple[dict[str, str], dict[float, float], list[float | None]]] = {}
        for s in self.by_name().get(name, ()):
            q = None
            rest = []
            for k, v in s.labels:
                if k == "quantile":
                    q = v
                else:
                    rest.append((k, v))
            if q is None:
                continue
            key = tuple(sorted(rest))
            g = groups.setdefault(key, (dict(rest), {}, [None, None]))
            try:
                g[1][float(q)] = s.value
            except ValueError:
                continue
        for suffix, pos in (("_sum", 0), ("_count", 1)):
            for s in self.by_name().get(name + suffix, ()):
                key = tuple(sorted(s.labels))
                if key in groups:
                    groups[key][2][pos] = s.value
        return [(lab, qs, extra[0], extra[1]) for lab, qs, extra in groups.values()]

    def normalized(self) -> list[tuple[str, tuple[tuple[str, str], ...], float | str, float | None]]:
        """Samples as comparable tuples (sorted labels, NaN as the string ``"NaN"``).

        Used to check this parser against other parsers (tests and benchmarks).
        """
        out = []
        for s in self.samples:
            v: float | str = "NaN" if s.value != s.value else s.value
            out.append((s.name, tuple(sorted(s.labels)), v, s.timestamp))
        return out


def histograms_from_samples(
    name: str,
    buckets: Iterable[PromSample],
    sums: Iterable[PromSample],
    counts: Iterable[PromSample],
    warnings: list[str] | None = None,
) -> list[Histogram]:
    """Group bucket/sum/count samples of histogram ``name`` by their labels without ``le``."""
    from clusterdoctor.model import Histogram

    groups: dict[Labels, Histogram] = {}
    for s in buckets:
        le = None
        rest = []
        for k, v in s.labels:
            if k == "le":
                le = v
            else:
                rest.append((k, v))
        if le is None:
            continue
        try:
            bound = float(le)
        except ValueError:
            if warnings is not None:
                warnings.append(f"{name}: bucket with non-numeric le={le!r} skipped")
            continue
        key = tuple(sorted(rest))
        h = groups.get(key)
        if h is None:
            h = groups[key] = Histogram(name=name, labels=dict(rest), buckets=[], timestamp=s.timestamp)
        h.buckets.append((bound, s.value))
        if s.timestamp is not None and (h.timestamp is None or s.timestamp > h.timestamp):
            h.timestamp = s.timestamp
    for rows, attr in ((sums, "sum"), (counts, "count")):
        for s in rows:
            h = groups.get(tuple(sorted(s.labels)))
            if h is not None:
                setattr(h, attr, s.value)
    for h in groups.values():
        h.buckets.sort(key=lambda b: b[0])
    return list(groups.values())


def iter_series_keys(ms: MetricSet) -> Iterator[tuple[str, Labels]]:
    """``(name, sorted labels)`` of every sample, the identity of a series across scrapes."""
    for s in ms.samples:
        yield s.name, tuple(sorted(s.labels))
