"""InfiniBand fabric diagnostics users paste: ``perfquery``, ``ibqueryerrors`` and ``iblinkinfo``.

* ``perfquery`` (rdma-core ``infiniband-diags/perfquery.c`` over libibmad's field dump:
  ``# Port counters: Lid 17 port 1 (CapMask: 0x5A00)`` then ``SymbolErrorCounter:........0``) and
  ``ibqueryerrors`` (``ibqueryerrors.c``: ``Errors for 0x... "node"`` then ``GUID 0x... port 1:
  [LinkDownedCounter == 25 (25.000)] ...``) → :class:`~clusterdoctor.observe.network.rdma.RdmaPort`
  records with the IBTA PortCounters under the sysfs names the counter rules use (``symbol_error``,
  ``link_downed``, ``port_xmit_wait`` ...): the same rules judge a port read either way.
* ``iblinkinfo`` (``iblinkinfo.c``: ``LID PORT[ext] ==( 4X 25.78125 Gbps Active/ LinkUp)==> LID PORT[ext]
  "remote" ( )``) → :class:`IbLink` records; the tool itself appends ``Could be 4X`` / ``Could be
  53.125 Gbps`` (``ibdiag_common.c`` get_max_msg) when a link runs below what both ends support. Down
  switch ports without a peer are listed too and are normal (unused ports).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.rdma import RdmaPort
from clusterdoctor.observe.paste import numbered

__all__ = ["IbLink", "load_fabric", "parse_iblinkinfo", "parse_ib_counters", "sniff_fabric"]

MAX_RECORDS = 100_000

# IBTA PortCounters / PortCountersExtended field names (libibmad) -> the sysfs counter names
IBTA_NAMES = {
    "SymbolErrorCounter": "symbol_error",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors",
    "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "VL15_dropped",
    "PortXmitData": "port_xmit_data",
    "PortRcvData": "port_rcv_data",
    "PortXmitPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets",
    "PortXmitWait": "port_xmit_wait",
}


@dataclass(frozen=True)
class IbLink:
    """One port line of ``iblinkinfo``."""

    node: str | None  # the switch or CA the line belongs to (its header), when shown
    lid: int
    port: int
    state: str | None  # Active, Down, Init, Armed
    phys_state: str | None  # LinkUp, Polling, Disabled
    width: str | None  # 4X
    speed: str | None  # "25.78125 Gbps"
    remote_lid: int | None
    remote_port: int | None
    remote: str | None  # the peer's node description
    could_be: str | None  # iblinkinfo's own note: "Could be 4X Could be 53.125 Gbps"
    source: str
    line: int

    @property
    def name(self) -> str:
        where = f"{self.node} " if self.node else ""
        return f"{where}lid {self.lid} port {self.port}"


_PQ_HDR = re.compile(r"^# Port (?:extended )?counters: (?P<who>[^\n]{1,120}?) port (?P<port>\d{1,3})\b")
_PQ_FIELD = re.compile(
    r"^(?P<name>[A-Za-z][A-Za-z0-9]{1,40}):\.{1,60}(?P<val>0x[0-9A-Fa-f]{1,16}|\d{1,20})\s*$"
)
_IQE_NODE = re.compile(r'^Errors for (?:0x[0-9A-Fa-f]{1,16} )?"(?P<node>[^"\n]{0,128})"')
_IQE_PORT = re.compile(
    r"^\s{1,8}GUID (?P<guid>0x[0-9A-Fa-f]{1,16}) port (?P<port>\d{1,3}|ALL):(?P<rest>[^\n]{0,4000})$"
)
_IQE_PAIR = re.compile(r"\[(?P<name>[A-Za-z][A-Za-z0-9]{1,40}) == (?P<val>\d{1,20})(?: \([^)\n]{0,24}\))?\]")


def parse_ib_counters(
    text: str, path: str = "<perfquery>", origin: list[int] | None = None
) -> list[RdmaPort]:
    """``perfquery`` and ``ibqueryerrors`` output → one port record per counter block."""
    from clusterdoctor.observe.network.rdma import _finish

    ports: list[RdmaPort] = []
    cur: RdmaPort | None = None
    node: str | None = None
    for lineno, line in numbered(text, origin):
        if len(line) > 8192:
            continue
        m = _PQ_HDR.match(line)
        if m:
            who = m.group("who").strip().lower().replace("  ", " ")
            cur = RdmaPort(who, int(m.group("port")), source=f"{path}:{lineno}")
            ports.append(cur)
            continue
        m = _PQ_FIELD.match(line)
        if m and cur is not None:
            key = IBTA_NAMES.get(m.group("name"))
            if key:
                v = m.group("val")
                cur.counters[key] = int(v, 16) if v.startswith("0x") else int(v)
            continue
        m = _IQE_NODE.match(line)
        if m:
            node = m.group("node").strip() or None
            continue
        m = _IQE_PORT.match(line)
        if m:
            port_s = m.group("port")
            dev = node or m.group("guid")
            p = RdmaPort(dev, int(port_s) if port_s.isdigit() else 0, source=f"{path}:{lineno}")
            for pair in _IQE_PAIR.finditer(m.group("rest")):
                key = IBTA_NAMES.get(pair.group("name"))
                if key:
                    p.counters[key] = int(pair.group("val"))
            if p.counters:
                ports.append(p)
            cur = None
    ports = [p for p in ports if p.counters][:MAX_RECORDS]
    if not ports:
        raise InputError("no perfquery or ibqueryerrors counters", path, 1)
    return [_finish(p) for p in ports]


_LINK = re.compile(
    r"^\s{0,64}(?:0x[0-9A-Fa-f]{16}\s{1,4})?(?P<lid>\d{1,6})\s{1,8}(?P<port>\d{1,3})\[[\w ]{0,3}\]\s==\("
    r"(?P<inner>[^()\n]{0,120})\)==>\s{1,40}(?P<remote>[^\n]{0,400})$"
)
_INNER = re.compile(
    r"^\s{0,32}(?:(?P<width>\d{1,2}X)\s{1,8}(?P<speed>[\d.]{1,12} Gbps(?: \(FDR10\))?)\s{1,8})?"
    r"(?P<state>[A-Za-z]{2,12})/\s{0,8}(?P<phys>[A-Za-z]{2,30})\s*$"
)
_REMOTE = re.compile(
    r'^(?:0x[0-9A-Fa-f]{16}\s{1,4})?(?P<lid>\d{1,6})\s{1,8}(?P<port>\d{1,3})\[[\w ]{0,3}\]\s"(?P<name>[^"\n]{0,128})"\s\((?P<msg>[^()\n]{0,200})\)'
)
_NODE_HDR = re.compile(r"^(?:Switch|CA): 0x[0-9A-Fa-f]{16} (?P<name>[^\n]{1,160}?(?<!\s)|[^\S\n]):?\s*$")


def parse_iblinkinfo(text: str, path: str = "<iblinkinfo>", origin: list[int] | None = None) -> list[IbLink]:
    """``iblinkinfo`` output → one :class:`IbLink` per port line."""
    out: list[IbLink] = []
    node: str | None = None
    for lineno, line in numbered(text, origin):
        if len(line) > 4096:
            continue
        h = _NODE_HDR.match(line)
        if h:
            node = h.group("name").strip().strip('"').strip() or None
            continue
        m = _LINK.match(line)
        if not m:
            continue
        inner = _INNER.match(m.group("inner"))
        if not inner:
            continue
        r = _REMOTE.match(m.group("remote").strip())
        msg = (r.group("msg").strip() if r else "") or None
        out.append(
            IbLink(
                node, int(m.group("lid")), int(m.group("port")), inner.group("state"), inner.group("phys"),
                inner.group("width"), inner.group("speed"),
                int(r.group("lid")) if r else None, int(r.group("port")) if r else None,
                (r.group("name") or None) if r else None,
                msg if msg and msg.startswith("Could be") else None, path, lineno,
            )
        )  # fmt: skip
        if len(out) >= MAX_RECORDS:
            break
    if not out:
        raise InputError("no iblinkinfo port lines (LID PORT ==( ... )==> ...)", path, 1)
    return out


_SNIFF_PQ = re.compile(rb"^# Port (?:extended )?counters: [^\n]{1,120} port \d{1,3}", re.M)
_SNIFF_IQE = re.compile(
    rb"^\s{1,8}GUID 0x[0-9A-Fa-f]{1,16} port (?:\d{1,3}|ALL): ?\[[A-Za-z]{2,40} == \d", re.M
)
_SNIFF_LINK = re.compile(
    rb"^[ \t]{0,64}(?:0x[0-9A-Fa-f]{16}\s{1,4})?\d{1,6}\s{1,8}\d{1,3}\[[\w ]{0,3}\]\s==\(", re.M
)


def sniff_fabric(head: bytes, name: str = "") -> bool:
    """True for perfquery, ibqueryerrors or iblinkinfo output."""
    if b"\x00" in head[:4096]:
        return False
    return bool(_SNIFF_PQ.search(head) or _SNIFF_IQE.search(head) or _SNIFF_LINK.search(head))


def load_fabric(path: str | Path) -> dict[str, Any]:
    """Read one such input → ``{"rdma": [ports]}`` and/or ``{"ib_links": [links]}``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    text = read_text(Path(p))
    out: dict[str, Any] = {}
    what = []
    try:
        out["rdma"] = parse_ib_counters(text, p, origin=input_origin())
        what.append(f"IB port counters ({len(out['rdma'])} ports)")
    except InputError:
        pass
    try:
        out["ib_links"] = parse_iblinkinfo(text, p, origin=input_origin())
        what.append(f"iblinkinfo output ({len(out['ib_links'])} ports)")
    except InputError:
        pass
    if not out:
        raise InputError("no perfquery, ibqueryerrors or iblinkinfo lines", p, 1)
    out["described_as"] = " + ".join(what)
    return out
