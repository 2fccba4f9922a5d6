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
printed by processes of several hosts (:attr:`NcclTestsRun.independent_copies`). When the device list
is cut or never printed, the copies still show as output no single run prints: a second ``# nThread``
header before any device or row of the first, or a second ``# Avg bus bandwidth`` summary with no row
between the two (nccl-tests prints from its main process only, so one MPI run prints each once;
:attr:`NcclTestsRun.interleaved_copies`).

NCCL 1.x's single-process tests (``build/test/single/all_reduce_test``, NVIDIA/nccl#85, #104) print
``# Using devices``, ``#   Rank  0 uses device  0 [0x02] Tesla P100-PCIE-16GB`` and a column header
``#      bytes             N    type      op     time  algbw  busbw      res``: their devices are read
(one process, so one host). A run whose output ends at its column header printed no result at all
(:attr:`NcclTestsRun.stopped_after_header`): the first timed collective never returned, or the paste
was cut there.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
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
# NCCL 1.x single-process tests: "#   Rank  0 uses device  0 [0x05] Tesla M40 24GB" ('#' or '> ' quoted)
_RANK_V1 = re.compile(
    r"^[ \t#>]{0,12}Rank\s{1,4}(?P<rank>\d{1,5}) uses device\s{1,4}(?P<dev>\d{1,4}) \[(?P<bus>[^\]\n]{1,20})\] "
    r"(?P<gpu>[^\n]{1,200}?)\s*$",
    re.MULTILINE,
)
_HEADER_V1 = re.compile(r"^[ \t#>]{0,12}bytes\s+N\s+type\s+op\s+time\s+algbw\s+busbw", re.MULTILINE)
# NCCL's own line for each rank of a communicator (NCCL_DEBUG=INFO), in nccl-tests output whose "# Rank"
# device list was cut: "host:pid:tid [dev] NCCL INFO comm 0x.. rank 0 nranks 2 cudaDev 0 busId 3000 - ..."
_COMM_RANK = re.compile(
    r"(?:^|[\s\]:>])(?P<host>[A-Za-z0-9_.\-]{1,128}):(?P<pid>\d{1,9}):\d{1,9} \[\d{1,4}\] NCCL INFO comm "
    r"0x[0-9a-fA-F]{1,16} rank (?P<rank>\d{1,7}) nranks \d{1,7} cudaDev (?P<dev>\d{1,4}) busId (?P<bus>[0-9a-fA-F]{1,16})",
    re.MULTILINE,
)
# the command that starts a test (behind a shell prompt, mpirun/srun ...): "./build/all_reduce_perf -b 8 ..."
_COMMAND = re.compile(r"\b[a-z_]{2,20}_perf(?:_mpi)? {1,8}-{1,2}[a-zA-Z]")
_FAILURE = re.compile(
    r"(?:^|\s)(?P<host>[A-Za-z0-9_.\-]{1,128}): Test NCCL failure [\w./\-]{1,64}:\d{1,6} '(?P<err>[^'\n]{1,160})'"
)
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
    command: str | None = None  # that line, as pasted (the last test command line, whatever follows it)
    # "<host>: Test NCCL failure common.cu:959 'internal error - ...'": (host, NCCL's error string)
    failures: list[tuple[str, str]] = field(default_factory=list)
    # a log of repeated runs (issue 26): rows past MAX_ROWS are summarised per size, not kept
    n_rows: int = 0  # every row read
    n_tables: int = 0  # every table read (``table_starts`` names those of the kept rows)
    summary: dict[int, SizeSummary] = field(default_factory=dict)
    avg_seen: bool = False  # an "# Avg bus bandwidth" line was read (its value may be nan/N/A)
    # no result row, and the last line is the column header: nothing came after it
    stopped_after_header: bool = False
    header_line: int | None = None
    # headers ('# nThread') and summaries ('# Avg bus bandwidth') that came right after another one,
    # with no device line or result row between them: the interleaved output of independent copies
    interleaved_headers: int = 0
    interleaved_summaries: int = 0
    summaries: int = 0  # '# Avg bus bandwidth' lines read

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
    def interleaved_copies(self) -> int:
        """How many copies of the test printed into one output, told by their interleaving alone (a
        header or a summary printed again before any device line or row came): 1 when none."""
        return 1 + max(self.interleaved_headers, self.interleaved_summaries)

    @property
    def hosts(self) -> set[str]:
        return {r.host for r in self.ranks}

    @property
    def gpu_models(self) -> set[str]:
        return {r.gpu for r in self.ranks if r.gpu}

    def large_rows(self, min_bytes: int = 1 << 28) -> list[TestRow]:
        """Kept rows at or above ``min_bytes`` (bandwidth-bound), else the largest quarter of the rows
        (the sizes summarised past :data:`MAX_ROWS` counted in the quarter: :meth:`large_sizes`)."""
        big = [r for r in self.rows if r.size_bytes >= min_bytes]
        if big or not self.summary:
            if big:
                return big
            rows = sorted(self.rows, key=lambda r: r.size_bytes)
            return rows[len(rows) * 3 // 4 :] if rows else []
        cut = self.large_sizes(min_bytes)[0]
        return [r for r in self.rows if r.size_bytes >= cut]

    def large_sizes(self, min_bytes: int = 1 << 28) -> tuple[int, list[int]]:
        """(smallest bandwidth-bound size, the summarised sizes at or above it)."""
        sizes = Counter(r.size_bytes for r in self.rows)
        for size, sm in self.summary.items():
            sizes[size] += sm.rows
        if any(z >= min_bytes for z in sizes):
            cut = min_bytes
        else:
            order = sorted(sizes.items())
            k = sum(sizes.values()) * 3 // 4  # as rows[n * 3 // 4 :] of the rows sorted by size
            cut, seen = (order[-1][0] if order else 0), 0
            for z, n in order:
                if seen + n > k:
                    cut = z
                    break
                seen += n
        return cut, sorted(z for z in self.summary if z >= cut)

    def large_busbw(self, min_bytes: int = 1 << 28) -> Counter[float]:
        """The busbw values (out-of-place and in-place, > 0) of the bandwidth-bound rows, kept and
        summarised, as value -> how many."""
        vals: Counter[float] = Counter(
            v
            for r in self.large_rows(min_bytes)
            for v in (r.out_of_place.busbw_gbs, r.in_place.busbw_gbs)
            if v is not None and v > 0
        )
        if self.summary:
            for z in self.large_sizes(min_bytes)[1]:
                sm = self.summary[z]
                for label in ("out-of-place", "in-place"):
                    vals.update({v: n for v, n in sm.busbw(label).items() if v > 0})
        return vals

    def peak_busbw(self) -> float | None:
        """Median busbw of the bandwidth-bound rows (out-of-place and in-place together)."""
        return counter_median(self.large_busbw())

    @property
    def rows_summarised(self) -> int:
        return self.n_rows - len(self.rows)


def counter_nth(values: Counter[float], i: int) -> float:
    """The ``i``-th smallest (0-based) of a multiset given as value -> count."""
    for v in sorted(values):
        i -= values[v]
        if i < 0:
            return v
    raise IndexError(i)


def counter_median(values: Counter[float]) -> float | None:
    """The median of a multiset given as value -> count (the mean of the middle two when even)."""
    n = sum(values.values())
    if not n:
        return None
    mid = n // 2
    return (
        counter_nth(values, mid) if n % 2 else (counter_nth(values, mid - 1) + counter_nth(values, mid)) / 2
    )


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


MAX_ROWS = 20_000  # rows kept in full per run; the rest summarised per size (issue 26: memory flat)


class SizeSummary:
    """The rows of one size read after the first :data:`MAX_ROWS` of a log of repeated runs: counted,
    their values tallied (a ``Counter`` per column: bounded by the distinct printed values, not by
    the rows), the lowest busbw of each placement with its line, and the rows with wrong data."""

    __slots__ = ("rows", "values", "lowest", "wrong", "first_wrong", "redops", "roots")

    def __init__(self) -> None:
        self.rows = 0
        # time_us, algbw_gbs, busbw_gbs (out-of-place), in_place_busbw_gbs
        self.values: dict[str, Counter[float]] = {k: Counter() for k in _SUMMARY_FIELDS}
        self.lowest: dict[str, tuple[float, int]] = {}  # "out-of-place"/"in-place" -> (busbw, line)
        self.wrong = 0  # measurements with a non-zero #wrong
        self.first_wrong: tuple[int, int] | None = None  # (line, #wrong)
        self.redops: set[str] = set()
        self.roots: set[int | None] = set()

    def add(self, row: TestRow) -> None:
        self.rows += 1
        o, i = row.out_of_place, row.in_place
        for k, v in zip(_SUMMARY_FIELDS, (o.time_us, o.algbw_gbs, o.busbw_gbs, i.busbw_gbs)):
            if v is not None:
                self.values[k][v] += 1
        for label, m in (("out-of-place", o), ("in-place", i)):
            if m.busbw_gbs and (label not in self.lowest or m.busbw_gbs < self.lowest[label][0]):
                self.lowest[label] = (m.busbw_gbs, row.line)
            if m.wrong:
                self.wrong += 1
                if self.first_wrong is None:
                    self.first_wrong = (row.line, m.wrong)
        self.redops.add(row.redop)
        self.roots.add(row.root)

    def busbw(self, label: str) -> Counter[float]:
        return self.values["busbw_gbs" if label == "out-of-place" else "in_place_busbw_gbs"]


_SUMMARY_FIELDS = ("time_us", "algbw_gbs", "busbw_gbs", "in_place_busbw_gbs")


def parse_nccl_tests(text: str, path: str = "<nccl-tests>") -> NcclTestsRun:
    """Parse nccl-tests output. Raises InputError when no result row is present."""
    return parse_nccl_tests_lines(text.split("\n"), path)


def parse_nccl_tests_lines(lines: Iterable[str], path: str = "<nccl-tests>") -> NcclTestsRun:
    """:func:`parse_nccl_tests` over lines as they come (a file streamed by ``limits.LineReader``):
    memory bounded by :data:`MAX_ROWS` rows and the per-size summaries of the rest, not by the file."""
    run = NcclTestsRun(path=path)
    seen_ranks: set[tuple] = set()
    comm_ranks: list[RankInfo] = []
    comm_seen: set[tuple[int, str, int]] = set()
    header_seen = False
    v1_ranks: list[RankInfo] = []
    last_header: int | None = None  # line of the last column header (either generation)
    after_header = False  # a non-blank line after it
    prev_size = -1
    last_cmd: tuple[int, str] | None = None  # (line number, line) of the last test command line
    after_cmd = False  # a non-blank line after it
    bare_header = bare_summary = False  # the last header / summary, with no device line or row after it
    for line, text in enumerate(lines, 1):
        if last_cmd is not None and not after_cmd and text.strip():
            after_cmd = True
        if last_header is not None and not after_header and text.strip():
            after_header = True
        if "_perf" in text:
            if run.collective is None and (m := _BINARY.search(text)):
                run.collective = m.group("name")
            if _COMMAND.search(text):
                last_cmd, after_cmd = (line, text), False
                run.command = text.strip()[:2000]
        if "Test NCCL failure" in text and len(run.failures) < 100 and (m := _FAILURE.search(text)):
            run.failures.append((m.group("host"), m.group("err").strip()))
        if "#" in text:
            if (m := _NTHREAD.search(text)) is not None:
                if run.headers == 0:
                    run.n_threads = int(m.group("nt"))
                    run.n_gpus = int(m.group("ng"))
                run.headers += 1
                run.interleaved_headers += bare_header
                bare_header = True
            if _HEADER.search(text):
                bare_header = False
                header_seen = True
                last_header, after_header = line, False
                prev_size = -2  # the next row starts a table
                continue
            if "Avg bus" in text and (m := _AVG.search(text)):
                run.summaries += 1
                run.interleaved_summaries += bare_summary
                bare_summary = True
                if run.avg_busbw_gbs is None:
                    run.avg_busbw_gbs = _num(m.group("v"))
                    run.avg_seen = True
            if run.out_of_bounds is None and "Out of bounds" in text and (m := _WRONG.search(text)):
                run.out_of_bounds = int(m.group("v"))
        if "Rank" in text and (r := _RANK.search(text)) is not None:
            info = (
                int(r.group("rank")),
                r.group("host"),
                int(r.group("dev")),
                r.group("bus"),
                r.group("gpu"),
                int(r.group("pid")),
            )
            bare_header = False
            if info not in seen_ranks:  # a log of repeated runs prints the same device list each time
                seen_ranks.add(info)
                run.ranks.append(RankInfo(*info))
            continue
        if "uses device" in text and (r := _RANK_V1.search(text)) is not None:
            # NCCL 1.x single-process tests: one process, its devices in order
            bare_header = False
            v1_ranks.append(
                RankInfo(int(r.group("rank")), "", int(r.group("dev")), r.group("bus"), r.group("gpu"))
            )
            continue
        if "bytes" in text and _HEADER_V1.search(text):
            last_header, after_header = line, False
            prev_size = -2
            continue
        if not run.ranks and "NCCL INFO comm" in text and (r := _COMM_RANK.search(text)) is not None:
            key = (int(r.group("rank")), r.group("host"), int(r.group("pid")))
            if key not in comm_seen:
                comm_seen.add(key)
                comm_ranks.append(RankInfo(key[0], key[1], int(r.group("dev")), r.group("bus"), "", key[2]))
            continue
        r = _ROW.search(text)
        if r is None:
            continue
        bare_header = bare_summary = False
        size = int(r.group("size"))
        if prev_size == -1 and not run.n_rows or prev_size == -2 or size < prev_size:
            run.n_tables += 1
            if len(run.rows) < MAX_ROWS:
                run.table_starts.append(len(run.rows))
        prev_size = size
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
        row = TestRow(
            size,
            int(r.group("count")),
            r.group("type"),
            r.group("redop"),
            int(root) if root is not None else None,
            oop,
            inp,
            line,
        )
        run.n_rows += 1
        if len(run.rows) < MAX_ROWS:
            run.rows.append(row)
        else:
            sm = run.summary.get(size)
            if sm is None:
                sm = run.summary[size] = SizeSummary()
            sm.add(row)
    if not run.ranks:
        # NCCL 1.x's device list, else (the device list was cut) NCCL's comm lines say which is which rank
        run.ranks = v1_ranks or comm_ranks
    if not run.rows:
        if not run.headers and not run.ranks and run.avg_busbw_gbs is None and not run.avg_seen:
            if last_cmd is not None and not after_cmd:
                # common.cu prints its '# nThread' header right after MPI_Init and an MPI_Allgather of
                # the host names, before any NCCL call: no line at all means the run never got past MPI
                run.command_only = True
                run.command_line = last_cmd[0]
                run.command = last_cmd[1].strip()[:2000]
                run.warnings.append(
                    f"{path}: the nccl-tests command line and no output after it (not even its header)"
                )
                return run
        if not run.headers and not run.ranks:
            if run.avg_busbw_gbs is None and not run.avg_seen or run.out_of_bounds is None:
                raise InputError("no nccl-tests result rows found", path)
            run.warnings.append(
                f"{path}: nccl-tests summary lines only ('# Avg bus bandwidth'), no header, devices or rows: "
                "its bandwidth is not judged (the link and the GPUs are not known)"
            )
            return run
        if last_header is not None and not after_header:
            run.stopped_after_header = True
            run.header_line = last_header
        run.warnings.append(
            f"{path}: nccl-tests header and device list only, no result rows (the output was cut before "
            "them, or the test stopped): its bandwidth is not judged"
        )
        return run
    if not header_seen:
        run.warnings.append(f"{path}: no column header line; columns assumed in the standard order")
    if run.collective is None:
        # all_reduce is the only test whose rows carry a real reduction op with root -1.
        ops = {r.redop for r in run.rows}.union(*(sm.redops for sm in run.summary.values()))
        roots = {r.root for r in run.rows}.union(*(sm.roots for sm in run.summary.values()))
        if ops <= {"sum", "prod", "max", "min", "avg"} and roots <= {-1, None}:
            run.collective = "all_reduce"
            run.warnings.append(
                f"{path}: test binary not named in the output; all_reduce assumed from redop/root"
            )
    return run


def load_nccl_tests(path: str | Path) -> NcclTestsRun:
    """Read a file of nccl-tests output, streamed (see :func:`parse_nccl_tests_lines`)."""
    p = Path(path)
    from clusterdoctor.observe.limits import LineReader

    with LineReader(p) as reader:
        run = parse_nccl_tests_lines(reader, str(p))
    run.warnings.extend(f"{p}: {w}" for w in reader.warnings)
    return run


# nccl-tests' names (src/common.cu test_typenames, test_opnames; "none" for collectives without an op)
_TYPES = rb"(?:u?int(?:8|32|64)|half|float|double|bfloat16|f8e4m3|f8e5m2)"
_OPS = rb"(?:sum|prod|max|min|avg|mulsum|none)"
_SNIFF = re.compile(
    rb"#\s+size\s+count\s+type\s+redop|(?m:^[ \t#>]{0,12}Rank {1,4}\d{1,5} uses device {1,4}\d{1,4} \[)|# Avg bus bandwidth|_perf\b(?:(?!_perf\b).)*-b\s|# nThread \d+ nGpus \d+ minBytes \d"
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
