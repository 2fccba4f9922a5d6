"""``ls /sys/class/infiniband`` and ``ls /dev/infiniband`` pasted together: the RDMA devices the kernel has
and the verbs device nodes (``uverbsN``, ``rdma_cm``) a process can open.

Each listing follows its command line (``# ls /dev/infiniband/``, ``$ ls -1 /sys/class/infiniband``);
names are split on white space, as ``ls`` prints them in columns. A device in ``/sys/class/infiniband``
is usable from user space only through its ``/dev/infiniband/uverbsN`` node (libibverbs
``ibv_open_device``); a container given only some of them sees every device but can open a few, and
librdmacm's ``rdma_get_devices`` fails as a whole when one listed device cannot be opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import lines_not_read, numbered

__all__ = ["IbDevNodes", "load_ib_devnodes", "parse_ib_devnodes", "sniff_ib_devnodes"]

_CMD = re.compile(
    r"^\s{0,8}(?:\S{0,80}[$#>]\s{0,4})?ls(?:\s{1,4}-[1a-zA-Z]{1,6}){0,3}\s{1,4}(?P<dir>/sys/class/infiniband|/dev/infiniband)/?\s*$"
)
_NAME = re.compile(r"^[\w.\-]{1,64}$")


@dataclass
class IbDevNodes:
    """What the two listings showed (None: that listing was not pasted)."""

    devices: list[str] | None = None  # /sys/class/infiniband
    nodes: list[str] | None = None  # /dev/infiniband
    source: str = ""
    skipped: list[int] = field(default_factory=list)

    @property
    def uverbs(self) -> list[str]:
        return [n for n in self.nodes or [] if n.startswith("uverbs")]


def _listed_dir(command: str) -> str | None:
    m = _CMD.match(command)
    return m.group("dir") if m else None


def sniff_ib_devnodes(head: bytes, name: str = "") -> bool:
    """An ``ls`` of either directory: typed in the text, or the command line the paste cleaner took off."""
    from clusterdoctor.observe.paste import input_commands

    if any(_listed_dir(c) for c in input_commands()):
        return True
    text = head[:8192].decode("utf-8", "replace")
    return any(_CMD.match(ln) for ln in text.splitlines()[:20])


def parse_ib_devnodes(
    text: str, path: str = "<input>", commands: tuple[str, ...] = (), origin: list[int] | None = None
) -> IbDevNodes:
    """The two listings. ``commands``/``origin``: the command lines the paste cleaner removed and where
    the cleaned lines stood in the paste: each jump in ``origin`` is where the next command stood."""
    out = IbDevNodes(source=path)
    cur: list[str] | None = None
    pending = list(commands)
    prev = 0

    def start(d: str | None) -> list[str] | None:
        if d is None:
            return None
        block: list[str] = []
        if d == "/sys/class/infiniband":
            out.devices = block
        else:
            out.nodes = block
        return block

    for lineno, line in numbered(text, origin):
        if origin is not None and pending and lineno > prev + 1:
            cur = start(_listed_dir(pending.pop(0)))
        prev = lineno
        if not line.strip():
            continue
        m = _CMD.match(line)
        if m:
            cur = start(m.group("dir"))
            continue
        names = line.split()
        if cur is not None and names and all(_NAME.match(n) for n in names):
            cur.extend(names)
        else:
            out.skipped.append(lineno)
            cur = None
    if out.devices is None and out.nodes is None:
        raise InputError("no ls /sys/class/infiniband or ls /dev/infiniband listing", path, 1)
    return out


def load_ib_devnodes(path: str | Path) -> dict[str, Any]:
    """Loader hook: ``ib_devnodes``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_commands, input_origin

    p = str(path)
    res = parse_ib_devnodes(read_text(Path(p)), p, input_commands(), input_origin())
    out: dict[str, Any] = {
        "ib_devnodes": [res],
        "described_as": "ls of /sys/class/infiniband and /dev/infiniband",
    }
    if res.skipped:
        out["warnings"] = [lines_not_read(p, res.skipped, "an ls listing")]
    return out
