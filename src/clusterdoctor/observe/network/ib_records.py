"""The records an RDMA port listing reduces to, and the state names in ibstat's words.

Every program :mod:`~clusterdoctor.observe.network.ibports` reads (``ibstat``, ``ibstatus``,
``ibv_devinfo [-v]``, ``rdma link``, ``show_gids``, ``ibdev2netdev [-v]``, ``lshca``, sysfs) reduces to
the same three records, so the rules judge a port the same way whichever tool printed it:

* :class:`IbPort` — one device port: its logical state (``Down``, ``Initializing``, ``Armed``,
  ``Active``) and physical state (``Polling``, ``Disabled``, ``LinkUp`` ...), link layer, rate, width,
  LIDs, MTUs, netdev;
* :class:`GidEntry` — one GID table entry (``ibv_devinfo -v``, ``show_gids``): index, GID, RoCE version;
* :class:`NetdevLink` — one ``ibdev2netdev`` line: the netdev of a port and whether *the netdev* is up
  (``(Down)`` there is the IP side: an IPoIB netdev without an address is down on a healthy pure-IB
  fabric, so the rules never read it as the IB link; ``-v`` adds the IB port state itself).

State names follow the programs' own tables: rdma-core ``infiniband-diags/ibstat.c`` (``Down``,
``Initializing``, ``Armed``, ``Active``; ``Sleep``, ``Polling``, ``Disabled``,
``PortConfigurationTraining``, ``LinkUp``, ``LinkErrorRecovery``, ``PhyTest``), ``libibverbs/examples/devinfo.c``
(``PORT_DOWN`` ... ``PORT_ACTIVE``, ``LINK_UP`` ...), ``infiniband-diags/scripts/ibstatus`` (``4: ACTIVE``,
``5: LinkUp``), iproute2 ``rdma link`` (``state ACTIVE physical_state LINK_UP``), Mellanox ``ibdev2netdev``
and ``show_gids`` (mlnx-tools), and ``lshca`` (``actv``/``init``/``poll``/``down``). The small value
readers the parser shares (``0x1a`` LIDs, ``4096 (5)`` MTUs, ``100 Gb/sec`` rates, link layers) are
here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["GidEntry", "IbListing", "IbPort", "NetdevLink", "normal_phys_state", "normal_state"]


@dataclass(frozen=True)
class IbPort:
    """One port of one RDMA device as one program printed it."""

    device: str | None  # mlx5_0; None when the excerpt does not name it
    port: int | None
    program: str  # ibstat | ibstatus | ibv_devinfo | rdma link | ibdev2netdev -v | lshca
    source: str
    line: int  # 1-based line of the port's first line in the input
    state: str | None = None  # Down | Initializing | Armed | Active | ActiveDefer
    phys_state: str | None = None  # Sleep | Polling | Disabled | PortConfigurationTraining | LinkUp | ...
    link_layer: str | None = None  # InfiniBand | Ethernet
    rate_gbps: float | None = None
    width: str | None = None  # 1X, 2X, 4X, 8X, 12X
    speed: str | None = None  # "25.0 Gbps", "EDR"
    lid: int | None = None
    sm_lid: int | None = None
    active_mtu: int | None = None
    max_mtu: int | None = None
    netdev: str | None = None
    ca_type: str | None = None
    firmware: str | None = None
    pci: str | None = None
    pcie_width: str | None = None  # lshca LnkStaWidth (x8), when below capability
    pcie_capability: str | None = None  # lshca LnkCapWidth (x16 G3)

    @property
    def name(self) -> str:
        dev = self.device or "?"
        return f"{dev}/{self.port}" if self.port is not None else dev


@dataclass(frozen=True)
class GidEntry:
    """One entry of a port's GID table."""

    device: str | None
    port: int | None
    index: int
    gid: str
    version: str | None  # "v1" | "v2" (RoCE); None on an InfiniBand port
    source: str
    line: int
    netdev: str | None = None
    ipv4: str | None = None

    @property
    def link_local(self) -> bool:
        return self.gid.lower().startswith("fe80")

    @property
    def address(self) -> str:
        """The IP address the GID carries: IPv4 for a ``::ffff:a.b.c.d`` GID, else the GID itself."""
        return self.ipv4 or self.gid


@dataclass(frozen=True)
class NetdevLink:
    """One line of ``ibdev2netdev``: a port's netdev and whether the netdev (the IP side) is up."""

    device: str
    port: int
    netdev: str
    up: bool
    source: str
    line: int
    port_state: str | None = None  # -v: the IB port state (ACTIVE, DOWN, INIT), normalised
    pci: str | None = None


@dataclass
class IbListing:
    """What one input held."""

    ports: list[IbPort] = field(default_factory=list)
    gids: list[GidEntry] = field(default_factory=list)
    netdevs: list[NetdevLink] = field(default_factory=list)
    programs: list[str] = field(default_factory=list)  # in the order first seen
    skipped: list[int] = field(default_factory=list)  # 1-based lines that none of the programs print
    # `grep . /sys/class/infiniband/*/ports/*/counters/*`: device/port -> counter -> value
    counters: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)

    def saw(self, program: str) -> None:
        if program not in self.programs:
            self.programs.append(program)


# --- state names ------------------------------------------------------------------------------------

_STATES = {
    "down": "Down",
    "init": "Initializing",
    "initializing": "Initializing",
    "armed": "Armed",
    "active": "Active",
    "actv": "Active",
    "activedefer": "ActiveDefer",
    "poll": "Down",  # lshca: down/polling
    "nop": None,
}
_PHYS = {
    "sleep": "Sleep",
    "polling": "Polling",
    "disabled": "Disabled",
    "portconfigurationtraining": "PortConfigurationTraining",
    "portconfigurationtrainning": "PortConfigurationTraining",
    "configurationtraining": "PortConfigurationTraining",  # devinfo.c: "PORT_CONFIGURATION TRAINNING"
    "configurationtrainning": "PortConfigurationTraining",
    "linkup": "LinkUp",
    "linkerrorrecovery": "LinkErrorRecovery",
    "phytest": "PhyTest",
    "nostatechange": None,
}
_NUM_PREFIX = re.compile(r"^\s*\d{1,2}\s*:\s*")  # ibstatus / sysfs: "4: ACTIVE"
_PAREN_SUFFIX = re.compile(r"(?<!\s)\s*+\(\d{1,3}\)\s*$")  # ibv_devinfo: "PORT_ACTIVE (4)"


def _key(s: str) -> str:
    s = _PAREN_SUFFIX.sub("", _NUM_PREFIX.sub("", s)).strip().lower()
    if s.startswith("port_"):
        s = s[5:]
    return re.sub(r"[^a-z]", "", s)


def normal_state(s: str | None) -> str | None:
    """A port state as any of the programs prints it, in ibstat's words (``Active``), or None."""
    if not s:
        return None
    return _STATES.get(_key(s))


def normal_phys_state(s: str | None) -> str | None:
    """A physical port state as any of the programs prints it, in ibstat's words (``LinkUp``)."""
    if not s:
        return None
    return _PHYS.get(_key(s))


def _link_layer(s: str) -> str | None:
    k = s.strip().lower()
    if k in ("infiniband", "ib"):
        return "InfiniBand"
    if k in ("ethernet", "eth", "roce"):
        return "Ethernet"
    return None


def _int(s: str) -> int | None:
    s = s.strip()
    try:
        return int(s, 16) if s.lower().startswith("0x") else int(s)
    except ValueError:
        return None


def _float(s: str) -> float | None:
    m = re.match(r"^\s*(\d{1,6}(?:\.\d{1,3})?)", s)
    return float(m.group(1)) if m else None


def _mtu(s: str) -> int | None:
    m = re.match(r"^\s*(\d{3,5})\b", s)
    return int(m.group(1)) if m else None
