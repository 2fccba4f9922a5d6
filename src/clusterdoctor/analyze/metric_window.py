"""Metric series over one time window, whatever their origin, and the observation kinds they fill.

A :class:`MetricWindow` holds series by metric name. It is built from a single exposition (a
saved ``/metrics`` dump: one untimed point per series, counters since process start), from
several timed scrapes (direct ``--scrape``), or from Prometheus range queries. Rules ask it the
same questions in every case — the latest value, the increase of a counter over the window,
histograms of the window (bucket increases) or per step — and :attr:`MetricWindow.is_snapshot`
tells them whether "over the window" means "since the process started".

:func:`observations_from_metrics` turns any of these into the observation kinds the control-plane
rules require (``metrics``, ``etcd_metrics``, ``scheduler_metrics``, ``apiserver_metrics``,
``kubelet_metrics``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.analyze.quantile import merge_histograms, quantile_of
from clusterdoctor.analyze.rates import counter_increase
from clusterdoctor.model import Event, Histogram, Series, SourceRef

__all__ = [
    "COMPONENT_PREFIXES",
    "MetricWindow",
    "detect_kube_version",
    "merge_metric_observations",
    "metric_events",
    "observations_from_metrics",
]

# Which metric names reveal which component (kind -> name prefixes or exact names).
COMPONENT_PREFIXES: dict[str, tuple[str, ...]] = {
    "etcd_metrics": ("etcd_server_", "etcd_disk_", "etcd_network_peer_", "etcd_mvcc_db_"),
    "scheduler_metrics": ("scheduler_",),
    "apiserver_metrics": ("apiserver_request_duration_seconds", "apiserver_request_total"),
    "kubelet_metrics": ("kubelet_",),
}


def _key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


@dataclass
class MetricWindow:
    """Series by metric name over ``[start, end]`` (seconds; None for an untimed dump)."""

    series: dict[str, list[Series]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    start: float | None = None
    end: float | None = None
    source: str = ""
    warnings: list[str] = field(default_factory=list)
    # Instances (``instance`` label values) read from an untimed dump: each of their series holds one
    # value since the process started, even when the window also holds timed series of other targets.
    snapshot_instances: set[str] = field(default_factory=set)
    instance_sources: dict[str, str] = field(default_factory=dict)  # instance -> the file it came from
    # What a dump's own series say it is (``etcd:<member hex ID>``, ``node:<nodename>``,
    # ``kubelet:<node>``), by instance; see :meth:`canonical`.
    instance_identity: dict[str, str] = field(default_factory=dict)
    name_sources: dict[str, str] = field(default_factory=dict)  # metric name -> files (query answers)
    _canon: dict[str, str] | None = field(default=None, repr=False, compare=False)
    _earlier: dict[str, list[str]] | None = field(default=None, repr=False, compare=False)

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_metricset(cls, ms: Any, time: float | None = None, source: str | None = None) -> MetricWindow:
        """One exposition (``prom_text.MetricSet``); ``time`` stamps untimed samples."""
        return cls.from_metricsets([(time, ms)], source=source)

    @classmethod
    def from_metricsets(
        cls, timed: Sequence[tuple[float | None, Any]], source: str | None = None
    ) -> MetricWindow:
        """Several expositions of the same targets, ``(time, MetricSet)`` in time order."""
        w = cls(source=source or "")
        index: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = {}
        times: list[float] = []
        for t, ms in timed:
            if t is not None:
                times.append(t)
            for fam in ms.families.values():
                w.types.setdefault(fam.name, fam.type)
            w.warnings.extend(ms.warnings)
            for s in ms.samples:
                k = (s.name, tuple(sorted(s.labels)))
                ser = index.get(k)
                if ser is None:
                    ser = index[k] = Series(s.name, dict(s.labels), [])
                    w.series.setdefault(s.name, []).append(ser)
                ts = s.timestamp if s.timestamp is not None else t
                ser.points.append((ts if ts is not None else 0.0, s.value))
        if times:
            w.start, w.end = min(times), max(times)
        return w

    @classmethod
    def from_series(
        cls,
        series: Iterable[Series],
        start: float | None = None,
        end: float | None = None,
        source: str = "",
    ) -> MetricWindow:
        """Series from Prometheus range queries (points sorted by time)."""
        w = cls(start=start, end=end, source=source)
        for s in series:
            w.series.setdefault(s.name, []).append(s)
        return w

    def merge(self, other: MetricWindow) -> MetricWindow:
        """A window holding both windows' series (e.g. several scraped components).

        Timed series with the same name and labels in both (two range queries of one target) become
        one series with the points of both, in time order; dump series never collide (each dump's
        series carry their own ``instance``)."""
        out = MetricWindow(
            {k: list(v) for k, v in self.series.items()},
            dict(self.types),
            _min(self.start, other.start),
            _max(self.end, other.end),
            ", ".join(x for x in (self.source, other.source) if x),
            self.warnings + other.warnings,
            self.snapshot_instances | other.snapshot_instances,
            {**self.instance_sources, **other.instance_sources},
            {**self.instance_identity, **other.instance_identity},
            {
                k: ", ".join(
                    dict.fromkeys(x for x in (self.name_sources.get(k), other.name_sources.get(k)) if x)
                )
                for k in self.name_sources.keys() | other.name_sources.keys()
            },
        )
        for name, lst in other.series.items():
            mine = out.series.setdefault(name, [])
            index = {_key(s.labels): i for i, s in enumerate(mine)} if mine else {}
            for s in lst:
                i = index.get(_key(s.labels))
                if i is None or s.labels.get("instance", "") in out.snapshot_instances:
                    mine.append(s)
                    continue
                merged = dict(mine[i].points)
                merged.update(s.points)
                mine[i] = Series(s.name, dict(s.labels), sorted(merged.items()))
        for k, v in other.types.items():
            out.types.setdefault(k, v)
        return out

    # -- questions -----------------------------------------------------------------------------
    @property
    def is_snapshot(self) -> bool:
        """True when no series has two points: counters and histograms are since process start."""
        return all(len(s.points) < 2 for lst in self.series.values() for s in lst)

    def snapshot_for(self, labels: dict[str, str]) -> bool:
        """Whether the series with these labels hold values since their process started (a dump)
        rather than points over the window — per target, as one window may hold both."""
        return labels.get("instance", "") in self.snapshot_instances or self.is_snapshot

    def span_for(self, labels: dict[str, str]) -> str:
        """``since the process started`` or ``over the window``, for the target of ``labels``."""
        return "since the process started" if self.snapshot_for(labels) else "over the window"

    def rename_source(self, old: str, new: str) -> None:
        """Name the file ``old`` (a temporary extraction path) as ``new`` (``bundle:member``), in
        place: its dump's ``instance`` label, sources and identity. For a freshly loaded window."""
        for lst in self.series.values():
            for s in lst:
                if s.labels.get("instance") == old:
                    s.labels["instance"] = new
        self.snapshot_instances = {new if i == old else i for i in self.snapshot_instances}
        self.instance_sources = {
            (new if k == old else k): (new if v == old else v) for k, v in self.instance_sources.items()
        }
        self.instance_identity = {(new if k == old else k): v for k, v in self.instance_identity.items()}
        self.name_sources = {k: (new if v == old else v) for k, v in self.name_sources.items()}
        self.source = (
            ", ".join(new if x == old else x for x in self.source.split(", ")) if self.source else ""
        )
        self._canon = self._earlier = None

    def canonical(self, instance: str) -> str:
        """The target an ``instance`` label stands for: dumps of one target taken at different times
        (before/after) are one target. A dump that names itself (``etcd_server_id``,
        ``node_uname_info``, ``kubelet_node_name``) maps to that name (``etcd:8e9e05c52164694d``);
        dumps that do not, of the same metrics, whose counters never decrease from one to the other
        and whose ``process_start_time_seconds`` agree, are one process read twice and map to the
        latest dump. Anything else is itself."""
        self._group()
        assert self._canon is not None
        return self._canon.get(instance, instance)

    def _group(self) -> None:
        if self._canon is None:
            from clusterdoctor.analyze.metric_groups import group_dumps

            self._canon, self._earlier = group_dumps(self)

    def earlier(self, instance: str) -> list[str]:
        """Dumps of the same process as ``instance`` taken before it, earliest first (see
        :meth:`canonical`). The questions below (:meth:`select` and all that use it) answer from the
        latest dump of a process only — its counters hold everything the earlier ones do — so a
        before/after pair is judged once; rules name the earlier dumps as evidence."""
        self._group()
        assert self._earlier is not None
        return list(self._earlier.get(instance, []))

    def superseded(self) -> set[str]:
        """Instances of dumps that a later dump of the same process supersedes."""
        self._group()
        assert self._earlier is not None
        return {i for lst in self._earlier.values() for i in lst}

    def subject_for(self, instance: str, default: str = "") -> str:
        """What a finding about the target behind ``instance`` names: ``node worker-1`` (a node
        exporter dump), ``kubelet on worker-1``, the etcd member ID, the latest dump's path for
        dumps that do not name their target, else the instance label itself (``host:port``)."""
        if not instance:
            return default
        canon = self.canonical(instance)
        kind, _, name = canon.partition(":")
        if name and kind in _IDENTITY_WORDS and canon in self.instance_identity.values():
            return _IDENTITY_WORDS[kind].format(name)
        return canon

    def instances_of(self, canonical: str) -> list[str]:
        """Every ``instance`` label that stands for ``canonical`` (see :meth:`canonical`)."""
        insts = {s.labels.get("instance", "") for lst in self.series.values() for s in lst}
        return sorted(i for i in insts if self.canonical(i) == canonical)

    def source_for(self, labels: dict[str, str], name: str = "") -> str:
        """The file (or URL) the series of this target (or, for query answers, of metric ``name``)
        came from; the whole window's sources otherwise."""
        return (
            self.instance_sources.get(labels.get("instance", ""), "")
            or (self.name_sources.get(name, "") if name else "")
            or self.source
        )

    def names(self) -> set[str]:
        return set(self.series)

    def has(self, name: str) -> bool:
        """Whether ``name`` (or histogram ``name`` via ``name_bucket``) has series."""
        return bool(self.series.get(name) or self.series.get(name + "_bucket"))

    def first_present(self, *names: str) -> str | None:
        """The first of ``names`` with series (version-dependent metric names)."""
        for n in names:
            if self.has(n):
                return n
        return None

    def select(self, name: str, include_superseded: bool = False, **match: str) -> list[Series]:
        """Series ``name`` whose labels include every ``match`` pair (of the latest dump of each
        process unless ``include_superseded``: see :meth:`earlier`)."""
        lst = self.series.get(name, [])
        if self.snapshot_instances and not include_superseded:
            old = self.superseded()
            if old:
                lst = [s for s in lst if s.labels.get("instance", "") not in old]
        if not match:
            return list(lst)
        want = match.items()
        return [s for s in lst if want <= s.labels.items()]

    def histogram_of(self, name: str, instance: str) -> Histogram | None:
        """The histogram ``name`` of one dump (summed over its other labels), superseded or not."""
        parts = [h for h in self._histograms(name, True, instance=instance) if h.buckets]
        return merge_histograms(parts, name) if parts else None

    def value_of(self, name: str, instance: str) -> float | None:
        """The sum of counter/gauge ``name`` in one dump (superseded or not)."""
        vals = [s.points[-1][1] for s in self.select(name, True, instance=instance) if s.points]
        return sum(vals) if vals else None

    def latest(self, name: str, **match: str) -> list[tuple[dict[str, str], float, float]]:
        """``(labels, last value, its time)`` of each series ``name``."""
        out = []
        for s in self.select(name, **match):
            if s.points:
                t, v = s.points[-1]
                out.append((s.labels, v, t))
        return out

    def increase(self, name: str, **match: str) -> list[tuple[dict[str, str], float, int]]:
        """``(labels, increase, resets)`` of counter ``name`` over the window.

        For a snapshot the increase is the value itself (everything since the process started);
        in a timed window a series with a single point has no increase and is left out.
        """
        out = []
        snapshot = self.is_snapshot
        first_seen = None if snapshot else self._first_seen_by_instance()
        for s in self.select(name, **match):
            if not s.points:
                continue
            if not snapshot and s.labels.get("instance", "") in self.snapshot_instances:
                out.append((s.labels, s.points[-1][1], 0))  # a dump beside timed series: since start
                continue
            if first_seen is not None:
                t_inst = first_seen.get(s.labels.get("instance", ""))
                if t_inst is not None and s.points[0][0] > t_inst:
                    # The series appeared after its target was first read: client libraries create
                    # labelled counters on first use, so it started from zero inside the window.
                    inc, resets = counter_increase([(t_inst, 0.0), *s.points])
                    out.append((s.labels, inc, resets))
                    continue
            if len(s.points) == 1:
                if snapshot:
                    out.append((s.labels, s.points[0][1], 0))
                # in a timed window one point gives no increase (PromQL returns nothing)
            else:
                inc, resets = counter_increase(s.points)
                out.append((s.labels, inc, resets))
        return out

    def _first_seen_by_instance(self) -> dict[str, float]:
        """Earliest point time per ``instance`` label (when each target was first read)."""
        out: dict[str, float] = {}
        for lst in self.series.values():
            for s in lst:
                if s.points:
                    inst = s.labels.get("instance", "")
                    t = s.points[0][0]
                    if inst not in out or t < out[inst]:
                        out[inst] = t
        return out

    def histograms(self, name: str, **match: str) -> list[Histogram]:
        """Histograms ``name`` of the window, one per label set without ``le``.

        Bucket counts are increases over the window (counter resets handled), or the cumulative
        counts of a snapshot. Layout read from the ``le`` labels present.
        """
        return self._histograms(name, False, **match)

    def _histograms(self, name: str, include_superseded: bool, **match: str) -> list[Histogram]:
        groups: dict[tuple[tuple[str, str], ...], Histogram] = {}
        min_points = 1 if self.is_snapshot else 2
        for s in self.select(name + "_bucket", include_superseded, **match):
            le = s.labels.get("le")
            if le is None:
                continue
            if len(s.points) < min_points and s.labels.get("instance", "") not in self.snapshot_instances:
                continue
            try:
                bound = float(le)
            except ValueError:
                continue
            rest = {k: v for k, v in s.labels.items() if k != "le"}
            k = _key(rest)
            h = groups.get(k)
            if h is None:
                h = groups[k] = Histogram(name, rest, [], timestamp=s.points[-1][0])
            h.buckets.append((bound, self._window_value(s)))
        for suffix, attr in (("_sum", "sum"), ("_count", "count")):
            for s in self.select(name + suffix, include_superseded, **match):
                h = groups.get(_key(s.labels))
                if h is not None and s.points:
                    setattr(h, attr, self._window_value(s))
        for h in groups.values():
            h.buckets.sort()
        return list(groups.values())

    def merged_histogram(
        self, name: str, by: Sequence[str] = (), **match: str
    ) -> dict[tuple[str, ...], Histogram]:
        """Histograms summed by the labels ``by`` (PromQL ``sum by (by…, le)``)."""
        parts: dict[tuple[str, ...], list[Histogram]] = {}
        for h in self.histograms(name, **match):
            parts.setdefault(tuple(h.labels.get(b, "") for b in by), []).append(h)
        out = {}
        for k, hs in parts.items():
            m = merge_histograms(hs, name)
            if m is not None:
                out[k] = m
        return out

    def histogram_steps(self, name: str, **match: str) -> list[tuple[float, Histogram]]:
        """Per step, the histogram of observations made since the previous step (summed over
        every label set): the data a latency heatmap or a "when did p99 cross X" needs."""
        by_t: dict[float, dict[float, float]] = {}
        for s in self.select(name + "_bucket", **match):
            try:
                bound = float(s.labels.get("le", "nan"))
            except ValueError:
                continue
            if bound != bound:
                continue
            prev: float | None = None
            for t, v in s.points:
                if prev is not None and v == v:
                    inc = v if v < prev else v - prev
                    row = by_t.setdefault(t, {})
                    row[bound] = row.get(bound, 0.0) + inc
                if v == v:
                    prev = v
        out = []
        for t in sorted(by_t):
            row = by_t[t]
            out.append((t, Histogram(name, dict(match), sorted(row.items()), timestamp=t)))
        return out

    def quantile_steps(self, name: str, q: float, **match: str) -> list[tuple[float, float]]:
        """``(time, φ-quantile)`` per step (NaN where nothing was observed)."""
        return [(t, quantile_of(q, h.buckets).value) for t, h in self.histogram_steps(name, **match)]

    def _window_value(self, s: Series) -> float:
        if len(s.points) == 1 or s.labels.get("instance", "") in self.snapshot_instances:
            return s.points[-1][1]
        return counter_increase(s.points)[0]


_IDENTITY_WORDS = {"etcd": "etcd member {}", "node": "node {}", "kubelet": "kubelet on {}"}


def histogram_between(before: Histogram, after: Histogram) -> Histogram:
    """The observations made between two dumps of one histogram (bucket counts subtracted)."""
    prev = dict(before.buckets)
    buckets = [(b, max(0.0, c - prev.get(b, 0.0))) for b, c in after.buckets]
    count = None if after.count is None or before.count is None else max(0.0, after.count - before.count)
    return Histogram(after.name, dict(after.labels), buckets, count=count)


def earlier_dump_evidence(
    w: MetricWindow, instance: str, histogram: str = "", counter: str = "", what: str = ""
) -> list[Any]:
    """Evidence lines for the earlier dumps of the process behind ``instance`` (see
    :meth:`MetricWindow.earlier`): each earlier dump's value of ``counter``, or its ``histogram``
    p99 and count, and what was observed between it and the latest dump."""
    from clusterdoctor.model import Evidence

    out: list[Any] = []
    earlier = w.earlier(instance)
    if not earlier:
        return out
    label = what or histogram or counter
    if histogram:
        last = w.histogram_of(histogram, instance)
        for e in earlier:
            h = w.histogram_of(histogram, e)
            if h is None or not h.buckets:
                continue
            n = h.buckets[-1][1]
            q = quantile_of(0.99, h.buckets).value
            out.append(
                Evidence(
                    f"earlier dump of the same process: {label} p99 over {n:g} observations",
                    round(q, 6) if q == q else None,
                    unit="s",
                    source=w.source_for({"instance": e}) or None,
                )
            )
            if last is not None and last.buckets:
                mid = histogram_between(h, last)
                m = mid.buckets[-1][1] if mid.buckets else 0.0
                qm = quantile_of(0.99, mid.buckets).value if m else float("nan")
                out.append(
                    Evidence(
                        f"between that dump and the latest: {label} p99 over {m:g} observations",
                        round(qm, 6) if qm == qm else None,
                        unit="s",
                    )
                )
    if counter:
        for e in earlier:
            v = w.value_of(counter, e)
            if v is not None:
                out.append(
                    Evidence(
                        f"earlier dump of the same process: {label}",
                        v,
                        source=w.source_for({"instance": e}) or None,
                    )
                )
    return out


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def detect_kube_version(w: MetricWindow) -> tuple[int, int] | None:
    """Kubernetes ``(major, minor)`` from ``kubernetes_build_info`` (the lowest when several)."""
    found = []
    for labels, _, _ in w.latest("kubernetes_build_info"):
        m = _VERSION_RE.match(labels.get("git_version", ""))
        if m:
            found.append((int(m.group(1)), int(m.group(2))))
        elif labels.get("major", "").isdigit():
            minor = re.match(r"\d+", labels.get("minor", ""))
            if minor:
                found.append((int(labels["major"]), int(minor.group(0))))
    return min(found) if found else None


def observations_from_metrics(data: Any, source: str | None = None) -> dict[str, MetricWindow]:
    """Observation kinds filled by metrics: ``{"metrics": w, "etcd_metrics": w, …}``.

    ``data``: a ``prom_text.MetricSet`` (a dump), a sequence of ``(time, MetricSet)`` (scrapes),
    a :class:`MetricWindow`, an iterable of :class:`~clusterdoctor.model.Series`, or the dict
    ``prom_api.collect_for_rules`` returns. Component kinds are present only when that
    component's metrics are (each maps to the same window).
    """
    w = as_window(data, source)
    out: dict[str, MetricWindow] = {}
    if not w.series:
        return out
    out["metrics"] = w
    names = w.names()
    for kind, prefixes in COMPONENT_PREFIXES.items():
        if any(n.startswith(prefixes) for n in names):
            out[kind] = w
    return out


def as_window(data: Any, source: str | None = None) -> MetricWindow:
    """Coerce the accepted metric inputs (see :func:`observations_from_metrics`) to a window."""
    if isinstance(data, MetricWindow):
        return data
    if isinstance(data, dict) and "window" in data and isinstance(data["window"], MetricWindow):
        return data["window"]
    if hasattr(data, "samples") and hasattr(data, "families"):
        return MetricWindow.from_metricset(data, source=source or (getattr(data, "path", None) or ""))
    if isinstance(data, dict):
        series = [s for v in data.values() if isinstance(v, list) for s in v if isinstance(s, Series)]
        return MetricWindow.from_series(series, source=source or "")
    items = list(data)
    if items and all(isinstance(x, Series) for x in items):
        return MetricWindow.from_series(items, source=source or "")
    if items and all(isinstance(x, tuple) and len(x) == 2 for x in items):
        return MetricWindow.from_metricsets(items, source=source)
    raise TypeError(f"cannot read metrics from {type(data).__name__}")


# Metric changes that mark a step of the control-plane cascade, as Event kinds shared with
# clusterdoctor.analyze.correlate (log events use the same kinds).
_COUNTER_EVENTS = (
    ("etcd_server_leader_changes_seen_total", "etcd.leader_changed", "etcd leader changed"),
    ("etcd_server_heartbeat_send_failures_total", "etcd.heartbeat_slow", "etcd heartbeat not sent on time"),
    ("etcd_server_slow_apply_total", "etcd.slow_apply", "etcd apply took longer than 100 ms"),
)
_LATENCY_EVENTS = (
    ("etcd_disk_wal_fsync_duration_seconds", 0.010, "etcd.wal_fsync_slow", "etcd WAL fsync p99 above 10 ms"),
    (
        "etcd_disk_backend_commit_duration_seconds",
        0.025,
        "etcd.backend_commit_slow",
        "etcd backend commit p99 above 25 ms",
    ),
    ("apiserver_request_duration_seconds", 1.0, "apiserver.slow", "apiserver request p99 above 1 s"),
    (
        "scheduler_scheduling_attempt_duration_seconds",
        0.1,
        "scheduler.slow",
        "scheduling attempt p99 above 100 ms",
    ),
)


def metric_events(w: MetricWindow) -> list[Event]:
    """Timed events derived from a window with time (empty for a snapshot).

    Counter increases (leader changes, heartbeat failures, slow applies) become one event per
    step they grew in, kinds ``etcd.leader_changed``/``etcd.heartbeat_slow``/``etcd.slow_apply``;
    latency p99 crossing the documented thresholds becomes ``etcd.wal_fsync_slow``,
    ``etcd.backend_commit_slow``, ``apiserver.slow``, ``scheduler.slow`` at each step above it.
    """
    if w.is_snapshot:
        return []
    src = SourceRef("metrics", w.source or "metrics")
    out: list[Event] = []
    for name, kind, what in _COUNTER_EVENTS:
        for s in w.select(name):
            prev = None
            for t, v in s.points:
                if prev is not None and v == v and v != prev:
                    inc = v if v < prev else v - prev
                    if inc > 0:
                        attrs = tuple(sorted({**s.labels, "increase": f"{inc:g}"}.items()))
                        out.append(Event(t, kind, f"{what} ({name} +{inc:g})", src, attrs))
                if v == v:
                    prev = v
    for name, thr, kind, what in _LATENCY_EVENTS:
        for t, v in w.quantile_steps(name, 0.99):
            if v == v and v > thr:
                out.append(Event(t, kind, f"{what}: {v:.4g} s", src, (("p99_s", f"{v:.6g}"),)))
    out.sort(key=lambda e: (e.time or 0.0, e.kind))
    return out


def merge_metric_observations(existing: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Add ``new`` metric observations to ``existing`` (in place), merging windows of the same kind.

    Several dumps (a scheduler dump and an etcd dump) each give a ``metrics`` window; they are
    merged rather than overwritten. Component kinds point at the merged ``metrics`` window.
    """
    for kind, value in new.items():
        old = existing.get(kind)
        if isinstance(old, MetricWindow) and isinstance(value, MetricWindow) and old is not value:
            existing[kind] = old.merge(value)
        else:
            existing[kind] = value
    merged = existing.get("metrics")
    if isinstance(merged, MetricWindow):
        for kind in COMPONENT_PREFIXES:
            if isinstance(existing.get(kind), MetricWindow):
                existing[kind] = merged
    return existing
