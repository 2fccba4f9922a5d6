"""The agent's event sources: logs and the kernel log read incrementally, events kept for a window.

Each source is a callable the agent runs once per diagnosis round (``fn() -> {kind: value}``):

- :class:`LogFileSource` — a service log (etcd, kubelet, containerd …): only the lines written since
  the last round are parsed (:class:`~clusterdoctor.serve.agent_tail.FileTail`); the events are kept
  while they are younger than the window, then dropped, so a finding they raised goes away and its
  alert resolves. A file that is not a log (a Pod list, Flink or Kafka data, RDMA counters) is a
  snapshot: read whole every round, as before.
- :class:`KernelLogSource` — NVIDIA driver lines of the kernel log (``/dev/kmsg`` or a fallback,
  :func:`~clusterdoctor.serve.agent_tail.open_kernel_log`), kept for the window and read into one
  GPU report (Xid, SXid, fallen off the bus) per round.

An event's age is its own time when the line has one, else the time the agent read it. Both add
``event_counts`` (new events by kind, for ``clusterdoctor_events_total``) and ``lines_truncated``.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
from collections.abc import Callable
from typing import Any

from clusterdoctor.serve.agent_tail import FileTail, open_kernel_log

__all__ = ["DEFAULT_WINDOW_S", "KernelLogSource", "LogFileSource", "line_time"]

DEFAULT_WINDOW_S = 3600.0  # --event-window: an hour (an Xid stays visible across two 30 m on-call checks)
MAX_KEPT = 20_000  # events (or kernel lines) kept per source, the newest
_ISO = re.compile(rb"^\s*(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)")
_SYSLOG = re.compile(rb"^([A-Z][a-z]{2})\s+(\d{1,2}) (\d\d):(\d\d):(\d\d)\s")
_MONTHS = {m: i for i, m in enumerate(b"Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


def line_time(line: bytes, now: float) -> float | None:
    """The time a log line starts with (ISO 8601, or syslog's year-less stamp read as UTC in the year
    that puts it at or before ``now``); None without one."""
    m = _ISO.match(line)
    if m:
        t = m.group(1).decode().replace(",", ".").replace(" ", "T")
        t = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", t)
        if t.endswith("Z"):
            t = t[:-1] + "+00:00"
        try:
            d = _dt.datetime.fromisoformat(t)
        except ValueError:
            return None
        return (d if d.tzinfo else d.replace(tzinfo=_dt.timezone.utc)).timestamp()
    m = _SYSLOG.match(line)
    if m and m.group(1) in _MONTHS:
        year = _dt.datetime.fromtimestamp(now, _dt.timezone.utc).year
        for y in (year, year - 1):
            try:
                d = _dt.datetime(y, _MONTHS[m.group(1)], int(m.group(2)), *map(int, m.group(3, 4, 5)))
            except ValueError:
                return None
            t = d.replace(tzinfo=_dt.timezone.utc).timestamp()
            if t <= now + 86400:
                return t
    return None


def _is_log(head: bytes, name: str) -> bool:
    from clusterdoctor.observe.app.flink import sniff_flink
    from clusterdoctor.observe.app.kafka import sniff_kafka
    from clusterdoctor.observe.control.kube import sniff_nodes, sniff_pods
    from clusterdoctor.observe.control.logs import sniff_logs
    from clusterdoctor.observe.network.nic_stats import sniff_nic_stats
    from clusterdoctor.observe.network.rdma import sniff_rdma

    snapshot = (sniff_pods, sniff_nodes, sniff_flink, sniff_kafka, sniff_rdma, sniff_nic_stats)
    return sniff_logs(head, name) and not any(f(head, name) for f in snapshot)


class _Window:
    """(stamp, item) pairs younger than ``window_s``, the newest ``MAX_KEPT``."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.items: list[tuple[float, Any]] = []

    def add(self, stamp: float, item: Any) -> None:
        self.items.append((stamp, item))

    def expire(self, now: float) -> None:
        cut = now - self.window_s
        keep = [(s, x) for s, x in self.items if s >= cut]
        self.items = keep[-MAX_KEPT:]

    def values(self) -> list[Any]:
        return [x for _, x in self.items]


class LogFileSource:
    """One ``--log`` file, read incrementally (see the module docstring)."""

    def __init__(self, path: str, window_s: float = DEFAULT_WINDOW_S, clock: Callable[[], float] = time.time):
        self.path = path
        self.clock = clock
        self.window = _Window(window_s)
        self.tail = FileTail(path)
        self.snapshot: bool | None = None  # decided from the first bytes
        self._cut = 0
        self.members: dict[str, Any] = {}  # etcd members the log named, by id/name

    def __call__(self) -> dict[str, Any]:
        if self.snapshot is None:
            from clusterdoctor.observe.limits import read_head

            self.snapshot = not _is_log(read_head(self.path, 65536), os.path.basename(self.path))
        if self.snapshot:
            from clusterdoctor.observe.event_sources import load_event_observations

            out = load_event_observations(self.path)
            out.pop("warnings", None)
            return out
        now = self.clock()
        lines = self.tail.read()
        counts: dict[str, int] = {}
        if lines:
            from clusterdoctor.observe.control.logs import parse_logs

            year = _dt.datetime.fromtimestamp(now, _dt.timezone.utc).year
            res = parse_logs(b"\n".join(lines) + b"\n", self.path, year=year)
            for e in res.events:
                self.window.add(e.time if e.time is not None else now, e)
                counts[e.kind] = counts.get(e.kind, 0) + 1
            for x in res.dropped:  # a chunk over the event store's bound: counted, not kept
                counts[x.kind] = counts.get(x.kind, 0) + x.count
            for m in res.members:
                self.members[f"{getattr(m, 'id', 0)}/{getattr(m, 'name', '')}"] = m
        self.window.expire(now)
        events = self.window.values()
        out: dict[str, Any] = {"events": events, "event_counts": counts}
        if events:
            from clusterdoctor.observe.control.kube import pod_starts_from_events

            starts = pod_starts_from_events(events)
            if starts:
                out["pod_starts"] = starts
        if self.members:
            out["etcd_members"] = list(self.members.values())
        cut, self._cut = self.tail.truncated_lines - self._cut, self.tail.truncated_lines
        out["lines_truncated"] = cut
        return out


def _nvidia(line: bytes) -> bool:
    return b"NVRM" in line or b"nvidia" in line or b"SXid" in line


class KernelLogSource:
    """The kernel log's NVIDIA lines, incrementally, kept for the window (see the module docstring)."""

    name = "kernel-log"

    def __init__(
        self, paths: list[str], window_s: float = DEFAULT_WINDOW_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.paths = list(paths)
        self.clock = clock
        self.window = _Window(window_s)
        self.reader: Any = None
        self.used: str | None = None  # the path being read
        self.why: list[str] = []  # why the paths before it (or all) could not be read
        self._cut = 0

    def _lines(self) -> list[bytes]:
        if self.reader is None:
            self.reader, lines, self.why = open_kernel_log(self.paths, self.clock)
            if self.reader is None:
                raise OSError("no kernel log could be read: " + "; ".join(self.why))
            self.used = getattr(self.reader, "path", None) or getattr(self.reader, "directory", None)
            return lines
        try:
            return self.reader.read()
        except OSError:
            self.reader.close()
            self.reader = None  # the next round tries every path again
            raise

    def __call__(self) -> dict[str, Any]:
        from clusterdoctor.observe.gpu.kernel_log import parse_kernel_log
        from clusterdoctor.topology.gpu import GpuReport

        lines = self._lines()
        now = self.clock()
        new = [ln for ln in lines if _nvidia(ln)]
        for ln in new:
            t = line_time(ln, now)
            self.window.add(t if t is not None else now, ln)
        self.window.expire(now)
        src = f"kernel log {self.used} (live)"
        counts: dict[str, int] = {}
        if new:
            try:
                rep = parse_kernel_log(b"\n".join(new) + b"\n", src)
                for e in [*rep.events, *(e for g in rep.gpus for e in g.events)]:
                    counts[f"gpu.{e.kind}"] = counts.get(f"gpu.{e.kind}", 0) + 1
            except Exception:  # the window's parse below reports what it can
                pass
        kept = self.window.values()
        report = None
        if kept:
            try:
                report = parse_kernel_log(b"\n".join(kept) + b"\n", src)
            except Exception:
                report = None
        if report is None:
            report = GpuReport("kernel log", src)
            report.facts.add("kernel_log")  # read, and no NVIDIA message in the window: no Xid
        cut = getattr(self.reader, "truncated_lines", 0)
        out = {"gpu_reports": [report], "event_counts": counts, "lines_truncated": max(0, cut - self._cut)}
        self._cut = cut
        return out
