"""``ucx_info -d`` output: UCX's memory domains, transports and devices, and the ones that failed to open.

Format from openucx/ucx ``src/tools/info/tl_info.c``: blocks of ``# Memory domain: mlx5_0``, then per
transport ``#      Transport: rc_verbs`` / ``#         Device: mlx5_0:1``, and ``#   < failed to open
interface >`` when the transport could not be opened on that device. The ``UCX  ERROR`` line that says
why (``ibv_create_cq(cqe=4096) failed: Cannot allocate memory``) is printed inside the block, just
before; it is kept with the interface so that a rule can name the device a bare error line does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import numbered

__all__ = ["UcxInterface", "load_ucx_info", "parse_ucx_info", "sniff_ucx_info"]

MAX_IFACES = 10_000

_MD = re.compile(r"^#\s{0,16}Memory domain:\s{1,8}(?P<md>\S{1,64})\s*$")
_TL = re.compile(r"^#\s{0,16}Transport:\s{1,8}(?P<tl>\S{1,64})\s*$")
_DEV = re.compile(r"^#\s{0,16}Device:\s{1,8}(?P<dev>\S{1,64})\s*$")
_FAILED = re.compile(r"^#\s{0,16}<\s{0,4}failed to open (?:interface|memory domain)\s{0,4}>\s*$")
_ERROR = re.compile(r"\bUCX\s{1,4}ERROR\s{1,4}(?P<msg>[^\n]{1,400})$")


@dataclass
class UcxInterface:
    """One transport on one device, as ``ucx_info -d`` listed it."""

    memory_domain: str | None
    transport: str
    device: str | None
    source: str
    line: int
    failed: bool = False
    errors: list[str] = field(default_factory=list)  # the UCX ERROR lines printed in its block

    @property
    def hca(self) -> str | None:
        """The RDMA device of ``mlx5_0:1`` (``mlx5_0``), or the memory domain."""
        d = self.device or self.memory_domain
        return d.split(":")[0] if d else None


def parse_ucx_info(
    text: str, path: str = "<ucx_info>", origin: list[int] | None = None
) -> list[UcxInterface]:
    """Every transport/device block; raises :class:`InputError` when there is none."""
    out: list[UcxInterface] = []
    md: str | None = None
    cur: UcxInterface | None = None
    pending: list[str] = []  # UCX ERROR lines seen before the block they belong to is known
    for lineno, line in numbered(text, origin):
        if len(line) > 4096:
            continue
        m = _MD.match(line)
        if m:
            md, cur = m.group("md"), None
            continue
        m = _TL.match(line)
        if m:
            cur = UcxInterface(md, m.group("tl"), None, path, lineno)
            if len(out) < MAX_IFACES:
                out.append(cur)
            pending = []
            continue
        m = _DEV.match(line)
        if m and cur is not None:
            cur.device = m.group("dev")
            continue
        m = _ERROR.search(line)
        if m:
            (cur.errors if cur is not None else pending).append(m.group("msg").strip())
            continue
        if _FAILED.match(line) and cur is not None:
            cur.failed = True
    if not out:
        raise InputError("no `# Transport:` / `# Device:` blocks (not ucx_info -d output)", path, 1)
    return out


_SNIFF = re.compile(rb"^#\s{0,16}(?:Memory domain|Transport|Device):\s{1,8}\S", re.M)


def sniff_ucx_info(head: bytes, name: str = "") -> bool:
    """True for ``ucx_info -d`` output (two or more of its block headers)."""
    if b"\x00" in head[:4096]:
        return False
    n = 0
    for _ in _SNIFF.finditer(head):
        n += 1
        if n >= 2:
            return True
    return False


def load_ucx_info(path: str | Path) -> dict[str, Any]:
    """Read ``ucx_info -d`` output → ``{"ucx_interfaces": [UcxInterface, ...]}``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    ifaces = parse_ucx_info(read_text(Path(p)), p, origin=input_origin())
    failed = sum(i.failed for i in ifaces)
    return {
        "ucx_interfaces": ifaces,
        "described_as": f"ucx_info -d output ({len(ifaces)} interface(s), {failed} failed to open)",
    }
