"""``ibv_devices`` (rdma-core ``libibverbs/examples/device_list.c``): the RDMA devices and their node GUIDs.

The program prints a header ``    device          	   node GUID`` and a rule line of dashes, then one line
per device: ``    mlx5_0          	248a0703004bf0a8``. Pasted, the spacing is often collapsed
(``device node GUID`` / ``mlx5_0 248a0703004bf0a8``) and the command line may sit on top. A node GUID
of all zeros is a device whose GUID was never assigned: an SR-IOV virtual function the PF's
administrator gave no GUID (``ip link set <pf> vf N node_guid ...``), or a VF the subnet manager's
virtualisation does not serve. The header with no row under it is read too (no device listed: the
libibverbs warnings above it, catalogued messages, say why; SoftRoCE/rxe-dev#74 and #75).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import lines_not_read, numbered

__all__ = ["RdmaDevice", "load_ibv_devices", "parse_ibv_devices", "sniff_ibv_devices"]

_HDR = re.compile(r"^\s{0,16}device\s{1,40}node GUID\s*$")
_RULE = re.compile(r"^\s{0,16}-{4,20}\s{1,40}-{8,40}\s*$")
_ROW = re.compile(r"^\s{0,16}(?P<dev>[A-Za-z][\w.\-]{0,63})\s{1,40}(?P<guid>[0-9a-fA-F]{16})\s*$")
_CMD = re.compile(r"^\s{0,8}(?:[$#>]\s{0,4})?ibv_devices\s*$")
# libibverbs' own warnings on stderr, above the list (read as known messages beside this parser)
_VERBS_WARN = re.compile(r"^\s{0,8}libibverbs: (?:Warning|Fatal): ")
MAX_DEVICES = 4096


@dataclass(frozen=True)
class RdmaDevice:
    """One ``ibv_devices`` row."""

    name: str
    node_guid: str
    source: str = ""
    line: int = 0

    @property
    def guid_unset(self) -> bool:
        return int(self.node_guid, 16) == 0


def sniff_ibv_devices(head: bytes, name: str = "") -> bool:
    """The ``device  node GUID`` header within the first lines."""
    text = head[:8192].decode("utf-8", "replace")
    return any(_HDR.match(ln) for ln in text.splitlines()[:8])


def parse_ibv_devices(text: str, path: str = "<input>") -> tuple[list[RdmaDevice], list[int]]:
    """The devices of one or several ``ibv_devices`` outputs, and the lines that were none of it."""
    devs: list[RdmaDevice] = []
    skipped: list[int] = []
    seen_header = False
    for lineno, line in numbered(text):
        if not line.strip() or _CMD.match(line) or _RULE.match(line) or _VERBS_WARN.match(line):
            continue
        if _HDR.match(line):
            seen_header = True
            continue
        m = _ROW.match(line) if seen_header else None
        if m and len(devs) < MAX_DEVICES:
            devs.append(RdmaDevice(m.group("dev"), m.group("guid").lower(), path, lineno))
        else:
            skipped.append(lineno)
    if not devs and (not seen_header or skipped):
        raise InputError("ibv_devices output with no device row", path, 1)
    return devs, skipped  # the header alone: libibverbs lists no device (its warnings say why)


def load_ibv_devices(path: str | Path) -> dict[str, Any]:
    """Loader hook: ``rdma_devices`` (and a warning naming the lines not read)."""
    from clusterdoctor.observe.limits import read_text

    p = str(path)
    devs, skipped = parse_ibv_devices(read_text(Path(p)), p)
    out: dict[str, Any] = {
        "rdma_devices": devs,
        "described_as": f"ibv_devices output ({len(devs)} device(s))"
        if devs
        else "ibv_devices output (no device listed)",
    }
    if skipped:
        out["warnings"] = [lines_not_read(p, skipped, "ibv_devices output")]
    return out
