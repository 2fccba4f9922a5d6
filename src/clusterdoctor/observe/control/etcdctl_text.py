"""etcdctl's text output (``-w table`` and the default ``-w simple``, v3 and v2 API) → the records of
:mod:`clusterdoctor.observe.control.etcd_records`.

What etcdctl prints, from etcd-io/etcd ``etcdctl/ctlv3/command/printer.go`` (the columns),
``printer_simple.go`` (one line per row, fields joined by ``", "``), ``printer_table.go`` (tablewriter
tables, upper-cased headers) and ``ep_command.go``, and for the v2 API ``etcdctl/ctlv2/command/
cluster_health.go`` and ``member_commands.go``:

* ``endpoint status``: ``ENDPOINT | ID | VERSION | DB SIZE | IS LEADER | IS LEARNER | RAFT TERM | RAFT INDEX |
  RAFT APPLIED INDEX | ERRORS`` (3.4/3.5; 3.3 has no IS LEARNER and no applied index; 3.6 adds STORAGE
  VERSION, IN USE, PERCENTAGE NOT IN USE, QUOTA and the downgrade columns). Sizes are humanize.Bytes
  text (``25 kB``, ``2.1 GB``: powers of 1000);
* ``endpoint health``: ``<ep> is healthy: successfully committed proposal: took = <d>``, ``<ep> is unhealthy:
  failed to commit proposal: <err>`` / ``failed to connect: <err>``, or the ``ENDPOINT | HEALTH | TOOK |
  ERROR`` table;
* ``member list``: ``<id>, started|unstarted, <name>, <peer urls>, <client urls>[, <is learner>]`` or the
  ``ID | STATUS | NAME | PEER ADDRS | CLIENT ADDRS | IS LEARNER`` table;
* ``alarm list``: ``memberID:<decimal id> alarm:NOSPACE`` (the alarm member printed with ``%+v``; the
  README shows it as ``alarm:NOSPACE``);
* v2 ``member list``: ``<id>: name=<n> peerURLs=<u> clientURLs=<u> isLeader=<bool>`` (``<id>[unstarted]:
  peerURLs=<u>``); v2 ``cluster-health``: ``member <id> is healthy: got healthy result from <url>``,
  ``... is unhealthy: got unhealthy result from <url>``, ``... is unreachable: [<urls>] are all
  unreachable``, ``failed to check the health of member <id> on <url>: <err>``, ``cluster is healthy |
  degraded | unavailable``;
* ``Failed to get the status of endpoint <ep> (<err>)`` on stderr, and etcdctl's last ``Error: ...``.

:func:`parse_etcdctl_text` is pure and reads any mix of these (a paste often holds several commands);
lines that are none of them are counted as skipped, and :class:`~clusterdoctor.errors.InputError` is
raised only when no line is etcdctl output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.etcd_records import (
    EndpointError,
    EndpointHealth,
    EndpointStatus,
    EtcdMember,
    EtcdStatus,
    parse_duration,
)

__all__ = ["EtcdAlarm", "EtcdctlText", "parse_etcdctl_text", "parse_size", "sniff_etcdctl_text"]

MAX_LINE = 8192  # longer lines are not etcdctl output (its rows are a few hundred characters)


@dataclass(frozen=True)
class EtcdAlarm:
    """One raised alarm (``etcdctl alarm list``): the member that raised it and its type."""

    member_id: int
    alarm: str  # NOSPACE, CORRUPT
    source: str = ""


@dataclass
class EtcdctlText:
    """What :func:`parse_etcdctl_text` read."""

    status: EtcdStatus = field(default_factory=EtcdStatus)
    members: list[EtcdMember] = field(default_factory=list)
    alarms: list[EtcdAlarm] = field(default_factory=list)
    cluster_verdict: str | None = None  # v2 cluster-health's last line: healthy | degraded | unavailable
    errors: list[str] = field(default_factory=list)  # etcdctl's own "Error: ..." lines
    kinds: list[str] = field(default_factory=list)  # what was read, in order: "endpoint health", ...
    lines: int = 0
    read: int = 0
    skipped: list[int] = field(default_factory=list)  # 1-based numbers of lines that were not etcdctl output
    # (line text, member ID) of each endpoint status row's lines, its wrapped continuation lines included:
    # what a known message in a cell (ERRORS: alarm:NOSPACE) is about
    row_lines: list[tuple[str, int]] = field(default_factory=list)

    def describe(self) -> str:
        kinds = list(dict.fromkeys(self.kinds))
        return "etcdctl " + (" + ".join(kinds) if kinds else "output")


_SIZE_UNITS = {
    "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d{1,15}(?:\.\d{1,6})?)\s?([kKMGTP]i?B|B)?\s*$")


def parse_size(text: str) -> int | None:
    """humanize.Bytes text (``25 kB``, ``2.1 GB``, ``16 MiB``, ``4096``) → bytes; None if not a size."""
    m = _SIZE.match(text)
    if not m:
        return None
    unit = (m.group(2) or "B").lower()
    return int(float(m.group(1)) * _SIZE_UNITS.get(unit, 1))


_HEX_ID = re.compile(r"^[0-9a-f]{1,16}$")
_VERSION = re.compile(r"^\d{1,3}\.\d{1,3}\.\d{1,3}\S{0,40}$")
_BOOL = {"true": True, "false": False}

# simple (-w simple) forms
_HEALTHY = re.compile(
    r"^(?P<ep>\S{1,512}) is healthy: successfully committed proposal: took = (?P<took>\S{1,40})\s*$"
)
_UNHEALTHY = re.compile(r"^(?P<ep>\S{1,512}) is unhealthy: (?P<err>.{1,2000})$")
_FAILED_STATUS = re.compile(
    r"^Failed to get the status of endpoint (?P<ep>\S{1,512}) \((?P<err>.{0,2000})\)\s*$"
)
_ALARM = re.compile(r"^(?:memberID:(?P<id>\d{1,20}) )?alarm:(?P<alarm>[A-Z]{1,16})\s*$")
_ERROR = re.compile(r"^Error:\s+(?P<err>.{1,2000})$")
# v2 API
_V2_MEMBER = re.compile(
    r"^(?P<id>[0-9a-f]{1,16}): name=(?P<name>\S{0,256}) peerURLs=(?P<peer>\S{0,2048}) "
    r"clientURLs=(?P<client>\S{0,2048})(?: isLeader=(?P<leader>true|false))?\s*$"  # 2.0 printed no isLeader
)
_V2_UNSTARTED = re.compile(r"^(?P<id>[0-9a-f]{1,16})\[unstarted\]: peerURLs=(?P<peer>\S{0,2048})\s*$")
_V2_HEALTH = re.compile(
    r"^member (?P<id>[0-9a-f]{1,16}) is (?P<state>healthy|unhealthy)"
    r"(?:: got (?:un)?healthy result from (?P<url>\S{1,512}))?\s*$"  # etcd 2.0 printed no URL
)
_V2_UNREACHABLE = re.compile(r"^member (?P<id>[0-9a-f]{1,16}) is unreachable: (?P<why>.{1,2000})$")
_V2_CHECK_FAILED = re.compile(
    r"^failed to check the health of member (?P<id>[0-9a-f]{1,16}) on (?P<url>\S{1,512}): (?P<err>.{1,2000})$"
)
_V2_VERDICT = re.compile(
    r"^cluster (?:is (?P<v>healthy|degraded|unavailable)|may be unhealthy: .{0,500})\s*$"
)
_TABLE_BORDER = re.compile(r"^[+\-=─━┌┬┐├┼┤└┴┘╭╮╰╯│|\s]{3,}+$")  # \s* before a class holding \s: quadratic


def _cells(line: str) -> list[str] | None:
    """The cells of a table row (``| a | b |`` or ``│ a │ b │``), or None."""
    s = line.strip()
    if len(s) < 3 or s[0] not in "|│" or s[-1] not in "|│":
        return None
    return [c.strip() for c in re.split(r"[|│]", s[1:-1])]


def _id(text: str) -> int | None:
    t = text.strip()
    return int(t, 16) if _HEX_ID.match(t) else None


def _urls(text: str) -> tuple[str, ...]:
    return tuple(u for u in re.split(r"[,\s]+", text.strip()) if u)


def _bool(text: str) -> bool | None:
    return _BOOL.get(text.strip().lower())


def _int(text: str) -> int | None:
    t = text.strip()
    return int(t) if t.isdigit() and len(t) <= 20 else None


_STATUS_KEYS = {
    "endpoint": "endpoint", "id": "id", "version": "version", "storage version": "storage",
    "db size": "db", "in use": "in_use", "quota": "quota", "is leader": "leader", "is learner": "learner",
    "raft term": "term", "raft index": "index", "raft applied index": "applied", "errors": "errors",
}  # fmt: skip


def _status_row(values: dict[str, str], source: str) -> EndpointStatus | None:
    mid = _id(values.get("id", ""))
    db = parse_size(values.get("db", ""))
    if mid is None or db is None or not values.get("endpoint"):
        return None
    leader = _bool(values.get("leader", ""))
    errs = values.get("errors", "").strip()
    return EndpointStatus(
        endpoint=values["endpoint"],
        member_id=mid,
        cluster_id=0,
        leader=mid if leader else 0,
        version=values.get("version", ""),
        db_size=db,
        db_size_in_use=parse_size(values["in_use"]) if values.get("in_use") else None,
        raft_term=_int(values.get("term", "")) or 0,
        raft_index=_int(values.get("index", "")) or 0,
        raft_applied_index=_int(values.get("applied", "")) or _int(values.get("index", "")) or 0,
        is_learner=bool(_bool(values.get("learner", ""))),
        errors=tuple(e.strip() for e in errs.split(", ") if e.strip()) if errs else (),
        source=source,
        quota=parse_size(values["quota"]) if values.get("quota") else None,
    )


def _simple_status(fields: list[str], source: str) -> EndpointStatus | None:
    """A ``-w simple`` endpoint status row, by its etcdctl version's layout (see the module doc)."""
    if len(fields) < 7 or _id(fields[1]) is None or not _VERSION.match(fields[2]):
        return None
    if _VERSION.match(fields[3]) and len(fields) >= 13:  # 3.6: storage version, db size, in use, %, quota
        names = ["endpoint", "id", "version", "storage", "db", "in_use", "pct", "quota", "leader", "learner",
                 "term", "index", "applied", "errors"]  # fmt: skip
    elif len(fields) >= 9 and _bool(fields[5]) is not None:  # 3.4/3.5
        names = ["endpoint", "id", "version", "db", "leader", "learner", "term", "index", "applied", "errors"]
    else:  # 3.3
        names = ["endpoint", "id", "version", "db", "leader", "term", "index", "errors"]
    values = dict(zip(names, fields))
    if len(fields) > len(names):  # errors hold ", " themselves
        values["errors"] = ", ".join(fields[len(names) - 1 :])
    return _status_row(values, source)


def _simple_member(fields: list[str], source: str) -> EtcdMember | None:
    if len(fields) not in (5, 6) or _id(fields[0]) is None or fields[1] not in ("started", "unstarted"):
        return None
    return EtcdMember(
        id=_id(fields[0]) or 0,
        name=fields[2],
        peer_urls=_urls(fields[3]),
        client_urls=_urls(fields[4]),
        is_learner=bool(len(fields) == 6 and _bool(fields[5])),
        source=source,
    )


class _Table:
    """The table being read: its kind and column names (from its header row)."""

    def __init__(self, header: list[str]) -> None:
        self.cols = [h.strip().lower() for h in header]
        self.last: dict[str, str] | None = None  # the last row's cells (a wrapped cell continues it)
        cols = set(self.cols)
        if {"endpoint", "id", "version", "db size"} <= cols:
            self.kind = "endpoint status"
        elif {"endpoint", "health"} <= cols:
            self.kind = "endpoint health"
        elif {"id", "status", "name", "peer addrs"} <= cols:
            self.kind = "member list"
        elif {"endpoint", "hash"} <= cols:
            self.kind = "endpoint hashkv"
        else:
            self.kind = ""


def parse_etcdctl_text(text: str | bytes, path: str | None = None) -> EtcdctlText:
    """etcdctl's text output (any mix of the forms in the module docstring) → :class:`EtcdctlText`."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    src = path or "etcdctl output"
    out = EtcdctlText()
    st = out.status
    table: _Table | None = None
    unhealthy_v2: dict[str, EndpointHealth] = {}
    lines = text.splitlines()
    out.lines = len(lines)
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip("\r")
        s = line.strip()
        if not s:
            continue
        if len(line) > MAX_LINE:
            out.skipped.append(n)
            continue
        if _TABLE_BORDER.match(line) and not s.isalnum():
            if "|" in s or "+" in s or any(c in s for c in "─━┌├└"):
                out.read += 1
                continue
        cells = _cells(line)
        if cells is not None:
            low = [c.lower() for c in cells]
            if "endpoint" in low or ("id" in low and "status" in low):
                table = _Table(cells)
                out.read += 1
                continue
            if table is not None and table.kind and len(cells) == len(table.cols):
                if not cells[0].strip() and _continue_row(table, cells, out, src, line):
                    out.read += 1  # a cell the table writer wrapped onto a line of its own
                    continue
                if _table_row(table, cells, out, src):
                    out.read += 1
                    out.kinds.append(table.kind)
                    if table.kind == "endpoint status":
                        out.row_lines.append((line, out.status.statuses[-1].member_id))
                    continue
            out.skipped.append(n)
            continue
        table = None
        if _line(s, out, src, unhealthy_v2):
            out.read += 1
            continue
        out.skipped.append(n)
    # v2: a member that failed on one URL but answered on another is healthy
    answered = {h.endpoint for h in st.health if h.healthy}
    for mid, h in unhealthy_v2.items():
        if mid not in answered:
            st.health.append(h)
    found = st.statuses or st.health or st.errors or out.members or out.alarms or out.cluster_verdict
    if out.read == 0 or not (found or out.errors):
        raise InputError(
            "no line is etcdctl output (endpoint status/health, member list, alarm list)", path, 1
        )
    return out


def _continue_row(table: _Table, cells: list[str], out: EtcdctlText, src: str, line: str) -> bool:
    """An endpoint status row whose long cells (ERRORS: ``memberID:... alarm:NOSPACE``) the table writer
    wrapped: the non-empty cells of this line continue the row above, joined with a space."""
    if table.kind != "endpoint status" or table.last is None or not out.status.statuses:
        return False
    if not any(c.strip() for c in cells):
        return False
    values = dict(table.last)
    for k, c in zip(table.cols, cells):
        if c.strip():
            values[k] = (values.get(k, "").strip() + " " + c.strip()).strip()
    row = _status_row({_STATUS_KEYS.get(k, k): v for k, v in values.items()}, src)
    if row is None or row.member_id != out.status.statuses[-1].member_id:
        return False
    table.last = values
    out.status.statuses[-1] = row
    out.row_lines.append((line, row.member_id))
    return True


def _table_row(table: _Table, cells: list[str], out: EtcdctlText, src: str) -> bool:
    values = dict(zip(table.cols, cells))
    if table.kind == "endpoint status":
        row = _status_row({_STATUS_KEYS.get(k, k): v for k, v in values.items()}, src)
        if row is None:
            return False
        out.status.statuses.append(row)
        table.last = values
        return True
    if table.kind == "endpoint health":
        healthy = _bool(values.get("health", ""))
        if healthy is None:
            return False
        took = values.get("took", "")
        out.status.health.append(
            EndpointHealth(
                values.get("endpoint", ""),
                healthy,
                parse_duration(took) if took else None,
                values.get("error") or None,
                src,
            )
        )
        return True
    if table.kind == "member list":
        m = _simple_member(
            [values.get(k, "") for k in ("id", "status", "name", "peer addrs", "client addrs")]
            + ([values["is learner"]] if "is learner" in values else []),
            src,
        )
        if m is None:
            return False
        out.members.append(m)
        return True
    return table.kind == "endpoint hashkv"


def _line(s: str, out: EtcdctlText, src: str, unhealthy_v2: dict[str, EndpointHealth]) -> bool:
    """One line of the simple forms; True when it was one."""
    st = out.status
    m = _HEALTHY.match(s)
    if m:
        st.health.append(EndpointHealth(m.group("ep"), True, parse_duration(m.group("took")), None, src))
        out.kinds.append("endpoint health")
        return True
    m = _V2_HEALTH.match(s)
    if m:
        ok = m.group("state") == "healthy"
        url = m.group("url")
        st.health.append(
            EndpointHealth(
                url or f"member {m.group('id')}", ok, None, None if ok else "got unhealthy result", src
            )
        )
        urls = (url,) if url else ()
        out.members.append(EtcdMember(id=int(m.group("id"), 16), client_urls=urls, source=src))
        out.kinds.append("cluster-health")
        return True
    m = _V2_UNREACHABLE.match(s)
    if m:
        st.health.append(EndpointHealth(f"member {m.group('id')}", False, None, m.group("why"), src))
        out.members.append(EtcdMember(id=int(m.group("id"), 16), source=src))
        out.kinds.append("cluster-health")
        return True
    m = _V2_CHECK_FAILED.match(s)
    if m:
        unhealthy_v2.setdefault(
            m.group("url"), EndpointHealth(m.group("url"), False, None, m.group("err"), src)
        )
        # the line says whose URL it is: the member directory names the endpoint by its member
        out.members.append(EtcdMember(id=int(m.group("id"), 16), client_urls=(m.group("url"),), source=src))
        out.kinds.append("cluster-health")
        return True
    m = _V2_VERDICT.match(s)
    if m:
        out.cluster_verdict = m.group("v") or "unknown"
        out.kinds.append("cluster-health")
        return True
    m = _UNHEALTHY.match(s)
    if m:
        err = m.group("err")
        for lead in ("failed to commit proposal: ", "failed to connect: "):
            if err.startswith(lead):
                err = err[len(lead) :]
        st.health.append(EndpointHealth(m.group("ep"), False, None, err.strip() or "unhealthy", src))
        out.kinds.append("endpoint health")
        return True
    m = _FAILED_STATUS.match(s)
    if m:
        st.errors.append(EndpointError(m.group("ep"), m.group("err"), src))
        out.kinds.append("endpoint status")
        return True
    m = _ALARM.match(s)
    if m:
        out.alarms.append(EtcdAlarm(int(m.group("id") or 0), m.group("alarm"), src))
        out.kinds.append("alarm list")
        return True
    m = _V2_MEMBER.match(s)
    if m:
        out.members.append(
            EtcdMember(
                id=int(m.group("id"), 16),
                name=m.group("name"),
                peer_urls=_urls(m.group("peer")),
                client_urls=_urls(m.group("client")),
                source=src,
            )
        )
        out.kinds.append("member list")
        return True
    m = _V2_UNSTARTED.match(s)
    if m:
        out.members.append(
            EtcdMember(id=int(m.group("id"), 16), peer_urls=_urls(m.group("peer")), source=src)
        )
        out.kinds.append("member list")
        return True
    m = _ERROR.match(s)
    if m:
        out.errors.append(m.group("err").strip())
        return True
    if "," in s:
        fields = [f.strip() for f in s.split(",")]
        row = _simple_status(fields, src)
        if row is not None:
            st.statuses.append(row)
            out.kinds.append("endpoint status")
            return True
        mem = _simple_member(fields, src)
        if mem is not None:
            out.members.append(mem)
            out.kinds.append("member list")
            return True
    return False


_SNIFF = re.compile(
    r"^(?:\S{1,512} is (?:un)?healthy: (?:successfully committed|failed to)"
    r"|member [0-9a-f]{1,16} is (?:healthy|unhealthy|unreachable): "
    r"|[0-9a-f]{1,16}: name=\S{0,256} peerURLs="
    r"|(?:memberID:\d{1,20} )?alarm:[A-Z]{2,16}\s*$"
    r"|cluster is (?:healthy|degraded|unavailable)\s*$"
    r"|[0-9a-f]{1,16}, (?:un)?started, "
    r"|\S{1,512}, [0-9a-f]{1,16}, \d{1,3}\.\d{1,3}\.\d{1,3}\S{0,40}, "
    # table headers: cells are padded to the widest value (an https endpoint: 10+ blanks each side)
    r"|[ \t]{0,8}[|│][ \t]{0,64}(?:ENDPOINT|endpoint)[ \t]{0,64}[|│][ \t]{0,64}(?:ID|HEALTH|id|health)[ \t]{0,64}[|│]"
    r"|[ \t]{0,8}[|│][ \t]{0,64}ID[ \t]{0,64}[|│][ \t]{0,64}STATUS[ \t]{0,64}[|│][ \t]{0,64}NAME[ \t]{0,64}[|│])",
    re.M,
)


def sniff_etcdctl_text(head: bytes) -> bool:
    """True when the first bytes hold a line of etcdctl's text output."""
    if b"\x00" in head[:4096]:
        return False
    return _SNIFF.search(head[:65536].decode("utf-8", "replace")) is not None
