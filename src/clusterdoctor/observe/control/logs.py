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
from clusterdoctor.model import Event, SourceRef

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

# Event kinds this parser emits (the ``kind`` of each Event), with what they mean.
EVENT_KINDS: dict[str, str] = {
    "etcd.slow_apply": "etcd applied a request slower than expected (apply request took too long)",
    "etcd.heartbeat_slow": "etcd leader failed to send out a heartbeat on time (overloaded, slow disk)",
    "etcd.slow_fdatasync": "etcd WAL fdatasync took longer than 1 s",
    "etcd.election": "an etcd member started a new election",
    "etcd.lost_leader": "an etcd member lost its leader",
    "etcd.elected_leader": "an etcd member learnt of an elected leader",
    "etcd.leader_changed": "an etcd member saw the leader change",
    "etcd.request_timeout": "etcdserver: request timed out",
    "etcd.lease_not_found": "etcd: requested lease not found (a lease expired or was revoked)",
    "etcd.peer_inactive": "an etcd peer connection failed",
    "etcd.peer_lost": "an etcd member lost its stream to a peer (the peer stopped or is unreachable)",
    "etcd.peer_unreachable": "an etcd member cannot reach a peer (connection refused, dial/probe failed)",
    "etcd.peer_active": "an etcd member (re)established its connection to a peer",
    "etcd.client_timeout": "an etcd client's request failed (deadline exceeded, request timed out)",
    "etcd.lease_revoke_failed": "etcd failed to revoke expired leases",
    "k8s.lease_renew_failed": "a Kubernetes component failed to renew its leader-election lease",
    "k8s.leader_election_lost": "a Kubernetes component lost leader election",
    "apiserver.timeout": "the API server did not answer in time",
    "cni.timeout": "a CNI ADD/DEL call timed out (context deadline exceeded)",
    "cri.timeout": "a call to the container runtime (CRI, containerd socket) timed out",
    "sandbox.create_failed": "creating a pod sandbox failed (FailedCreatePodSandBox / RunPodSandbox failed)",
    "sandbox.stop_failed": "stopping a pod sandbox failed",
    "kubelet.pod_startup": "kubelet observed a pod's startup duration (pod_startup_latency_tracker)",
    "kubelet.pleg_unhealthy": "kubelet PLEG is not healthy",
}

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

# --- message classifiers ------------------------------------------------------------------------
_ID = r"([0-9a-f]{1,16})"
_RE_LOST = re.compile(r"raft\.node: " + _ID + r" lost leader " + _ID + r" at term (\d+)")
_RE_ELECTED = re.compile(r"raft\.node: " + _ID + r" elected leader " + _ID + r" at term (\d+)")
_RE_CHANGED = re.compile(
    r"raft\.node: " + _ID + r" changed leader from " + _ID + r" to " + _ID + r" at term (\d+)"
)
_RE_ELECTION = re.compile(_ID + r" is starting a new election at term (\d+)")
_RE_HB_CAPN = re.compile(
    r"failed to send out heartbeat on time \(exceeded the (\S+) timeout for (\S+?)(?:, to (\S+?))?\)"
)
_RE_APPLY_OLD = re.compile(r"apply entries took too long \[(\S+) for (\d+) entries\]")
_RE_RO_TOOK = re.compile(
    r"(read-only range|range|txn|put|delete) request .* took too long \((\S+)\) to execute"
)
_RE_POD_START = re.compile(r'"Observed pod startup duration"')
_RE_KV = re.compile(r'(?<!\w)(\w++)=("(?:[^"\\]|\\.)*+"|\S+)')  # keys from a run's start: linear
_RE_LEASE_RENEW = re.compile(r"failed to renew lease (\S+?):")
_APISERVER_TIMEOUT = "the server was unable to return a response in the time allotted"
_DEADLINE = ("context deadline exceeded", "DeadlineExceeded", "i/o timeout")


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


def parse_duration(text: str | float | int | None) -> float | None:
    """A Go duration (``2.000055631s``, ``176.5ms``, ``1m2.5s``) or a number of seconds → seconds."""
    if text is None:
        return None
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip()
    if not s:
        return None
    try:
        return float(s)
    except ValueError:
        pass
    total = 0.0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    pos = 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)", s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * units[m.group(2)]
        pos = m.end()
    return total if pos == len(s) and pos > 0 else None


def _utc(y: int, mo: int, d: int, hh: int, mi: int, ss: int, frac: str | None) -> float | None:
    try:
        base = calendar.timegm((y, mo, d, hh, mi, ss, 0, 0, 0))
        _dt.date(y, mo, d)
    except (ValueError, OverflowError):
        return None
    return base + (float("0" + frac.replace(",", ".")) if frac else 0.0)


def parse_time(text: str) -> float | None:
    """RFC 3339 / ISO 8601 / Kubernetes ``2025-02-26 16:13:58 +0000 UTC`` text → epoch seconds (UTC).

    Text without a zone is read as UTC. None when it is not a timestamp.
    """
    return _iso(text)[0]


def _iso(ts: str) -> tuple[float | None, bool]:
    """RFC 3339 / ISO text → (epoch seconds, had_zone)."""
    m = re.match(
        r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)([.,]\d+)?\s*(Z|[+-]\d\d:?\d\d|\+0000 UTC| UTC)?",
        ts.strip(),
    )
    if not m:
        return None, False
    y, mo, d, hh, mi, ss = (int(m.group(i)) for i in range(1, 7))
    t = _utc(y, mo, d, hh, mi, ss, m.group(7))
    zone = m.group(8)
    if t is None:
        return None, False
    if zone and zone.strip() not in ("Z", "+0000 UTC", "UTC"):
        z = zone.replace(":", "")
        sign = 1 if z[0] == "+" else -1
        t -= sign * (int(z[1:3]) * 3600 + int(z[3:5]) * 60)
    return t, bool(zone)


@dataclass
class _Ctx:
    path: str | None
    year: int
    year_guessed: bool
    warnings: list[str]
    zone_warned: bool = False
    formats: dict[str, int] = field(default_factory=dict)
    describe_cols: list[int] | None = None
    first_t: float | None = None
    last_t: float | None = None
    local_ids: list[str] = field(default_factory=list)  # "starting (local) member X" lines, in order
    local_name: str = ""
    local_clients: tuple[str, ...] = ()
    cluster_id: str = ""
    peer_urls: dict[str, tuple[str, ...]] = field(default_factory=dict)  # member hex ID -> peer URLs
    components: dict[str, int] = field(default_factory=dict)
    shared: dict[Any, Any] = field(default_factory=dict)

    def no_zone(self, lineno: int, form: str) -> None:
        if not self.zone_warned:
            self.zone_warned = True
            self.warnings.append(f"line {lineno}: {form} timestamps carry no time zone; read as UTC")

    def same(self, v: Any) -> Any:
        """One shared copy of a repeated message, attribute value or (name, value) pair: a log of
        many similar events keeps each text once (issue 26: memory by what the log says)."""
        kept = self.shared.get(v)
        if kept is not None:
            return kept
        if len(self.shared) < 200_000:
            self.shared[v] = v
        return v

    def seen(self, form: str) -> None:
        self.formats[form] = self.formats.get(form, 0) + 1


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


def _unquote(v: str) -> str:
    if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        return v[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return v


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


def _s(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _event(
    kind: str,
    t: float | None,
    msg: str,
    lineno: int,
    ctx: _Ctx,
    comp: str,
    level: str,
    attrs: dict[str, Any],
) -> Event:
    a = {"line": lineno, "component": comp, "level": level}
    a.update({k: v for k, v in attrs.items() if v is not None and v != ""})
    same = ctx.same
    return Event(
        time=t,
        kind=kind,
        message=same(msg[:500]),
        source=SourceRef("log", ctx.path or "<log>", f"line {lineno}"),
        # the line number is each event's own: not kept in the shared table (it would fill it)
        attrs=tuple(("line", str(v)) if k == "line" else same((str(k), same(_s(v)))) for k, v in a.items()),
    )


def _classify(
    msg: str,
    t: float | None,
    level: str,
    comp: str,
    lineno: int,
    ctx: _Ctx,
    fields: dict[str, Any],
    *,
    reason: str | None = None,
) -> Event | None:
    def ev(kind: str, **attrs: Any) -> Event:
        a = {k: v for k, v in fields.items() if isinstance(v, (str, int, float)) and k in _KEEP_FIELDS}
        a.update(attrs)
        return _event(kind, t, msg, lineno, ctx, comp, level, a)

    if t is not None:
        if ctx.first_t is None or t < ctx.first_t:
            ctx.first_t = t
        if ctx.last_t is None or t > ctx.last_t:
            ctx.last_t = t
    client = "retrying of unary invoker failed" in msg or str(fields.get("caller", "")).startswith(
        "clientv3/"
    )
    if client:
        comp = "etcd client"
    ctx.components[comp] = ctx.components.get(comp, 0) + 1
    peer = None if client else _etcd_identity_and_peer(msg, fields, ctx)
    if peer is not None:
        kind, pid = peer
        return ev(kind, peer=pid)
    if client and fields.get("error"):
        err = str(fields.get("error", ""))
        if any(
            d in err for d in ("DeadlineExceeded", "deadline exceeded", "request timed out", "Unavailable")
        ):
            target = str(fields.get("target", ""))
            return _event(
                "etcd.client_timeout",
                t,
                msg,
                lineno,
                ctx,
                comp,
                level,
                {"endpoint": target.rsplit("/", 1)[-1] if target else None, "error": err[:200]},
            )

    if reason == "FailedCreatePodSandBox" or "RunPodSandbox" in msg and "failed" in msg.lower():
        return ev("sandbox.create_failed", cause=_sandbox_cause(msg))
    if "apply request took too long" in msg:
        return ev(
            "etcd.slow_apply",
            took_s=parse_duration(fields.get("took")),
            expected_s=parse_duration(fields.get("expected-duration")),
        )
    m = _RE_APPLY_OLD.search(msg)
    if m:
        return ev("etcd.slow_apply", took_s=parse_duration(m.group(1)), entries=m.group(2), expected_s=0.1)
    m = _RE_RO_TOOK.search(msg)
    if m and "took too long" in msg:
        return ev("etcd.slow_apply", took_s=parse_duration(m.group(2)), expected_s=0.1)
    if "failed to send out heartbeat" in msg:
        m = _RE_HB_CAPN.search(msg)
        if m:
            return ev(
                "etcd.heartbeat_slow",
                heartbeat_interval_s=parse_duration(m.group(1)),
                exceeded_s=parse_duration(m.group(2)),
                to=m.group(3),
            )
        return ev(
            "etcd.heartbeat_slow",
            heartbeat_interval_s=parse_duration(fields.get("heartbeat-interval")),
            expected_s=parse_duration(fields.get("expected-duration")),
            exceeded_s=parse_duration(fields.get("exceeded-duration")),
            to=fields.get("to"),
        )
    if "slow fdatasync" in msg:
        return ev("etcd.slow_fdatasync", took_s=parse_duration(fields.get("took")))
    m = _RE_LOST.search(msg)
    if m:
        return ev("etcd.lost_leader", member=m.group(1), leader=m.group(2), term=m.group(3))
    m = _RE_CHANGED.search(msg)
    if m:
        return ev(
            "etcd.leader_changed",
            member=m.group(1),
            old_leader=m.group(2),
            leader=m.group(3),
            term=m.group(4),
        )
    m = _RE_ELECTED.search(msg)
    if m:
        return ev("etcd.elected_leader", member=m.group(1), leader=m.group(2), term=m.group(3))
    m = _RE_ELECTION.search(msg)
    if m:
        return ev("etcd.election", member=m.group(1), term=m.group(2))
    if "requested lease not found" in msg:
        return ev("etcd.lease_not_found")
    m = _RE_LEASE_RENEW.search(msg)
    if m:
        return ev("k8s.lease_renew_failed", lease=m.group(1))
    if "error retrieving resource lock" in msg:  # client-go leaderelection.go
        return ev("k8s.lease_renew_failed", lease=msg.split("resource lock", 1)[1].split(":")[0].strip())
    if "failed to revoke lease" in msg.lower() or "failed to revoke leases" in msg.lower():
        return ev("etcd.lease_revoke_failed")
    if "leaderelection lost" in msg.lower():
        return ev("k8s.leader_election_lost")
    if "etcdserver: request timed out" in msg and "leader transfer" not in msg:
        return ev("etcd.request_timeout")
    if _RE_POD_START.search(msg):
        kv = {k: _unquote(v) for k, v in _RE_KV.findall(msg)}
        created, _ = _iso(kv.get("podCreationTimestamp", ""))
        return ev(
            "kubelet.pod_startup",
            pod=kv.get("pod"),
            slo_s=parse_duration(kv.get("podStartSLOduration")),
            e2e_s=parse_duration(kv.get("podStartE2EDuration")),
            created=created,
            pulling=_pulled(kv),
        )
    low = msg.lower()
    if re.search(
        r"error (adding|deleting) network|cni failed to (set up|teardown)|failed to (setup|teardown|destroy) network",
        low,
    ):
        if any(d.lower() in low for d in _DEADLINE) or _APISERVER_TIMEOUT in msg:
            if "StopPodSandbox" in msg or "teardown" in low or "deleting" in low or "destroy" in low:
                kind = "sandbox.stop_failed" if "StopPodSandbox" in msg else "cni.timeout"
                return ev(kind, op="DEL", cause=_sandbox_cause(msg))
            return ev("cni.timeout", op="ADD", cause=_sandbox_cause(msg))
    if "StopPodSandbox" in msg and "failed" in low or "Failed to stop sandbox" in msg:
        return ev("sandbox.stop_failed", cause=_sandbox_cause(msg))
    if (
        "containerd.sock" in msg
        or "runtime service failed" in msg
        or "CRI" in msg
        or "remote_runtime" in str(fields.get("caller", ""))
    ) and any(d.lower() in low for d in _DEADLINE):
        return ev("cri.timeout")
    if _APISERVER_TIMEOUT in msg:
        return ev("apiserver.timeout")
    if "PLEG is not healthy" in msg:
        return ev("kubelet.pleg_unhealthy")
    if "peer became inactive" in msg or re.search(r"peer \S+ became inactive", msg):
        m = _RE_CAPN_PEER_INACTIVE.search(msg)
        return ev("etcd.peer_inactive", peer=fields.get("peer-id") or (m.group(1) if m else None))
    return None


# etcd rafthttp / etcdserver lines about one peer, zap (fields) and capnslog (in the text) forms
_RE_CAPN_PEER_INACTIVE = re.compile(r"peer ([0-9a-f]{1,16}) became inactive")
_RE_CAPN_LOST = re.compile(r"lost the TCP streaming connection with peer ([0-9a-f]{1,16})")
_RE_CAPN_READ = re.compile(r"failed to read ([0-9a-f]{1,16}) on stream")
_RE_CAPN_REACH = re.compile(r"failed to reach the peerURL\((\S+?)\) of member ([0-9a-f]{1,16})")
_RE_CAPN_VERSION = re.compile(r"cannot get the version of member ([0-9a-f]{1,16})")
_RE_CAPN_DIAL = re.compile(r"(?:health check for|failed to dial) (?:peer )?([0-9a-f]{1,16})")
_RE_CAPN_ACTIVE = re.compile(r"peer ([0-9a-f]{1,16}) became active")
_RE_CAPN_ESTABLISHED = re.compile(
    r"(?:established a TCP streaming connection|streaming) with peer ([0-9a-f]{1,16})"
)
_RE_CAPN_START = re.compile(r"(?:re)?starting member ([0-9a-f]{1,16}) in cluster ([0-9a-f]{1,16})")
_RE_CAPN_ADDED = re.compile(r"added member ([0-9a-f]{1,16}) \[([^\]]*)\] to cluster ([0-9a-f]{1,16})")
# names bounded: "{Name:" repeated made every start rescan the rest of the run
_RE_PUBLISHED = re.compile(r"\{Name:(\S{0,1024}+) ClientURLs:\[([^\]]*+)\]\}")
_RE_CAPN_NAME = re.compile(r"^name = (\S+)$")


def _peer_field(fields: dict[str, Any], *names: str) -> str | None:
    for n in names:
        v = fields.get(n)
        if isinstance(v, str) and v:
            return v
    return None


def _etcd_identity_and_peer(msg: str, fields: dict[str, Any], ctx: _Ctx) -> tuple[str, str | None] | None:
    """Record what an etcd line says about members (``ctx``); return ``(kind, peer)`` for the lines
    about one peer's connection (lost, unreachable, active again), else None."""
    if "member" in msg or "name = " in msg:
        if msg in ("starting local member", "restarting local member"):
            if isinstance(fields.get("local-member-id"), str):
                ctx.local_ids.append(fields["local-member-id"])
            if isinstance(fields.get("cluster-id"), str):
                ctx.cluster_id = fields["cluster-id"]
            return None
        if msg == "added member":
            pid = _peer_field(fields, "added-peer-id")
            if pid:
                ctx.peer_urls[pid] = tuple(str(u) for u in fields.get("added-peer-peer-urls") or ())
            return None
        if msg.startswith("published local member"):
            m = _RE_PUBLISHED.search(str(fields.get("local-member-attributes", "")))
            if m:
                ctx.local_name, ctx.local_clients = m.group(1), tuple(m.group(2).split())
            return None
        m = _RE_CAPN_START.search(msg)
        if m:
            ctx.local_ids.append(m.group(1))
            ctx.cluster_id = m.group(2)
            return None
        m = _RE_CAPN_ADDED.search(msg)
        if m:
            ctx.peer_urls[m.group(1)] = tuple(u.strip(",") for u in m.group(2).split())
            return None
        m = _RE_CAPN_NAME.match(msg)
        if m and not ctx.local_name:
            ctx.local_name = m.group(1)
            return None
    if msg.startswith("published {Name:"):
        m = _RE_PUBLISHED.search(msg)
        if m:
            ctx.local_name, ctx.local_clients = m.group(1), tuple(m.group(2).split())
        return None
    if msg == "starting an etcd server" and isinstance(fields.get("name"), str):
        ctx.local_name = ctx.local_name or fields["name"]
        return None
    if "TCP streaming connection" in msg or "on stream" in msg:
        if msg.startswith("lost TCP streaming connection"):
            return "etcd.peer_lost", _peer_field(fields, "remote-peer-id", "peer-id")
        if msg.startswith("established TCP streaming connection"):
            return "etcd.peer_active", _peer_field(fields, "remote-peer-id", "peer-id")
        m = _RE_CAPN_LOST.search(msg) or _RE_CAPN_READ.search(msg)
        if m:
            return "etcd.peer_lost", m.group(1)
    if msg == "failed to reach the peer URL" or msg == "failed to get version":
        return "etcd.peer_unreachable", _peer_field(fields, "remote-member-id", "remote-peer-id")
    if msg == "prober detected unhealthy status":
        return "etcd.peer_unreachable", _peer_field(fields, "remote-peer-id")
    if msg == "peer became active":
        return "etcd.peer_active", _peer_field(fields, "peer-id")
    m = _RE_CAPN_REACH.search(msg)
    if m:
        return "etcd.peer_unreachable", m.group(2)
    m = _RE_CAPN_VERSION.search(msg) or (_RE_CAPN_DIAL.search(msg) if "dial" in msg else None)
    if m:
        return "etcd.peer_unreachable", m.group(1)
    m = _RE_CAPN_ACTIVE.search(msg) or (_RE_CAPN_ESTABLISHED.search(msg) if "established" in msg else None)
    if m:
        return "etcd.peer_active", m.group(1)
    return None


_KEEP_FIELDS = (
    "to",
    "prefix",
    "request",
    "error",
    "caller",
    "local-member-id",
    "peer-id",
    "remote-peer-id",
    "stream-reader-type",
    "stream-writer-type",
    "reason",
    "age",
    "from",
    "type",
)


def _pulled(kv: dict[str, str]) -> str:
    fp = kv.get("firstStartedPulling", "")
    return "no" if fp.startswith("0001-01-01") or not fp else "yes"


def _sandbox_cause(msg: str) -> str:
    low = msg.lower()
    causes = []
    if _APISERVER_TIMEOUT in msg:
        causes.append("apiserver-timeout")
    if "cni" in low or "network" in low:
        causes.append("cni")
    if any(d.lower() in low for d in _DEADLINE):
        causes.append("deadline-exceeded")
    return ",".join(causes) or "other"


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
