"""etcd, kubelet and containerd logs → :class:`~clusterdoctor.model.Event` records.

One parser reads every form these components write, mixed in one file:

* etcd **zap JSON** (``{"level":"warn","ts":"2021-09-16T05:38:01.650Z","msg":"apply request took too long",…}``;
  ``ts`` as RFC 3339 text or as float seconds), including a record split over two lines;
* etcd **capnslog** (``2026-11-30 08:50:39.435061 W | etcdserver: failed to send out heartbeat on time …``)
  and the raft package's Go-log lines (``raft2026/11/30 08:50:38 INFO: raft.node: … lost leader …``);
* **klog** (kubelet, kube-apiserver: ``E0302 20:00:36.150527    9914 cni.go:330] Error deleting network …``);
* containerd **logfmt** (``time="…" level=error msg="RunPodSandbox … failed" error="…"``);
* any of the above behind a **journald/syslog** prefix (``Mar 02 20:00:36 host kubelet[9914]: …``,
  ``journalctl -o short-iso``) or inside ``journalctl -o json`` records;
* the event table of ``kubectl describe pod`` (``Warning  FailedCreatePodSandBox  2m7s  kubelet  …``).

Only lines that say something a rule uses become events (elections, leader loss, slow apply, slow
heartbeats, slow fdatasync, request timeouts, lease loss, CNI/CRI timeouts, sandbox failures, pod
startup durations); the rest are recognised and skipped. Timestamps are UTC epoch seconds. Forms
without a year (syslog, klog) take it from the file itself when a full date occurs in it (e.g. a
``podCreationTimestamp``), else from ``year=``, else the current year, with a warning. Forms without
a zone are read as UTC, with a warning.

Besides events, etcd logs name their members: a member's log says its own ID, name and client URLs
when it starts, and the ID and peer URL of every member it adds (``starting local member``, ``added
member``, ``published local member``). :func:`parse_logs` keeps these as
:class:`~clusterdoctor.observe.control.etcd.EtcdMember` records (``LogParse.members``), stamps the
events of a file written by one member with ``local_member``, and records the time span of the
file's lines (``LogParse.first_time``/``last_time``: a member whose log stops early may have died).

Lines that are not logs (garbage, a truncated record) are skipped with a warning naming the line;
:class:`~clusterdoctor.errors.InputError` is raised only when no line is a log line at all.

This module reads the forms; what each message means (the event kinds, the classifier, durations and
timestamps inside a message) is :mod:`clusterdoctor.observe.control.log_events`.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import json
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.model import Event
from clusterdoctor.observe.control.log_events import (  # re-exported: EVENT_KINDS, parse_duration, parse_time
    EVENT_KINDS,
    _classify,
    _Ctx,
    _iso,
    _unquote,
    _utc,
    parse_duration,
    parse_time,
)

__all__ = [
    "EVENT_KINDS",
    "LogParse",
    "LogSpan",
    "describe_log",
    "load_logs",
    "parse_duration",
    "parse_logs",
    "parse_time",
    "sniff_logs",
]


_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}

# --- line prefixes ---------------------------------------------------------------------------
_SYSLOG = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)(?P<frac>\.\d+)? "
    r"(?P<host>\S+) (?P<proc>[^\s:\[]+)(?:\[(?P<pid>\d+)\])?: ?(?P<body>.*)$"
)
_SHORT_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) "
    r"(?P<host>\S+) (?P<proc>[^\s:\[]+)(?:\[(?P<pid>\d+)\])?: ?(?P<body>.*)$"
)
# --- bodies ------------------------------------------------------------------------------------
_CAPNSLOG = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?P<lvl>[DINWECF]) \| (?P<pkg>[\w./-]+): (?P<msg>.*)$"
)
_GOLOG_RAFT = re.compile(
    r"^(?P<pkg>[a-z]+)?(?P<ts>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?:(?P<lvl>[A-Z]+): )?(?P<msg>.*)$"
)
_KLOG = re.compile(
    r"^(?P<lvl>[IWEF])(?P<mo>\d\d)(?P<dd>\d\d) (?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?)\s+(?P<tid>\d+) "
    r"(?P<src>[^:\]\s]+:\d+)\] (?P<msg>.*)$"
)
_LOGFMT_TIME = re.compile(r'^time="(?P<ts>[^"]+)" level=(?P<lvl>\w+) ')
# a key starts only at the first word character of its run of [\w.-] (a later start in the run ends
# where the first did and fails as it did), all quantifiers possessive: linear on any line (a pair
# tried from every letter of a 1 MB run was quadratic)
_LOGFMT_PAIR = re.compile(r'(?<![\w.-])[.-]*+(\w[\w.-]*+)=("(?:[^"\\]|\\.)*+"|\S+)')
_KUBECTL_TS = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (?P<body>.*)$"
)
_DESCRIBE_HEADER = re.compile(r"^(\s*)Type\s+Reason\s+Age\s+From\s+Message\s*$")
_DESCRIBE_RULE = re.compile(r"^\s*-{4}\s+-{6}\s+-{3,}\s+-{4}\s+-{7}\s*$")
_GRPC = re.compile(
    r"^(?P<lvl>INFO|WARNING|ERROR|FATAL): (?P<ts>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?P<msg>.*)$"
)
_BANNER = re.compile(r"^\[(?:WARNING|INFO|ERROR|DEBUG)\] \S")
_FULL_DATE = re.compile(r"\b(?P<y>(?:19|20)\d\d)-(?P<m>\d\d)-(?P<d>\d\d)[ T]\d\d:\d\d")


@dataclass
class LogParse:
    """What :func:`parse_logs` read: events in file order, warnings, and how much was a log."""

    events: list[Event] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lines: int = 0
    log_lines: int = 0
    formats: dict[str, int] = field(default_factory=dict)
    members: list[Any] = field(default_factory=list)  # EtcdMember records named by the log
    local_member: str | None = None  # hex ID of the etcd member that wrote the file, when one did
    first_time: float | None = None  # time of the first and last timed line of any kind
    last_time: float | None = None
    components: dict[str, int] = field(default_factory=dict)  # etcd / kubelet / containerd … lines
    # what the bounded event store (event_store.py) dropped of a long log, and those kinds' bursts
    dropped: list[Any] = field(default_factory=list)
    bursts: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class LogSpan:
    """The time span of one log file's lines (``log_spans`` observation): whose log, from when to when."""

    source: str
    first: float | None
    last: float | None
    lines: int
    member: str | None = None  # hex ID of the etcd member that wrote it


def _infer_year(text: str, year: int | None, ref_year: int | None = None) -> tuple[int, bool]:
    """The year of stamps that carry none: given, else the first full date in the text, else the year
    of ``ref_year`` (the file's modification time: when it was collected) or of now."""
    if year is not None:
        return year, False
    m = _FULL_DATE.search(text[:1_000_000])
    if m and 1 <= int(m.group("m")) <= 12 and not m.group("y").startswith("00"):
        return int(m.group("y")), False
    return ref_year or _dt.datetime.now(_dt.timezone.utc).year, True


def parse_logs(
    data: str | bytes, path: str | None = None, *, year: int | None = None, budget: Any = None
) -> LogParse:
    """Parse a log file (any mix of the supported forms) into events; see the module docstring.

    ``year`` fills timestamps that carry none (syslog, klog). Raises :class:`InputError` only when
    the input is empty or no line is a log line in a supported form. Past the ``seconds`` budget
    (``budget``: a :class:`~clusterdoctor.observe.limits.Budget`, by default one started now) the
    lines left are not parsed, said in a warning with the line it stopped at.
    """
    from clusterdoctor.observe.limits import Budget

    budget = budget if budget is not None else Budget(path)
    if isinstance(data, bytes):
        text = data.decode("utf-8", errors="replace")
    else:
        text = data
    if not text.strip():
        raise InputError("empty log", path)
    return parse_log_lines(text.splitlines(), path, year=year, head=text[:1_000_000], budget=budget)


def parse_log_lines(
    lines: Iterable[str],
    path: str | None = None,
    *,
    year: int | None = None,
    head: str = "",
    budget: Any = None,
    ref_year: int | None = None,
) -> LogParse:
    """:func:`parse_logs` over lines as they come (a file streamed by ``limits.LineReader``: memory
    bounded by what is kept, not by the file). ``head``: the start of the text, where a year is looked
    for. Warnings: the first 100 word for word, the rest counted in one last line."""
    from clusterdoctor.observe.control.event_store import EventStore
    from clusterdoctor.observe.limits import Budget, LimitExceeded, WarningList

    budget = budget if budget is not None else Budget(path)
    store = EventStore()  # events bounded per kind: memory flat whatever the log's length
    yr, guessed = _infer_year(head, year, ref_year)
    out = LogParse(warnings=WarningList(100))
    ctx = _Ctx(path, yr, guessed, out.warnings)
    it = iter(lines)
    ahead: deque[str] = deque()  # lines read ahead to join a JSON record split over several
    n = 0  # lines consumed
    bad = 0
    nonblank = False
    while True:
        if ahead:
            raw = ahead.popleft()
        else:
            raw = next(it, None)
            if raw is None:
                break
        n += 1
        lineno = n
        try:
            budget.tick()
        except LimitExceeded as e:
            if out.log_lines == 0:
                raise
            out.warnings.append(f"line {lineno}: not parsed further: {e.reason}")
            break
        line = raw.strip("\r\n\x00")
        if not line.strip():
            nonblank = nonblank or bool(raw.strip())
            continue
        nonblank = True
        if line.lstrip().startswith("# "):
            continue  # a comment / separator line
        # a JSON record broken over several lines: join while the join fails to parse
        stripped = line.strip()
        if stripped.startswith("{") and not stripped.endswith("}"):
            joined = stripped
            for extra in range(1, 4):
                if len(ahead) < extra:
                    nxt = next(it, None)
                    if nxt is None:
                        break
                    ahead.append(nxt)
                joined += ahead[extra - 1].strip("\r\n")
                if _json_obj(joined) is not None:
                    out.warnings.append(
                        f"lines {lineno}-{lineno + extra}: one JSON record split over {extra + 1} lines; joined"
                    )
                    line = joined
                    for _ in range(extra):
                        ahead.popleft()
                    n += extra
                    break
        ev, ok = _parse_line(line, lineno, ctx)
        if ok:
            out.log_lines += 1
            if ev is not None:
                store.add(ev)
        else:
            bad += 1
            if bad <= 20:
                out.warnings.append(f"line {lineno}: not a log line in a known form; skipped")
    out.lines = n
    if not nonblank:
        raise InputError("empty log", path)
    if bad > 20:
        out.warnings.append(f"{bad - 20} more lines skipped")
    if out.log_lines == 0:
        raise InputError("no line is an etcd, kubelet, containerd or journald log line", path, 1)
    if ctx.year_guessed and any(f in ctx.formats for f in ("syslog", "klog")):
        out.warnings.append(f"log timestamps carry no year; assumed {ctx.year}")
    out.formats = dict(ctx.formats)
    out.components = dict(ctx.components)
    out.first_time, out.last_time = ctx.first_t, ctx.last_t
    out.events = store.events()
    _finish_members(out, ctx)
    out.dropped = store.dropped(path or "<log>", out.local_member)
    out.bursts = store.bursts(path or "<log>")
    out.warnings = out.warnings.summary() if isinstance(out.warnings, WarningList) else out.warnings
    return out


def _finish_members(out: LogParse, ctx: _Ctx) -> None:
    """Members the log named, and ``local_member`` on the events of a file one member wrote."""
    from clusterdoctor.observe.control.etcd import EtcdMember

    local = sorted(set(ctx.local_ids))
    owner = local[0] if len(local) == 1 else None
    if len(local) > 1:
        out.warnings.append(
            f"log of several etcd members ({', '.join(local)}); its events are not attributed to one"
        )
    out.local_member = owner
    cluster = _hex(ctx.cluster_id)
    src = ctx.path or "<log>"
    ids = set(ctx.peer_urls) | ({owner} if owner else set())
    for mid in sorted(ids):
        n = _hex(mid)
        if not n:
            continue
        mine = mid == owner
        out.members.append(
            EtcdMember(
                id=n,
                name=ctx.local_name if mine else "",
                peer_urls=ctx.peer_urls.get(mid, ()),
                client_urls=ctx.local_clients if mine else (),
                cluster_id=cluster,
                source=src,
            )
        )
    if owner is None:
        return
    for i, e in enumerate(out.events):
        if not e.kind.startswith("etcd.") or e.kind == "etcd.client_timeout":
            continue
        a = dict(e.attrs)
        if "local_member" not in a:
            a["local_member"] = a.get("local-member-id") or owner
            out.events[i] = Event(e.time, e.kind, e.message, e.source, tuple(a.items()))


def _hex(v: str | None) -> int:
    try:
        return int(v, 16) if v else 0
    except ValueError:
        return 0


def _json_obj(s: str) -> dict[str, Any] | None:
    try:
        v = json.loads(s)
    except (ValueError, RecursionError):
        return None
    return v if isinstance(v, dict) else None


def _parse_line(line: str, lineno: int, ctx: _Ctx) -> tuple[Event | None, bool]:
    """One line → (event or None, whether the line was a log line at all)."""
    if line.startswith("[pod/"):  # `kubectl logs --prefix`: [pod/<name>/<container>] before the line
        end = line.find("] ", 0, 520)
        if end > 0:
            line = line[end + 2 :]
    s = line.strip()
    if s.startswith("{"):
        obj = _json_obj(s)
        if obj is None:
            return None, False
        if "MESSAGE" in obj:  # journalctl -o json
            ctx.seen("journald-json")
            t = None
            rt = obj.get("__REALTIME_TIMESTAMP")
            try:
                t = int(str(rt)) / 1e6 if rt is not None else None
            except ValueError:
                t = None
            msg = obj.get("MESSAGE")
            if not isinstance(msg, str):
                return None, True
            comp = str(obj.get("SYSLOG_IDENTIFIER") or obj.get("_COMM") or "")
            return _parse_body(msg, lineno, ctx, t, comp, prefix_zone=True)
        return _from_zap(obj, lineno, ctx, None, "")
    m = _SYSLOG.match(line)
    if m and m.group("mon") in _MONTHS:
        ctx.seen("syslog")
        hh, mi, ss = (int(x) for x in m.group("hms").split(":"))
        t = _utc(ctx.year, _MONTHS[m.group("mon")], int(m.group("day")), hh, mi, ss, m.group("frac"))
        ctx.no_zone(lineno, "syslog")
        return _parse_body(m.group("body"), lineno, ctx, t, m.group("proc"), prefix_zone=False)
    m = _SHORT_ISO.match(line)
    if m:
        ctx.seen("journald-iso")
        t, _ = _iso(m.group("ts"))
        return _parse_body(m.group("body"), lineno, ctx, t, m.group("proc"), prefix_zone=True)
    m = _KUBECTL_TS.match(line)
    if m:
        t, _ = _iso(m.group("ts"))
        ev, ok = _parse_body(m.group("body"), lineno, ctx, t, "", prefix_zone=True)
        if ok:
            return ev, ok
    return _parse_body(line, lineno, ctx, None, "", prefix_zone=False)


def _parse_body(
    body: str, lineno: int, ctx: _Ctx, t_prefix: float | None, comp: str, *, prefix_zone: bool
) -> tuple[Event | None, bool]:
    b = body.strip()
    if b.startswith("{"):
        obj = _json_obj(b)
        if obj is not None:
            return _from_zap(obj, lineno, ctx, t_prefix, comp)
    m = _CAPNSLOG.match(b)
    if m:
        ctx.seen("capnslog")
        t, _ = _iso(m.group("ts"))
        ctx.no_zone(lineno, "capnslog")
        level = {
            "D": "debug",
            "I": "info",
            "N": "notice",
            "W": "warn",
            "E": "error",
            "C": "critical",
            "F": "fatal",
        }[m.group("lvl")]
        return _classify(
            m.group("msg"), t if t is not None else t_prefix, level, comp or "etcd", lineno, ctx, {}
        ), True
    m = _KLOG.match(b)
    if m:
        ctx.seen("klog")
        hh, mi, ss_f = m.group("hms").split(":")
        ss, _, frac = ss_f.partition(".")
        t = _utc(
            ctx.year,
            int(m.group("mo")),
            int(m.group("dd")),
            int(hh),
            int(mi),
            int(ss),
            "." + frac if frac else None,
        )
        if t_prefix is not None and prefix_zone:
            t = t_prefix  # the journald prefix carries a zone, klog does not
        elif t is None:
            t = t_prefix
        ctx.no_zone(lineno, "klog")
        level = {"I": "info", "W": "warn", "E": "error", "F": "fatal"}[m.group("lvl")]
        return _classify(
            m.group("msg"), t, level, comp or "kubelet", lineno, ctx, {"caller": m.group("src")}
        ), True
    m = _LOGFMT_TIME.match(b)
    if m:
        ctx.seen("logfmt")
        t, _ = _iso(m.group("ts"))
        kv = {k: _unquote(v) for k, v in _LOGFMT_PAIR.findall(b)}
        msg = kv.get("msg", "")
        if kv.get("error"):
            msg = f"{msg}: {kv['error']}"
        return _classify(
            msg, t if t is not None else t_prefix, m.group("lvl"), comp or "containerd", lineno, ctx, {}
        ), True
    m = _GRPC.match(b)
    if m:
        ctx.seen("grpc")
        t, _ = _iso(m.group("ts").replace("/", "-"))
        return _classify(
            m.group("msg"),
            t if t is not None else t_prefix,
            m.group("lvl").lower(),
            comp or "grpc",
            lineno,
            ctx,
            {},
        ), True
    if _BANNER.match(b):
        ctx.seen("banner")
        return None, True
    m = _GOLOG_RAFT.match(b)
    if m:
        ctx.seen("golog")
        ts = m.group("ts").replace("/", "-")
        t, _ = _iso(ts)
        ctx.no_zone(lineno, "Go log")
        lvl = (m.group("lvl") or "info").lower()
        return _classify(
            m.group("msg"),
            t if t is not None else t_prefix,
            lvl,
            comp or m.group("pkg") or "etcd",
            lineno,
            ctx,
            {},
        ), True
    # kubectl describe events table
    if _DESCRIBE_HEADER.match(body):
        ctx.seen("kubectl-describe")
        hdr = body
        ctx.describe_cols = [hdr.index(c) for c in ("Type", "Reason", "Age", "From", "Message")]
        return None, True
    if _DESCRIBE_RULE.match(body):
        return None, ctx.describe_cols is not None
    if ctx.describe_cols is not None and re.match(r"^\s+(Normal|Warning)\s", body):
        ctx.seen("kubectl-describe")
        return _from_describe(body, lineno, ctx), True
    if t_prefix is not None:
        # a journald/syslog line whose body is free text: still a log line
        return _classify(b, t_prefix, "", comp, lineno, ctx, {}), True
    return None, False


def _from_zap(
    obj: dict[str, Any], lineno: int, ctx: _Ctx, t_prefix: float | None, comp: str
) -> tuple[Event | None, bool]:
    msg = obj.get("msg")
    if not isinstance(msg, str):
        return None, False
    ctx.seen("zap-json")
    ts = obj.get("ts")
    t: float | None = None
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        t = float(ts) if abs(ts) < 1e11 else float(ts) / 1000.0
    elif isinstance(ts, str):
        t, zoned = _iso(ts)
        if t is not None and not zoned:
            ctx.no_zone(lineno, "zap")
    if t is None:
        t = t_prefix
    fields = {k: v for k, v in obj.items() if k not in ("level", "ts", "msg")}
    level = str(obj.get("level", ""))
    return _classify(msg, t, level, comp or "etcd", lineno, ctx, fields), True


def _from_describe(body: str, lineno: int, ctx: _Ctx) -> Event | None:
    cols = ctx.describe_cols or []
    parts = []
    for j, start in enumerate(cols):
        end = cols[j + 1] if j + 1 < len(cols) else None
        parts.append(body[start:end].strip() if end is not None else body[start:].strip())
    if len(parts) != 5:
        return None
    typ, reason, age, source, message = parts
    attrs: dict[str, Any] = {"reason": reason, "age": age, "from": source, "type": typ}
    ev = _classify(
        message, None, "warn" if typ == "Warning" else "info", source, lineno, ctx, attrs, reason=reason
    )
    return ev


# --- detection and loading ------------------------------------------------------------------------

_SNIFF_PATTERNS = (
    re.compile(rb'^\{"level":"\w+","ts":', re.M),
    re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ [DINWECF] \| ", re.M),
    re.compile(rb"^raft\d{4}/\d\d/\d\d ", re.M),
    re.compile(rb"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] ", re.M),
    re.compile(
        rb"^[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)? \S+ (?:kubelet|containerd|etcd|kube-\w+|k3s|crio)(?:\[\d+\])?: ",
        re.M,
    ),
    re.compile(rb'^time="[^"]+" level=\w+ msg=', re.M),
    # a klog line behind the journal prefix of any unit (origin-node, dockerd-current, microk8s.daemon-kubelite)
    re.compile(
        rb"^[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)? \S{1,255} [^\s:\[]{1,255}(?:\[\d{1,10}\])?: "
        rb"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{1,9}\s{1,16}\d{1,10} [^\s:\]]{1,255}:\d{1,10}\] ",
        re.M,
    ),
    # `kubectl logs --prefix` ([pod/name/container] before each line) of a zap, capnslog or klog log
    re.compile(rb"^\[pod/[^\]\s]{1,512}\] (?:\{\"level\"|\d{4}-\d\d-\d\d |[IWEF]\d{4} )", re.M),
    re.compile(rb'^\{"__CURSOR":', re.M),
    re.compile(rb"^[ \t]+Type\s+Reason\s+Age\s+From\s+Message", re.M),
)


def sniff_logs(head: bytes, name: str = "") -> bool:
    """True when ``head`` (the first bytes of a file) looks like a log this module reads."""
    return any(p.search(head) for p in _SNIFF_PATTERNS)


def load_logs(path: str | Path, *, year: int | None = None) -> dict[str, Any]:
    """Read a log file: ``{"events": [Event…], "warnings": [str…]}`` (warnings name the file)."""
    p = Path(path)
    from clusterdoctor.observe.limits import LineReader

    reader = LineReader(p)  # streamed: memory bounded by what is kept, budgets checked as it reads
    try:
        with reader:
            # a year-less stamp takes the year the file was written, not today's: a log collected last
            # year and read today is not "ahead of its collection" (CLOCK001)
            try:
                ref_year = _dt.datetime.fromtimestamp(p.stat().st_mtime, _dt.timezone.utc).year
            except (OSError, OverflowError, ValueError):
                ref_year = None
            res = parse_log_lines(reader, str(p), year=year, head=reader.head, ref_year=ref_year)
    except MemoryError:
        raise InputError(
            f"not enough memory to parse {reader.bytes_read >> 20} MiB of log (cut it, e.g. with tail or grep)",
            str(p),
        ) from None
    out: dict[str, Any] = {
        "events": res.events,
        "warnings": [f"{p}: {w}" for w in [*res.warnings, *reader.warnings]],
        "described_as": describe_log(res),
        "log_spans": [LogSpan(str(p), res.first_time, res.last_time, res.log_lines, res.local_member)],
    }
    if res.members:
        out["etcd_members"] = res.members
    if res.dropped:  # a long log: the events beyond each kind's first ones, counted
        out["events_dropped"] = res.dropped
        out["event_bursts"] = res.bursts
    return out


_COMPONENT_NAMES = {"etcd client": "etcd client", "grpc": "", "": ""}


def describe_log(res: LogParse) -> str:
    """What a parsed log is, in words: ``etcd log (member m0)``, ``kubelet log``, ``containerd log``,
    ``kubectl describe events``, or the components when several wrote it."""
    if res.formats.get("kubectl-describe") and len(res.formats) == 1:
        return "kubectl describe events"
    comps = [
        _COMPONENT_NAMES.get(c, c)
        for c, _ in sorted(res.components.items(), key=lambda kv: -kv[1])
        if _COMPONENT_NAMES.get(c, c)
    ]
    if res.local_member:
        name = next((m.name for m in res.members if m.hex_id == res.local_member and m.name), "")
        who = f"member {name} ({res.local_member})" if name else f"member {res.local_member}"
        return f"etcd log ({who})"
    if not comps:
        return "log"
    if len(comps) == 1:
        return f"{comps[0]} log"
    return f"log ({', '.join(comps[:3])})"


def event_attrs(ev: Event) -> dict[str, str]:
    """An event's attrs as a dict."""
    return dict(ev.attrs)
