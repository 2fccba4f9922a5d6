"""Python tracebacks in a job's log: the frames, the exception, the rank that printed them.

The format is CPython's (``traceback.format_exception``): ``Traceback (most recent call last):``, then
per frame ``  File "path", line N, in func`` and the source line, then ``ExcType: message``; chained
exceptions repeat the block after ``The above exception was the direct cause of the following
exception:``. What users paste adds prefixes (torchrun's ``[rank3]:``, pytest's ``E   ``, a launcher's
``[default0]:``) and cuts: a paste may start inside the frames or stop before the exception line, and the
tracebacks of several ranks may be interleaved line by line. So a frame is read wherever its ``File "…",
line N, in f`` appears in a line, and a traceback is whatever runs of frames the text holds, split at each
header and at each change of the ``[rankN]`` prefix.

The one cross-rank fact kept is the innermost ``torch.distributed`` collective each traceback is in (the
last frame in ``distributed_c10d.py``): ranks stuck in different collectives are what a hang's tracebacks
show when the program called them in a different order (rules/comm_hangs.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.torch_dist import RANK_TAG

__all__ = [
    "LEAF_COLLECTIVES",
    "Frame",
    "PyTraceback",
    "TracebackLog",
    "load_tracebacks",
    "parse_tracebacks",
    "sniff_tracebacks",
]

MAX_LINE = 16384  # a longer line is not a traceback line
_HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'File "(?P<file>[^"\n]{1,1000})", line (?P<line>\d{1,9}), in (?P<func>[^\s,]{1,200})')
# the exception line: a dotted class name ending like an exception class, then ": message" (or alone)
_EXC = re.compile(
    r"(?:^|[\]:>\s])(?P<type>[A-Za-z_][\w.]{0,200}?(?:Error|Exception|Interrupt|Exit|Failure|Timeout))"
    r"(?:: (?P<msg>[^\n]{0,2000}+))?\s*$"  # possessive: the tail's \s* never rescans the message
)
_C10D = "distributed_c10d.py"
# the collectives that call no other collective (torch.distributed's API): one stack is inside at most one
LEAF_COLLECTIVES = frozenset(
    "barrier monitored_barrier broadcast all_reduce all_gather all_gather_into_tensor reduce_scatter "
    "reduce_scatter_tensor all_to_all all_to_all_single reduce gather scatter send recv isend irecv".split()
)
# a frame's source line that calls one by its qualified name: torch.distributed.barrier(, dist.all_reduce(,
# default_pg.broadcast( (c10d's own call into the process group)
_CALL = re.compile(r"\b(?:torch\.distributed|dist|default_pg)\.(?P<c>[a-z_]{4,30})\(")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str
    at: int  # the line of the input it is on (1-based)


@dataclass
class PyTraceback:
    line: int  # where it starts in the input (its header, or its first frame when the header was cut)
    rank: int | None = None
    frames: list[Frame] = field(default_factory=list)
    exc_type: str | None = None
    message: str | None = None
    has_header: bool = False
    calls: list[str] = field(default_factory=list)  # leaf collectives its source lines call by name

    @property
    def leaf_collectives(self) -> set[str]:
        """The leaf collectives this traceback's frames are in or call by name. One process's stack holds
        at most one; two mean the lines of several processes' tracebacks are interleaved (no rank prefix)."""
        out = {f.func for f in self.frames if f.file.endswith(_C10D) and f.func in LEAF_COLLECTIVES}
        return out | set(self.calls)

    @property
    def innermost_collective(self) -> str | None:
        """The last ``torch.distributed`` collective this traceback is in (``broadcast``, ``barrier``)."""
        for f in reversed(self.frames):
            if f.file.endswith(_C10D) and not f.func.startswith("_") and f.func != "wrapper":
                return f.func
        return None


@dataclass
class TracebackLog:
    path: str
    tracebacks: list[PyTraceback] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def parse_tracebacks(text: str, path: str = "<traceback>") -> TracebackLog:
    """Every traceback (or run of frames) in ``text`` (pure; other lines are ignored)."""
    log = TracebackLog(path)
    cur: PyTraceback | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        if len(raw) > MAX_LINE:
            continue
        r = RANK_TAG.search(raw, 0, 200)
        rank = int(r.group(1) or r.group(2)) if r else None
        if _HEADER in raw:
            cur = PyTraceback(n, rank, has_header=True)
            log.tracebacks.append(cur)
            continue
        m = _FRAME.search(raw)
        if m is not None:
            if cur is None or cur.exc_type is not None or (rank is not None and cur.rank not in (None, rank)):
                cur = PyTraceback(n, rank)
                log.tracebacks.append(cur)
            cur.frames.append(Frame(m.group("file"), int(m.group("line")), m.group("func"), n))
            continue
        if cur is not None and cur.exc_type is None and (cur.frames or cur.has_header):
            c = _CALL.search(raw, 0, 400)
            if c is not None and c.group("c") in LEAF_COLLECTIVES:
                cur.calls.append(c.group("c"))
                continue
            e = _EXC.search(raw)
            if e is not None and not raw.startswith((" " * 4, "\t")):
                cur.exc_type, cur.message = e.group("type"), (e.group("msg") or "").strip() or None
    return log


_SNIFF_FRAME = re.compile(rb'File "[^"\n]{1,1000}", line \d{1,9}, in ')


def sniff_tracebacks(head: bytes) -> bool:
    """A Python traceback: its header, at least two frame lines (a paste cut above the header), or its
    last frame and the exception line under it (a paste of a traceback's tail, any logger prefix)."""
    if _HEADER.encode() in head:
        return True
    frames = len(_SNIFF_FRAME.findall(head[:65536], 0))
    if frames >= 2:
        return True
    if frames == 1:
        log = parse_tracebacks(head[:65536].decode("utf-8", "replace"))
        return any(t.frames and t.exc_type for t in log.tracebacks)
    return False


def load_tracebacks(path: str | Path) -> TracebackLog:
    """The tracebacks of a file; InputError when it holds none."""
    from clusterdoctor.observe.limits import read_text

    p = Path(path)
    log = parse_tracebacks(read_text(p), str(p))
    if not log.tracebacks:
        raise InputError("no Python traceback in it", str(p))
    cut = [t for t in log.tracebacks if not t.has_header]
    if cut:
        log.warnings.append(
            f"{p}: {len(cut)} traceback(s) without their 'Traceback (most recent call last):' header (the "
            "paste starts inside them): read from their first frame"
        )
    return log
