"""NCCL debug logs (``NCCL_DEBUG=INFO``) and the PyTorch distributed failures around them, many ranks interleaved.

A training job's console or log file as users keep it: NCCL's lines, PyTorch's watchdog, gloo and
TCPStore messages (:mod:`~clusterdoctor.observe.comm.torch_dist`), behind any launcher prefix.
Line grammar from NVIDIA/nccl ``src/debug.cc``: ``[timestamp] host:pid:tid [cudaDev] NCCL INFO msg``,
optionally behind a launcher prefix (``[1,0]<stdout>:`` from Open MPI, ``[default0]:`` from
torchrun ``--tee``, ``[rank0]:`` from PyTorch, ``0:`` from srun, ``worker-0: `` from DeepSpeed's pdsh,
``2024/04/30 23:29:35 `` timestamps); the prefix is whatever precedes ``host:pid:tid [dev]``. What is
kept (see ``../shared/reference/comm.md`` §3):

* ``NCCL version``; ``Using network Socket|IB|AWS Libfabric``; ``NET/IB : No device found``;
* ``comm 0x… rank R nRanks N nNodes K localRanks L`` and ``… - Init COMPLETE`` (old and new forms);
* ``Channel cc/i : r[dev] -> p[dev] [send] via NET/IB/0/GDRDMA`` (transport per peer; old ``Ring``);
* ring order (``Channel 00/02 :    0   1``) and ``Trees``; ``Setting affinity for GPU g to mask``;
* ``Init timings`` (total and parts per rank); ``NCCL WARN`` lines;
* COLL records ``AllReduce: opCount 1f sendbuff … count N datatype 7 op 0 root 0 comm 0x… [nranks=8]``
  (opCount is hex, per communicator);
* ProcessGroupNCCL watchdog timeouts (``WorkNCCL(SeqNum=S, OpType=…, Timeout(ms)=T)``) and
  "last enqueued / last completed" lines in every wording, gloo and TCPStore timeouts
  (:class:`~clusterdoctor.observe.comm.torch_dist.DistScanner`).

Speed: one C-speed regex scan finds the interesting lines (a literal prefix ``NCCL INFO ``), Python
work happens only per kept line, and files are read in blocks so memory stays bounded.

Memory: every communicator init prints its transport, ring, affinity and socket-interface lines
again (a job that restarts, or a log of many nccl-tests runs, repeats them thousands of times). Each
distinct line is kept once, with the line it was first and last printed on and how many times
(:attr:`Transport.count`, :attr:`Affinity.count`, :attr:`NcclLog.socket_if_seen`); at most
:data:`MAX_DISTINCT` distinct ones of each kind, the rest counted in :attr:`NcclLog.dropped` with one
warning. Rules that counted lines sum the counts, so a log gives the findings it gave with every line
kept (:data:`KEEP_REPEATS`, for tests and benches, keeps them all as before).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.torch_dist import (
    TRIGGERS,
    DistError,
    DistScanner,
    WatchdogStatus,
    WatchdogTimeout,
)
from clusterdoctor.topology.cpuset import parse_hexmask

__all__ = [
    "DistError",
    "NcclLog",
    "Proc",
    "Seen",
    "WatchdogStatus",
    "WatchdogTimeout",
    "classify_via",
    "load_nccl_log",
    "parse_nccl_log",
    "sniff_nccl_log",
]

# ncclDataType_t (src/nccl.h.in) and ncclRedOp_t.
DATATYPES = {
    0: "int8",
    1: "uint8",
    2: "int32",
    3: "uint32",
    4: "int64",
    5: "uint64",
    6: "float16",
    7: "float32",
    8: "float64",
    9: "bfloat16",
    10: "fp8e4m3",
    11: "fp8e5m2",
}
DATATYPE_BYTES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}
REDOPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}

# Read in 1 MiB blocks, as limits.LineReader: each block is held a few times over while it is read,
# cut at its last line break and decoded (16 MiB blocks made a 93 MiB peak of which 75 were these
# copies; 1 MiB: 18 MiB, at the same speed). A line may span blocks, up to _LONGEST_LINE.
_BLOCK = 1 << 20
_LONGEST_LINE = 64 << 20
# Distinct transports, affinities, rings, socket-interface and no-device lines kept per log, each kind;
# beyond it new distinct ones are counted (NcclLog.dropped). 50,000 transports are ~15 MiB; a
# 1,024-rank job with 32 channels prints ~130,000 distinct ones in one init, of which every process's own
# come first in a per-host log.
MAX_DISTINCT = 50_000
# Keep every repeated line as its own entry (count 1), as before repeats were folded: a reference for
# tests and benches, never the default.
KEEP_REPEATS = False

# "host:pid:tid [dev] NCCL INFO|WARN" with anything (launcher prefix, timestamp) before it: the header
# is the one that ends right before "NCCL" (a timestamp "23:29:35 [80746]" before it is not a header).
_PREFIX = re.compile(
    r"(?:^|(?<=[\s\]:>]))(?P<host>[A-Za-z0-9_.\-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]\s*$"
)
_INFO = re.compile(
    r"NCCL INFO (?:"
    r"(?P<chan>Channel \d+(?:/\d+)? : [^\n]*)"
    r"|(?P<ring>Ring \d+ : [^\n]*)"
    r"|(?P<trees>Trees [^\n]*)"
    r"|(?P<net>Using network [^\n]*)"
    r"|(?P<nodev>NET/\w+ ?: No device found[^\n]*)"
    r"|(?P<netif>NET/Socket ?: Using [^\n]*)"
    r"|(?P<ibnet>NET/IB ?: [^\n]*)"
    r"|(?P<boot>Bootstrap ?: Using [^\n]*)"
    r"|(?P<boottrace>(?:\w+/)?bootstrap\.cc:\d+ -> \d+[^\n]*)"
    r"|(?P<aff>Setting affinity for GPU [^\n]*)"
    r"|(?P<timings>Init timings[^\n]*)"
    r"|(?P<comm>(?:\w+:? )?comm 0x[0-9a-fA-F]+ rank [^\n]*)"
    r"|(?P<coll>\w+: opCount [^\n]*)"
    r"|(?P<env>NCCL_\w+ set by environment to [^\n]*)"
    r"|(?P<version>NCCL version [^\n]*)"
    r")"
)
_WARN = re.compile(r"NCCL WARN ([^\n]*)")
_OOB_IF = re.compile(r"; OOB ([\w.\-]{1,32}):")
_BOOT_IF = re.compile(r"Bootstrap ?: Using ([\w.\-]{1,32}):")
# NCCL 2.0-2.2 (src/core.h WARN/INFO macros of that time) printed "host:pid:tid [dev] INFO msg" without
# "NCCL": read as the newer lines once the word is put in
_OLD_LINE = re.compile(r"(?P<h>:\d{1,9}:\d{1,9} \[\d{1,4}\]) (?P<k>INFO|WARN) ")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+[^\s]*)")
_CHAN = re.compile(
    r"Channel (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)\[(?P<sdev>[0-9a-fA-Fx]+)\] -> "
    r"(?P<dst>\d+)\[(?P<ddev>[0-9a-fA-Fx]+)\](?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$"
)
_RING_ORDER = re.compile(r"Channel (?P<ch>\d+)/(?P<n>\d+) :((?:\s+\d+)+)\s*$")
_OLD_RING = re.compile(
    r"Ring (?P<ch>\d+) : (?P<src>\d+)(?:\[(?P<sdev>\w+)\])? -> (?P<dst>\d+)(?:\[(?P<ddev>\w+)\])?(?: \[(?P<dir>send|receive)\])? "
    r"via (?P<via>.+?)\s*$"
)
_COMM_INFO = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
    r"localRanks (?P<local>\d+)(?: localRank (?P<localrank>\d+))?"
)
_INIT_DONE = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)"
    r"(?: nvmlDev (?P<nvml>\d+))? busId (?P<bus>[0-9a-fA-F]+)(?: commId (?P<cid>0x[0-9a-fA-F]+))? - "
    r"(?P<what>Init COMPLETE|Destroy COMPLETE|Abort COMPLETE)"
)
_TIMINGS = re.compile(
    r"Init timings(?: - (?P<fn>\w+))?: rank (?P<rank>\d+) nranks (?P<nranks>\d+) total (?P<total>[\d.]+)(?: \((?P<parts>[^)]*)\))?"
)
_COLL = re.compile(
    r"(?P<op>\w+): opCount (?P<opc>[0-9a-fA-F]+) sendbuff (?P<sb>\S+) recvbuff (?P<rb>\S+) count (?P<count>\d+) "
    r"datatype (?P<dt>\d+) op (?P<red>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-fA-F]+)"
    r"(?: \[nranks=(?P<nranks>\d+)\])?"
)
_AFFINITY = re.compile(r"Setting affinity for GPU (?P<gpu>\d+) to ?(?P<mask>[0-9a-fA-Fx,]*)\s*$")
# greedy up to the last non-space (a lazy group before \s*$ rescanned the trailing spaces at every step)
_NET = re.compile(r"Using network (?P<net>.*\S|[^\S\n])\s*$")
_ENV = re.compile(
    r"(?P<name>NCCL_\w+) set by environment to (?P<value>.*(?=\.\s*$)|.*[^\s.]|)\.?\s*$"
)  # the value without its trailing spaces and one final dot, as the lazy .*? took it, linear

# The one pass over a block: every alternative starts with "NCCL ", which the regex engine factors out
# into a literal prefix it scans for at C speed; INFO lines, WARN lines and a bare "NCCL version"
# (nccl-tests' header) are told apart by the group that matched. Built from the definitions above.
_ONE_PASS = re.compile(f"{_INFO.pattern}|{_WARN.pattern}|{_VERSION.pattern}")
_WARN_GROUP = _INFO.groups + 1
_VERSION_GROUP = _INFO.groups + _WARN.groups + 1

# Whether a block holds a PyTorch-failure trigger word: exactly ``any(t in text for t in TRIGGERS)``,
# in a few C-speed regex scans instead of one string search per word. Each scan looks for one
# character (a regex that starts with one literal character scans for it in a tight loop) and checks
# there, still in C, the words that contain it: the rest of the word, then the word as a whole by a
# lookbehind. The characters are chosen to cover the most words first, the rarer (this order, rarest
# first: counted over the real NCCL, nccl-tests and control-plane logs of the fixtures) on a tie.
_RARE_FIRST = "$jH;\\V'|ZMKqWzD{}xRAGPBUEy+S#()hIL=_FTOvkN/wgb<C>p,[]mfc9i\"75ndr6l83u4a-:os.e2t10"


def _trigger_gate(triggers: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """The scans that together find any of ``triggers``."""
    rank = {c: i for i, c in enumerate(_RARE_FIRST)}
    words = [t for t in dict.fromkeys(triggers) if t and not any(o != t and o in t for o in triggers)]
    scans = []
    while words:
        chars = {c for t in words for c in t}
        c = max(sorted(chars), key=lambda c: (sum(c in t for t in words), -rank.get(c, len(rank))))
        alts = []
        for t in (t for t in words if c in t):
            off = t.index(c)
            alts.append(re.escape(t[off + 1 :]) + (f"(?<={re.escape(t)})" if off else ""))
        scans.append(re.compile(f"{re.escape(c)}(?:{'|'.join(alts)})"))
        words = [t for t in words if c not in t]
    return tuple(scans)


_GATE = _trigger_gate(TRIGGERS)


def _any_trigger(text: str) -> bool:
    """Whether ``text`` contains one of the trigger words (torch_dist.TRIGGERS)."""
    return any(rx.search(text) is not None for rx in _GATE)


@dataclass(frozen=True, order=True)
class Proc:
    """One process writing to the log: host and pid (cudaDev of its first line)."""

    host: str
    pid: int


@dataclass
class CommInfo:
    comm: str
    rank: int
    nranks: int
    nnodes: int | None = None
    local_ranks: int | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    proc: Proc | None = None
    init_complete: bool = False


@dataclass(slots=True)
class Transport:
    """One channel connection: ``src`` rank to ``dst`` rank over ``kind`` (P2P, SHM, NET, COLLNET)."""

    channel: int
    src: int
    dst: int
    direction: str | None
    via: str  # as printed: "NET/IB/0/GDRDMA", "P2P/IPC/read", "SHM/direct/direct"
    kind: str
    net: str | None  # for NET: "IB", "Socket", "AWS Libfabric"
    gdr: bool
    proc: Proc | None
    line: int | None = None  # where it was first printed
    # the GPU of each end as printed in brackets (cudaDev, or the bus id in NCCL 2.12-2.18); None if not
    src_dev: str | None = None
    dst_dev: str | None = None
    count: int = 1  # times the same line (these fields, the same process) was printed
    last_line: int | None = None  # where it was last printed (``line`` when printed once)


@dataclass(slots=True)
class Affinity:
    proc: Proc | None
    gpu: int
    mask: str
    cpus: tuple[int, ...]
    line: int | None = None  # where it was first printed
    count: int = 1  # times this process printed this GPU's mask
    last_line: int | None = None


@dataclass(slots=True)
class Seen:
    """Where a repeated line was printed: the first and last line number and how many times."""

    first: int | None
    last: int | None
    count: int = 1


@dataclass(slots=True)
class InitTiming:
    rank: int
    nranks: int
    total_s: float
    parts: dict[str, float]
    proc: Proc | None
    line: int | None = None


@dataclass(slots=True)
class CollRecord:
    """One COLL line: the op, its opCount (decoded from hex), element count, datatype, comm."""

    op: str
    op_count: int
    count: int
    datatype: int
    redop: int
    root: int
    comm: str
    nranks: int | None
    proc: Proc | None

    @property
    def nbytes(self) -> int | None:
        size = DATATYPE_BYTES.get(self.datatype)
        return self.count * size if size is not None else None

    @property
    def dtype(self) -> str:
        return DATATYPES.get(self.datatype, f"type{self.datatype}")


@dataclass
class NcclLog:
    """Everything kept from one NCCL log (possibly many ranks interleaved)."""

    path: str
    version: str | None = None
    networks: dict[str, set[Proc | None]] = field(default_factory=dict)  # network name -> processes
    no_device: list[str] = field(default_factory=list)  # as printed, at most MAX_DISTINCT lines
    socket_ifs: list[str] = field(default_factory=list)  # distinct "NET/Socket : Using" texts, in order
    socket_if_seen: dict[str, Seen] = field(default_factory=dict)  # each of socket_ifs: lines, count
    # INFO lines of NCCL's IB transport init ("NET/IB : Using ...", "No device found" included) and
    # the processes that printed "Bootstrap : Using ..." (the first line of NCCL's network init)
    ib_init_lines: int = 0
    bootstrap_procs: set[Proc | None] = field(default_factory=set)
    socket_if_procs: set[Proc | None] = field(default_factory=set)  # printed "NET/Socket : Using"
    # interfaces of NCCL's TCP bootstrap: "Bootstrap : Using ib0:10.0.0.1<0>" and the IB transport's
    # out-of-band one ("NET/IB : Using [0]mlx5_0:1/IB ... ; OOB ib0:10.0.0.1<0>"), chosen the same way
    bootstrap_ifs: set[str] = field(default_factory=set)
    # the error trace of a failed bootstrap ("bootstrap.cc:270 -> 2"), as printed, at most 20
    bootstrap_errors: list[str] = field(default_factory=list)
    comms: dict[tuple[str, Proc | None], CommInfo] = field(default_factory=dict)
    transports: list[Transport] = field(default_factory=list)  # distinct, first printed first
    rings: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # distinct (channel, order)
    trees: int = 0
    affinities: list[Affinity] = field(default_factory=list)
    init_timings: list[InitTiming] = field(default_factory=list)
    colls: list[CollRecord] = field(default_factory=list)
    watchdog_timeouts: list[WatchdogTimeout] = field(default_factory=list)
    watchdog_status: list[WatchdogStatus] = field(default_factory=list)
    dist_errors: list[DistError] = field(default_factory=list)  # gloo, TCPStore, rendezvous
    env: dict[str, str] = field(default_factory=dict)
    warns: list[str] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    procs: set[Proc] = field(default_factory=set)
    lines_kept: int = 0
    bytes_read: int = 0
    warnings: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)  # kind -> lines past MAX_DISTINCT distinct ones

    # -- derived ---------------------------------------------------------------------------

    @property
    def ib_transport_skipped(self) -> bool:
        """Whether NCCL went to its socket transport without trying the IB one.

        NCCL's network init prints ``Bootstrap : Using <if>``, then tries the IB transport, which
        prints ``NET/IB : Using ...``, ``NET/IB : No device found.`` or a warning unless
        ``NCCL_IB_DISABLE=1`` (``ncclIbInit`` returns at once) or ``NCCL_NET`` names another network
        (it is not tried), then the socket one (``NET/Socket : Using ...``). A process that printed
        the first and the last with no IB line anywhere in the log was told to use sockets.
        """
        if self.ib_init_lines or self.no_device or "IB" in self.networks:
            return False
        if any("NET/IB" in w or "ibverbs" in w for w in self.warns):
            return False
        return bool(self.bootstrap_procs & self.socket_if_procs)

    def rank_of(self, proc: Proc | None) -> int | None:
        """The global rank of a process (its rank in the largest communicator it joined)."""
        best: CommInfo | None = None
        for (_, p), c in self.comms.items():
            if p == proc and (best is None or c.nranks > best.nranks):
                best = c
        return best.rank if best else None

    def rank_of_comm(self, comm: str, proc: Proc | None) -> int | None:
        c = self.comms.get((comm, proc))
        if c is None:
            for (cid, _), info in self.comms.items():
                if cid == comm:
                    return info.rank
            return None
        return c.rank

    @property
    def nranks(self) -> int | None:
        return max((c.nranks for c in self.comms.values()), default=None)

    @property
    def nnodes(self) -> int | None:
        """Nodes in the job: ``nNodes`` when printed, else distinct hosts when more than one; else None."""
        stated = [c.nnodes for c in self.comms.values() if c.nnodes is not None]
        if stated:
            return max(stated)
        return len(self.hosts) if len(self.hosts) > 1 else None

    def net_transports(self) -> list[Transport]:
        return [t for t in self.transports if t.kind == "NET"]

    def lines_of(self, transports: list[Transport]) -> int:
        """How many channel lines printed these transports (repeats counted)."""
        return sum(t.count for t in transports)


def classify_via(via: str) -> tuple[str, str | None, bool]:
    """(kind, net name, GPUDirect RDMA) of a transport string such as ``NET/IB/0/GDRDMA``."""
    parts = via.split("/")
    kind = parts[0].upper() if parts else "?"
    net = None
    if kind == "NET" and len(parts) > 1:
        net = parts[1]
    gdr = "GDRDMA" in via.upper()
    return kind, net, gdr


class _Parser:
    def __init__(self, log: NcclLog) -> None:
        self.log = log
        self.line_base = 0  # lines before the current block
        # Line prefixes ("[1,0]<stdout>:host:21:27 [0] ") and affinity masks repeat: parse each once.
        self._procs: dict[str, Proc | None] = {}
        self._masks: dict[str, tuple[int, ...]] = {}
        self._vias: dict[str, tuple[str, str | None, bool]] = {}
        # distinct lines kept once: key -> the entry whose count and last line a repeat updates
        self.keep_repeats = KEEP_REPEATS
        self._transport_at: dict[tuple, Transport] = {}
        self._affinity_at: dict[tuple, Affinity] = {}
        self._rings: set[tuple[int, tuple[int, ...]]] = set()
        self.dist = DistScanner()
        self.old_format: bool | None = None  # NCCL 2.0-2.2 lines (no "NCCL" before INFO/WARN), first block
        log.watchdog_timeouts, log.watchdog_status, log.dist_errors = (
            self.dist.timeouts,
            self.dist.status,
            self.dist.errors,
        )

    def feed(self, text: str) -> None:
        log = self.log
        if self.old_format is None:
            self.old_format = "NCCL INFO" not in text and _OLD_LINE.search(text) is not None
        if self.old_format:  # as the newer lines; line numbers unchanged (no newline added)
            text = _OLD_LINE.sub(r"\g<h> NCCL \g<k> ", text)
        lines_before = self.line_base
        last_pos = 0
        last_line = 0

        def line_no(pos: int) -> int:
            nonlocal last_pos, last_line
            last_line += text.count("\n", last_pos, pos)
            last_pos = pos
            return lines_before + last_line + 1

        warns = log.warns
        for m in _ONE_PASS.finditer(text):
            kind = m.lastgroup
            if kind is None:  # a WARN line, or "NCCL version" outside an INFO line
                if m.lastindex == _WARN_GROUP:
                    if len(warns) < 1000:
                        warns.append(m.group(_WARN_GROUP).strip())
                elif log.version is None:
                    log.version = m.group(_VERSION_GROUP)
                continue
            msg = m.group(kind)
            ls = text.rfind("\n", 0, m.start()) + 1
            proc = self._proc(text, ls, m.start())
            log.lines_kept += 1
            if kind == "chan":
                t = _CHAN.match(msg)
                if t is not None:
                    via = t.group("via")
                    cv = self._vias.get(via)
                    if cv is None:
                        cv = self._vias[via] = classify_via(via)
                    self._transport(t, via, cv, proc, line_no(m.start()))
                    continue
                r = _RING_ORDER.match(msg)
                if r is not None:
                    ring = (int(r.group("ch")), tuple(int(x) for x in r.group(3).split()))
                    if self.keep_repeats:
                        log.rings.append(ring)
                    elif ring not in self._rings and self._room("rings", len(self._rings)):
                        self._rings.add(ring)
                        log.rings.append(ring)
            elif kind == "ring":
                t = _OLD_RING.match(msg)
                if t is not None:
                    via = t.group("via")
                    self._transport(t, via, classify_via(via), proc, line_no(m.start()))
            elif kind == "coll":
                c = _COLL.match(msg)
                if c is not None:
                    log.colls.append(
                        CollRecord(
                            c.group("op"),
                            int(c.group("opc"), 16),
                            int(c.group("count")),
                            int(c.group("dt")),
                            int(c.group("red")),
                            int(c.group("root")),
                            c.group("comm").lower(),
                            int(c.group("nranks")) if c.group("nranks") else None,
                            proc,
                        )
                    )
            elif kind == "comm":
                self._comm(msg, proc)
            elif kind == "trees":
                log.trees += 1
            elif kind == "net":
                n = _NET.match(msg)
                if n is not None:
                    log.networks.setdefault(n.group("net"), set()).add(proc)
            elif kind == "ibnet":
                log.ib_init_lines += 1
                o = _OOB_IF.search(msg)
                if o is not None:
                    log.bootstrap_ifs.add(o.group(1))
            elif kind == "boot":
                log.bootstrap_procs.add(proc)
                o = _BOOT_IF.match(msg)
                if o is not None:
                    log.bootstrap_ifs.add(o.group(1))
            elif kind == "boottrace":
                if len(log.bootstrap_errors) < 20:
                    log.bootstrap_errors.append(msg.strip())
            elif kind == "nodev":
                if msg.startswith("NET/IB"):
                    log.ib_init_lines += 1
                if self.keep_repeats or self._room("no_device", len(log.no_device)):
                    log.no_device.append(msg.strip())
            elif kind == "netif":
                log.socket_if_procs.add(proc)
                self._socket_if(msg.strip(), line_no(m.start()))
            elif kind == "aff":
                a = _AFFINITY.match(msg)
                if a is not None:
                    mask = a.group("mask")
                    cpus = self._masks.get(mask)
                    if cpus is None:
                        try:
                            cpus = parse_hexmask(mask) if mask else ()
                        except InputError:
                            cpus = ()
                        self._masks[mask] = cpus
                    self._affinity(proc, int(a.group("gpu")), mask, cpus, line_no(m.start()))
            elif kind == "timings":
                t2 = _TIMINGS.match(msg)
                if t2 is not None:
                    parts: dict[str, float] = {}
                    for item in (t2.group("parts") or "").split(","):
                        bits = item.split()
                        if len(bits) == 2:
                            try:
                                parts[bits[0]] = float(bits[1])
                            except ValueError:
                                pass
                    log.init_timings.append(
                        InitTiming(
                            int(t2.group("rank")),
                            int(t2.group("nranks")),
                            float(t2.group("total")),
                            parts,
                            proc,
                            line_no(m.start()),
                        )
                    )
            elif kind == "env":
                e = _ENV.match(msg)
                if e is not None:
                    log.env[e.group("name")] = e.group("value")
            elif kind == "version" and log.version is None:
                v = _VERSION.match(msg)
                if v:
                    log.version = v.group(1)
        if _any_trigger(text):
            self.dist.feed(text, lines_before)
        self.line_base += text.count("\n")

    def _room(self, kind: str, kept: int) -> bool:
        """Whether one more distinct entry of ``kind`` fits (else the line is counted as dropped)."""
        if kept < MAX_DISTINCT:
            return True
        self.log.dropped[kind] = self.log.dropped.get(kind, 0) + 1
        return False

    def _transport(
        self, t: re.Match[str], via: str, cv: tuple[str, str | None, bool], proc: Proc | None, line: int
    ) -> None:
        ch, src, dst, direction = int(t.group("ch")), int(t.group("src")), int(t.group("dst")), t.group("dir")
        sdev, ddev = t.group("sdev"), t.group("ddev")
        if not self.keep_repeats:
            key = (ch, src, dst, direction, via, proc, sdev, ddev)
            seen = self._transport_at.get(key)
            if seen is not None:
                seen.count += 1
                seen.last_line = line
                return
            if not self._room("transports", len(self._transport_at)):
                return
        k, net, gdr = cv
        tr = Transport(ch, src, dst, direction, via, k, net, gdr, proc, line, sdev, ddev, 1, line)
        if not self.keep_repeats:
            self._transport_at[key] = tr
        self.log.transports.append(tr)

    def _affinity(self, proc: Proc | None, gpu: int, mask: str, cpus: tuple[int, ...], line: int) -> None:
        if not self.keep_repeats:
            key = (proc, gpu, mask)
            seen = self._affinity_at.get(key)
            if seen is not None:
                seen.count += 1
                seen.last_line = line
                return
            if not self._room("affinities", len(self._affinity_at)):
                return
        a = Affinity(proc, gpu, mask, cpus, line, 1, line)
        if not self.keep_repeats:
            self._affinity_at[key] = a
        self.log.affinities.append(a)

    def _socket_if(self, text: str, line: int) -> None:
        log = self.log
        if self.keep_repeats:
            log.socket_ifs.append(text)
        seen = log.socket_if_seen.get(text)
        if seen is not None:
            seen.count += 1
            seen.last = line
        elif self._room("socket_ifs", len(log.socket_if_seen)):
            log.socket_if_seen[text] = Seen(line, line)
            if not self.keep_repeats:
                log.socket_ifs.append(text)

    def _proc(self, text: str, ls: int, end: int) -> Proc | None:
        key = text[ls:end]
        try:
            return self._procs[key]
        except KeyError:
            pass
        p = _PREFIX.search(key)
        proc = None
        if p is not None:
            proc = Proc(p.group("host"), int(p.group("pid")))
            self.log.hosts.add(proc.host)
            self.log.procs.add(proc)
        if len(self._procs) < 100_000:
            self._procs[key] = proc
        return proc

    def _comm(self, msg: str, proc: Proc | None) -> None:
        log = self.log
        c = _COMM_INFO.search(msg)
        if c is not None:
            key = (c.group("comm").lower(), proc)
            info = log.comms.get(key)
            if info is None:
                info = log.comms[key] = CommInfo(
                    key[0], int(c.group("rank")), int(c.group("nranks")), proc=proc
                )
            info.nnodes = int(c.group("nnodes"))
            info.local_ranks = int(c.group("local"))
            return
        d = _INIT_DONE.search(msg)
        if d is not None:
            key = (d.group("comm").lower(), proc)
            info = log.comms.get(key)
            if info is None:
                info = log.comms[key] = CommInfo(
                    key[0], int(d.group("rank")), int(d.group("nranks")), proc=proc
                )
            info.cuda_dev = int(d.group("dev"))
            info.bus_id = d.group("bus").lower()
            if d.group("what") == "Init COMPLETE":
                info.init_complete = True


def parse_nccl_log(text: str, path: str = "<nccl log>") -> NcclLog:
    """Parse the text of an NCCL log (pure; never raises for odd lines, which are ignored)."""
    log = NcclLog(path=path)
    _Parser(log).feed(text)
    log.bytes_read = len(text)
    _check(log)
    return log


def load_nccl_log(path: str | Path) -> NcclLog:
    """Read and parse a log file in blocks (bounded memory); raises InputError if unreadable."""
    p = Path(path)
    log = NcclLog(path=str(p))
    parser = _Parser(log)
    try:
        from clusterdoctor.observe.limits import open_input

        with open_input(p) as fh:  # regular files only; .gz/.zst logs inflated; budgets checked as it reads
            pending: list[bytes] = []  # the start of a line that began in an earlier block
            held = 0
            while True:
                block = fh.read(_BLOCK)
                if not block:
                    break
                cut = block.rfind(b"\n") + 1
                if cut == 0:
                    pending.append(block)
                    held += len(block)
                    if held > _LONGEST_LINE:
                        raise InputError(
                            f"no line breaks in {_LONGEST_LINE >> 20} MB: not a text log", str(p)
                        )
                    continue
                whole = memoryview(block)[:cut]
                data = b"".join((*pending, whole)) if pending else whole
                parser.feed(str(data, "utf-8", "replace"))
                log.bytes_read += len(data)
                pending, held = ([block[cut:]], len(block) - cut) if cut < len(block) else ([], 0)
            if pending:
                parser.feed(b"".join(pending).decode("utf-8", "replace"))
                log.bytes_read += held
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", str(p)) from None
    _check(log)
    return log


def _check(log: NcclLog) -> None:
    found = log.lines_kept or log.watchdog_timeouts or log.watchdog_status or log.dist_errors
    if not found and log.version is None:
        log.warnings.append(
            f"{log.path}: no line clusterdoctor reads (NCCL INFO init/transport/collective lines, watchdog "
            "or gloo/TCPStore timeouts); was NCCL_DEBUG=INFO set?"
        )
    for kind, n in log.dropped.items():
        log.warnings.append(
            f"{log.path}: over {MAX_DISTINCT:,} distinct {kind.replace('_', ' ')} lines; {n:,} more not kept"
        )


_SNIFF = re.compile(
    rb"NCCL (?:INFO|WARN)|NCCL version \d|:\d{1,9}:\d{1,9} \[\d{1,4}\] (?:INFO|WARN) |Watchdog caught collective|WorkNCCL\(SeqNum"
    rb"|Timed out waiting \d+ms for (?:recv|send) operation|failed to pass monitoredBarrier"
    rb"|wait timeout after \d+ms, keys: |waiting for clients\. \d+/\d+ clients joined"
    rb"|initializing process group in store based barrier"
    rb"|didn't join collective #|are the lagging ranks that caused this timeout"
    rb"|waiting for remainder of ranks for more than"
)


def sniff_nccl_log(head: bytes) -> bool:
    """Whether the first bytes of a file look like an NCCL debug log or watchdog output."""
    return _SNIFF.search(head) is not None
