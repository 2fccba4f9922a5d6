"""iproute2 ``rdma system [show]``: the RDMA subsystem's network-namespace mode and its other switches.

It prints one line, ``netns shared`` (iproute2 5.x), later ``netns shared copy-on-fork on`` and
``netns shared privileged-qkey off copy-on-fork on``; the mode is ``shared`` (every RDMA device is
visible in every network namespace, what the RDMA shared device plugin needs) or ``exclusive`` (a
device belongs to one namespace: ``rdma dev set <dev> netns <ns>``, what SR-IOV with per-pod RDMA
uses). A paste may hold the command line above it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["RdmaSystem", "load_rdma_system", "parse_rdma_system", "sniff_rdma_system"]

_LINE = re.compile(
    r"^\s{0,8}netns (?P<mode>shared|exclusive)(?P<rest>(?: [a-z][a-z-]{1,30} (?:on|off)){0,6})\s*$"
)
_CMD = re.compile(
    r"^\s{0,8}(?:\S{0,80}[$#>]\s{0,4})?rdma\s{1,4}(?:-\w{1,3}\s{1,4})?sys(?:tem)?(?:\s{1,4}show)?\s*$"
)


@dataclass
class RdmaSystem:
    """What ``rdma system`` said."""

    netns_mode: str  # "shared" | "exclusive"
    switches: dict[str, bool] = field(default_factory=dict)  # copy-on-fork, privileged-qkey
    source: str = ""
    line: int = 0


def _lines(text: str) -> list[tuple[int, str]]:
    return [
        (i, ln)
        for i, ln in enumerate(text.splitlines(), 1)
        if ln.strip() and not ln.strip().startswith("```")
    ]


def sniff_rdma_system(head: bytes, name: str = "") -> bool:
    """The whole paste is ``rdma system``'s line, with at most its command line above it."""
    lines = _lines(head[:4096].decode("utf-8", "replace"))
    if lines and _CMD.match(lines[0][1]):
        lines = lines[1:]
    return len(lines) == 1 and bool(_LINE.match(lines[0][1]))


def parse_rdma_system(text: str, path: str = "<input>") -> RdmaSystem:
    """The mode and switches. InputError when no ``netns shared|exclusive`` line is found."""
    for lineno, line in _lines(text):
        m = _LINE.match(line)
        if m:
            words = m.group("rest").split()
            switches = {words[i]: words[i + 1] == "on" for i in range(0, len(words) - 1, 2)}
            return RdmaSystem(m.group("mode"), switches, path, lineno)
    raise InputError("no 'netns shared|exclusive' line: not rdma system output", path, 1)


def load_rdma_system(path: str | Path) -> dict[str, Any]:
    """Loader hook: ``rdma_system``."""
    from clusterdoctor.observe.limits import read_text

    p = str(path)
    res = parse_rdma_system(read_text(Path(p)), p)
    return {"rdma_system": [res], "described_as": f"rdma system (netns {res.netns_mode})"}
