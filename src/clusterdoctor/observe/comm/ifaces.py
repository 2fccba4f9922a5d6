"""A host's network interfaces as users paste them in NCCL socket threads: ``ip addr``, ``ip -br addr``
and ``ifconfig``, to check what ``NCCL_SOCKET_IFNAME`` / ``GLOO_SOCKET_IFNAME`` can match.

Formats, as the programs print them:

* ``ip addr`` (iproute2 ``ip/ipaddress.c``): ``2: eth0@if23: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 ...
  state UP ...``, then indented ``link/ether ...``, ``inet 172.17.0.2/16 ... scope global eth0``, ``inet6 ...``;
* ``ip -br addr``: ``eth0  UP  10.0.0.5/24 fe80::1/64`` (name, state, addresses);
* ``ifconfig`` (net-tools 2.x): ``eth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500`` then ``inet
  10.0.0.5  netmask ...``; net-tools 1.x: ``eth0      Link encap:Ethernet  HWaddr ...`` then ``inet
  addr:10.0.0.5  Bcast:...``, ``UP BROADCAST RUNNING ...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError

__all__ = ["Iface", "IfaceList", "load_ifaces", "parse_ifaces", "sniff_ifaces"]

MAX_IFACES = 4096
_IP_HDR = re.compile(
    r"^\d{1,6}: (?P<name>[\w.:\-]{1,32})(?:@[\w.\-]{1,32})?: <(?P<flags>[A-Z_,\-]{0,200})>(?P<rest>[^\n]{0,300})$"
)
_IP_INET = re.compile(r"^inet6? (?P<addr>[0-9a-fA-F.:]{2,64})(?:/\d{1,3})?\b")
_BR = re.compile(
    r"^(?P<name>[\w.\-]{1,32})(?:@[\w.\-]{1,32})? +(?P<state>UP|DOWN|UNKNOWN|LOWERLAYERDOWN|DORMANT|NOTPRESENT)(?P<addrs>(?: +[0-9a-fA-F.:]{2,64}/\d{1,3})*) *$"
)
_IFC_HDR = re.compile(r"^(?P<name>[\w.\-]{1,32}): flags=\d{1,8}<(?P<flags>[A-Z_,\-]{0,200})>  mtu \d{1,6}")
_IFC_OLD_HDR = re.compile(r"^(?P<name>[\w.:\-]{1,32}) +Link encap:")
_IFC_INET = re.compile(r"^inet6? (?:addr: ?)?(?P<addr>[0-9a-fA-F.:]{2,64})(?:/\d{1,3})?\b")
_IFC_OLD_FLAGS = re.compile(
    r"^(?P<flags>(?:UP|BROADCAST|RUNNING|MULTICAST|LOOPBACK|POINTOPOINT|NOARP)(?: [A-Z]{2,12}){0,8})  "
)


@dataclass
class Iface:
    name: str
    up: bool
    addrs: list[str] = field(default_factory=list)

    @property
    def routable(self) -> bool:
        """Up, with an address other than loopback and IPv6 link-local."""
        return self.up and any(not a.startswith(("127.", "fe80:", "::1")) and a != "::1" for a in self.addrs)


@dataclass
class IfaceList:
    path: str
    program: str
    ifaces: list[Iface] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        return [i.name for i in self.ifaces]


def parse_ifaces(text: str, path: str = "<ip addr>") -> IfaceList:
    """The interfaces of an ``ip addr`` / ``ip -br addr`` / ``ifconfig`` output; InputError when none."""
    lines = [ln.rstrip() for ln in text.splitlines()[:200_000]]
    out = IfaceList(path, "")
    cur: Iface | None = None
    for raw in lines:
        if not raw.strip() or len(raw) > 4096:
            continue
        line = raw.strip()
        indented = raw[:1].isspace()
        if not indented and (m := _IP_HDR.match(line)):
            flags = m.group("flags").split(",")
            cur = Iface(m.group("name"), "UP" in flags or " state UP " in m.group("rest") + " ")
            out.program = out.program or "ip addr"
        elif not indented and (m := _IFC_HDR.match(line)):
            cur = Iface(m.group("name"), "UP" in m.group("flags").split(","))
            out.program = out.program or "ifconfig"
        elif not indented and (m := _IFC_OLD_HDR.match(line)):
            cur = Iface(m.group("name"), False)
            out.program = out.program or "ifconfig"
        elif not indented and (m := _BR.match(line)):
            cur = Iface(m.group("name"), m.group("state") in ("UP", "UNKNOWN"))
            cur.addrs = [a.split("/")[0] for a in m.group("addrs").split()]
            out.program = out.program or "ip -br addr"
        elif indented and cur is not None:
            if m := (_IP_INET.match(line) or _IFC_INET.match(line)):
                cur.addrs.append(m.group("addr"))
            elif _IFC_OLD_FLAGS.match(line + "  ") and line.startswith("UP"):
                cur.up = True
            continue
        else:
            cur = None
            continue
        if len(out.ifaces) < MAX_IFACES:
            out.ifaces.append(cur)
    if not out.ifaces:
        raise InputError("no network interface (not ip addr or ifconfig output)", path)
    return out


def sniff_ifaces(head: bytes) -> bool:
    """``ip addr`` or ``ifconfig`` (an interface header line with its flags), or ``ip -br addr`` (every
    line a name, a state and addresses)."""
    if b"\x00" in head[:4096]:
        return False
    text = head[:16384].decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return False
    for ln in lines[:50]:
        s = ln.rstrip()
        if not s[:1].isspace() and (_IP_HDR.match(s) or _IFC_HDR.match(s) or _IFC_OLD_HDR.match(s)):
            return True
    return all(_BR.match(ln.strip()) for ln in lines[:200]) and any("/" in ln for ln in lines)


def load_ifaces(path: str | Path) -> IfaceList:
    from clusterdoctor.observe.limits import read_text

    p = Path(path)
    return parse_ifaces(read_text(p), str(p))
