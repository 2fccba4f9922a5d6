"""nccl-tests output (``all_reduce_perf`` and friends): per-size rows and the run's header.

Format (NVIDIA/nccl-tests README.md, doc/PERFORMANCE.md; fixtures in ``fixtures/comm``)::

    # nThread 1 nGpus 1 minBytes 1 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 100 ...
    #  Rank  0 Group  0 Pid     21 on test-nccl-efa-worker-0 device  0 [0x35] Tesla T4
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time ...
      1073741824     268435456     float     sum      -1    22661   47.38   47.38      0    22658 ...
    # Avg bus bandwidth    : 47.4509

Columns: size (B), count (elements), type, redop, root, then out-of-place time (us), algbw, busbw,
#wrong and the same in-place. Older builds have no ``root`` column and print ``error`` instead of
``#wrong`` (NVIDIA/nccl-tests#107); ``N/A`` appears in place of numbers. Lines may carry a launcher
prefix (``[1,0]<stdout>:``, srun's `` 0: ``, any of :data:`~clusterdoctor.observe.comm.launcher.LINE_PREFIX`).
GB here is 1e9 bytes, as nccl-tests computes it. Older builds print ``#   Rank  0 Pid …`` without ``Group``.

A paste cut before the result rows (the header and the device list only) is read as what it is: the
run's devices, no rows, and a warning that there is nothing to measure. A binary built without
``MPI=1`` and started by ``mpirun`` runs one independent copy per process (README: "NCCL tests rely on
MPI to work on multiple processes"): each copy numbers its own ranks from 0, so one rank number is
printed by processes of several hosts (:attr:`NcclTestsRun.independent_copies`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.launcher import LINE_PREFIX

_LAUNCHER = LINE_PREFIX
_NUM = r"(?:-?[\d.]+(?:[eE][-+]?\d+)?|N/A)"
_ROW = re.compile(
    r"^" + _LAUNCHER + r"[^\S\n]*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>[a-z0-9_]+)\s+(?P<redop>[a-z]+)"
    r"(?P<rest>(?:\s+" + _NUM + r")+)\s*$",
    re.MULTILINE,
)
_HEADER = re.compile(r"^" + _LAUNCHER + r"#\s+size\s+count\s+type\s+redop\s*(?P<root>root)?", re.MULTILINE)
_NTHREAD = re.compile(r"# nThread (?P<nt>\d+) nGpus (?P<ng>\d+) minBytes (?P<min>\d+) maxBytes (?P<max>\d+)")
_RANK = re.compile(
    r"(?:#\s+|^[ \t]*)Rank\s+(?P<rank>\d+)(?: Group\s+(?P<group>\d+))? Pid\s+(?P<pid>\d+) on\s+(?P<host>\S+) device\s+(?P<dev>\d+) "
    r"\[(?P<bus>[^\]]+)\] (?P<gpu>[^\n]+?)\s*$",
    re.MULTILINE,
)
# NCCL's own line for each rank of a communicator (NCCL_DEBUG=INFO), in nccl-tests output whose "# Rank"
# device list was cut: "host:pid:tid [dev] NCCL INFO comm 0x.. rank 0 nranks 2 cudaDev 0 busId 3000 - ..."
_COMM_RANK = re.compile(
    r"(?:^|[\s\]:>])(?P<host>[A-Za-z0-9_.\-]{1,128}):(?P<pid>\d{1,9}):\d{1,9} \[\d{1,4}\] NCCL INFO comm "
    r"0x[0-9a-fA-F]{1,16} rank (?P<rank>\d{1,7}) nranks \d{1,7} cudaDev (?P<dev>\d{1,4}) busId (?P<bus>[0-9a-fA-F]{1,16})",
    re.MULTILINE,
)
# the command that starts a test (behind a shell prompt, mpirun/srun ...): "./build/all_reduce_perf -b 8 ..."
_COMMAND = re.compile(r"\b[a-z_]{2,20}_perf(?:_mpi)? {1,8}-{1,2}[a-zA-Z]")
_AVG = re.compile(r"# Avg bus bandwidth\s*:\s*(?P<v>[\d.]+|nan|inf)")
_WRONG = re.compile(r"# Out of bounds values\s*:\s*(?P<v>\d+)")
_BINARY = re.compile(
    r"\b(?P<name>all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv|hypercube|gather|scatter)_perf\b"
)


@dataclass(slots=True)  # one per row: a log of repeated runs holds millions
class Measurement:
    time_us: float | None
    algbw_gbs: float | None
    busbw_gbs: float | None
    wrong: int | None


@dataclass(slots=True)  # one per row: a log of repeated runs holds millions
class TestRow:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    out_of_place: Measurement
    in_place: Measurement
    line: int


@dataclass
class RankInfo:
    rank: int
    host: str
    device: int
    bus: str
    gpu: str
    pid: int = 0


@dataclass
class NcclTestsRun:
    """One nccl-tests run: its rows, header facts and the printed average."""

    path: str
    collective: str | None = None  # "all_reduce" when the binary name is in the text
    n_threads: int | None = None
    n_gpus: int | None = None
    ranks: list[RankInfo] = field(default_factory=list)
    rows: list[TestRow] = field(default_factory=list)
    avg_busbw_gbs: float | None = None
    out_of_bounds: int | None = None
    warnings: list[str] = field(default_factory=list)
    headers: int = 0  # "# nThread ... nGpus ..." header lines: one per independent copy of the test
    # index in ``rows`` where each result table starts: a log of repeated runs holds several (a new one
    # at each column header line, or where the size falls back); [0] for one table
    table_starts: list[int] = field(default_factory=list)
    # the paste is the test's command line and nothing after it: the run printed nothing at all
    command_only: bool = False
    command_line: int | None = None
    command: str | None = None  # that line, as pasted

    def tables(self) -> list[list[TestRow]]:
        """The result tables, in order (one per run of the test in this output)."""
        bounds = [*self.table_starts, len(self.rows)]
        return [self.rows[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]

    @property
    def independent_copies(self) -> int:
        """How many processes each ran the test alone: one rank number printed by processes (host, pid)
        on two or more hosts, which one MPI run never does. 1 for a normal run (MPI or one process); two
        runs of one host pasted together are not counted (they may be a before and an after)."""
        owners: dict[int, set[tuple[str, int]]] = {}
        for r in self.ranks:
            owners.setdefault(r.rank, set()).add((r.host, r.pid))
        best = max(owners.values(), key=len, default=set())
        hosts = {h for h, _ in best}
        return len(best) if len(best) >= 2 and len(hosts) >= 2 else 1

    @property
    def hosts(self) -> set[str]:
        return {r.host for r in self.ranks}

    @property
    def gpu_models(self) -> set[str]:
        return {r.gpu for r in self.ranks if r.gpu}

    def large_rows(self, min_bytes: int = 1 << 28) -> list[TestRow]:
        """Rows at or above ``min_bytes`` (bandwidth-bound), else the largest quarter of the rows."""
        big = [r for r in self.rows if r.size_bytes >= min_bytes]
        if big:
            return big
        rows = sorted(self.rows, key=lambda r: r.size_bytes)
        return rows[len(rows) * 3 // 4 :] if rows else []

    def peak_busbw(self) -> float | None:
        """Median busbw of the bandwidth-bound rows (out-of-place and in-place together)."""
        vals = sorted(
            v
            for r in self.large_rows()
            for v in (r.out_of_place.busbw_gbs, r.in_place.busbw_gbs)
            if v is not None and v > 0
        )
        if not vals:
            return None
        mid = len(vals) // 2
        return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def _num(tok: str) -> float | None:
    if tok == "N/A":
        return None
    try:
        return float(tok)
    except ValueError:
        return None


def _meas(toks: list[str], wrong_col: bool) -> Measurement:
    t = _num(toks[0]) if toks else None
    a = _num(toks[1]) if len(toks) > 1 else None
    b = _num(toks[2]) if len(toks) > 2 else None
    w = None
    if wrong_col and len(toks) > 3:
        v = _num(toks[3])
        w = int(v) if v is not None and v == int(v) and v >= 0 else None
    return Measurement(t, a, b, w)


def parse_nccl_tests(text: str, path: str = "<nccl-tests>") -> NcclTestsRun:
    """Parse nccl-tests output. Raises InputError when no result row is present."""
    run = NcclTestsRun(path=path)
    m = _BINARY.search(text)
    if m:
        run.collective = m.group("name")
    for i, m in enumerate(_NTHREAD.finditer(text)):
        if i == 0:
            run.n_threads = int(m.group("nt"))
            run.n_gpus = int(m.group("ng"))
        run.headers += 1
    for r in _RANK.finditer(text):
        run.ranks.append(
            RankInfo(
                int(r.group("rank")),
                r.group("host"),
                int(r.group("dev")),
                r.group("bus"),
                r.group("gpu"),
                int(r.group("pid")),
            )
        )
    if not run.ranks:  # the device list was cut: NCCL's comm lines say which process is which rank
        seen: set[tuple[int, str, int]] = set()
        for r in _COMM_RANK.finditer(text):
            key = (int(r.group("rank")), r.group("host"), int(r.group("pid")))
            if key not in seen:
                seen.add(key)
                run.ranks.append(RankInfo(key[0], key[1], int(r.group("dev")), r.group("bus"), "", key[2]))
    header = _HEADER.search(text)
    header_pos = [h.start() for h in _HEADER.finditer(text)] if header is not None else []
    next_header = 0
    newline_pos = 0
    line = 1
    prev_size = -1
    for r in _ROW.finditer(text):
        size = int(r.group("size"))
        new_table = not run.rows or size < prev_size
        while next_header < len(header_pos) and header_pos[next_header] < r.start():
            next_header += 1
            new_table = True
        if new_table:
            run.table_starts.append(len(run.rows))
        prev_size = size
        line += text.count("\n", newline_pos, r.start())
        newline_pos = r.start()
        toks = r.group("rest").split()
        # [root] then out-of-place and in-place (time, algbw, busbw[, #wrong|error]); the count tells which.
        root = None
        if len(toks) in (9, 7):
            root = _num(toks[0])
            toks = toks[1:]
        if len(toks) == 8:
            oop, inp = _meas(toks[:4], True), _meas(toks[4:], True)
        elif len(toks) == 6:
            oop, inp = _meas(toks[:3], False), _meas(toks[3:], False)
        else:
            run.warnings.append(f"{path}:{line}: row with {len(toks)} numbers skipped")
            continue
        run.rows.append(
            TestRow(
                size,
                int(r.group("count")),
                r.group("type"),
                r.group("redop"),
                int(root) if root is not None else None,
                oop,
                inp,
                line,
            )
        )
    m = _AVG.search(text)
    if m:
        v = _num(m.group("v"))
        run.avg_busbw_gbs = v
    m = _WRONG.search(text)
    if m:
        run.out_of_bounds = int(m.group("v"))
    if not run.rows:
        if not run.headers and not run.ranks and run.avg_busbw_gbs is None:
            commands = list(_COMMAND.finditer(text))
            c = commands[-1] if commands else None
            end = text.find("\n", c.end()) if c is not None else -1
            if c is not None and (end < 0 or not text[end:].strip()):
                # common.cu prints its '# nThread' header right after MPI_Init and an MPI_Allgather of
                # the host names, before any NCCL call: no line at all means the run never got past MPI
                run.command_only = True
                run.command_line = text.count("\n", 0, c.start()) + 1
                start = text.rfind("\n", 0, c.start()) + 1
                run.command = text[start : end if end >= 0 else len(text)].strip()[:2000]
                run.warnings.append(
                    f"{path}: the nccl-tests command line and no output after it (not even its header)"
                )
                return run
        if not run.headers and not run.ranks:
            if run.avg_busbw_gbs is None or run.out_of_bounds is None:  # nccl-tests prints both lines
                raise InputError("no nccl-tests result rows found", path)
            run.warnings.append(
                f"{path}: nccl-tests summary lines only ('# Avg bus bandwidth'), no header, devices or rows: "
                "its bandwidth is not judged (the link and the GPUs are not known)"
            )
            return run
        run.warnings.append(
            f"{path}: nccl-tests header and device list only, no result rows (the output was cut before "
            "them, or the test stopped): its bandwidth is not judged"
        )
        return run
    if header is None:
        run.warnings.append(f"{path}: no column header line; columns assumed in the standard order")
    if run.collective is None:
        # all_reduce is the only test whose rows carry a real reduction op with root -1.
        ops = {r.redop for r in run.rows}
        roots = {r.root for r in run.rows}
        if ops <= {"sum", "prod", "max", "min", "avg"} and roots <= {-1, None}:
            run.collective = "all_reduce"
            run.warnings.append(
                f"{path}: test binary not named in the output; all_reduce assumed from redop/root"
            )
    return run


def load_nccl_tests(path: str | Path) -> NcclTestsRun:
    p = Path(path)
    from clusterdoctor.observe.limits import read_text

    text = read_text(p)
    return parse_nccl_tests(text, str(p))


# nccl-tests' names (src/common.cu test_typenames, test_opnames; "none" for collectives without an op)
_TYPES = rb"(?:u?int(?:8|32|64)|half|float|double|bfloat16|f8e4m3|f8e5m2)"
_OPS = rb"(?:sum|prod|max|min|avg|mulsum|none)"
_SNIFF = re.compile(
    rb"#\s+size\s+count\s+type\s+redop|# Avg bus bandwidth|_perf\b(?:(?!_perf\b).)*-b\s|# nThread \d+ nGpus \d+ minBytes \d"
    # the device list alone ("#  Rank  0 Group  0 Pid 544816 on dgx01 device  0 [0x1a] NVIDIA H100"), '#' lost
    rb"|(?m:^[ \t#]{0,8}Rank {1,3}\d{1,6}(?: Group {1,3}\d{1,6})? Pid {1,3}\d{1,9} on {1,12}\S{1,128} device {1,3}\d{1,4} \[)"
    # result rows pasted without the header (common.cu prints "%12li  %12li  %8s  %6s  %6i" then time,
    # algbw, busbw, #wrong twice): two such rows in a row, with nccl-tests' own type and op names
    rb"|(?m:(?:^[ \t]{0,16}\d{1,16}[ \t]{1,16}\d{1,16}[ \t]{1,16}"
    + _TYPES
    + rb"[ \t]{1,16}"
    + _OPS
    + rb"(?:[ \t]{1,16}-?\d{1,12})?(?:[ \t]{1,16}(?:[\d.]{1,16}(?:e[-+]\d{1,3})?|N/A)){6,8}[ \t]*\r?\n){2})"
)


def sniff_nccl_tests(head: bytes) -> bool:
    return _SNIFF.search(head) is not None
