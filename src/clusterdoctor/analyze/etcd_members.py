"""Who is who in an etcd cluster, from every source that names members, so that each finding about
one member names it the same way: name, hex ID, peer and client URL.

Members are named by ``etcdctl member list -w json`` (everything, IDs in decimal), by the members'
own logs (a member's log gives its ID, name and client URLs when it starts, and every member's ID
and peer URL as it adds them), by ``etcdctl endpoint status`` (endpoint → member ID), and by metrics
(``etcd_server_id`` in a dump; an ``instance`` label ``host:port`` that is a member's client URL).
:func:`member_directory` joins them; :meth:`MemberDirectory.resolve` takes any token a source uses
for a member — hex ID, decimal ID, name, URL, ``host:port``, an ``instance`` label — and returns the
member.

Pure: reads observations only (rules call it).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Member", "MemberDirectory", "member_directory", "member_subject"]


@dataclass
class Member:
    """One member, with everything the sources say about it."""

    id: int = 0
    name: str = ""
    peer_urls: list[str] = field(default_factory=list)
    client_urls: list[str] = field(default_factory=list)
    cluster_id: int = 0
    sources: set[str] = field(default_factory=set)

    @property
    def hex_id(self) -> str:
        return format(self.id, "x") if self.id else ""

    def label(self) -> str:
        """Short: ``m0 (8e9e05c52164694d)``; the ID alone, or the URL, when that is all that is known."""
        if self.name and self.id:
            return f"{self.name} ({self.hex_id})"
        return self.name or self.hex_id or (self.client_urls or self.peer_urls or ["?"])[0]

    def describe(self) -> str:
        """Long: ``m0 (ID 8e9e05c52164694d, peer http://10.0.0.1:2380, client http://10.0.0.1:2379)``."""
        parts = []
        if self.id:
            parts.append(f"ID {self.hex_id}")
        if self.peer_urls:
            parts.append("peer " + ", ".join(self.peer_urls))
        if self.client_urls:
            parts.append("client " + ", ".join(self.client_urls))
        head = self.name or (self.hex_id if self.id else "member")
        if self.name == "" and self.id:
            parts = parts[1:]
        return f"{head} ({', '.join(parts)})" if parts else head


def _hostport(url: str) -> str:
    """``http://127.0.0.1:2379`` → ``127.0.0.1:2379``; a bare ``host:port`` stays."""
    u = url.strip()
    if "://" in u:
        return urllib.parse.urlparse(u).netloc or u
    return u.rstrip("/")


def _as_id(token: str) -> int | None:
    t = token.strip()
    if not t:
        return None
    if t.isdigit() and len(t) > 16:
        return int(t)  # a decimal uint64 (member list -w json)
    try:
        n = int(t, 16)
    except ValueError:
        return None
    return n if 0 < n < 1 << 64 and len(t) >= 8 else None


@dataclass
class MemberDirectory:
    """Members by ID (and those known only by URL), with the aliases sources use for them."""

    members: dict[int, Member] = field(default_factory=dict)
    by_instance: dict[str, int] = field(default_factory=dict)  # metrics instance label -> member ID

    def add(
        self,
        id: int = 0,
        name: str = "",
        peer_urls: Iterable[str] = (),
        client_urls: Iterable[str] = (),
        cluster_id: int = 0,
        source: str = "",
    ) -> Member | None:
        """Record what a source says about one member (merged with what is known)."""
        m: Member | None = self.members.get(id) if id else None
        if m is None and not id:
            m = self._by_url(list(client_urls) + list(peer_urls)) or (self._by_name(name) if name else None)
        if m is None and id:
            # known so far only by URL or name: now its ID is known too
            m = self._by_url(list(client_urls) + list(peer_urls)) or (self._by_name(name) if name else None)
            if m is not None and m.id and m.id != id:
                m = None
            if m is not None and not m.id:
                for k, v in list(self.members.items()):
                    if v is m:
                        del self.members[k]
                m.id = id
                self.members[id] = m
        if m is None:
            if not (id or name or peer_urls or client_urls):
                return None
            m = Member(id=id)
            self.members[id if id else -(len(self.members) + 1)] = m
        if name and not m.name:
            m.name = name
        for u in peer_urls:
            if u and u not in m.peer_urls:
                m.peer_urls.append(u)
        for u in client_urls:
            if u and u not in m.client_urls:
                m.client_urls.append(u)
        if cluster_id and not m.cluster_id:
            m.cluster_id = cluster_id
        if source:
            m.sources.add(source)
        return m

    def _by_url(self, urls: list[str]) -> Member | None:
        want = {_hostport(u) for u in urls if u}
        if not want:
            return None
        for m in self.members.values():
            if want & {_hostport(u) for u in m.client_urls + m.peer_urls}:
                return m
        return None

    def _by_name(self, name: str) -> Member | None:
        found = [m for m in self.members.values() if m.name == name]
        return found[0] if len(found) == 1 else None

    def resolve(self, token: str | int | None) -> Member | None:
        """The member a source means by ``token`` (hex/decimal ID, name, URL, host:port, instance)."""
        if token is None or token == "":
            return None
        if isinstance(token, int):
            return self.members.get(token)
        t = str(token).strip()
        if t.startswith("etcd:"):
            t = t[5:]
        if t in self.by_instance:
            return self.members.get(self.by_instance[t])
        n = _as_id(t)
        if n is not None and n in self.members:
            return self.members[n]
        m = self._by_url([t])
        if m is not None:
            return m
        return self._by_name(t)

    def label(self, token: str | int | None, default: str = "") -> str:
        """The short name of the member ``token`` means (``m0 (8e9e05c52164694d)``), else the token."""
        m = self.resolve(token)
        if m is not None:
            return m.label()
        if isinstance(token, str) and token.startswith("etcd:"):
            return token[5:]
        return str(token) if token not in (None, "") else default

    def describe(self, token: str | int | None, default: str = "") -> str:
        """The long name (name, ID, peer and client URL) of the member ``token`` means, else the token."""
        m = self.resolve(token)
        if m is not None:
            return m.describe()
        return self.label(token, default)

    def cluster_label(self, m: Member) -> str:
        """``etcd cluster 7d42fc7c0c50677f`` (when the sources give its ID), else ``etcd cluster of m0, m1, m2``."""
        if m.cluster_id:
            return f"etcd cluster {m.cluster_id:x}"
        peers = [x.label() for x in self.known() if not x.cluster_id or x.cluster_id == m.cluster_id]
        return "etcd cluster of " + ", ".join(peers)

    def known(self) -> list[Member]:
        return sorted(self.members.values(), key=lambda m: (m.name or "~", m.hex_id))


def member_directory(obs: Any) -> MemberDirectory:
    """Every member the observations name (``etcd_members``, ``etcd_status``, events, metrics)."""
    d = MemberDirectory()
    get = obs.get if hasattr(obs, "get") else (lambda k, default=None: None)
    members = list(get("etcd_members") or [])
    # complete records first (member lists), then what logs add
    members.sort(key=lambda m: (not (m.name and m.client_urls), not m.name))
    for m in members:
        d.add(
            getattr(m, "id", 0),
            getattr(m, "name", ""),
            getattr(m, "peer_urls", ()),
            getattr(m, "client_urls", ()),
            getattr(m, "cluster_id", 0),
            getattr(m, "source", ""),
        )
    st = get("etcd_status")
    for s in getattr(st, "statuses", None) or []:
        if s.member_id:
            d.add(s.member_id, client_urls=[s.endpoint] if s.endpoint else [], cluster_id=s.cluster_id)
    for e in get("events") or []:
        a = dict(getattr(e, "attrs", ()) or ())
        for k in ("local_member", "member", "peer", "leader", "old_leader"):
            n = _as_id(a.get(k) or "")
            if n and n not in d.members:
                d.add(n)
    for kind in ("etcd_metrics", "metrics"):
        w = get(kind)
        if w is None or not hasattr(w, "series"):
            continue
        for inst, key in getattr(w, "instance_identity", {}).items():
            if key.startswith("etcd:"):
                n = _as_id(key[5:])
                if n:
                    d.add(n)
                    d.by_instance[inst] = n
        ids = w.series.get("etcd_server_id", [])
        for s in ids:
            n = _as_id(s.labels.get("server_id", ""))
            inst = s.labels.get("instance", "")
            if n:
                d.add(n)
                if inst:
                    d.by_instance.setdefault(inst, n)
                elif len(ids) == 1:  # one unlabelled dump: its series have no instance label
                    d.by_instance.setdefault("", n)
                    d.by_instance.setdefault("etcd", n)
        for s in w.series.get("etcd_network_active_peers", []):
            n = _as_id(s.labels.get("Local", ""))
            inst = s.labels.get("instance", "")
            if n and inst:
                d.by_instance.setdefault(inst, n)
        # the peers each member talks to are members too (named by ID only)
        for name, label in (
            ("etcd_network_active_peers", "Remote"),
            ("etcd_network_peer_sent_failures_total", "To"),
            ("etcd_network_peer_sent_bytes_total", "To"),
        ):
            for s in w.series.get(name, []):
                n = _as_id(s.labels.get(label, ""))
                if n and n not in d.members:
                    d.add(n)
        break  # etcd_metrics and metrics are the same window when both are present
    return d


def member_subject(obs: Any, instance: str, directory: MemberDirectory | None = None) -> str:
    """The subject of a finding about the member behind a metrics ``instance`` label (or an ID)."""
    d = directory if directory is not None else member_directory(obs)
    w = obs.get("etcd_metrics") if hasattr(obs, "get") else None
    canon = w.canonical(instance) if w is not None and hasattr(w, "canonical") else instance
    m = d.resolve(instance) or d.resolve(canon)
    return m.label() if m is not None else (canon[5:] if canon.startswith("etcd:") else canon)


# --- members that stopped ------------------------------------------------------------------------

# Peer-log lines that say a member is gone, and those that say it is (still, or again) there.
_LOST_KINDS = ("etcd.peer_lost", "etcd.peer_inactive", "etcd.peer_unreachable")
_REFUSED = ("connection refused", "no route to host", "failed to reach", "get the version", "get version")


@dataclass
class Signal:
    """One observation that a member stopped (or the last one that it was alive)."""

    what: str
    time: float | None
    source: str | None
    strong: bool = True
    basis: str = ""  # "up", "peers", "etcdctl", "metrics", "own log"


@dataclass
class MemberDown:
    """A member that stopped answering and did not come back within the observations."""

    member: Member
    signals: list[Signal]
    stopped_at: float | None  # best estimate (earliest timed sign that it was gone)
    stopped_basis: str
    last_alive: float | None  # last sign of life
    last_alive_basis: str = ""
    was_leader: bool = False
    leader_basis: str = ""
    term: str | None = None
    new_leader: str | None = None
    elected_at: float | None = None

    @property
    def bases(self) -> list[str]:
        return sorted({s.basis for s in self.signals if s.strong})


def _src(e: Any) -> str | None:
    s = getattr(e, "source", None)
    if s is None:
        return None
    return f"{s.location}:{(s.detail or '').replace('line ', '')}".rstrip(":")


def _attr(e: Any, k: str) -> str:
    return dict(getattr(e, "attrs", ()) or ()).get(k) or ""


def _resolve_target(d: MemberDirectory, inst: str, job: str) -> Member | None:
    m = d.resolve(inst)
    if m is not None:
        return m
    host = inst.rsplit(":", 1)[0]
    if "etcd" not in job.lower() or not host:
        return None
    # a metrics port other than the client port (--listen-metrics-urls): the one member on that host
    on_host = [
        x for x in d.members.values() if any(_hostport(u).rsplit(":", 1)[0] == host for u in x.client_urls)
    ]
    return on_host[0] if len(on_host) == 1 else None


def members_down(obs: Any, d: MemberDirectory | None = None) -> list[MemberDown]:
    """Members that stopped: ``up == 0`` for their Prometheus target until the end, peers logging lost
    streams / refused connections to them with no sign of life after, ``endpoint health`` false or
    status errors, peers' metrics showing them inactive. A member with a later sign of life (its
    own log lines, a peer re-establishing its stream, ``up`` back to 1) is not down — a stalled
    member (SIGSTOP, a blocked disk) is the stall rules' business. The time it stopped is the
    earliest timed sign after its last sign of life; it ranks as the cause of the leader change
    when its followers lost it as their leader."""
    d = d if d is not None else member_directory(obs)
    get = obs.get
    evs = [e for e in get("events") or [] if getattr(e, "kind", "").startswith("etcd.")]
    spans = list(get("log_spans") or [])
    by_id: dict[int, list[Signal]] = {}
    alive: dict[int, tuple[float, str]] = {}

    def live(mid: int, t: float | None, why: str) -> None:
        if t is not None and (mid not in alive or t > alive[mid][0]):
            alive[mid] = (t, why)

    # 1. its own log lines, and peers re-establishing streams to it
    for sp in spans:
        m = d.resolve(sp.member) if sp.member else None
        if m is not None and sp.last is not None:
            live(m.id, sp.last, f"its own log ({sp.source}) has lines until then")
    for e in evs:
        if e.kind == "etcd.peer_active":
            m = d.resolve(_attr(e, "peer"))
            if m is not None:
                live(m.id, e.time, f"{_who(d, e)} (re)connected to it ({_src(e)})")
    # 2. peers losing it
    for e in evs:
        if e.kind not in _LOST_KINDS:
            continue
        m = d.resolve(_attr(e, "peer"))
        if m is None or _attr(e, "local_member") == m.hex_id:
            continue
        text = (e.message + " " + _attr(e, "error")).lower()
        strong = e.kind != "etcd.peer_unreachable" or any(r in text for r in _REFUSED)
        verb = {
            "etcd.peer_lost": "lost its stream to it",
            "etcd.peer_inactive": "marked it inactive",
            "etcd.peer_unreachable": "could not reach it",
        }[e.kind]
        by_id.setdefault(m.id, []).append(Signal(f"{_who(d, e)} {verb}", e.time, _src(e), strong, "peers"))
    # 3. Prometheus up
    w = get("metrics")
    if w is not None and hasattr(w, "series"):
        for s in w.series.get("up", []):
            pts = [(t, v) for t, v in s.points if v == v]
            # a range query's point at t holds the last scrape at or before t: up to one step earlier
            step = min((b[0] - a[0] for a, b in zip(pts, pts[1:]) if b[0] > a[0]), default=0.0)
            if len(pts) < 2 or pts[-1][1] != 0:
                for t, v in pts:
                    if v == 1:
                        m = _resolve_target(d, s.labels.get("instance", ""), s.labels.get("job", ""))
                        if m is not None:
                            live(m.id, t - step, f"Prometheus found its target {s.labels.get('instance')} up")
                continue
            m = _resolve_target(d, s.labels.get("instance", ""), s.labels.get("job", ""))
            if m is None:
                continue
            i = len(pts) - 1
            while i > 0 and pts[i - 1][1] == 0:
                i -= 1
            if i > 0:
                live(
                    m.id,
                    pts[i - 1][0] - step,
                    f"Prometheus last found {s.labels.get('instance')} up (scrape within {step:g} s before "
                    f"{_iso(pts[i - 1][0])})",
                )
            by_id.setdefault(m.id, []).append(
                Signal(
                    f"Prometheus: up == 0 for target {s.labels.get('instance')} "
                    f"(job {s.labels.get('job', '?')}) from its scrape at this time to the end of the data",
                    pts[i][0],
                    w.source_for(s.labels, "up") or None,
                    True,
                    "up",
                )
            )
    # 4. etcdctl
    st = get("etcd_status")
    for h in getattr(st, "health", None) or []:
        m = d.resolve(h.endpoint)
        if m is not None and not h.healthy:
            by_id.setdefault(m.id, []).append(
                Signal(
                    f"etcdctl endpoint health {h.endpoint}: false ({h.error or 'no error'})",
                    None,
                    h.source or None,
                    True,
                    "etcdctl",
                )
            )
    for er in getattr(st, "errors", None) or []:
        m = d.resolve(er.endpoint)
        if m is not None:
            by_id.setdefault(m.id, []).append(
                Signal(
                    f"etcdctl endpoint status {er.endpoint}: {er.message}",
                    None,
                    er.source or None,
                    True,
                    "etcdctl",
                )
            )
    # 5. peers' metrics dumps: etcd_network_active_peers{Remote=<it>} == 0
    wm = get("etcd_metrics")
    if wm is not None and hasattr(wm, "series"):
        for s in wm.series.get("etcd_network_active_peers", []):
            m = d.resolve(s.labels.get("Remote", ""))
            if m is None or not s.points or not wm.snapshot_for(s.labels):
                continue
            if s.points[-1][1] == 0:
                by_id.setdefault(m.id, []).append(
                    Signal(
                        f"{d.label(s.labels.get('Local', ''))} reports it not active "
                        "(etcd_network_active_peers == 0)",
                        None,
                        wm.source_for(s.labels) or None,
                        True,
                        "metrics",
                    )
                )
    out = []
    last_log = max((sp.last for sp in spans if sp.last is not None), default=None)
    for mid, sigs in by_id.items():
        m = d.members[mid]
        seen = alive.get(mid)
        after = [s for s in sigs if s.time is None or seen is None or s.time > seen[0]]
        if (
            seen is not None
            and any(s.time is not None and s.time <= seen[0] for s in sigs)
            and not [s for s in after if s.time is not None]
        ):
            continue  # it was lost, then seen alive again: not down at the end
        strong = [s for s in after if s.strong]
        timed = [s for s in strong if s.time is not None]
        if not timed and len({s.basis for s in strong}) < 2:
            continue  # one untimed source alone (a health check) is ETCD008's finding
        first = min(timed, key=lambda s: s.time) if timed else None
        # its own log ending before the others is supporting evidence only
        own = [sp for sp in spans if sp.member and d.resolve(sp.member) is m and sp.last is not None]
        if own and last_log is not None and own[0].last is not None and last_log > own[0].last:
            after.append(
                Signal(
                    f"its own log ends here; the other logs go on until {_iso(last_log)}",
                    own[0].last,
                    own[0].source,
                    False,
                    "own log",
                )
            )
        down = MemberDown(
            member=m,
            signals=sorted(after, key=lambda s: (s.time is None, s.time or 0.0)),
            stopped_at=first.time if first else None,
            stopped_basis=first.what if first else "",
            last_alive=seen[0] if seen else None,
            last_alive_basis=seen[1] if seen else "",
        )
        _leader(down, evs, obs, d)
        out.append(down)
    out.sort(key=lambda x: (x.stopped_at is None, x.stopped_at or 0.0))
    return out


def _leader(down: MemberDown, evs: list[Any], obs: Any, d: MemberDirectory) -> None:
    """Whether the member was the leader when it stopped: its followers lost it as their leader."""
    hid = down.member.hex_id
    t0 = down.stopped_at if down.stopped_at is not None else down.last_alive
    lost = [
        e
        for e in evs
        if (e.kind == "etcd.lost_leader" and _attr(e, "leader") == hid)
        or (e.kind == "etcd.leader_changed" and _attr(e, "old_leader") == hid)
    ]
    if t0 is not None:
        lost = [e for e in lost if e.time is None or e.time >= t0 - 1.0]
    if lost:
        first = min(lost, key=lambda e: e.time if e.time is not None else float("inf"))
        down.was_leader = True
        down.term = _attr(first, "term") or None
        down.leader_basis = f"{_who(d, first)} lost it as leader at term {down.term or '?'} ({_src(first)})"
        elected = [
            e
            for e in evs
            if e.kind in ("etcd.elected_leader", "etcd.leader_changed")
            and _attr(e, "term") == (down.term or "")
            and _attr(e, "leader") not in ("", hid)
        ]
        if elected:
            el = min(elected, key=lambda e: e.time if e.time is not None else float("inf"))
            down.new_leader = d.label(_attr(el, "leader"))
            down.elected_at = el.time
        return
    st = obs.get("etcd_status")
    for s in getattr(st, "statuses", None) or []:
        if s.leader == down.member.id and s.member_id != down.member.id:
            others = [x for x in st.statuses if x.source != s.source and x.leader and x.leader != s.leader]
            if others:
                down.was_leader = True
                down.leader_basis = (
                    f"{s.source or 'etcdctl endpoint status'} shows it as the leader; "
                    f"{others[0].source or 'a later status'} shows {d.label(others[0].leader)}"
                )
                down.new_leader = d.label(others[0].leader)
                return


def _who(d: MemberDirectory, e: Any) -> str:
    lm = _attr(e, "local_member")
    return f"member {d.label(lm)}" if lm else "a peer"


def _iso(t: float) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
