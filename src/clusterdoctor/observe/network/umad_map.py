"""The ``/sys/class/infiniband_mad`` map: which RDMA device and port each ``umadN`` / ``issmN`` node serves.

Each node of ``/sys/class/infiniband_mad`` holds two sysfs files, ``ibdev`` and ``port``; a shell loop
prints them one node a line (Mellanox/rdmamap#17)::

    for d in /sys/class/infiniband_mad/umad* /sys/class/infiniband_mad/issm*; do
      echo "$(basename $d) -> ibdev=$(cat $d/ibdev 2>/dev/null) port=$(cat $d/port 2>/dev/null)"
    done
    umad0 -> ibdev=mlx5_0 port=1

``umadN`` is a port's management-datagram node (what ibstat, ibnetdiscover and OpenSM open), ``issmN``
its "is subnet manager" node. The loop's own lines are skipped; other lines are named in a warning.
The map is read (which devices and ports the host's MAD layer serves), not judged: no rule needs it
yet, and a multi-port device (an XDR ``smi`` device with four ports) is normal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import lines_not_read, numbered

__all__ = ["MadNode", "load_umad_map", "parse_umad_map", "sniff_umad_map"]

_ROW = re.compile(
    r"^\s{0,8}(?P<node>(?:umad|issm)\d{1,5})\s{0,4}(?:->|:)\s{0,4}ibdev=(?P<dev>[\w.\-]{0,64})\s{1,8}"
    r"port=(?P<port>\d{0,3})\s*$"
)
_LOOP = re.compile(r"^\s{0,8}(?:[$#>]\s{0,4})?(?:for \w{1,16} in |do\b|done\b|echo \"?\$\(basename )")
MAX_NODES = 4096


@dataclass(frozen=True)
class MadNode:
    """One ``/sys/class/infiniband_mad`` node: its name, the device and port it serves (None: unreadable)."""

    node: str
    ibdev: str | None
    port: int | None
    source: str = ""
    line: int = 0

    @property
    def is_sm(self) -> bool:
        return self.node.startswith("issm")


def sniff_umad_map(head: bytes, name: str = "") -> bool:
    """Two ``umadN -> ibdev=<dev> port=<n>`` lines within the first lines."""
    text = head[:16384].decode("utf-8", "replace")
    return sum(1 for ln in text.splitlines()[:60] if _ROW.match(ln)) >= 2


def parse_umad_map(text: str, path: str = "<input>") -> tuple[list[MadNode], list[int]]:
    """The nodes of the map, and the numbers of the lines that were neither rows nor the loop."""
    out: list[MadNode] = []
    skipped: list[int] = []
    for lineno, line in numbered(text):
        m = _ROW.match(line)
        if m:
            if len(out) < MAX_NODES:
                port = m.group("port")
                out.append(
                    MadNode(
                        m.group("node"), m.group("dev") or None, int(port) if port else None, path, lineno
                    )
                )
            continue
        if line.strip() and not _LOOP.match(line):
            skipped.append(lineno)
    if not out:
        raise InputError("no 'umadN -> ibdev=<dev> port=<n>' line", path, 1)
    return out, skipped


def load_umad_map(path: str | Path) -> dict[str, Any]:
    """Loader hook: ``ib_mad_nodes`` (and a warning naming the lines not read)."""
    from clusterdoctor.observe.limits import read_text

    p = str(path)
    nodes, skipped = parse_umad_map(read_text(Path(p)), p)
    devs = sorted({n.ibdev for n in nodes if n.ibdev})
    umad = sum(not n.is_sm for n in nodes)
    out: dict[str, Any] = {
        "ib_mad_nodes": nodes,
        "described_as": (
            f"infiniband_mad map ({umad} umad, {len(nodes) - umad} issm node(s); "
            f"{', '.join(devs[:4]) or 'no device'}{' ...' if len(devs) > 4 else ''})"
        ),
    }
    if skipped:
        out["warnings"] = [lines_not_read(p, skipped, "the infiniband_mad map")]
    return out
