"""InfiniBand/RoCE port listings as users paste them: ``ibstat``, ``ibstatus``, ``ibv_devinfo [-v]``,
``rdma link``, ``show_gids``, ``ibdev2netdev [-v]``, ``lshca`` and ``grep . /sys/class/infiniband/...``.

This module reads the programs' text (one pass over the lines, whichever programs a paste holds),
tells their output apart from other inputs (:func:`sniff_ib_listing`) and loads a file into
observations (:func:`load_ib_listing`). What the text reduces to, :class:`IbPort`, :class:`GidEntry`
and :class:`NetdevLink`, and the state names in ibstat's words live in
:mod:`~clusterdoctor.observe.network.ib_records` (re-exported here).

Excerpts are read for what they hold: a GID table without its ``hca_id`` line, a port section without
its ``CA`` header (the device is then ``None``), several programs' output in one paste. Lines that are
none of these are counted and named in a warning (:attr:`IbListing.skipped`), never guessed at.
Every pattern here is anchored and linear; lines longer than :data:`MAX_LINE` are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.ib_records import (
    _PAREN_SUFFIX,
    GidEntry,
    IbListing,
    IbPort,
    NetdevLink,
    _float,
    _int,
    _link_layer,
    _mtu,
    normal_phys_state,
    normal_state,
)
from clusterdoctor.observe.paste import numbered

__all__ = [
    "GidEntry",
    "IbListing",
    "IbPort",
    "NetdevLink",
    "command_device",
    "load_ib_listing",
    "normal_phys_state",
    "normal_state",
    "parse_ib_listing",
    "sniff_ib_listing",
]

MAX_LINE = 4096
MAX_RECORDS = 100_000  # ports/GIDs/netdevs kept from one input (a listing is small; the rest is counted)


# --- line shapes ------------------------------------------------------------------------------------

_IBSTAT_CA = re.compile(r"^(?:CA|Switch|Router|iWARP RNIC|\?\?\?) '(?P<dev>[^'\s]{1,64})'\s*$")
_IBSTAT_PORT = re.compile(r"^\s{0,16}Port (?P<port>\d{1,3}):\s*$")
_IBSTATUS_HDR = re.compile(r"^Infiniband device '(?P<dev>[^'\s]{1,64})' port (?P<port>\d{1,3}) status:\s*$")
_DEVINFO_HCA = re.compile(r"^\s{0,8}hca_id:\s+(?P<dev>\S{1,64})\s*$")
_DEVINFO_PORT = re.compile(r"^\s{0,24}port:\s+(?P<port>\d{1,3})\s*$")
_GID = re.compile(
    r"^\s{0,32}GID\[\s{0,3}(?P<idx>\d{1,5})\]:\s+(?P<gid>[0-9A-Fa-f:.]{2,45})(?:,\s*RoCE (?P<ver>v[12]))?\s*$"
)
_KV = re.compile(  # the value up to its last non-space, then the spaces once (a lazy value rescanned them)
    r"^\s{0,40}(?P<key>[A-Za-z][\w ]{0,40}?)\s*:\s*+(?P<val>\S(?:[^\n]{0,199}\S)?)?\s*+$"
)
_FLAG = re.compile(r"^\s{2,}[A-Z][A-Z0-9_ ]{1,60}\s*$|^\s{2,}Unknown flags: 0x[0-9A-Fa-f]{1,20}\s*$")
_RDMA_LINK = re.compile(
    r"^link (?P<dev>[^/\s]{1,64})/(?P<port>\d{1,3})(?P<rest>(?: \S{1,64} \S{1,64}){1,16})\s*$"
)
# iproute2 rdma/link.c prints `link DEV/PORT [subnet_prefix P lid L sm_lid S lmc M] state S
# physical_state P [netdev N]`, state from link_state_to_str; `rdma res` lines name a QP, CQ, MR or PD
_LINK_STATES = frozenset({"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"})
_RES_KEYS = frozenset(
    {"lqpn", "rqpn", "type", "sq-psn", "rq-psn", "pdn", "cqn", "mrn", "ctxn", "srqn", "comm", "pid"}
)
_SHOW_GIDS_HDR = re.compile(r"^DEV\s+PORT\s+INDEX\s+GID\s+IPv4\s+VER\s+DEV\s*$")
_SHOW_GIDS_SEP = re.compile(r"^-{3}\s+-{4}\s+-{5}\s+-{3}\s+-{4,16}\s+-{3}\s+-{3}\s*$")
_SHOW_GIDS_ROW = re.compile(
    r"^(?P<dev>[A-Za-z][\w.\-]{0,63})\s+(?P<port>\d{1,3})\s+(?P<idx>\d{1,5})\s+"
    r"(?P<gid>[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){7})\s+(?:(?P<ipv4>\d{1,3}(?:\.\d{1,3}){3})\s+)?"
    r"(?P<ver>[vV][12])(?:\s+(?P<net>\S{1,64}))?\s*$"
)
_SHOW_GIDS_END = re.compile(r"^n_gids_found=\d{1,6}\s*$")
_IBDEV2NETDEV = re.compile(
    r"^(?P<dev>[A-Za-z][\w.\-]{0,63})\s+port\s+(?P<port>\d{1,3})\s+==>\s+(?P<net>\S{1,64})\s+\((?P<up>Up|Down)\)"
    r"\s*(?:#[^\n]{0,400})?$"
)
_IBDEV2NETDEV_V = re.compile(
    r"^(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+(?P<dev>[A-Za-z][\w.\-]{0,63})\s+"
    r"\((?P<model>[^()\n]{0,120})\)\s+(?P<desc>[^\n]{0,200}?)\s+fw\s+(?P<fw>\S{1,40})\s+port\s+(?P<port>\d{1,3})\s+"
    r"\((?P<state>[A-Z_]{2,16})\)\s+==>\s+(?P<net>\S{1,64})\s+\((?P<up>Up|Down)\)\s*$"
)
_LSHCA_SEP = re.compile(r"^-{20,}\s*$")
_LSHCA_DEV = re.compile(r"^Dev #\d{1,4}\s*$|^ (?:Desc|PN|PSID|SN|FW|Tempr|Driver):\s?[^\n]{0,200}$")
# `grep . /sys/class/infiniband/*/ports/*/state` (or head/cat with file names): path:value
_SYSFS = re.compile(
    r"^/sys/class/infiniband/(?P<dev>[^/\s]{1,64})/ports/(?P<port>\d{1,3})/(?:(?P<group>counters|counters_ext|"
    r"hw_counters)/)?(?P<attr>[A-Za-z][\w]{0,63}):(?P<val>[^\n]{1,120})$"
)
_SYSFS_ATTRS = {"state": "state", "phys_state": "phys_state", "rate": "rate", "link_layer": "link_layer",
                "lid": "lid", "sm_lid": "sm_lid"}  # fmt: skip
_LSHCA_HDR = re.compile(r"^\s{0,4}(?:[A-Za-z_]{2,16}\s{0,8}\|\s{0,8}){2,30}[A-Za-z_]{2,16}\s*$")

IBSTAT_KEYS = {
    "state": "state",
    "physical state": "phys_state",
    "rate": "rate",
    "base lid": "lid",
    "sm lid": "sm_lid",
    "link layer": "link_layer",
    "lmc": None,
    "capability mask": None,
    "port guid": None,
    "effective speed": None,
}
IBSTAT_CA_KEYS = {
    "ca type": "ca_type",
    "number of ports": None,
    "firmware version": "firmware",
    "hardware version": None,
    "node guid": None,
    "system image guid": None,
}
IBSTATUS_KEYS = {
    "default gid": None,
    "base lid": "lid",
    "sm lid": "sm_lid",
    "state": "state",
    "phys state": "phys_state",
    "rate": "rate",
    "link_layer": "link_layer",
}
DEVINFO_PORT_KEYS = {
    "state": "state",
    "phys_state": "phys_state",
    "max_mtu": "max_mtu",
    "active_mtu": "active_mtu",
    "sm_lid": "sm_lid",
    "port_lid": "lid",
    "link_layer": "link_layer",
    "active_width": "width",
    "active_speed": "speed",
}


class _Port:
    """A port being read: its fields so far."""

    def __init__(self, device: str | None, port: int | None, program: str, source: str, line: int) -> None:
        self.device, self.port, self.program, self.source, self.line = device, port, program, source, line
        self.f: dict[str, Any] = {}

    def set(self, what: str, raw: str) -> None:
        raw = raw.strip()
        if what == "state":
            self.f["state"] = normal_state(raw)
        elif what == "phys_state":
            self.f["phys_state"] = normal_phys_state(raw)
        elif what == "link_layer":
            self.f["link_layer"] = _link_layer(raw)
        elif what in ("lid", "sm_lid"):
            self.f[what] = _int(raw.split()[0]) if raw else None
        elif what in ("max_mtu", "active_mtu"):
            self.f[what] = _mtu(raw)
        elif what == "rate":
            self.f["rate_gbps"] = _float(raw)
            m = re.search(r"\((\d{1,2}X)\s{1,4}(\w{1,10})\)", raw)  # ibstatus: "100 Gb/sec (4X EDR)"
            if m:
                self.f["width"], self.f["speed"] = m.group(1), m.group(2)
        elif what == "width":
            m = re.match(r"^\s*(\d{1,2})X", raw)
            self.f["width"] = f"{m.group(1)}X" if m else None
        elif what == "speed":
            self.f["speed"] = _PAREN_SUFFIX.sub("", raw).strip() or None
        else:
            self.f[what] = raw or None

    def record(self, ca: dict[str, Any] | None = None) -> IbPort:
        f = dict(self.f)
        for k, v in (ca or {}).items():
            f.setdefault(k, v)
        if f.get("rate_gbps") is None and f.get("width") and f.get("speed"):
            w, s = _float(f["width"]), _float(f["speed"])
            if w and s:
                f["rate_gbps"] = w * s  # ibv_devinfo -v: active_width x active_speed
        return IbPort(self.device, self.port, self.program, self.source, self.line, **f)


_PORT_FIELDS = (
    "state", "phys_state", "link_layer", "rate_gbps", "width", "speed", "lid", "sm_lid", "active_mtu", "max_mtu",
    "netdev", "ca_type", "firmware", "pci", "pcie_width", "pcie_capability",
)  # fmt: skip


class _Reader:
    """One pass over the lines; ``mode`` is the program whose block the current line belongs to."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.out = IbListing()
        self.cur: _Port | None = None
        self.mode: str | None = None
        self.dev: str | None = None
        self.ca: dict[str, Any] = {}
        self.lshca_cols: list[str] | None = None

    def close(self) -> None:
        if self.cur is not None and (self.cur.f or self.cur.port is not None):
            _append(self.out.ports, self.cur.record(self.ca))
        self.cur = None

    def enter(self, mode: str | None, dev: str | None = None) -> None:
        self.close()
        self.mode, self.dev, self.ca = mode, dev, {}
        if mode:
            self.out.saw(mode)

    def start_port(self, program: str, port: int | None, lineno: int) -> None:
        self.close()
        if self.mode != program:
            self.mode, self.dev, self.ca = program, None, {}
        self.out.saw(program)
        self.cur = _Port(self.dev, port, program, self.path, lineno)

    def line(self, lineno: int, line: str) -> None:
        if self._header(lineno, line) or self._record(lineno, line) or self._lshca(lineno, line):
            return
        if self._field(lineno, line):
            return
        self.out.skipped.append(lineno)
        if self.mode in ("ibstat", "ibstatus", "ibv_devinfo"):
            self.enter(None)  # a line of another program ends the block

    def _header(self, lineno: int, line: str) -> bool:
        # cheap guards first: a listing is mostly field lines, which none of these headers can be
        if "'" in line:
            m = _IBSTAT_CA.match(line)
            if m:
                self.enter("ibstat", m.group("dev"))
                return True
            m = _IBSTATUS_HDR.match(line)
            if m:
                self.enter("ibstatus", m.group("dev"))
                self.cur = _Port(self.dev, int(m.group("port")), "ibstatus", self.path, lineno)
                return True
        if "hca_id" in line:
            m = _DEVINFO_HCA.match(line)
            if m:
                self.enter("ibv_devinfo", m.group("dev"))
                return True
        if "ort" not in line:
            return False
        if self.mode in (None, "ibstat"):
            m = _IBSTAT_PORT.match(line)
            if m:
                self.start_port("ibstat", int(m.group("port")), lineno)
                return True
        if self.mode in (None, "ibv_devinfo"):
            m = _DEVINFO_PORT.match(line)
            if m:
                self.start_port("ibv_devinfo", int(m.group("port")), lineno)
                return True
        return False

    def _record(self, lineno: int, line: str) -> bool:
        out, path = self.out, self.path
        if line.startswith("/sys/class/infiniband/"):
            return self._sysfs(lineno, line)
        m = _RDMA_LINK.match(line) if line.startswith("link ") else None
        if m and _rdma_link(m, path, lineno, out):
            self.enter(None)
            return True
        m = (_IBDEV2NETDEV_V.match(line) or _IBDEV2NETDEV.match(line)) if "==>" in line else None
        if m:
            self.enter(None)
            _netdev(m, path, lineno, out)
            return True
        if line.startswith(("DEV", "---", "n_gids")) and (
            _SHOW_GIDS_HDR.match(line) or _SHOW_GIDS_SEP.match(line) or _SHOW_GIDS_END.match(line)
        ):
            self.enter("show_gids")
            return True
        m = _SHOW_GIDS_ROW.match(line) if line.count(":") >= 7 and not line[:1].isspace() else None
        if m:
            if self.mode != "show_gids":
                self.enter("show_gids")
            _append(
                out.gids,
                GidEntry(
                    m.group("dev"), int(m.group("port")), int(m.group("idx")), m.group("gid"),
                    m.group("ver").lower(), path, lineno, m.group("net") or None,
                    m.group("ipv4") or _ipv4_of(m.group("gid")),
                ),
            )  # fmt: skip
            return True
        m = _GID.match(line) if "GID[" in line else None
        if m:
            if self.mode is None:
                self.mode = "ibv_devinfo"  # a GID table excerpt without its hca_id line
                out.saw("ibv_devinfo")
            dev = self.dev if self.mode == "ibv_devinfo" else None
            port = self.cur.port if self.cur is not None else None
            _append(
                out.gids,
                GidEntry(
                    dev, port, int(m.group("idx")), m.group("gid"), m.group("ver"), path, lineno, None,
                    _ipv4_of(m.group("gid")),
                ),
            )  # fmt: skip
            return True
        return False

    def _sysfs(self, lineno: int, line: str) -> bool:
        m = _SYSFS.match(line)
        if m is None:
            return False
        dev, port, attr, val = m.group("dev"), int(m.group("port")), m.group("attr"), m.group("val").strip()
        self.enter(None)
        self.out.saw("sysfs")
        if m.group("group"):
            n = re.match(r"^\d{1,20}$", val)
            if n:
                self.out.counters.setdefault((dev, port), {})[attr] = int(val)
            return True
        what = _SYSFS_ATTRS.get(attr)
        if what is None:
            return True  # another attribute of the port (gids, pkeys, cap_mask): nothing to judge
        last = self.out.ports[-1] if self.out.ports else None
        p = _Port(dev, port, "sysfs", self.path, lineno)
        if last is not None and last.program == "sysfs" and (last.device, last.port) == (dev, port):
            p.line = last.line
            p.f = {k: getattr(last, k) for k in _PORT_FIELDS if getattr(last, k) is not None}
            self.out.ports.pop()
        p.set(what, val)
        _append(self.out.ports, p.record())
        return True

    def _lshca(self, lineno: int, line: str) -> bool:
        if line.startswith("---") and _LSHCA_SEP.match(line):
            return True  # a rule of dashes (lshca, show_gids, tables): nothing to read
        if (line.startswith(("Dev #", " ")) and _LSHCA_DEV.match(line)) and (
            self.mode == "lshca" or line.startswith("Dev #")
        ):
            self.mode = "lshca"
            return True
        if "|" not in line:
            return False
        if _LSHCA_HDR.match(line):
            cols = [c.strip() for c in line.split("|")]
            if "RDMA" in cols:
                self.enter("lshca")
                self.lshca_cols = cols
                return True
        if self.mode == "lshca" and self.lshca_cols is not None:
            return _lshca_row(self.lshca_cols, line, self.path, lineno, self.out)
        return False

    def _field(self, lineno: int, line: str) -> bool:
        kv = _KV.match(line)
        if kv is None:
            # inside an ibv_devinfo or ibstat block every line is indented: device attributes and
            # capability flags (device_cap_flags, "log atomic arg sizes (mask) 0x8") we do not need
            return self.mode in ("ibv_devinfo", "ibstat") and line[:1] in (" ", "\t")
        key, val = kv.group("key").strip().lower(), kv.group("val") or ""
        mode, cur = self.mode, self.cur
        if mode is None:
            # a port section without its header: `ibstat DEV PORT`, or lines cut out of ibv_devinfo -v
            if key in ("state", "physical state") and not val.strip().upper().startswith("PORT_"):
                mode = "ibstat" if key == "physical state" or _IBSTAT_STATE.match(val) else None
            elif key in DEVINFO_PORT_KEYS and (key != "state" or val.strip().upper().startswith("PORT_")):
                mode = "ibv_devinfo"
            if mode is None:
                return False
            self.start_port(mode, None, lineno)
            cur = self.cur
        if mode == "ibstat":
            if cur is None:
                if key in IBSTAT_CA_KEYS:
                    what = IBSTAT_CA_KEYS[key]
                    if what:
                        self.ca[what] = val.strip() or None
                    return True
                return line[:1] in (" ", "\t")
            if key in IBSTAT_KEYS:
                what = IBSTAT_KEYS[key]
                if what:
                    cur.set(what, val)
                return True
            return line[:1] in (" ", "\t")
        if mode == "ibstatus":
            if cur is not None and key in IBSTATUS_KEYS:
                what = IBSTATUS_KEYS[key]
                if what:
                    cur.set(what, val)
                return True
            return False
        if mode == "ibv_devinfo":
            if cur is not None and key in DEVINFO_PORT_KEYS:
                cur.set(DEVINFO_PORT_KEYS[key], val)
            elif cur is None and key == "fw_ver":
                self.ca["firmware"] = val.strip() or None
            return True
        return False


_IBSTAT_STATE = re.compile(r"^\s*(?:Down|Initializing|Armed|Active)\s*$")


def parse_ib_listing(text: str, path: str = "<input>", origin: list[int] | None = None) -> IbListing:
    """Every port, GID and netdev line of ``text`` (one or several of the programs' outputs).

    Raises :class:`InputError` when no line of it is one of the programs' output."""
    r = _Reader(path)
    for lineno, line in numbered(text, origin):
        if not line.strip():
            continue
        if len(line) > MAX_LINE:
            r.out.skipped.append(lineno)
            continue
        r.line(lineno, line)
    r.close()
    out = r.out
    if not (out.ports or out.gids or out.netdevs or out.counters):
        raise InputError(
            "no ibstat, ibstatus, ibv_devinfo, rdma link, show_gids, ibdev2netdev or lshca lines", path, 1
        )
    return out


def _append(items: list[Any], item: Any) -> None:
    if len(items) < MAX_RECORDS:
        items.append(item)


def _rdma_link(m: re.Match[str], path: str, lineno: int, out: IbListing) -> bool:
    toks = m.group("rest").split()
    kv = dict(zip(toks[::2], toks[1::2]))
    if "state" not in kv and "physical_state" not in kv:
        return False  # `rdma statistic` / `rdma res` lines are read elsewhere
    if _RES_KEYS.intersection(kv) or ("state" in kv and kv["state"].upper() not in _LINK_STATES):
        return False  # `rdma res show qp|cm_id`: a QP state (RTS, INIT ...), not the port's (rdma_qp.py)
    p = _Port(m.group("dev"), int(m.group("port")), "rdma link", path, lineno)
    if "state" in kv:
        p.set("state", kv["state"])
    if "physical_state" in kv:
        p.set("phys_state", kv["physical_state"])
    if "lid" in kv:
        p.set("lid", kv["lid"])
    if "sm_lid" in kv:
        p.set("sm_lid", kv["sm_lid"])
    if "netdev" in kv:
        p.f["netdev"] = kv["netdev"]
    if "subnet_prefix" in kv:
        p.f["link_layer"] = "InfiniBand"  # rdma link prints the IB addressing only on IB ports
    _append(out.ports, p.record())
    out.saw("rdma link")
    return True


def _netdev(m: re.Match[str], path: str, lineno: int, out: IbListing) -> None:
    d = m.groupdict()
    state = normal_state(d.get("state")) if d.get("state") else None
    _append(
        out.netdevs,
        NetdevLink(d["dev"], int(d["port"]), d["net"], d["up"] == "Up", path, lineno, state, d.get("pci")),
    )
    if d.get("state"):
        out.saw("ibdev2netdev -v")
        _append(
            out.ports,
            IbPort(
                d["dev"], int(d["port"]), "ibdev2netdev -v", path, lineno, state=state,
                netdev=d["net"], pci=d.get("pci"), firmware=d.get("fw"),
            ),
        )  # fmt: skip
    else:
        out.saw("ibdev2netdev")


_LSHCA_MARK = re.compile(r"(?<!\s)\s*+(?:>!<|\*)\s*$")  # from the start of the spaces only


def _lshca_row(cols: list[str], line: str, path: str, lineno: int, out: IbListing) -> bool:
    cells = [c.strip() for c in line.split("|")]
    if len(cells) != len(cols):
        return False
    row = dict(zip(cols, cells))
    rdma = _LSHCA_MARK.sub("", row.get("RDMA", ""))
    if not rdma or rdma.startswith("-"):
        return False
    port = _int(row.get("Port", "1") or "1") or 1
    # lshca's elastic view drops the LnkStat column when every port is "actv"
    stat = row.get("LnkStat", "") if "LnkStat" in cols else "actv"
    state = normal_state(stat) if stat else None
    phys = (
        {"actv": "LinkUp", "init": "LinkUp", "poll": "Polling", "down": None}.get(stat.lower())
        if stat
        else None
    )
    link = _link_layer(row.get("Link", "")) if row.get("Link") else None
    sta, cap = row.get("LnkStaWidth"), row.get("LnkCapWidth")
    degraded = bool(sta and ">!<" in sta)
    rate = row.get("Rate")
    _append(
        out.ports,
        IbPort(
            rdma, port, "lshca", path, lineno, state=state, phys_state=phys, link_layer=link,
            rate_gbps=_float(rate) if rate and state == "Active" else None,
            netdev=row.get("Net") or None, ca_type=row.get("HCA_Type") or None,
            pci=row.get("PCI_addr") or None,
            pcie_width=_LSHCA_MARK.sub("", sta) if degraded and sta else None,
            pcie_capability=cap if degraded else None,
        ),
    )  # fmt: skip
    return True


def _ipv4_of(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID (``::ffff:10.0.0.1`` or ``0000:...:ffff:0a00:0001``)."""
    g = gid.lower()
    m = re.match(r"^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$", g)
    if m:
        return m.group(1)
    m = re.match(r"^(?:0000:){5}ffff:([0-9a-f]{4}):([0-9a-f]{4})$", g)
    if m:
        a, b = int(m.group(1), 16), int(m.group(2), 16)
        return f"{a >> 8}.{a & 255}.{b >> 8}.{b & 255}"
    return None


# --- detection and loading --------------------------------------------------------------------------

_SNIFF = (
    re.compile(
        rb"^(?:CA|Switch) '[^'\n]{1,64}'[^\S\n]*\n(?:\s[^\n]{0,200}\n){0,12}?\s+Port \d{1,3}:\s*$", re.M
    ),
    re.compile(rb"^\s{0,16}State: (?:Down|Initializing|Armed|Active)\s*\n\s{0,16}Physical state: \w", re.M),
    re.compile(rb"^Infiniband device '[^'\n]{1,64}' port \d{1,3} status:", re.M),
    re.compile(rb"^\s{0,8}hca_id:\s+\S{1,64}\s*$", re.M),
    re.compile(rb"^\s{0,32}GID\[\s{0,3}\d{1,5}\]:\s+[0-9A-Fa-f:.]{2,45}", re.M),
    re.compile(
        rb"^\s{1,24}(?:phys_)?state:\s+(?:PORT_[A-Z_]{3,12}|LINK_UP|POLLING|DISABLED|SLEEP) \(\d\)", re.M
    ),
    re.compile(
        rb"^link [^/\s]{1,64}/\d{1,3} (?:(?:subnet_prefix|lid|sm_lid|lmc) \S{1,64} ){0,4}"
        rb"state (?:ACTIVE|DOWN|INIT|ARMED)\b",
        re.M,
    ),
    re.compile(rb"^DEV\s+PORT\s+INDEX\s+GID\s", re.M),
    re.compile(rb"^[A-Za-z][\w.\-]{0,63}\s+port\s+\d{1,3}\s+==>\s+\S{1,64}\s+\((?:Up|Down)\)", re.M),
    re.compile(
        rb"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] \S{1,64} \([^()\n]{0,120}\) .{0,200}==> ",
        re.M,
    ),
    re.compile(rb"^\s{0,4}PCI_addr\s*\|\s*RDMA\s*\||^\s{0,4}RDMA\s*\|\s*Net\s*\|", re.M),
    re.compile(rb"^/sys/class/infiniband/[^/\s]{1,64}/ports/\d{1,3}/[\w/]{1,80}:", re.M),
)


def sniff_ib_listing(head: bytes, name: str = "") -> bool:
    """True when the first bytes hold output of one of the port-listing programs."""
    if b"\x00" in head[:4096]:
        return False
    return any(rx.search(head) for rx in _SNIFF)


# The device a command line names: ibv_devinfo -d DEV / --ib-dev=DEV, ibstat DEV [PORT], ibstatus DEV[:PORT],
# show_gids DEV, rdma link show DEV/PORT
_CMD_DEVICE = re.compile(
    r"(?:^|[\s/;|&])(?:ibv_devinfo\b[^|;&\n]{0,200}?(?:-d\s{1,8}|--ib-dev=)|ibstat\s{1,8}|ibstatus\s{1,8}|"
    r"show_gids\s{1,8}|rdma\s{1,8}link\s{1,8}show\s{1,8})(?P<dev>[A-Za-z][\w.\-]{0,63})"
)


def command_device(commands: Iterable[str]) -> str | None:
    """The one RDMA device the paste's command lines name, or None (none, or several)."""
    devs = {m.group("dev") for c in commands for m in _CMD_DEVICE.finditer(c)}
    return devs.pop() if len(devs) == 1 else None


def _name_headerless(listing: IbListing, device: str) -> None:
    """Ports and GIDs of an excerpt without its header take the device its command line names."""
    from dataclasses import replace

    listing.ports = [replace(p, device=device) if p.device is None else p for p in listing.ports]
    listing.gids = [replace(g, device=device) if g.device is None else g for g in listing.gids]


def load_ib_listing(path: str | Path) -> dict[str, Any]:
    """Read one such input → ``ib_ports``, ``ib_gids``, ``ib_netdevs`` (and a warning naming the lines
    that were none of the programs' output). A port or GID table excerpt without its header takes the
    device the paste's command line names (``ibv_devinfo -d mlx5_0 -v``)."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_commands, input_origin

    p = str(path)
    listing = parse_ib_listing(read_text(Path(p)), p, origin=input_origin())
    hint = command_device(input_commands())
    if hint:
        _name_headerless(listing, hint)
    out: dict[str, Any] = {}
    if listing.ports:
        out["ib_ports"] = listing.ports
    if listing.gids:
        out["ib_gids"] = listing.gids
    if listing.netdevs:
        out["ib_netdevs"] = listing.netdevs
    if listing.counters:
        from clusterdoctor.observe.network.rdma import RdmaPort, _finish

        out["rdma"] = [
            _finish(RdmaPort(dev, port, counters=dict(c), source=p))
            for (dev, port), c in sorted(listing.counters.items())
        ]
    if listing.skipped:
        out["warnings"] = [
            f"{p}: {_spans(listing.skipped)} not read (not {', '.join(listing.programs)} output)"
        ]
    n = len(listing.ports) or len(listing.netdevs)
    what = " + ".join(listing.programs)
    detail = f"{n} port(s)" if n else f"{len(listing.gids)} GID(s)"
    out["described_as"] = f"{what} output ({detail})"
    return out


def _spans(lines: list[int], most: int = 6) -> str:
    spans: list[tuple[int, int]] = []
    for n in lines:
        if spans and spans[-1][1] == n - 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans[:most])
    more = f" and {len(spans) - most} more" if len(spans) > most else ""
    return f"line{'s' if len(lines) > 1 else ''} {shown}{more}"
