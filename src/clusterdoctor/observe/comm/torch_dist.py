"""PyTorch distributed failures in a job's log: NCCL watchdog timeouts, gloo and TCPStore timeouts.

What users paste and save is the launcher's console: every line may carry prefixes (torchrun's
``[default0]:`` with ``--tee``, a ``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE`` such as
``[default-r0-l0]:``, PyTorch's own ``[rank0]:``, DeepSpeed/pdsh ``worker-0: ``, srun ``0: ``, Open MPI
``[1,0]<stdout>:``, a log viewer's ``[80746] ``, Markdown indentation), and long lines are often
hard-wrapped by the terminal they were copied from (``…NumelIn=1, Nume`` / ``lOut=1, …``). The patterns
below are searched anywhere in a line, and a watchdog message is read across such wraps.

Kept (wording from PyTorch's ProcessGroupNCCL/ProcessGroupGloo/TCPStore, strings checked in
libtorch 2.13, and the real logs in ``tests/data/comm``):

* ``[Rank R] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=S, OpType=OP, NumelIn=I,
  NumelOut=O, Timeout(ms)=T) ran for X milliseconds before timing out.`` (2022-era lines lack Numel*);
* the rank's progress in four wordings: ``failure detected by watchdog at work sequence id: S PG status:
  last enqueued work: E, last completed work: C``; ``Exception (either an error or timeout) detected by
  watchdog at work: S, last enqueued NCCL work: E, last completed NCCL work: C``; ``Timeout at NCCL work:
  S, last enqueued …``; ``Received a dump signal … Last enqueued NCCL work: E, last completed NCCL
  work: C.`` (no S);
* gloo: ``Timed out waiting Nms for recv|send operation to complete``, ``Connection closed by peer
  [addr]:port``; ``TORCH_DISTRIBUTED_DEBUG=DETAIL``: ``Ranks 1, 3 failed to pass monitoredBarrier in N ms``;
* rendezvous/TCPStore: ``wait timeout after Nms, keys: …`` (a peer's address key never written),
  ``Timed out after N seconds waiting for clients. J/W clients joined.``, ``Timed out initializing
  process group in store based barrier on rank R, … (world_size=W, num_workers_joined=J, …``, ``The
  client socket has timed out after Nms while trying to connect to (host, port).``
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

# "[rank3]:" (PyTorch), "[Rank 3]" / "[PG 1 Rank 3]" / "[PG ID 0 PG GUID 0(default_pg) Rank 3]" (c10d).
RANK_TAG = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]|\[rank(\d+)\]")

_WATCHDOG_START = "Watchdog caught collective operation timeout:"
# 1.8-1.10: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000); 1.11-1.13 add SeqNum= and TensorShape=[...];
# 2.x: SeqNum, OpType, NumelIn, NumelOut, Timeout(ms). A user may elide fields ("WorkNCCL(..., OpType="),
# or wrap the message between fields and indent the rest (",\n           Timeout(ms)=": the flat text keeps
# the indent, so a field may follow its comma after up to 40 blanks).
_WATCHDOG_BODY = re.compile(
    r"Watchdog caught collective operation timeout:\s*"
    r"WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?(?:(?:\.\.\.|…), ?)?OpType=(?P<op>\w+)"
    r"(?:,\s{1,40}TensorShape=\[[^\]\n]{0,400}\])?"
    r"(?:,\s{1,40}NumelIn=(?P<nin>\d+),\s{1,40}NumelOut=(?P<nout>\d+))?"
    r"(?:,\s{1,40}Timeout\(ms\)=(?P<timeout>\d+))?\)(?:\s{0,8}ran for (?P<ran>\d+) milliseconds)?"
)
# the same message pasted from "WorkNCCL(" on (its first words cut): the "ran for ... before timing out"
# tail is what makes it the watchdog's
_WORK_RAN = re.compile(
    r"WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?(?:(?:\.\.\.|…), ?)?OpType=(?P<op>\w+)"
    r"(?:,\s{1,40}TensorShape=\[[^\]\n]{0,400}\])?"
    r"(?:,\s{1,40}NumelIn=(?P<nin>\d+),\s{1,40}NumelOut=(?P<nout>\d+))?"
    r"(?:,\s{1,40}Timeout\(ms\)=(?P<timeout>\d+))?\)\s{0,8}ran for (?P<ran>\d+) milliseconds before timing out"
)
_PG_TAG = re.compile(r"\[PG (?:ID )?(\d+)")
_RANK_BEFORE = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]\s*$")
_WRAP_WINDOW = 600  # characters after the start phrase that may hold the rest of a wrapped message
_LOOK_BACK = 300  # characters before a trigger word that may hold the start of its message
_STATUS = re.compile(
    r"(?:failure detected by watchdog at work sequence id: (?P<s1>\d+) PG status: last enqueued work: "
    r"(?P<e1>-?\d+), last completed work: (?P<c1>-?\d+))"
    r"|(?:(?:detected by watchdog at work|Timeout at NCCL work): (?P<s2>\d+), last enqueued NCCL work: "
    r"(?P<e2>-?\d+), last completed NCCL work: (?P<c2>-?\d+))"
    r"|(?:Received a dump signal [^\n]{0,300}?Last enqueued NCCL work: (?P<e3>-?\d+), last completed NCCL work: "
    r"(?P<c3>-?\d+))"
)
_ERRORS = re.compile(
    r"(?P<gloo>Timed out waiting (?P<g_ms>\d+)ms for (?P<g_op>recv|send) operation to complete)"
    r"|(?P<peer>Connection closed by peer \[?(?P<p_addr>[^\]\s]+)\]?:(?P<p_port>\d+))"
    r"|(?P<mb>Ranks? (?P<mb_ranks>\d+(?:, ?\d+)*) failed to pass monitoredBarrier in (?P<mb_ms>\d+) ms)"
    r"|(?P<wait>wait timeout after (?P<w_ms>\d+)ms, keys: (?P<w_keys>[^\n]*))"
    r"|(?P<clients>Timed out after (?P<c_s>\d+) seconds waiting for clients\. (?P<c_j>\d+)/(?P<c_w>\d+) clients joined)"
    r"|(?P<barrier>Timed out initializing process group in store based barrier on rank (?P<b_rank>\d+), "
    r"for key: (?P<b_key>\S+) \(world_size=(?P<b_w>\d+), num_workers_joined=(?P<b_j>\d+))"
    r"|(?P<connect>The client socket has timed out after (?P<k_ms>\d+)ms while trying to connect to "
    r"\((?P<k_host>[^,]+), (?P<k_port>\d+)\))"
)
# TORCH_NCCL_DESYNC_DEBUG=1: the desync report (torch/csrc/distributed/c10d/TraceUtils.h,
# retrieveDesyncReport) printed after a watchdog timeout, one line per part:
#   - [0] Timeout at collective: ALLREDUCE, #315
#   - To our best knowledge, ranks [5] are the lagging ranks that caused this timeout. They never joined any
#     collectives
#   - [1, 2] joined but didn't finish collective #41 (count from 1)
#     [7] finished collective #182, but didn't join collective #183 (count from 1)
#   - Snapshot of ranks' latest states:  #315 started ranks:  [0, 1, 2] started ALLREDUCE
_RANK_LIST = r"\[(?P<{}>[\d, ]{{1,65536}})\]"
_DESYNC = re.compile(
    r"(?P<head>\[(?P<h_rank>\d{1,7})\] Timeout at collective: (?P<h_op>\w{1,64}), #(?P<h_seq>\d{1,20}))"
    r"|(?P<never>ranks " + _RANK_LIST.format("n_ranks") + r" are the lagging ranks that caused this timeout)"
    r"|(?P<joined>"
    + _RANK_LIST.format("j_ranks")
    + r" joined but didn't finish collective #(?P<j_seq>\d{1,20}))"
    r"|(?P<stopped>"
    + _RANK_LIST.format("s_ranks")
    + r" finished collective #(?P<s_seq>\d{1,20}), but didn't join "
    r"collective #(?P<s_next>\d{1,20}))"
    r"|(?P<snap_head>#(?P<sh_seq>\d{1,20}) (?P<sh_state>started|finished) ranks:)"
    r"|(?P<snap>"
    + _RANK_LIST.format("sn_ranks")
    + r" (?P<sn_state>started|finished) (?!collective\b)(?P<sn_op>\w{1,64}))"
)
# Horovod's stall inspector (horovod/common/stall_inspector.cc; operations.cc before 0.21): "One or more
# tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for
# remainder of ranks for more than 60 seconds. ..." then "Missing ranks:" / "Stalled ranks:" and one line per
# rank that has not submitted them, "0: [tensor, ...]" ("1!: [...]" when it is being shut down), or the
# older "<tensor> [missing ranks: 0, 2]".
_STALL = "waiting for remainder of ranks for more than"
_STALL_SECONDS = re.compile(r"waiting for remainder of ranks for more than (\d{1,9}) seconds")
_STALL_RANK_LINE = re.compile(r"^[ \t]{0,16}(?P<rank>\d{1,7})!?: \[(?P<tensors>[^\n]{0,400})")
_STALL_INLINE = re.compile(r"\[missing ranks: (?P<ranks>[\d, ]{1,65536})\]")
_STALL_MAX_LINES = 4096  # rank lines read after one stall message
_DESYNC_TRIGGERS = (
    "Timeout at collective:",
    "are the lagging ranks",
    "didn't finish collective",
    "didn't join collective",
)
_STATUS_ANCHORS = (
    "failure detected by watchdog",
    "detected by watchdog at work",
    "Timeout at NCCL work",
    "Received a dump signal",
)
# Any of these starts a scan; a terminal wrap can split some of them, not all (they are spread over the
# first hundred characters of a watchdog message).
_WATCHDOG_PARTS = ("Watchdog", "WorkNCCL", "SeqNum", "OpType", "NumelIn", "Timeout(ms)")
TRIGGERS = (
    *_WATCHDOG_PARTS,
    "atchdog",
    "Timed out",
    "timed out",
    "monitoredBarrier",
    "wait timeout",
    "dump signal",
    "Connection closed by peer",
    *_DESYNC_TRIGGERS,
    _STALL,
)


@dataclass(slots=True)
class WatchdogTimeout:
    rank: int | None
    seq: int | None  # None in the 1.8-1.10 wording (no SeqNum) or when the user elided it
    op: str
    numel_in: int | None
    numel_out: int | None
    timeout_ms: int | None
    ran_ms: int | None
    line: int | None = None


@dataclass(slots=True)
class WatchdogStatus:
    """A rank's position on its process group when the watchdog fired: last enqueued/completed work."""

    rank: int | None
    seq: int | None  # the failed work's sequence number (None in the "dump signal" wording)
    last_enqueued: int
    last_completed: int
    line: int | None = None
    pg: str | None = None  # process group id from "[PG 1 Rank 0]" / "[PG ID 0 PG GUID 0(default_pg) Rank 0]"


@dataclass(slots=True)
class DistError:
    """A gloo, TCPStore or rendezvous failure line.

    ``kind``: ``gloo_timeout`` (op recv/send), ``peer_closed`` (peer = address), ``monitored_barrier``
    (``ranks`` = the ranks that did not pass), ``store_wait`` (``ranks`` = ranks whose address key never
    appeared: in gloo's full-mesh connect the key's last component is the peer's rank), ``store_clients``
    / ``store_barrier`` (``joined`` of ``world_size``), ``store_connect`` (peer = host:port never reached),
    ``desync`` (TORCH_NCCL_DESYNC_DEBUG's report: ``rank`` reported it, ``ranks`` are the lagging, dead or
    mismatched ranks it names, ``op``/``seq`` the reporter's own collective, ``text`` the report in short).
    """

    kind: str
    rank: int | None  # the rank that reported it (from the line's prefix), when known
    timeout_ms: int | None = None
    op: str | None = None
    ranks: tuple[int, ...] = ()
    joined: int | None = None
    world_size: int | None = None
    peer: str | None = None
    text: str = ""
    line: int | None = None
    seq: int | None = None


def rank_of_line(text: str, line_start: int, pos: int) -> int | None:
    """The rank named on the line from ``line_start`` to ``pos`` (a ``[Rank N]`` or ``[rankN]:`` tag)."""
    m = RANK_TAG.search(text, line_start, pos)
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


class _Flat:
    """A block with its newlines removed, for messages a terminal wrapped (a newline anywhere, even
    inside a word), and the map back to line numbers. Built only when a block needs it."""

    def __init__(self, text: str) -> None:
        self.text = text
        nl = [m.start() for m in re.finditer("\n", text)]
        self.flat_nl = [n - i for i, n in enumerate(nl)]  # where each removed newline was, in flat text
        self.flat = text.replace("\n", "")

    def newlines_before(self, p: int) -> int:
        return bisect_right(self.flat_nl, p)

    def orig(self, p: int) -> int:
        return p + self.newlines_before(p)


class DistScanner:
    """Finds the lines above in blocks of text (``feed(text, lines_before)``, lines numbered from 1).

    Each (rank, what) is kept once per file: PyTorch repeats a timeout inside the "watchdog thread
    terminated with exception" line and in ``what():``. A message is first read on its own line; when
    that fails (the line was hard-wrapped), it is read again with the block's newlines removed.
    """

    def __init__(self) -> None:
        self.timeouts: list[WatchdogTimeout] = []
        self.status: list[WatchdogStatus] = []
        self.errors: list[DistError] = []
        self._seen: set[tuple[object, ...]] = set()

    def feed(self, text: str, lines_before: int = 0) -> None:
        """Scan ``text`` (lines ``lines_before + 1`` on): only the windows around a trigger word (from a few
        lines before it, where a wrapped message starts, to the message's end) are searched, so a large NCCL
        log that mentions "timed out" once costs a few string searches, not a regex pass over it."""
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        spans: list[tuple[int, int]] = []
        for t in TRIGGERS:
            i = text.find(t)
            while i >= 0:
                # from a line start at least _LOOK_BACK characters before: a wrapped message's first
                # words and its rank tag may sit several physical lines above the trigger word
                ls = text.rfind("\n", 0, max(0, i - _LOOK_BACK)) + 1
                le = text.find("\n", i + _WRAP_WINDOW)
                le = len(text) if le < 0 else le + 1
                spans.append((ls, le))
                i = text.find(t, le)
        if not spans:
            return
        spans.sort()
        merged = [spans[0]]
        for a, b in spans[1:]:
            if a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
            else:
                merged.append((a, b))
        pos, lines = 0, lines_before
        for a, b in merged:
            lines += text.count("\n", pos, a)
            pos = a
            self._feed_window(text[a:b], lines)

    def _feed_window(self, text: str, lines_before: int) -> None:
        counted = [0, 0]  # position, newlines before it

        def line_no(pos: int) -> int:
            p0, n0 = counted
            n = n0 + text.count("\n", p0, pos) if pos >= p0 else text.count("\n", 0, pos)
            counted[0], counted[1] = pos, n
            return lines_before + n + 1

        flat: _Flat | None = None
        if any(p in text for p in _WATCHDOG_PARTS):
            flat = _Flat(text)
            self._watchdog(text, flat, line_no)
        covered: list[int] = []
        for m in _STATUS.finditer(text):
            covered.append(m.start())
            self._status(text, m, line_no)
        for anchor in _STATUS_ANCHORS:
            start = text.find(anchor)
            while start >= 0:
                if not any(0 <= start - c < 200 for c in covered):
                    flat = flat or _Flat(text)
                    p = start - text.count("\n", 0, start)
                    m = _STATUS.match(flat.flat, p, min(len(flat.flat), p + _WRAP_WINDOW))
                    if m is not None:
                        self._status(text, m, line_no, at=start)
                start = text.find(anchor, start + 1)
        for m in _ERRORS.finditer(text):
            self._error(text, m, line_no)
        if any(t in text for t in _DESYNC_TRIGGERS):
            self._desync(text, line_no)
        if _STALL in text:
            self._stall(text, line_no)

    def _once(self, key: tuple[object, ...]) -> bool:
        if key in self._seen:
            return False
        if len(self._seen) < 1_000_000:
            self._seen.add(key)
        return True

    def _watchdog(self, text: str, flat: _Flat, line_no: Callable[[int], int]) -> None:
        ft = flat.flat
        p = ft.find(_WATCHDOG_START)
        while p >= 0:
            start = flat.orig(p)  # where the message starts in the block (the phrase may be wrapped)
            end = text.find("\n", start)
            m = _WATCHDOG_BODY.match(text, start, len(text) if end < 0 else end)
            if m is None or m.group("ran") is None:
                m = _WATCHDOG_BODY.match(ft, p, min(len(ft), p + _WRAP_WINDOW)) or m
            if m is not None:
                ls = text.rfind("\n", 0, start) + 1
                before = _RANK_BEFORE.search(ft, max(0, p - 200), p)
                rank = int(before.group(1)) if before else rank_of_line(text, ls, start)
                if rank is None and ls > 0 and "[" not in text[ls:start]:
                    prev = (
                        text.rfind("\n", 0, ls - 1) + 1
                    )  # a wrapped line: the tag may sit on the line before
                    rank = rank_of_line(text, prev, ls)
                w = WatchdogTimeout(
                    rank,
                    _opt_int(m.group("seq")),
                    m.group("op"),
                    _opt_int(m.group("nin")),
                    _opt_int(m.group("nout")),
                    _opt_int(m.group("timeout")),
                    _opt_int(m.group("ran")),
                    line_no(start),
                )
                if self._once(("wd", w.rank, w.seq, w.op, w.numel_in)):
                    self.timeouts.append(w)
            p = ft.find(_WATCHDOG_START, p + 1)
        if _WATCHDOG_START in ft or "ran for" not in ft:
            return
        for m in _WORK_RAN.finditer(ft):
            start = flat.orig(m.start())
            ls = text.rfind("\n", 0, start) + 1
            before = _RANK_BEFORE.search(ft, max(0, m.start() - 200), m.start())
            rank = int(before.group(1)) if before else rank_of_line(text, ls, start)
            w = WatchdogTimeout(
                rank,
                _opt_int(m.group("seq")),
                m.group("op"),
                _opt_int(m.group("nin")),
                _opt_int(m.group("nout")),
                _opt_int(m.group("timeout")),
                _opt_int(m.group("ran")),
                line_no(start),
            )
            if self._once(("wd", w.rank, w.seq, w.op, w.numel_in)):
                self.timeouts.append(w)

    def _status(
        self, text: str, m: re.Match[str], line_no: Callable[[int], int], at: int | None = None
    ) -> None:
        pos = m.start() if at is None else at  # ``at``: where a wrapped match starts in ``text``
        ls = text.rfind("\n", 0, pos) + 1
        rank = rank_of_line(text, ls, pos)
        if rank is None:
            return  # PyTorch always tags these lines "[PG … Rank N]"; untagged, it is a quotation, not a log line
        seq = m.group("s1") or m.group("s2")
        enq = int(m.group("e1") or m.group("e2") or m.group("e3"))
        comp = int(m.group("c1") or m.group("c2") or m.group("c3"))
        if not self._once(("st", rank, enq, comp)):
            return  # the same position in another wording (PyTorch prints two or three)
        pg = _PG_TAG.search(text, ls, pos)
        self.status.append(
            WatchdogStatus(
                rank, int(seq) if seq else None, enq, comp, line_no(pos), pg.group(1) if pg else None
            )
        )

    def _error(self, text: str, m: re.Match[str], line_no: Callable[[int], int]) -> None:
        ls = text.rfind("\n", 0, m.start()) + 1
        rank = rank_of_line(text, ls, m.start())
        kind = m.lastgroup
        if kind == "gloo":
            e = DistError("gloo_timeout", rank, int(m.group("g_ms")), m.group("g_op"))
        elif kind == "peer":
            e = DistError("peer_closed", rank, peer=f"{m.group('p_addr')}:{m.group('p_port')}")
        elif kind == "mb":
            ranks = tuple(sorted({int(x) for x in re.findall(r"\d+", m.group("mb_ranks"))}))
            e = DistError("monitored_barrier", rank, int(m.group("mb_ms")), ranks=ranks)
        elif kind == "wait":
            keys = m.group("w_keys").strip()
            ranks = tuple(
                sorted({int(k.rsplit("/", 1)[1]) for k in keys.split(",") if re.search(r"/\d+\s*$", k)})
            )
            e = DistError("store_wait", rank, int(m.group("w_ms")), ranks=ranks, text=keys[:200])
        elif kind == "clients":
            e = DistError(
                "store_clients",
                rank,
                int(m.group("c_s")) * 1000,
                joined=int(m.group("c_j")),
                world_size=int(m.group("c_w")),
            )
        elif kind == "barrier":
            e = DistError(
                "store_barrier",
                int(m.group("b_rank")),
                joined=int(m.group("b_j")),
                world_size=int(m.group("b_w")),
                text=m.group("b_key"),
            )
        else:
            e = DistError(
                "store_connect",
                rank,
                int(m.group("k_ms")),
                peer=f"{m.group('k_host').strip()}:{m.group('k_port')}",
            )
        if not self._once(("err", e.kind, e.rank, e.op, e.ranks, e.peer, e.joined)):
            return  # the same failure in the traceback, the exception line and the elastic summary
        e.line = line_no(m.start())
        if not e.text:
            e.text = m.group(0)[:200]
        self.errors.append(e)

    def _desync(self, text: str, line_no: Callable[[int], int]) -> None:
        """The desync reports in a window: each part belongs to the last ``Timeout at collective`` head
        before it (a report cut above its head is kept, with no reporter)."""
        reports: list[_Desync] = []
        cur: _Desync | None = None
        for m in _DESYNC.finditer(text):
            kind = m.lastgroup
            if kind == "head" or cur is None:
                ls = text.rfind("\n", 0, m.start()) + 1
                cur = _Desync(m.start(), rank_of_line(text, ls, m.start()))
                reports.append(cur)
            if kind == "head":
                cur.rank, cur.op, cur.seq = int(m.group("h_rank")), m.group("h_op"), int(m.group("h_seq"))
            elif kind == "never":
                ranks = _ranks(m.group("n_ranks"))
                cur.culprits.update(ranks)
                cur.parts.append(f"{_rl(ranks)} never joined any collective")
            elif kind == "joined":
                ranks = _ranks(m.group("j_ranks"))
                cur.culprits.update(ranks)
                cur.parts.append(f"{_rl(ranks)} joined but did not finish collective #{m.group('j_seq')}")
            elif kind == "stopped":
                ranks = _ranks(m.group("s_ranks"))
                cur.culprits.update(ranks)
                cur.parts.append(
                    f"{_rl(ranks)} finished collective #{m.group('s_seq')} but never joined #{m.group('s_next')}"
                )
            elif kind == "snap_head":
                cur.snap = f"#{m.group('sh_seq')} "
            elif kind == "snap":
                ranks = _ranks(m.group("sn_ranks"))
                cur.parts.append(f"{cur.snap}{m.group('sn_state')} by {_rl(ranks)}: {m.group('sn_op')}")
        for r in reports:
            culprits = tuple(sorted(r.culprits))
            if not culprits or not self._once(("desync", r.rank, culprits, r.seq)):
                continue
            self.errors.append(
                DistError(
                    "desync",
                    r.rank,
                    ranks=culprits,
                    op=r.op,
                    text="; ".join(r.parts)[:400],
                    line=line_no(r.pos),
                    seq=r.seq,
                )
            )

    def _stall(self, text: str, line_no: Callable[[int], int]) -> None:
        """Horovod's stall messages: the ranks it lists have not submitted what the others wait on."""
        pos = text.find(_STALL)
        while pos >= 0:
            ls = text.rfind("\n", 0, pos) + 1
            secs = _STALL_SECONDS.search(text, pos, pos + 200)
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            ranks: set[int] = set()
            tensors: list[str] = []
            for m in _STALL_INLINE.finditer(text, ls, end):
                ranks.update(_ranks(m.group("ranks")))
            p, n = end + 1, 0
            while p < len(text) and n < _STALL_MAX_LINES:
                q = text.find("\n", p)
                q = len(text) if q < 0 else q
                line = text[p:q]
                n += 1
                m = _STALL_RANK_LINE.match(line)
                if m is not None:
                    ranks.add(int(m.group("rank")))
                    if len(tensors) < 3:
                        t = m.group("tensors").rstrip("]")
                        tensors.append(t if len(t) <= 120 else "…" + t[-119:])  # the op's own name is last
                elif _STALL_INLINE.search(line):
                    ranks.update(_ranks(_STALL_INLINE.search(line).group("ranks")))  # type: ignore[union-attr]
                elif line.strip() and not line.strip().endswith(("ranks:", "ops:")):
                    break
                p = q + 1
            culprits = tuple(sorted(ranks))
            if culprits and self._once(("stall", culprits)):
                self.errors.append(
                    DistError(
                        "horovod_stall",
                        rank_of_line(text, ls, pos),
                        int(secs.group(1)) * 1000 if secs else None,
                        ranks=culprits,
                        text="; ".join(tensors)[:300],
                        line=line_no(pos),
                    )
                )
            pos = text.find(_STALL, max(p, pos + 1))


@dataclass
class _Desync:
    pos: int
    rank: int | None
    op: str | None = None
    seq: int | None = None
    snap: str = ""
    culprits: set[int] = field(default_factory=set)
    parts: list[str] = field(default_factory=list)


def _ranks(text: str) -> tuple[int, ...]:
    return tuple(sorted({int(x) for x in re.findall(r"\d+", text)}))


def _rl(ranks: tuple[int, ...]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks[:16]) + (" …" if len(ranks) > 16 else "")


def _opt_int(s: str | None) -> int | None:
    return int(s) if s else None
