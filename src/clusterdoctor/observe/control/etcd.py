"""etcdctl output: ``endpoint status -w json``, ``endpoint health -w json`` and ``member list -w json``
(the text forms, ``-w table`` and ``-w simple``, are read by :mod:`clusterdoctor.observe.control.etcdctl_text`).

Parsers are pure (:func:`parse_endpoint_status`, :func:`parse_endpoint_health`,
:func:`parse_member_list`); the stderr of
a failed ``endpoint status`` ("Failed to get the status of endpoint X (reason)") is read by
:func:`parse_etcdctl_errors`. :func:`collect_etcd_status` runs the real ``etcdctl`` with a timeout.
Member ids are uint64 (printed in hex by ``-w table``, in decimal by ``-w json`` — etcdctl 3.4.23
with or without ``--hex``; a hex string is read too); they stay Python ints here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from typing import Any

from clusterdoctor.errors import CollectError, InputError
from clusterdoctor.observe.control.etcd_records import (
    EndpointError,
    EndpointHealth,
    EndpointStatus,
    EtcdMember,
    EtcdStatus,
    MemberList,
    parse_duration,
)

__all__ = [
    "EndpointError",
    "EndpointHealth",
    "EndpointStatus",
    "EtcdMember",
    "EtcdStatus",
    "MemberList",
    "collect_etcd_status",
    "load_etcdctl_observations",
    "parse_duration",
    "parse_endpoint_health",
    "parse_endpoint_status",
    "parse_etcdctl_errors",
    "parse_member_list",
    "sniff_etcdctl",
]


def _load_json_list(text: str | bytes, path: str | None, what: str) -> list[Any]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    s = text.strip()
    if not s:
        raise InputError(f"empty etcdctl {what} output", path)
    try:
        data = json.loads(s)
    except json.JSONDecodeError as e:
        raise InputError(f"not etcdctl {what} JSON: {e.msg}", path, e.lineno) from None
    except RecursionError:
        raise InputError(f"etcdctl {what} JSON nested too deep to read", path) from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise InputError(f"etcdctl {what} JSON is not a list", path)
    return data


def _int(v: Any, name: str, path: str | None) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise InputError(f"etcdctl status field {name} is not a number", path)
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 reads as infinity
        raise InputError(f"etcdctl status field {name} is not a number: {v!r}", path) from None


def parse_endpoint_status(text: str | bytes, path: str | None = None) -> list[EndpointStatus]:
    """Rows of ``etcdctl endpoint status -w json`` (etcd 3.4–3.6 field names)."""
    out = []
    for i, row in enumerate(_load_json_list(text, path, "endpoint status")):
        if not isinstance(row, dict) or not isinstance(row.get("Status"), dict):
            raise InputError(f"entry {i} has no Status object (not endpoint status output?)", path)
        st = row["Status"]
        hdr = st.get("header") if isinstance(st.get("header"), dict) else {}
        errs = st.get("errors") or []
        out.append(
            EndpointStatus(
                endpoint=str(row.get("Endpoint", "")),
                member_id=_int(hdr.get("member_id", 0), "member_id", path),
                cluster_id=_int(hdr.get("cluster_id", 0), "cluster_id", path),
                leader=_int(st.get("leader", 0), "leader", path),
                version=str(st.get("version", "")),
                db_size=_int(st.get("dbSize", 0), "dbSize", path),
                db_size_in_use=_int(st["dbSizeInUse"], "dbSizeInUse", path) if "dbSizeInUse" in st else None,
                raft_term=_int(st.get("raftTerm", hdr.get("raft_term", 0)), "raftTerm", path),
                raft_index=_int(st.get("raftIndex", 0), "raftIndex", path),
                raft_applied_index=_int(st.get("raftAppliedIndex", 0), "raftAppliedIndex", path),
                is_learner=bool(st.get("isLearner", False)),
                errors=tuple(str(e) for e in errs) if isinstance(errs, list) else (str(errs),),
                source=path or "",
                quota=_int(st["dbSizeQuota"], "dbSizeQuota", path) if "dbSizeQuota" in st else None,
            )
        )
    return out


def parse_endpoint_health(text: str | bytes, path: str | None = None) -> list[EndpointHealth]:
    """Rows of ``etcdctl endpoint health -w json``."""
    out = []
    for i, row in enumerate(_load_json_list(text, path, "endpoint health")):
        if not isinstance(row, dict) or "health" not in row or "endpoint" not in row:
            raise InputError(f"entry {i} lacks endpoint/health (not endpoint health output?)", path)
        h = row["health"]
        healthy = h is True or (isinstance(h, str) and h.lower() == "true")
        took = row.get("took")
        out.append(
            EndpointHealth(
                endpoint=str(row["endpoint"]),
                healthy=healthy,
                took_seconds=parse_duration(took) if isinstance(took, str) else None,
                error=str(row["error"]) if row.get("error") else None,
                source=path or "",
            )
        )
    return out


def _member_id(v: Any, path: str | None) -> int:
    """A member ID as ``-w json`` prints it (a decimal uint64), or as a hex string."""
    if isinstance(v, str):  # JSON numbers are decimal; a string ID is hex (as -w table prints it)
        try:
            n = int(v, 16)
        except ValueError:
            raise InputError(f"member ID {v!r} is not a hexadecimal ID", path) from None
    else:
        n = _int(v, "ID", path)
    if not 0 <= n < 1 << 64:
        raise InputError(f"member ID {n} is not a uint64", path)
    return n


def _str_list(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        return (v,)
    if isinstance(v, list):
        return tuple(str(x) for x in v if isinstance(x, (str, int, float)))
    return ()


def parse_member_list(text: str | bytes, path: str | None = None) -> MemberList:
    """``etcdctl member list -w json`` (etcd 3.4-3.6; decimal IDs; hex strings are read too).

    A member that was added but has not started yet has no name and no client URLs; it is kept.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    s = text.strip()
    if not s:
        raise InputError("empty etcdctl member list output", path)
    try:
        data = json.loads(s)
    except json.JSONDecodeError as e:
        raise InputError(f"not etcdctl member list JSON: {e.msg}", path, e.lineno) from None
    if not isinstance(data, dict) or not isinstance(data.get("members"), list):
        raise InputError("no members list (not etcdctl member list -w json output?)", path)
    hdr = data.get("header") if isinstance(data.get("header"), dict) else {}
    cluster = _member_id(hdr.get("cluster_id", 0), path)
    out = MemberList(
        cluster_id=cluster,
        answered_by=_member_id(hdr.get("member_id", 0), path),
        raft_term=_int(hdr.get("raft_term", 0), "raft_term", path),
    )
    where = path or "etcdctl member list"
    for i, m in enumerate(data["members"]):
        if not isinstance(m, dict) or "ID" not in m:
            raise InputError(f"member {i} has no ID", path)
        out.members.append(
            EtcdMember(
                id=_member_id(m["ID"], path),
                name=str(m.get("name") or ""),
                peer_urls=_str_list(m.get("peerURLs")),
                client_urls=_str_list(m.get("clientURLs")),
                is_learner=bool(m.get("isLearner", False)),
                cluster_id=cluster,
                source=where,
            )
        )
    return out


_FAILED_RE = re.compile(r"Failed to get the status of endpoint (\S+) \((.*)\)\s*$")


def parse_etcdctl_errors(text: str | bytes, path: str | None = None) -> list[EndpointError]:
    """Endpoints named in etcdctl's stderr as failed (``Failed to get the status of endpoint X (why)``)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    out = []
    for line in text.splitlines():
        m = _FAILED_RE.search(line)
        if m:
            out.append(EndpointError(m.group(1), m.group(2), path or ""))
    return out


def collect_etcd_status(
    endpoints: list[str],
    etcdctl: str = "etcdctl",
    timeout: float = 5.0,
    extra_args: list[str] | None = None,
) -> EtcdStatus:
    """Run ``etcdctl endpoint status`` and ``endpoint health`` (``-w json``) against ``endpoints``.

    A failing endpoint becomes an :class:`EndpointError` (etcdctl exits 1 but still prints the
    others); :class:`CollectError` only when etcdctl is missing or prints nothing usable.
    """
    exe = shutil.which(etcdctl)
    if exe is None:
        raise CollectError(f"{etcdctl} not found on PATH (install etcd-client)")
    from clusterdoctor.observe.limits import current, run_bounded

    base = [
        exe,
        f"--endpoints={','.join(endpoints)}",
        f"--dial-timeout={max(1, int(min(timeout, 5)))}s",  # connect
        f"--command-timeout={max(1, int(timeout))}s",  # each request, answer included
        *(extra_args or []),
    ]
    env = {**os.environ, "ETCDCTL_API": "3"}
    res = EtcdStatus()
    run_deadline = time.monotonic() + current().seconds  # both commands within the run's budget
    for sub in ("status", "health"):
        limit = min(timeout * 2 + 5, run_deadline - time.monotonic())
        try:
            if limit <= 0:
                raise TimeoutError("the run's deadline has passed")
            # output capped as it is read (an etcd answering megabytes of "version" cannot fill memory)
            _code, stdout, stderr = run_bounded([*base, "endpoint", sub, "-w", "json"], limit, 16 << 20, env)
        except TimeoutError as e:
            raise CollectError(f"etcdctl endpoint {sub} timed out after {limit:g} s ({e})") from None
        except InputError as e:
            raise CollectError(f"etcdctl endpoint {sub}: {e.reason}") from None
        out = stdout.decode("utf-8", errors="replace")
        if sub == "status":
            res.errors.extend(parse_etcdctl_errors(stderr, "etcdctl endpoint status"))
            if out.strip():
                res.statuses = parse_endpoint_status(out, "etcdctl endpoint status")
        elif out.strip():
            res.health = parse_endpoint_health(out, "etcdctl endpoint health")
    if not res.statuses and not res.health and not res.errors:
        raise CollectError(f"etcdctl returned nothing for {','.join(endpoints)}")
    return res


_FAILED_RE_B = re.compile(rb"^Failed to get the status of endpoint \S+ \(", re.M)


def _load_text(data: bytes, path: str) -> dict[str, Any]:
    """etcdctl's text output (tables, simple lines, v2 cluster-health, stderr), and its client's own log
    lines (zap JSON) as events."""
    from clusterdoctor.observe.control.etcdctl_text import parse_etcdctl_text
    from clusterdoctor.observe.control.logs import parse_logs

    events: list[Any] = []
    try:
        res = parse_logs(data, path)
        events = res.events
    except InputError:
        pass
    try:
        txt = parse_etcdctl_text(data, path)
    except InputError:
        if not events:
            raise
        return {"events": events, "described_as": "etcdctl stderr (client log lines)"}
    only_stderr = txt.status.errors and not (
        txt.status.statuses or txt.status.health or txt.members or txt.alarms or txt.cluster_verdict
    )
    what = "etcdctl stderr" if only_stderr else txt.describe()
    out: dict[str, Any] = {"etcd_status": txt.status, "described_as": what}
    if txt.members:
        out["etcd_members"] = txt.members
    if txt.alarms:
        out["etcd_alarms"] = txt.alarms
    if txt.row_lines:  # a known message in a row's cell is about that row's member
        out["line_about"] = [(path, text, f"{mid:016x}") for text, mid in txt.row_lines]
    if events:
        out["events"] = events
    skipped = [n for n in txt.skipped]
    if skipped and txt.read:
        shown = ", ".join(str(n) for n in skipped[:8]) + (
            f" and {len(skipped) - 8} more" if len(skipped) > 8 else ""
        )
        out["warnings"] = [f"{path}: {len(skipped)} line(s) are not etcdctl output, skipped (line {shown})"]
    return out


def _is_member_list(h: bytes) -> bool:
    return h.startswith(b"{") and b'"members"' in h and (b'"peerURLs"' in h or b'"header"' in h)


def sniff_etcdctl(head: bytes, name: str = "") -> bool:
    """Loader hook: ``etcdctl endpoint status|health -w json`` or ``member list -w json`` output."""
    h = head.lstrip()[:4096]
    if _is_member_list(h) or _FAILED_RE_B.search(h):
        return True
    if not h.startswith((b"[", b"{")):
        from clusterdoctor.observe.control.etcdctl_text import sniff_etcdctl_text

        return sniff_etcdctl_text(head)
    if not h.startswith(b"["):
        return False
    return (b'"Status"' in h and b'"header"' in h) or (b'"endpoint"' in h and b'"health"' in h)


def load_etcdctl_observations(path: str) -> dict[str, Any]:
    """Loader hook: ``{"etcd_status": EtcdStatus}`` from a saved status or health JSON file, or
    ``{"etcd_members": [EtcdMember…]}`` from a saved member list."""
    from pathlib import Path

    p = Path(path)
    from clusterdoctor.observe.limits import read_input

    data = read_input(p)  # size-limited, one-line errors
    if not data.lstrip().startswith((b"[", b"{")) or _FAILED_RE_B.search(data[:4096]):
        return _load_text(data, str(p))
    if _is_member_list(data.lstrip()[:4096]):
        ml = parse_member_list(data, str(p))
        return {
            "etcd_members": ml.members,
            "described_as": f"etcdctl member list ({len(ml.members)} members)",
        }
    st = EtcdStatus()
    if b'"Status"' in data:
        st.statuses = parse_endpoint_status(data, str(p))
        what = "etcdctl endpoint status"
    else:
        st.health = parse_endpoint_health(data, str(p))
        what = "etcdctl endpoint health"
    return {"etcd_status": st, "described_as": what}
