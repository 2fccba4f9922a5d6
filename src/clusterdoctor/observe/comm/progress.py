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
# The bar from its percentage on; the description is taken from the text before it (up to 200
# characters after the last '|' or ']'), not by the regex: a lazy description in front made every
# position of a long line try 200 characters (issue 25: patterns linear on 1 MiB lines).
_BAR = re.compile(
    r"(?P<pct>\d{1,3})%\|[^|\r\n]{0,120}\| ?(?P<n>\d[\d.]{0,20}[kMG]?)/"
    r"(?P<total>\d[\d.]{0,20}[kMG]?) \[(?P<elapsed>[\d:]{2,12})<(?P<left>[\d:?]{1,12})"
)
_DESC_MAX = 200
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
        tags = list(_RANK.finditer(line))
        prev_end, ti, last_tag = 0, 0, None  # bars come in order: one walk over the rank tags
        for m in _BAR.finditer(line):
            start = m.start("pct")
            while ti < len(tags) and tags[ti].end() <= start:
                last_tag, ti = tags[ti], ti + 1
            rank = None
            if last_tag is not None:
                rank = int(last_tag.group(1) or last_tag.group(2))
            seg = line[max(prev_end, start - _DESC_MAX) : start]
            seg = seg[max(seg.rfind("|"), seg.rfind("]"), seg.rfind("\r")) + 1 :]
            prev_end = m.end()
            desc = _RANK.sub("", seg).strip().rstrip(":").strip().lstrip(": ")
            out.append(Progress(path, n, rank, desc, min(int(m.group("pct")), 100), m.group("left")))
            if len(out) >= MAX_BARS:
                return out
    return out
