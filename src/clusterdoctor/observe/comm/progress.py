"""Progress bars that ranks print (tqdm), with the rank that printed them: what a rank was busy with.

tqdm's line (``tqdm/std.py`` ``format_meter``): ``{desc}: {percentage:3.0f}%|{bar}| {n}/{total} [{elapsed}<{remaining},
{rate}]``, e.g. ``[default0]:Grouping texts in chunks of 2049:   8%|▊         | 726000/9672101 [02:32<30:38,
4866.01 examples/s]``. A launcher prefix (``[default0]:``, ``[rank0]:``) names the rank. When the other
ranks time out in a collective, an unfinished bar of a rank that did not time out says that rank is still
busy in its own work (data preprocessing, a download) and is the one behind (rules/comm_hangs.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Progress", "scan_progress"]

MAX_BARS = 10_000
_BAR = re.compile(
    r"(?P<desc>[^|\r\n\]]{0,200}?):? {0,4}(?P<pct>\d{1,3})%\|[^|\r\n]{0,120}\| ?(?P<n>\d[\d.]{0,20}[kMG]?)/"
    r"(?P<total>\d[\d.]{0,20}[kMG]?) \[(?P<elapsed>[\d:]{2,12})<(?P<left>[\d:?]{1,12})"
)
_RANK = re.compile(r"\[(?:default|rank)(\d{1,6})\]:?|\[Rank (\d{1,6})\]")


@dataclass(frozen=True)
class Progress:
    path: str
    line: int
    rank: int | None
    desc: str
    pct: int
    left: str  # tqdm's remaining-time estimate ("30:38", "?")


def scan_progress(text: str, path: str = "<log>") -> list[Progress]:
    """Every progress bar in ``text`` with the rank whose prefix stands nearest before it on its line."""
    out: list[Progress] = []
    if "%|" not in text:
        return out
    for n, line in enumerate(text.splitlines(), 1):
        if "%|" not in line or len(line) > 65536:
            continue
        for m in _BAR.finditer(line):
            tags = list(_RANK.finditer(line, 0, m.start("pct")))
            rank = None
            if tags:
                t = tags[-1]
                rank = int(t.group(1) or t.group(2))
            desc = _RANK.sub("", m.group("desc")).strip().lstrip(": ")
            out.append(Progress(path, n, rank, desc, min(int(m.group("pct")), 100), m.group("left")))
            if len(out) >= MAX_BARS:
                return out
    return out
