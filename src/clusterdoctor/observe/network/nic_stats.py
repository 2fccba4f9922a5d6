"""Ethernet/DPDK NIC statistics: ``ethtool -S``, testpmd ``show port stats|xstats``, DPDK xstats JSON,
Holoscan ANO DPDK end-of-run logs, and ``mlnx_perf`` per-second rates.

Counters become :class:`clusterdoctor.observe.network.rdma.RdmaPort` records (device, port, counters) so the
same rules judge receive drops on a DPDK port and on an RDMA port; ``mlnx_perf`` output (already
per-second deltas) becomes :class:`~clusterdoctor.observe.network.rdma.RdmaRate` records.

DPDK's generic ``rte_eth_stats`` fields appear under several spellings; they are stored under the
ethdev names: ``ipackets``, ``ierrors``, ``imissed`` (dropped by the NIC for lack of RX
descriptors) and ``rx_nombuf`` (mbuf pool empty) — from testpmd's ``RX-missed``/``RX-nombuf``, the
JSON ``stats.rx_missed``/``rx_no_mbuf`` and Holoscan's ``Missed packets``/``RX out of buffers``.
Per-ring ethtool lines (``[3]: rx_discards: 0``, bnxt) are kept as ``[3].rx_discards`` and summed
under the plain name when the driver prints no port-level counter of that name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.rdma import RdmaPort, RdmaRate

__all__ = ["load_nic_stats", "parse_nic_stats", "sniff_nic_stats"]

_GENERIC = {
    "rx-packets": "ipackets",
    "rx-errors": "ierrors",
    "rx-missed": "imissed",
    "rx-nombuf": "rx_nombuf",
    "rx-bytes": "ibytes",
    "tx-packets": "opackets",
    "tx-errors": "oerrors",
    "tx-bytes": "obytes",
    "received packets": "ipackets",
    "transmit packets": "opackets",
    "received bytes": "ibytes",
    "transmit bytes": "obytes",
    "missed packets": "imissed",
    "errored packets": "ierrors",
    "rx out of buffers": "rx_nombuf",
    "rx_missed": "imissed",
    "rx_no_mbuf": "rx_nombuf",
    "rx_packets": "ipackets",
    "rx_errors": "ierrors",
    "rx_bytes": "ibytes",
    "tx_packets": "opackets",
    "tx_errors": "oerrors",
    "tx_bytes": "obytes",
}

_HOLO_PREFIX = re.compile(r"^\s*\[(?:info|warn|warning|error|debug)\]\s*\[[^\]]*\]\s?", re.I)
_PORT_HDR = re.compile(r"(?:NIC (?:extended )?statistics for port|^\s*Port)\s+(\d+)\s*:?", re.I)
_KV = re.compile(  # the key up to the spaces before its colon, each run of spaces looked past once
    r"^\s*(?:-\s+)?([A-Za-z_](?>[\w.\-]+| +(?!\s*:))*)\s*:\s+(-?\d[\d,]*+)\s*(?:Bps\s*=.*)?$"
)
_RING = re.compile(r"^\s*\[(\d+)\]:\s+([\w.\-]+):\s+(\d+)\s*$")
# a name starts where no name character precedes it: a run of them is scanned once, from its start
_PAIRS = re.compile(r"(?<![\w-])([A-Za-z][\w-]{0,127}+):\s+(\d+)")


def _int(s: str) -> int | None:
    try:
        return int(s.replace(",", ""))
    except ValueError:
        return None


def _dpdk_json(v: dict[str, Any], path: str | None) -> list[RdmaPort]:
    info = v.get("basic_info") if isinstance(v.get("basic_info"), dict) else {}
    try:
        pid = int(info.get("port_id", 0))
    except (TypeError, ValueError):
        pid = 0
    name = str(info.get("interface") or info.get("driver") or "dpdk")
    port = RdmaPort(f"dpdk:{name}", pid, source=path or "<dpdk json>")
    stats = v.get("stats") if isinstance(v.get("stats"), dict) else {}
    for k, val in stats.items():
        if isinstance(val, int) and not isinstance(val, bool):
            port.counters[_GENERIC.get(k.lower(), k)] = val
    for x in v.get("xstats") or []:
        if isinstance(x, dict) and isinstance(x.get("name"), str) and isinstance(x.get("value"), int):
            port.counters.setdefault(x["name"], x["value"])
    link = v.get("link") if isinstance(v.get("link"), dict) else {}
    if "link_speed" in link:
        port.rate = f"{link['link_speed']} Mb/s"
    if not port.counters:
        raise InputError("DPDK JSON without stats or xstats", path)
    return [port]


def parse_nic_stats(
    data: str | bytes, path: str | None = None, device: str | None = None
) -> tuple[list[RdmaPort], list[RdmaRate]]:
    """Parse one NIC statistics dump → (ports with counters, per-second rates for mlnx_perf)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    s = text.strip()
    if not s:
        raise InputError("empty NIC statistics", path)
    if s.startswith("{"):
        try:
            v = json.loads(s)
        except (ValueError, RecursionError):
            raise InputError("invalid JSON", path) from None
        if not isinstance(v, dict):
            raise InputError("not DPDK port JSON", path)
        return _dpdk_json(v, path), []
    dev = device
    m = re.search(r"^#\s*ethtool -S (\S+)", text, re.M)
    if m:
        dev = dev or m.group(1)
    dev = dev or (Path(path).stem if path else "nic")
    is_rates = bool(re.search(r"Bps\s*=", text))
    ports: dict[int, RdmaPort] = {}
    cur = -1
    rings: dict[int, dict[str, int]] = {}

    def port(n: int) -> RdmaPort:
        if n not in ports:
            label = f"dpdk:{dev}" if n >= 0 else dev
            ports[n] = RdmaPort(label, max(n, 0) if n >= 0 else 1, source=path or "<nic stats>")
        return ports[n]

    for line in text.splitlines():
        line = _HOLO_PREFIX.sub("", line)
        if not line.strip() or line.strip().startswith(("#", "testpmd>")) and not _PORT_HDR.search(line):
            continue
        h = _PORT_HDR.search(line)
        if h and (line.strip().startswith(("Port", "#")) or "statistics for port" in line):
            cur = int(h.group(1))
            port(cur)
            continue
        r = _RING.match(line)
        if r:
            rings.setdefault(cur, {})
            p = port(cur)
            p.counters[f"[{r.group(1)}].{r.group(2)}"] = int(r.group(3))
            rings[cur][r.group(2)] = rings[cur].get(r.group(2), 0) + int(r.group(3))
            continue
        kv = _KV.match(line)
        if kv:
            name = kv.group(1).strip()
            val = _int(kv.group(2))
            if val is None:
                continue
            key = _GENERIC.get(name.lower(), name) if " " in name or "-" in name else name
            port(cur).counters[key] = val
            continue
        pairs = _PAIRS.findall(line)
        if len(pairs) >= 1 and re.match(r"^\s*(RX|TX|Rx|Tx)-", line):
            for k, v in pairs:
                if k.lower() in _GENERIC:
                    port(cur).counters[_GENERIC[k.lower()]] = int(v)
    for n, sums in rings.items():
        p = port(n)
        for k, v in sums.items():
            p.counters.setdefault(k, v)
    out = [p for p in ports.values() if p.counters]
    if not out:
        raise InputError(
            "no `name: value` NIC counters found (not ethtool -S / DPDK / mlnx_perf output)", path, 1
        )
    if is_rates:
        return [], [
            RdmaRate(
                p.device,
                p.port,
                1.0,
                deltas=dict(p.counters),
                per_s={k: float(v) for k, v in p.counters.items()},
            )
            for p in out
        ]
    return out, []


# an `ethtool -S DEV | grep ...` excerpt has no "NIC statistics:" header: indented `name: value` lines
# whose names are NIC counters (never a Prometheus sample: those are not indented)
_SNIFF_EXCERPT = re.compile(rb"^\s{2,16}([A-Za-z][\w.\-\[\]]{1,64}): \d{1,20}\s*$", re.M)
_NIC_COUNTER = re.compile(
    rb"(?:^|_)(?:rx|tx)(?:_|$)|_phy$|discard|drop|pause|error|packets|bytes|out_of_buffer|missed"
)
_SNIFF = (
    re.compile(rb"^NIC statistics:\s*$", re.M),
    re.compile(rb"NIC (?:extended )?statistics for port \d+"),
    re.compile(rb"\[adv_network_dpdk_mgr\.cpp:\d+\]"),
    re.compile(rb'"xstats"\s*:\s*\['),
    re.compile(rb"^[ \t]*[a-z_0-9]+: [\d,]+ Bps\s+=", re.M),
)


def sniff_nic_stats(head: bytes, name: str = "") -> bool:
    """True for ethtool -S (whole or a grep excerpt), testpmd stats/xstats, DPDK xstats JSON, Holoscan
    ANO logs, mlnx_perf."""
    if any(p.search(head) for p in _SNIFF):
        return True
    names = [m.group(1) for _, m in zip(range(64), _SNIFF_EXCERPT.finditer(head))]
    if len(names) < 2 or sum(1 for n in names if _NIC_COUNTER.search(n)) < max(2, len(names) // 2):
        return False
    # every non-blank line is such a counter (an excerpt, not a YAML document or a log)
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    return len(lines) == len([ln for ln in lines if _SNIFF_EXCERPT.match(ln)])


_CMD_DEV = re.compile(
    r"\bethtool\s{1,8}(?:-S|--statistics)\s{1,8}(?:--all-groups\s{1,8})?([A-Za-z][\w.\-@]{0,63})"
)


def load_nic_stats(path: str | Path) -> dict[str, Any]:
    """Read a NIC statistics file → ``{"rdma": [ports]}`` or, for mlnx_perf, ``{"rdma_rates": [...]}``.

    The ``rdma`` kind holds RDMA and Ethernet/DPDK port counters alike, so the receive-drop and
    link-error rules judge both.
    """
    p = Path(path)
    from clusterdoctor.observe.limits import read_input
    from clusterdoctor.observe.paste import input_commands

    data = read_input(p)
    # a pasted `ethtool -S ens1f0np0 | grep discard` names the port its counters are about
    devs = {m.group(1) for c in input_commands() for m in _CMD_DEV.finditer(c)}
    ports, rts = parse_nic_stats(data, str(p), device=devs.pop() if len(devs) == 1 else None)
    out: dict[str, Any] = {}
    if ports:
        out["rdma"] = ports
    if rts:
        out["rdma_rates"] = rts
    n = sum(len(x.counters) for x in ports) + sum(len(r.per_s) for r in rts)
    names = ", ".join(sorted({x.device for x in ports} | {r.device for r in rts})[:4])
    out["described_as"] = f"NIC statistics ({names}: {n} counters)"
    return out
