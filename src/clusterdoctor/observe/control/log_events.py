"""Which log messages are events: a message (its text and, for zap/logfmt, its fields) → an
:class:`~clusterdoctor.model.Event` of one of :data:`EVENT_KINDS`, or nothing.

:mod:`clusterdoctor.observe.control.logs` finds the lines and their forms (zap JSON, capnslog, klog,
logfmt, journald, ``kubectl describe``) and hands each message here with its time, level and
component; this module decides what the message says (elections, leader loss, slow apply, slow
heartbeats, peers lost and back, CNI/CRI timeouts, sandbox failures, pod startup durations), reads the
durations and timestamps inside it (:func:`parse_duration`, :func:`parse_time`), and records what an
etcd line says about its members in the parse state (:class:`_Ctx`).
"""

from __future__ import annotations

import calendar
import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.model import Event, SourceRef

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


def _unquote(v: str) -> str:
    if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        return v[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return v


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
