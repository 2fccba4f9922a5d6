"""RDMA NIC counters: sysfs, ``rdma statistic show``, ``rdma res show qp`` and mlx5 ``hw_counters`` text.

Sources, all reduced to :class:`RdmaPort` (one device port, cumulative counters):

* ``<root>/sys/class/infiniband/<dev>/ports/<n>/{counters,counters_ext,hw_counters}/*`` — IBTA port
  counters and mlx5 RoCE/transport counters (:func:`read_sysfs_infiniband`, ``root`` is
  configurable so a saved tree or a test fixture works like the live ``/``);
* ``rdma statistic show`` in its one-line-per-link form and its ``-p`` form (one tab-indented
  counter a line), and ``-j`` JSON (:func:`parse_rdma_statistic`);
* the ``Port 1 hw counters:`` / ``name: value`` text of MLNX ``show_counters`` (:func:`parse_hw_counters_text`);
* ``rdma res show qp`` (:func:`parse_rdma_res_qp`) → :class:`QueuePair` records.

Units: ``port_xmit_data``/``port_rcv_data`` (and their ``_64`` variants) count **4-byte words**
(IBTA; node_exporter multiplies by 4); :func:`bytes_counters` gives the byte values. IB port
counters saturate instead of wrapping: a 32-bit counter reading 2**32-1 is stuck, not a value, and
is listed in :attr:`RdmaPort.saturated`. ``N/A (no PMA)`` files (no performance-management agent)
are listed in :attr:`RdmaPort.unavailable`.

:func:`rates` turns two reads into per-second rates; a counter that went down was reset (driver
reload, ``rdma statistic`` reset, link reset) and its rate is computed from zero, with the reset
noted. ``hw_counters/lifespan`` (ms) is the driver's cache time: reads closer than that return
the same values.
"""

from __future__ import annotations

import json
import re
import time as _time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = [
    "QueuePair",
    "RdmaPort",
    "RdmaRate",
    "bytes_counters",
    "load_rdma",
    "parse_hw_counters_text",
    "parse_rdma_res_qp",
    "parse_rdma_statistic",
    "rates",
    "read_sysfs_infiniband",
    "sniff_rdma",
]

WORD_COUNTERS = ("port_xmit_data", "port_rcv_data", "port_xmit_data_64", "port_rcv_data_64")
# IBTA PortCounters field widths (saturating); the *_64 / counters_ext and mlx5 hw_counters are 64-bit.
_WIDTH_BITS = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
    "port_xmit_data": 32,
    "port_rcv_data": 32,
    "port_xmit_packets": 32,
    "port_rcv_packets": 32,
    "port_xmit_wait": 32,
}


@dataclass
class RdmaPort:
    """One port of one RDMA device: cumulative counters at one time."""

    device: str
    port: int
    counters: dict[str, int] = field(default_factory=dict)
    time: float | None = None
    source: str = ""
    link_layer: str | None = None
    state: str | None = None
    rate: str | None = None
    unavailable: list[str] = field(default_factory=list)
    saturated: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


@dataclass
class RdmaRate:
    """Counter increases of one port between two reads, and rates per second."""

    device: str
    port: int
    interval_s: float
    deltas: dict[str, int] = field(default_factory=dict)
    per_s: dict[str, float] = field(default_factory=dict)
    resets: list[str] = field(default_factory=list)
    saturated: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


@dataclass(frozen=True)
class QueuePair:
    """One line of ``rdma res show qp``."""

    device: str
    port: int | None
    lqpn: int
    type: str
    state: str
    comm: str
    pid: int | None = None
    kernel: bool = False


def bytes_counters(port: RdmaPort) -> dict[str, int]:
    """``port_*_data`` counters converted from 4-byte words to bytes (``port_xmit_bytes`` …)."""
    out = {}
    for k in WORD_COUNTERS:
        if k in port.counters:
            out[k.replace("_data", "_bytes")] = port.counters[k] * 4
    return out


def _saturated(name: str, value: int) -> bool:
    bits = _WIDTH_BITS.get(name)
    return bits is not None and value == (1 << bits) - 1 and bits < 64


def _finish(p: RdmaPort) -> RdmaPort:
    p.saturated = sorted(k for k, v in p.counters.items() if _saturated(k, v))
    return p


# --- sysfs ------------------------------------------------------------------------------------------


def read_sysfs_infiniband(root: str | Path = "/") -> list[RdmaPort]:
    """Read every port under ``<root>/sys/class/infiniband``; empty when there is no RDMA device.

    ``root`` may also point directly at a ``class/infiniband`` or ``sys`` directory.
    """
    r = Path(root)
    base = None
    for cand in (r / "sys" / "class" / "infiniband", r / "class" / "infiniband", r):
        if cand.is_dir() and cand.name == "infiniband":
            base = cand
            break
    if base is None:
        return []
    now = _time.time()
    out: list[RdmaPort] = []
    for dev in sorted(base.iterdir(), key=lambda p: p.name):
        ports = dev / "ports"
        if not ports.is_dir():
            continue
        for pdir in sorted(ports.iterdir(), key=lambda p: p.name):
            try:
                pn = int(pdir.name)
            except ValueError:
                continue
            port = RdmaPort(dev.name, pn, time=now, source=str(pdir))
            for sub in ("counters", "counters_ext", "hw_counters"):
                d = pdir / sub
                if not d.is_dir():
                    continue
                for f in sorted(d.iterdir(), key=lambda p: p.name):
                    if not f.is_file():
                        continue
                    txt = _read_small(f)
                    if txt is None:
                        continue
                    try:
                        port.counters[f.name] = int(txt.split()[0]) if txt.strip() else 0
                    except ValueError:
                        port.unavailable.append(f.name)
            for attr in ("link_layer", "state", "rate"):
                txt = _read_small(pdir / attr)
                if txt is not None:
                    setattr(port, attr, txt.strip())
            out.append(_finish(port))
    return out


def _read_small(p: Path) -> str | None:
    from clusterdoctor.observe.limits import read_bounded

    try:
        return read_bounded(p, 4096, prefix=True).decode("utf-8", errors="replace")
    except (OSError, InputError):
        return None


# --- text forms ------------------------------------------------------------------------------------

_LINK = re.compile(r"^link (\S+?)/(\d+)\b(.*)$", re.ASCII)
_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def _decode(data: str | bytes) -> str:
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def parse_rdma_statistic(data: str | bytes, path: str | None = None) -> list[RdmaPort]:
    """``rdma statistic show`` output (one line per link, ``-p`` or ``-j``) → ports."""
    text = _decode(data)
    s = text.strip()
    if not s:
        raise InputError("empty rdma statistic output", path)
    if s.startswith("["):
        return _parse_stat_json(s, path)
    ports: list[RdmaPort] = []
    cur: RdmaPort | None = None
    bad = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINK.match(line.strip())
        if m:
            rest = m.group(3).split()
            if rest and rest[0] in ("lqpn", "cqn", "mrn", "pdn", "cm-idn"):
                cur = None  # an `rdma res` line, not statistics
                continue
            cur = RdmaPort(m.group(1), int(m.group(2)), source=f"{path or '<rdma statistic>'}:{lineno}")
            ports.append(cur)
            if len(rest) % 2:
                rest = rest[:-1]  # truncated pair
                bad += 1
            for k, v in zip(rest[::2], rest[1::2]):
                if _NAME.match(k) and v.isascii() and v.isdigit():
                    cur.counters[k] = int(v)
            continue
        if cur is not None and line[:1] in ("\t", " "):
            parts = line.split()
            if len(parts) == 2 and _NAME.match(parts[0]) and parts[1].isascii() and parts[1].isdigit():
                cur.counters[parts[0]] = int(parts[1])
                continue
        bad += 1
    ports = [p for p in ports if p.counters]
    if not ports:
        raise InputError(
            "no `link DEV/PORT counter value …` line found (not `rdma statistic show` output)", path, 1
        )
    return [_finish(p) for p in ports]


def _parse_stat_json(s: str, path: str | None) -> list[RdmaPort]:
    try:
        v = json.loads(s)
    except (ValueError, RecursionError):
        raise InputError("invalid JSON", path) from None
    out = []
    if isinstance(v, list):
        for item in v:
            if not isinstance(item, dict) or "ifname" not in item:
                continue
            try:
                port = RdmaPort(str(item["ifname"]), int(item.get("port", 1)), source=path or "<rdma -j>")
            except (TypeError, ValueError):
                continue
            for k, val in item.items():
                if k in ("ifname", "port", "ifindex"):
                    continue
                if isinstance(val, int) and not isinstance(val, bool):
                    port.counters[str(k)] = val
            out.append(_finish(port))
    if not out:
        raise InputError("no RDMA link statistics in the JSON", path)
    return out


_HW_HEADER = re.compile(r"^\s*Port (\d+) hw counters:\s*$", re.I | re.ASCII)
_HW_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*:\s*(\d+)\s*$", re.ASCII)


def parse_hw_counters_text(
    data: str | bytes, path: str | None = None, device: str | None = None
) -> list[RdmaPort]:
    """``show_counters DEV`` text (``Port 1 hw counters:`` then ``name: value`` lines) → ports."""
    text = _decode(data)
    dev = device or (
        Path(path).name.split("_show_counters")[0] if path and "_show_counters" in Path(path).name else "rdma"
    )
    ports: list[RdmaPort] = []
    cur: RdmaPort | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _HW_HEADER.match(line)
        if m:
            cur = RdmaPort(dev, int(m.group(1)), source=f"{path or '<hw_counters>'}:{lineno}")
            ports.append(cur)
            continue
        m = _HW_LINE.match(line)
        if m:
            if cur is None:
                cur = RdmaPort(dev, 1, source=f"{path or '<hw_counters>'}:{lineno}")
                ports.append(cur)
            cur.counters[m.group(1)] = int(m.group(2))
    ports = [p for p in ports if p.counters]
    if not ports:
        raise InputError("no `name: value` counter lines found", path, 1)
    return [_finish(p) for p in ports]


_QP = re.compile(
    r"^link (?P<dev>[^/\s]+)(?:/(?P<port>\d+))?\s+lqpn (?P<lqpn>\d+)\s+(?:.*?\btype (?P<type>\S+))?"
    r"(?:.*?\bstate (?P<state>\S+))?(?:.*?\bpid (?P<pid>\d+))?(?:.*?\bcomm (?P<comm>.+?))?\s*$"
)


def parse_rdma_res_qp(data: str | bytes, path: str | None = None) -> list[QueuePair]:
    """``rdma res show qp`` lines → queue pairs. Kernel owners print ``[ib_core]`` (new) or ``ib_core`` (old)."""
    text = _decode(data)
    out = []
    for line in text.splitlines():
        m = _QP.match(line.strip())
        if not m:
            continue
        comm = (m.group("comm") or "").strip()
        kernel = comm.startswith("[") or (
            m.group("pid") is None and comm in ("ib_core", "mlx5_ib", "ib_uverbs", "ib_ipoib", "rdma_cm")
        )
        out.append(
            QueuePair(
                device=m.group("dev"),
                port=int(m.group("port")) if m.group("port") else None,
                lqpn=int(m.group("lqpn")),
                type=m.group("type") or "?",
                state=m.group("state") or "?",
                comm=comm.strip("[]"),
                pid=int(m.group("pid")) if m.group("pid") else None,
                kernel=kernel,
            )
        )
    if not out:
        raise InputError("no `link DEV/PORT lqpn N …` line found (not `rdma res show qp` output)", path, 1)
    return out


# --- rates -----------------------------------------------------------------------------------------


def rates(before: list[RdmaPort], after: list[RdmaPort], interval_s: float | None = None) -> list[RdmaRate]:
    """Per-port counter increases between two reads (matched by device/port).

    ``interval_s`` defaults to the difference of the reads' times. A counter that decreased was
    reset: its increase is counted from zero and it is listed in ``resets``. Counters stuck at
    their saturation value in either read are listed in ``saturated`` and left out.
    """
    prev = {(p.device, p.port): p for p in before}
    out = []
    for a in after:
        b = prev.get((a.device, a.port))
        if b is None:
            continue
        dt = interval_s
        if dt is None and a.time is not None and b.time is not None:
            dt = a.time - b.time
        if dt is None or not dt > 0:
            raise InputError(f"{a.name}: the two reads need a positive interval (got {dt})")
        r = RdmaRate(a.device, a.port, float(dt))
        for k, v in a.counters.items():
            if k not in b.counters or k == "lifespan":
                continue
            if _saturated(k, v) or _saturated(k, b.counters[k]):
                r.saturated.append(k)
                continue
            d = v - b.counters[k]
            if d < 0:
                r.resets.append(k)
                d = v
            r.deltas[k] = d
            r.per_s[k] = d / dt
        for k in WORD_COUNTERS:
            if k in r.deltas:
                bk = k.replace("_data", "_bytes")
                r.deltas[bk] = r.deltas[k] * 4
                r.per_s[bk] = r.per_s[k] * 4
        out.append(r)
    return out


# --- detection and loading --------------------------------------------------------------------------

_SNIFF_STAT = re.compile(rb"^link \S+/\d+ (?:[a-z_]+ \d+ ){2}", re.M)
# `rdma -p statistic show`: tab-indented counters; a paste (GitHub) may have turned the tab into spaces
_SNIFF_STAT_P = re.compile(rb"^link \S+/\d+\s*\n[ \t]{1,16}[a-z_]+ \d+", re.M)
_SNIFF_QP = re.compile(rb"^link \S+ lqpn \d+ ", re.M)
_SNIFF_HW = re.compile(rb"^[ \t]*Port \d+ hw counters:", re.M | re.I)


def sniff_rdma(head: bytes, name: str = "") -> bool:
    """True for ``rdma statistic``/``rdma res show qp`` output or mlx5 ``hw_counters`` text."""
    return bool(
        _SNIFF_STAT.search(head)
        or _SNIFF_STAT_P.search(head)
        or _SNIFF_QP.search(head)
        or _SNIFF_HW.search(head)
    )


def load_rdma(path: str | Path) -> dict[str, Any]:
    """Read an RDMA text dump (or a sysfs root directory) → ``{"rdma": [...], "rdma_qps": [...]}``."""
    p = Path(path)
    if p.is_dir():
        ports = read_sysfs_infiniband(p)
        if not ports:
            raise InputError("no sys/class/infiniband/*/ports under this directory", str(p))
        return {"rdma": ports}
    from clusterdoctor.observe.limits import read_input

    data = read_input(p)  # size-limited, one-line errors
    out: dict[str, Any] = {}
    head = data[:65536]
    if _SNIFF_HW.search(head):
        out["rdma"] = parse_hw_counters_text(data, str(p))
    else:
        try:
            out["rdma"] = parse_rdma_statistic(data, str(p))
        except InputError:
            pass
    if _SNIFF_QP.search(data):
        out["rdma_qps"] = parse_rdma_res_qp(data, str(p))
    if not out:
        raise InputError("no RDMA counters or queue pairs found", str(p), 1)
    return out
