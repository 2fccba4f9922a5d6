"""Known messages in any text: every line that an entry of the message catalogues matches, as a hit.

The catalogues (:mod:`clusterdoctor.rules.catalog`) are data: a pattern, a literal ``trigger``, what the
message means. This parser finds the lines: a C-speed ``bytes.find`` pass per trigger picks the
candidate lines, and only those are matched against the entries whose trigger they hold. A message
that a line break cuts (a terminal's hard wrap inside a word, a thread's or a mail client's word wrap,
even inside the trigger: "killed by signal: Bus\nerror") is read across the break, in text the size of
a paste; the hit is the line it starts on. A hit keeps the line (cut to :data:`MAX_TEXT` characters), its number as the user
gave it, the pattern's named groups, and the rank and host the line's prefix names (``[rank3]:``,
``[default3]:``, NCCL's ``host:pid:tid [dev]``).

Used two ways by :mod:`clusterdoctor.observe.detect`: on every text input beside its own parser (an
NCCL log's ``NCCL WARN`` lines, a kernel log's ``NVRM`` lines that carry no Xid), and as the loader of
last resort, for an excerpt that no program parser claims but that holds known messages ("log excerpt
with 3 known messages").

The judgement is not here: :mod:`clusterdoctor.rules.messages` turns hits into findings.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["MessageHit", "as_observations", "load_messages", "scan_file", "scan_text", "sniff_messages"]

MAX_TEXT = 400  # characters of a line kept as evidence
MAX_HITS_PER_CODE = 200  # hits of one message kept per file (the rest are counted)
MAX_WRAPPED = 4 << 20  # text up to this size may be a wrapped paste: messages cut by a line break are read
_WRAP_REACH = 160  # a key this close to a line's start may be the end of a trigger the line above began
MAX_LINE = 64 << 10  # a longer line is cut before matching (patterns are linear; this bounds the work)
_BLOCK = 8 << 20

# rank from PyTorch's prefixes and c10d's tags: [rank3]:, [Rank 3], [PG 0 Rank 3], [default3]:
_RANK = re.compile(r"\[(?:PG [^\]\n]{0,80}?)?Rank (\d{1,6})\]|\[rank(\d{1,6})\]|\[default(\d{1,6})\]:")
# NCCL's header: host:pid:tid [dev]
_NCCL_HDR = re.compile(
    r"(?:^|[\s\]:>])(?P<host>[A-Za-z0-9_.\-]{1,128}):(?P<pid>\d{1,9}):\d{1,9} \[(?P<dev>\d{1,4})\]"
)


# the number just before a message whose entry has count_before ("28 " in "28 Insufficient cpu")
_COUNT_BEFORE = re.compile(r"(?<![\w.])(\d{1,9}) $")


@dataclass(frozen=True)
class MessageHit:
    """One line that a catalogue entry matches."""

    code: str
    path: str
    line: int  # 1-based, in the file as the user gave it
    text: str
    groups: tuple[tuple[str, str], ...] = ()
    rank: int | None = None
    host: str | None = None
    device: int | None = None
    count: int = 1  # > 1 on the last kept hit of a code whose further hits were only counted

    def group(self, name: str) -> str | None:
        for k, v in self.groups:
            if k == name:
                return v
        return None


@lru_cache(maxsize=1)
def _index() -> tuple[tuple[bytes, ...], dict[str, list[Any]]]:
    """The literals to look for and the entries behind each trigger. A trigger that contains another
    is not looked for itself (every line holding it holds the shorter one)."""
    from clusterdoctor.rules.catalog import all_messages

    by_trigger: dict[str, list[Any]] = defaultdict(list)
    for m in all_messages():
        for t in dict.fromkeys(m.all_triggers):
            by_trigger[t].append(m)
    shortest = sorted(by_trigger, key=len)
    keys: list[str] = []
    for t in shortest:
        if not any(k in t for k in keys):
            keys.append(t)
    return tuple(k.encode() for k in keys), dict(by_trigger)


def _candidate_lines(data: bytes, keys: tuple[bytes, ...]) -> tuple[list[int], bool]:
    """The starts of the lines holding any key, in order, and whether a message may run on to the next
    line. In text up to :data:`MAX_WRAPPED` bytes (a paste; a program's own log is not wrapped) they
    include the lines a key begins on when a line break falls inside it and the lines above a key found
    near a line's start (a paste wrapped by a terminal, a mail client or a thread's width: "killed by
    signal: Bus\nerror"). One ``bytes.find`` pass per key (C speed, each linear): an alternation of
    many literals runs in the regex engine position by position, dozens of times slower on text where
    none occurs."""
    starts: set[int] = set()
    early: set[int] = set()  # lines a key is found near the start of: the trigger may begin a line above
    for k in keys:
        i = data.find(k)
        while i >= 0:
            ls = data.rfind(b"\n", 0, i) + 1
            starts.add(ls)
            if i - ls < _WRAP_REACH and ls > 0:
                early.add(ls)
            le = data.find(b"\n", i + len(k))
            if le < 0:
                break
            i = data.find(k, le + 1)
    if b"\n" not in data.rstrip(b"\n") or len(data) > MAX_WRAPPED:
        return sorted(starts), False
    starts |= _starts_across_wraps(data, keys)
    starts.update(data.rfind(b"\n", 0, ls - 1) + 1 for ls in early)
    return sorted(starts), True


def _starts_across_wraps(data: bytes, keys: tuple[bytes, ...]) -> set[int]:
    """Starts of the lines on which a key begins that a line break cuts: where the break stands for a
    space ("Bus\nerror", the text with breaks read as spaces, same offsets) or falls inside a word
    ("Bus er\nror", the text without breaks, offsets mapped back)."""
    from bisect import bisect_right

    out: set[int] = set()
    flat = data.replace(b"\n", b" ")
    joined = data.replace(b"\n", b"")
    # the i-th break (at original offset p_i) stands before joined offset p_i - i
    cuts: list[int] = []
    i = data.find(b"\n")
    while i >= 0:
        cuts.append(i - len(cuts))
        i = data.find(b"\n", i + 1)
    for k in keys:
        j = flat.find(k) if b" " in k else -1  # a word wrap breaks a line where a space was
        while j >= 0:
            if data.find(b"\n", j, j + len(k)) >= 0:
                out.add(data.rfind(b"\n", 0, j) + 1)
            j = flat.find(k, j + 1)
        j = joined.find(k)
        while j >= 0:
            a = bisect_right(cuts, j)
            if bisect_right(cuts, j + len(k) - 1) > a:  # a break inside the key: the line of its start
                out.add(data.rfind(b"\n", 0, j + a) + 1)
            j = joined.find(k, j + 1)
    return out


def scan_text(text: str, path: str, origin: list[int] | None = None) -> list[MessageHit]:
    """Every catalogued line of ``text``. ``origin[i]`` is the line number the user sees for line
    ``i + 1`` of ``text`` (a cleaned paste); by default the text's own numbering."""
    data = text.encode("utf-8", "surrogateescape")
    return _scan(data, path, origin, 0)


def scan_file(path: str | Path) -> list[MessageHit]:
    """Every catalogued line of a file, read in blocks (memory bounded by the block, not the file). A
    file over the ``input`` limit is not scanned either (the limit's error, as every reader gives it)."""
    from clusterdoctor.observe.limits import (
        LimitExceeded,
        check_regular,
        human_size,
        max_input_bytes,
        open_input,
        virtual_input,
    )

    p = str(path)
    if virtual_input(p) is None:
        size, cap = check_regular(p).st_size, max_input_bytes()
        if size > cap:
            raise LimitExceeded(
                f"file is {human_size(size)}, larger than the input limit of {human_size(cap)}", p, "input"
            )
    hits: list[MessageHit] = []
    counts: dict[str, int] = defaultdict(int)
    line0 = 0
    carry = b""
    with open_input(p) as f:
        while True:
            block = f.read(_BLOCK)
            if not block:
                break
            data = carry + block
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            carry = data[cut + 1 :]
            chunk = data[: cut + 1]
            hits.extend(_scan(chunk, p, None, line0, counts))
            line0 += chunk.count(b"\n")
        if carry:
            hits.extend(_scan(carry, p, None, line0, counts))
    return _fold_counts(hits, counts)


def _scan(
    data: bytes, path: str, origin: list[int] | None, line0: int, counts: dict[str, int] | None = None
) -> list[MessageHit]:
    keys, by_trigger = _index()
    own = counts is None
    counts = counts if counts is not None else defaultdict(int)
    hits: list[MessageHit] = []
    counted_to, newlines = 0, 0  # newlines in data[:counted_to] (positions only grow: linear)
    starts, may_wrap = _candidate_lines(data, keys)
    for start in starts:
        newlines += data.count(b"\n", counted_to, start)
        counted_to = start
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        raw = data[start : min(end, start + MAX_LINE)]
        line = raw.decode("utf-8", "replace").rstrip("\r")
        nxt_end = data.find(b"\n", end + 1) if end < len(data) else -1
        nxt = data[end + 1 : (len(data) if nxt_end < 0 else nxt_end)][:MAX_LINE].decode("utf-8", "replace")
        lineno = line0 + newlines + 1
        shown = origin[lineno - 1] if origin is not None and 0 < lineno <= len(origin) else lineno
        done: set[str] = set()  # an entry listed under two triggers is read once per line
        wrapped = (line + " " + nxt, line + nxt.lstrip()) if nxt and may_wrap else ()
        for trig, entries in by_trigger.items():
            if trig not in line and not (wrapped and any(trig in w for w in wrapped)):
                continue
            for e in entries:
                if e.code in done:
                    continue
                mt = _search(e, line, nxt)
                if mt is None:
                    continue
                ctx = e.context_regex
                if ctx is not None and ctx.search(mt.string) is None:
                    continue  # the message, but not from the program the entry is about
                extra: tuple[tuple[str, str], ...] = ()
                if e.count_before:  # "28 Insufficient cpu": the count printed before the message
                    c = _COUNT_BEFORE.search(mt.string, max(0, mt.start() - 12), mt.start())
                    if c is None:
                        continue
                    extra = (("count", c.group(1)),)
                done.add(e.code)
                counts[e.code] += 1
                if counts[e.code] > MAX_HITS_PER_CODE:
                    continue
                hits.append(_hit(e.code, path, shown, mt.string, mt, extra))
    return _fold_counts(hits, counts) if own else hits


def _search(e: Any, line: str, nxt: str) -> re.Match[str] | None:
    """The entry's first pattern (``pattern``, then its ``variants``) that matches the line, or the line
    joined with the next one (a terminal wrap)."""
    regexes = getattr(e, "regexes", None) or (e.regex,)
    for rx in regexes:
        mt = rx.search(line)
        if mt is not None:
            return mt
    if nxt:
        # read across a wrap: a terminal's inside a word, then a word wrap (the break was a space)
        for joined in (line + nxt.strip(), line + " " + nxt.strip()):
            for rx in regexes:
                mt = rx.search(joined)
                if mt is not None and mt.start() < len(line):  # the message starts on this line
                    return mt
    return None


def _hit(
    code: str, path: str, lineno: int, line: str, mt: re.Match[str], extra: tuple[tuple[str, str], ...] = ()
) -> MessageHit:
    groups = tuple((k, v) for k, v in mt.groupdict().items() if v is not None) + extra
    rank = host = device = None
    r = _RANK.search(line)
    if r:
        rank = int(next(g for g in r.groups() if g is not None))
    h = _NCCL_HDR.search(line)
    if h:
        host, device = h.group("host"), int(h.group("dev"))
    g = dict(groups)
    if "rank" in g and g["rank"].isdigit():
        rank = int(g["rank"])
    text = line.strip()
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    return MessageHit(code, path, lineno, text, groups, rank, host, device)


def _fold_counts(hits: list[MessageHit], counts: dict[str, int]) -> list[MessageHit]:
    """The last kept hit of a code that had more than :data:`MAX_HITS_PER_CODE` carries the total."""
    over = {c: n for c, n in counts.items() if n > MAX_HITS_PER_CODE}
    if not over:
        return hits
    from dataclasses import replace

    last: dict[str, int] = {}
    for i, h in enumerate(hits):
        if h.code in over:
            last[h.code] = i
    for c, i in last.items():
        hits[i] = replace(hits[i], count=over[c] - MAX_HITS_PER_CODE + 1)
    return hits


def sniff_messages(head: bytes, name: str = "") -> bool:
    """True when the first bytes hold at least one catalogued line."""
    if b"\x00" in head[:4096]:
        return False
    return bool(_scan(head, name, None, 0))


def load_messages(path: str | Path) -> dict[str, Any]:
    """An excerpt no program parser claims, read for its known messages (the loader of last resort)."""
    p = str(path)
    hits = scan_file(p)
    if not hits:
        raise InputError("no known message in it", p)
    return as_observations(hits)


def as_observations(hits: list[MessageHit]) -> dict[str, Any]:
    """Hits as a loader's observations, with what the input is in words."""
    n = sum(h.count for h in hits)
    codes = len({h.code for h in hits})
    return {
        "messages": hits,
        "described_as": f"log excerpt ({n} known message line(s), {codes} kind(s))",
    }
