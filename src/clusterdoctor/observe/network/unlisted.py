"""RDMA-side pastes that are no program clusterdoctor reads, refused with what they look like.

``rxe_cfg`` (the Soft-RoCE configuration script of old rdma-core releases) prints a table of the
host's Ethernet interfaces and the rxe device on each (``Name Link Driver Speed NMTU IPv4_addr RDEV
RMTU``); a CI job's shell trace (``set -x``: ``+ ibv_devinfo -l``, ``++ port=1``) shows the commands a
script ran, not their output. Neither is judged; the refusal says which it is, so that the user gives
``ibv_devices``/``ibv_devinfo`` output instead. libibverbs' warnings inside such a paste are still read
(known messages of a refused file). Listed last in :mod:`clusterdoctor.observe.detect`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["load_unlisted_rdma", "looks_like_rdma", "sniff_unlisted_rdma"]

_RXE_HDR = re.compile(
    r"^\s{0,8}Name\s{1,8}Link\s{1,8}Driver\s{1,8}Speed\s{1,8}NMTU\s{1,8}IPv4_addr\s{1,8}RDEV\s{1,8}RMTU\s*$"
)
# an xtrace line: "+ cmd", "++ var=value", behind an optional ISO timestamp (GitHub Actions, Azure)
_XTRACE = re.compile(r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z?\s)?\+{1,6} \S")
_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z?\s")


def looks_like_rdma(text: str) -> str | None:
    """The refusal's reason when the text is one of this module's shapes, else None."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()][:400]
    if not lines:
        return None
    if any(_RXE_HDR.match(ln) for ln in lines[:12]):
        return (
            "an rxe_cfg status table (Soft-RoCE interfaces and their rxe devices), not a program clusterdoctor "
            "reads: give ibv_devices or ibv_devinfo output"
        )
    traced = sum(bool(_XTRACE.match(ln)) for ln in lines)
    stamped = sum(bool(_TS.match(ln)) for ln in lines)
    if traced >= 3 and traced * 2 >= len(lines) and (stamped == 0 or stamped * 10 >= len(lines) * 9):
        return "a shell trace (set -x) of a script: the commands it ran, not their output"
    return None


def sniff_unlisted_rdma(head: bytes, name: str = "") -> bool:
    if b"\x00" in head[:4096]:
        return False
    return looks_like_rdma(head[:16384].decode("utf-8", "replace")) is not None


def load_unlisted_rdma(path: str | Path) -> dict[str, Any]:
    """Always refuses: an :class:`InputError` whose reason says what the file looks like."""
    from clusterdoctor.observe.limits import read_head

    p = Path(path)
    why = (
        looks_like_rdma(read_head(p, 16384).decode("utf-8", "replace")) or "not a program clusterdoctor reads"
    )
    raise InputError(why, str(p))
