"""Two host listings users paste beside an RDMA or data-loading error: ``ulimit -a`` and ``lsmod``.

* ``ulimit -a`` (bash ``builtins/ulimit.def``: ``max locked memory       (kbytes, -l) 64``, zsh:
  ``-l: locked-in-memory size (kbytes)  64``) → :class:`Ulimits`: each limit by its option letter, in the
  unit the shell prints (``None`` = ``unlimited``). The locked-memory limit (``-l``) is what RDMA memory
  registration and queue creation need raised; the open-files limit (``-n``) is what DataLoader
  workers and checkpoints run out of.
* ``lsmod`` (kmod ``tools/lsmod.c``: ``Module  Size  Used by`` then ``name size count users``) →
  :class:`KernelModule` records (``nvidia_peermem``, ``mlx5_ib``, ``rdma_rxe`` ...). A line of it is also a
  valid Prometheus sample (``name value timestamp``), so it is told apart by its header or by a
  ``Used by`` list, and claimed before the metrics reader sees it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import numbered

__all__ = [
    "KernelModule",
    "Ulimits",
    "load_limits_text",
    "parse_lsmod",
    "parse_ulimit",
    "sniff_limits_text",
]

# bash: "max locked memory       (kbytes, -l) 64"; "open files                      (-n) 1024"
_BASH = re.compile(
    r"^(?P<name>[a-z][a-z \-/]{2,40}?)\s{1,40}\((?:(?P<unit>[\w ]{1,20}), )?-(?P<opt>[a-zA-Z])\)\s{1,10}"
    r"(?P<val>\d{1,20}|unlimited)\s*$"
)
# zsh: "-l: locked-in-memory size (kbytes)  64"; "-n: file descriptors            1024"
_ZSH = re.compile(
    r"^-(?P<opt>[a-zA-Z]): (?P<name>[a-z][a-z \-/]{2,40}?)(?: \((?P<unit>[\w ]{1,20})\))?\s{1,40}"
    r"(?P<val>\d{1,20}|unlimited)\s*$"
)
_LSMOD_HDR = re.compile(r"^Module\s+Size\s+Used by\s*$")
_LSMOD_ROW = re.compile(
    r"^(?P<name>[A-Za-z0-9_]{1,56})\s{1,40}(?P<size>\d{1,12})\s{1,20}(?P<used>-?\d{1,6})"
    r"(?:\s{1,20}(?P<users>[\w,\-\[\]]{1,4000}))?\s*$"
)


@dataclass
class Ulimits:
    """The limits of one ``ulimit -a``: option letter → value (``None`` = unlimited)."""

    source: str
    values: dict[str, int | None] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def memlock_kib(self) -> int | None:
        """Max locked memory in KiB; None when unlimited or not listed (see :meth:`has`)."""
        return self.values.get("l")

    def has(self, opt: str) -> bool:
        return opt in self.values


@dataclass(frozen=True)
class KernelModule:
    """One line of ``lsmod``."""

    name: str
    size: int
    used: int
    users: tuple[str, ...]
    source: str
    line: int


def parse_ulimit(text: str, path: str = "<ulimit>", origin: list[int] | None = None) -> Ulimits:
    """``ulimit -a`` output → :class:`Ulimits`; raises :class:`InputError` when no limit line is found."""
    out = Ulimits(path)
    for lineno, line in numbered(text, origin):
        if len(line) > 512:
            continue
        m = _BASH.match(line.strip()) or _ZSH.match(line.strip())
        if not m:
            continue
        opt = m.group("opt")
        val = m.group("val")
        out.values[opt] = None if val == "unlimited" else int(val)
        if m.group("unit"):
            out.units[opt] = m.group("unit")
        out.names[opt] = m.group("name").strip()
        out.lines[opt] = lineno
    if not out.values:
        raise InputError("no `name (unit, -x) value` limit line (not ulimit -a output)", path, 1)
    return out


def parse_lsmod(text: str, path: str = "<lsmod>", origin: list[int] | None = None) -> list[KernelModule]:
    """``lsmod`` output (or a ``grep`` of it) → modules; raises :class:`InputError` when none is found."""
    out: list[KernelModule] = []
    for lineno, line in numbered(text, origin):
        if len(line) > 4096:
            continue
        m = _LSMOD_ROW.match(line)
        if not m:
            continue
        users = tuple(u for u in (m.group("users") or "").split(",") if u and u != "-")
        out.append(
            KernelModule(m.group("name"), int(m.group("size")), int(m.group("used")), users, path, lineno)
        )
    if not out:
        raise InputError("no `module size used-by` line (not lsmod output)", path, 1)
    return out


_SNIFF_BASH = re.compile(
    rb"^[a-z][a-z \-/]{2,40}?\s{1,40}\((?:[\w ]{1,20}, )?-[a-zA-Z]\)\s{1,10}(?:\d{1,20}|unlimited)\s*$", re.M
)
_SNIFF_ZSH = re.compile(
    rb"^-[a-zA-Z]: [a-z][a-z \-/]{2,40}?(?: \([\w ]{1,20}\))?\s{1,40}(?:\d{1,20}|unlimited)\s*$", re.M
)
_SNIFF_LSMOD_HDR = re.compile(rb"^Module\s+Size\s+Used by\s*$", re.M)
# a row with a users list: what no Prometheus sample has; module names are lower case, sizes whole pages
_SNIFF_LSMOD_USERS = re.compile(
    rb"^[a-z0-9_]{2,56}\s{1,40}\d{4,9}\s{1,20}\d{1,4}\s{1,20}[a-z0-9_]{2,56}(?:,[a-z0-9_]{2,56}){0,64},?\s*$",
    re.M,
)
_SNIFF_LSMOD_ROW = re.compile(
    rb"^[a-z0-9_]{2,56}\s{1,40}\d{4,9}\s{1,20}\d{1,4}(?:\s{1,20}\S{1,4000})?\s*$", re.M
)


def _count(rx: re.Pattern[bytes], head: bytes, need: int) -> bool:
    n = 0
    for _ in rx.finditer(head):
        n += 1
        if n >= need:
            return True
    return False


def _kind(head: bytes) -> str | None:
    if b"\x00" in head[:4096]:
        return None
    if _count(_SNIFF_BASH, head, 3) or _count(_SNIFF_ZSH, head, 3):
        return "ulimit"
    if _SNIFF_LSMOD_HDR.search(head) or (
        _SNIFF_LSMOD_USERS.search(head) and _count(_SNIFF_LSMOD_ROW, head, 2)
    ):
        return "lsmod"
    return None


def sniff_limits_text(head: bytes, name: str = "") -> bool:
    """True for ``ulimit -a`` (three limit lines or more) or ``lsmod`` output."""
    return _kind(head) is not None


def load_limits_text(path: str | Path) -> dict[str, Any]:
    """Read ``ulimit -a`` → ``{"ulimits": [Ulimits]}`` or ``lsmod`` → ``{"kernel_modules": [...]}``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    text = read_text(Path(p))
    kind = _kind(text[:65536].encode("utf-8", "surrogateescape"))
    if kind == "ulimit":
        u = parse_ulimit(text, p, origin=input_origin())
        return {"ulimits": [u], "described_as": f"ulimit -a output ({len(u.values)} limits)"}
    if kind == "lsmod":
        mods = parse_lsmod(text, p, origin=input_origin())
        return {"kernel_modules": mods, "described_as": f"lsmod output ({len(mods)} modules)"}
    raise InputError("not ulimit -a or lsmod output", p, 1)
