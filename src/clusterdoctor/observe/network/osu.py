"""OSU Micro-Benchmarks output (``osu_bw``, ``osu_bibw``, ``osu_latency``, ``osu_allreduce`` ...): the
test's header and its size/value table.

Format from the benchmarks' ``util/osu_util.h`` (``print_header``): a title line ``# OSU MPI
Bi-Directional Bandwidth Test v5.7`` (``OSU MPI-CUDA``, ``OSU OpenSHMEM``, ``OSU UPC``), optional
``# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)`` lines, then a column header ``# Size
Bandwidth (MB/s)`` / ``# Size  Latency (us)`` / ``# Size  Avg Latency(us)`` and one row per message
size. A run is data, not a verdict: small messages are latency bound by design, so nothing here
judges bandwidth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import numbered

__all__ = ["OsuRun", "load_osu", "parse_osu", "sniff_osu"]

MAX_ROWS = 10_000
_TITLE = re.compile(
    r"^#\s{0,4}(?P<title>OSU [\w\-/ ]{1,40}? (?:Test|Benchmark)[\w.\- ]{0,40}?)\s*(?:v(?P<ver>[\d.]{1,12}))?\s*$"
)
_COLS = re.compile(r"^#\s{0,4}Size\s+(?P<cols>\S[^\n]{0,200}?)\s*$")
_ROW = re.compile(
    r"^\s{0,8}(?P<size>\d{1,12})\s+(?P<vals>\d[\d.eE+\-]{0,20}(?:\s+\d[\d.eE+\-]{0,20}){0,8})\s*$"
)


@dataclass
class OsuRun:
    """One benchmark run: its title, version, the value columns and the rows (size, values)."""

    title: str
    source: str
    line: int
    version: str | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[int, tuple[float, ...]]] = field(default_factory=list)


def parse_osu(text: str, path: str = "<osu>", origin: list[int] | None = None) -> list[OsuRun]:
    """Every run in ``text``; :class:`InputError` when there is no OSU title or table."""
    runs: list[OsuRun] = []
    cur: OsuRun | None = None
    for lineno, line in numbered(text, origin):
        if len(line) > 4096 or not line.strip():
            continue
        m = _TITLE.match(line)
        if m:
            cur = OsuRun(m.group("title").strip(), path, lineno, m.group("ver"))
            runs.append(cur)
            continue
        m = _COLS.match(line)
        if m:
            if cur is None:
                cur = OsuRun("OSU benchmark", path, lineno)
                runs.append(cur)
            cur.columns = [c for c in re.split(r"\s{2,}", m.group("cols")) if c]
            continue
        m = _ROW.match(line)
        if m and cur is not None and cur.columns and len(cur.rows) < MAX_ROWS:
            try:
                vals = tuple(float(v) for v in m.group("vals").split())
            except ValueError:
                continue
            cur.rows.append((int(m.group("size")), vals))
    runs = [r for r in runs if r.rows]
    if not runs:
        raise InputError(
            "no OSU benchmark title or size/value table (# OSU MPI ... Test, # Size ...)", path, 1
        )
    return runs


def sniff_osu(head: bytes, name: str = "") -> bool:
    """True when the first bytes hold an OSU benchmark title line."""
    if b"\x00" in head[:4096]:
        return False
    text = head[:16384].decode("utf-8", "replace")
    return any(_TITLE.match(ln) for ln in text.splitlines()[:40])


def load_osu(path: str | Path) -> dict[str, Any]:
    """Read OSU benchmark output → ``{"osu": [OsuRun, ...]}``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    runs = parse_osu(read_text(Path(p)), p, origin=input_origin())
    return {
        "osu": runs,
        "described_as": f"OSU benchmark output ({runs[0].title}, {sum(len(r.rows) for r in runs)} row(s))",
    }
