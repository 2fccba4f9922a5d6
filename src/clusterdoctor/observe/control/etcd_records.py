"""The records etcdctl's outputs are read into (shared by the JSON and the text parsers).

Member ids are uint64 (printed in hex by ``-w table`` and ``-w simple``, in decimal by ``-w json``); they
stay Python ints here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "EndpointError",
    "EndpointHealth",
    "EndpointStatus",
    "EtcdMember",
    "EtcdStatus",
    "MemberList",
    "parse_duration",
]


@dataclass(frozen=True)
class EndpointStatus:
    """One row of ``etcdctl endpoint status``."""

    endpoint: str
    member_id: int
    cluster_id: int
    leader: int
    version: str
    db_size: int
    db_size_in_use: int | None
    raft_term: int
    raft_index: int
    raft_applied_index: int
    is_learner: bool = False
    errors: tuple[str, ...] = ()
    source: str = ""  # the file (or command) this row was read from: rows of one file are one moment
    quota: int | None = None  # the backend quota in bytes, when the output says it (etcdctl 3.6 tables)

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader and self.leader != 0


@dataclass(frozen=True)
class EndpointHealth:
    """One row of ``etcdctl endpoint health``."""

    endpoint: str
    healthy: bool
    took_seconds: float | None
    error: str | None = None
    source: str = ""


@dataclass(frozen=True)
class EndpointError:
    """An endpoint etcdctl could not read (from its stderr)."""

    endpoint: str
    message: str
    source: str = ""


@dataclass
class EtcdStatus:
    """What etcdctl said about a cluster: the ``etcd_status`` observation."""

    statuses: list[EndpointStatus] = field(default_factory=list)
    health: list[EndpointHealth] = field(default_factory=list)
    errors: list[EndpointError] = field(default_factory=list)

    def leader_endpoints(self) -> list[str]:
        return [s.endpoint for s in self.statuses if s.is_leader]

    def merge(self, other: EtcdStatus) -> EtcdStatus:
        """Both outputs together (a status file and a health file of the same cluster)."""
        return EtcdStatus(
            self.statuses + other.statuses, self.health + other.health, self.errors + other.errors
        )


@dataclass(frozen=True)
class EtcdMember:
    """One etcd member as something names it: ``etcdctl member list`` (every field), a member's own
    log (its name, ID and URLs when it starts) or its metrics (``etcd_server_id``). Unknown fields
    are empty; ``id`` is 0 when unknown."""

    id: int
    name: str = ""
    peer_urls: tuple[str, ...] = ()
    client_urls: tuple[str, ...] = ()
    is_learner: bool = False
    cluster_id: int = 0
    source: str = ""  # where this was read (a file path, "etcdctl member list")

    @property
    def hex_id(self) -> str:
        return format(self.id, "x") if self.id else ""


@dataclass
class MemberList:
    """``etcdctl member list -w json``: the cluster's members, as the answering member sees them."""

    cluster_id: int
    answered_by: int  # header.member_id: the member etcdctl asked
    raft_term: int
    members: list[EtcdMember] = field(default_factory=list)


# from the start of a number only (a start inside it ends where it did): linear (was cubic)
_DUR_RE = re.compile(r"(?<![0-9])([0-9]++(?:\.[0-9]++)?|\.[0-9]++)(ns|us|µs|μs|ms|s|m|h)")
_DUR_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float | None:
    """A Go duration string (``868.135µs``, ``2.000903725s``, ``1m30s``) in seconds; None if not one."""
    s = text.strip()
    if not s:
        return None
    pos = 0
    total = 0.0
    for m in _DUR_RE.finditer(s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _DUR_UNIT[m.group(2)]
        pos = m.end()
    return total if pos == len(s) and pos > 0 else None
