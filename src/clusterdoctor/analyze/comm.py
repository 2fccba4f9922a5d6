"""Communication analysis: per-rank time breakdown, collectives across ranks, stragglers and hangs.

Per rank (from a Kineto trace), following HTA's definitions so the numbers can be compared
(``hta/analyzers/breakdown_analysis.py``, ``communication_analysis.py`` at 0.5.0):

* GPU activity = every kernel/memcpy/memset on a stream. When the trace has two or more
  ``ProfilerStep`` annotations, only activity launched before the start of the *last* step is used
  (HTA ``_filter_irrelevant_gpu_kernels``: the profiler stops in the middle of the last step).
* span = first start to last end of that activity; idle = span − |union of all activity|;
  compute = |union of COMPUTATION kernels|; non-compute = span − idle − compute.
* comm/compute overlap = |union(comm) ∩ union(compute)| / |union(comm)|.
* kernel-type breakdown = time covered by each exact combination of COMPUTATION, COMMUNICATION
  and MEMORY unions, in percent of the total.

Where we deliberately differ from HTA: HTA rounds float (ns-resolution) timestamps to whole µs
(start up, end down; ``round_down_time_stamps`` in ``hta/common/trace_parser.py``) before merging,
which shortens every kernel by up to 1 µs and, on traces of many short kernels, moves time from
"busy" to "idle". We keep the timestamps as recorded. On the 2-rank AllReduce fixture the shares
differ by < 1 percentage point (tests/analyze/test_hta_parity.py); on integer-µs traces they are equal.

Beyond HTA: exposed communication = |union(comm) − union(compute)| (communication no compute hides),
the same per ``ProfilerStep``, and CPU-only traces (gloo: ``gloo:*`` work on the backend's threads is
communication, CPU operators on other threads are compute).

Across ranks: collectives are matched by (process group, sequence number — the ``Seq`` argument
when present, else their order in the group), then ``true time`` = the shortest duration among
ranks (the part all ranks spent communicating; TraceLens' NcclAnalyser takes the same minimum),
``skew`` = latest start − earliest start, and algbw/busbw with nccl-tests' factors
(doc/PERFORMANCE.md). Timestamps of different hosts come from unsynchronised clocks, so skew is
only meaningful for ranks on one host or with synchronised clocks.

Hangs: NCCL COLL opCounts per rank and communicator, watchdog SeqNum lines, Flight Recorder
dumps (who never joined a collective, mismatched op/size/dtype) and ``torchfrtrace`` reports.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from clusterdoctor.analyze.busbw import busbw_factor
from clusterdoctor.analyze.intervals import exclusive_lengths, exclusive_lengths_lists, union, union_arrays
from clusterdoctor.observe.kineto import COMM, COMM_ANNOTATION_RE, COMPUTE, MEMORY, KinetoTrace

if TYPE_CHECKING:  # parsers of the other sources are imported only when their data is analysed
    from clusterdoctor.observe.flight_recorder import FrDump, FrTraceReport
    from clusterdoctor.observe.nccl_log import NcclLog


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def _median(values: Iterable[float]) -> float:
    vals = sorted(values)
    n = len(vals)
    if not n:
        return 0.0
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


# Element sizes of the dtype names PyTorch writes into traces and dumps.
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "half": 2,
    "float16": 2,
    "c10::half": 2,
    "bfloat16": 2,
    "c10::bfloat16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "short": 2,
    "int16": 2,
    "char": 1,
    "byte": 1,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
_KERNEL_COLL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_COLL_NAMES = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "_allgather_base": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "reducescatter": "reduce_scatter",
    "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "sendrecv",
    "send": "sendrecv",
    "recv": "sendrecv",
    "alltoall": "alltoall",
    "all_to_all": "alltoall",
    "all_to_all_single": "alltoall",
    "alltoall_base": "alltoall",
    "barrier": "barrier",
}


def normalize_collective(name: str | None) -> str:
    """``AllReduce``, ``allreduce``, ``nccl:all_reduce`` -> ``all_reduce`` (nccl-tests naming)."""
    if not name:
        return "unknown"
    n = name.split(":", 1)[-1].strip().lower()
    return _COLL_NAMES.get(n, _COLL_NAMES.get(n.replace("_", ""), n))


def dtype_bytes(dtype: Any) -> int | None:
    if not isinstance(dtype, str):
        return None
    return DTYPE_BYTES.get(dtype.strip().lower())


# -- per-rank breakdown ----------------------------------------------------------------------------


class StepBreakdown(msgspec.Struct):
    step: int
    span_us: float
    compute_us: float
    comm_us: float
    exposed_comm_us: float
    idle_us: float

    def as_dict(self) -> dict[str, Any]:
        return {
            k: (round(v, 3) if isinstance(v, float) else v) for k, v in msgspec.structs.asdict(self).items()
        }


class RankBreakdown(msgspec.Struct):
    """One rank's time: compute, communication, exposed communication, idle (µs and percent)."""

    rank: int | None
    source: str
    device: str  # "gpu" or "cpu"
    span_us: float = 0.0
    busy_us: float = 0.0
    compute_us: float = 0.0
    comm_us: float = 0.0
    memory_us: float = 0.0
    overlap_us: float = 0.0
    exposed_comm_us: float = 0.0
    idle_us: float = 0.0
    non_compute_us: float = 0.0
    kernel_types_us: dict[str, float] = msgspec.field(default_factory=dict)
    steps: list[StepBreakdown] = msgspec.field(default_factory=list)
    events_used: int = 0
    events_dropped_last_step: int = 0
    timeline: dict[str, list[tuple[float, float]]] = msgspec.field(
        default_factory=dict
    )  # for plots (µs from t0)
    notes: list[str] = msgspec.field(default_factory=list)

    def pct(self, part: float) -> float:
        return 100.0 * part / self.span_us if self.span_us > 0 else 0.0

    @property
    def comm_comp_overlap_pct(self) -> float:
        return 100.0 * self.overlap_us / self.comm_us if self.comm_us > 0 else 0.0

    @property
    def exposed_comm_pct(self) -> float:
        return self.pct(self.exposed_comm_us)

    def kernel_types_pct(self) -> dict[str, float]:
        tot = sum(self.kernel_types_us.values())
        return {k: 100.0 * v / tot for k, v in self.kernel_types_us.items()} if tot > 0 else {}

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "source": self.source,
            "device": self.device,
            "span_us": round(self.span_us, 3),
            "compute_time_us": round(self.compute_us, 3),
            "comm_time_us": round(self.comm_us, 3),
            "exposed_comm_time_us": round(self.exposed_comm_us, 3),
            "idle_time_us": round(self.idle_us, 3),
            "non_compute_time_us": round(self.non_compute_us, 3),
            "comm_comp_overlap_pct": round(self.comm_comp_overlap_pct, 2),
            "temporal_breakdown_pct": {
                "compute": round(self.pct(self.compute_us), 2),
                "non_compute": round(self.pct(self.non_compute_us), 2),
                "idle": round(self.pct(self.idle_us), 2),
                "exposed_comm": round(self.pct(self.exposed_comm_us), 2),
            },
            "kernel_type_breakdown_pct": {k: round(v, 2) for k, v in self.kernel_types_pct().items()},
            "steps": [s.as_dict() for s in self.steps],
            "events_used": self.events_used,
            "notes": list(self.notes),
        }


_TYPE_BITS = {COMPUTE: 1, COMM: 2, MEMORY: 4}


def _combo_name(mask: int) -> str:
    names = [k for k, b in _TYPE_BITS.items() if mask & b]
    return " overlapping ".join(names)


# Plain lists cost about 2 µs per GPU event (a CPU operator interval: about a tenth of that) and
# numpy about 0.4 µs, but importing numpy costs about 45 ms: numpy pays off from about 20,000 GPU
# events in all (one large trace or many ranks), and once imported, from 5,000 in a trace.
SMALL_TRACE_EVENTS = 5_000
NUMPY_IMPORT_EVENTS = 20_000
CPU_EVENT_WEIGHT = 0.1


def _list_cost(trace: KinetoTrace) -> float:
    """The work of the plain-list breakdown of ``trace``, in GPU events."""
    return max(len(trace.ts), CPU_EVENT_WEIGHT * len(trace.cpu_ts))


def _vectorize(cost: float, total: float) -> bool:
    """Whether numpy beats plain lists for a trace of ``cost`` among traces of ``total`` (in GPU events)."""
    import sys

    if cost <= SMALL_TRACE_EVENTS:
        return False
    return total > NUMPY_IMPORT_EVENTS or "numpy" in sys.modules


def rank_breakdown(
    trace: KinetoTrace, *, timeline_points: int = 400, vectorized: bool | None = None
) -> RankBreakdown:
    """Break one rank's trace down into compute, communication, exposed communication and idle time.

    ``vectorized`` picks numpy (large traces) or plain lists (small ones); both give the same result.
    """
    if vectorized is None:
        vectorized = _vectorize(_list_cost(trace), _list_cost(trace))
    if not vectorized:
        return _breakdown_lists(trace, timeline_points)
    if not trace.has_gpu:
        return _cpu_breakdown(trace, timeline_points)
    import numpy as np

    ts = np.frombuffer(trace.ts, dtype=np.float64) if len(trace.ts) else np.zeros(0)
    dur = np.frombuffer(trace.dur, dtype=np.float64) if len(trace.dur) else np.zeros(0)
    corr = np.frombuffer(trace.corr, dtype=np.int64)
    name_id = np.asarray(trace.name_id, dtype=np.int64)
    kinds = np.array([_TYPE_BITS.get(k, 0) for k in trace.kinds], dtype=np.int64)
    kind = kinds[name_id] if len(name_id) else np.zeros(0, dtype=np.int64)
    rb = RankBreakdown(trace.rank, trace.path, "gpu")

    launch_corr = (
        np.frombuffer(trace.launch_corr, dtype=np.int64) if len(trace.launch_corr) else np.zeros(0, np.int64)
    )
    launch_ts = np.frombuffer(trace.launch_ts, dtype=np.float64) if len(trace.launch_ts) else np.zeros(0)
    step_names = {s for s, _, _ in trace.steps}
    keep = np.ones(ts.size, dtype=bool)
    if len(step_names) >= 2:
        # HTA parity: only activity launched before the last ProfilerStep started.
        last_start = max(s[1] for s in trace.steps)
        allowed = launch_corr[launch_ts < last_start]
        keep = (corr >= 0) & np.isin(corr, allowed)
        rb.events_dropped_last_step = int(ts.size - keep.sum())
        rb.notes.append(
            f"{rb.events_dropped_last_step} GPU events launched in the last (incomplete) ProfilerStep "
            "or without a launch record were left out, as HTA does"
        )
    elif not step_names:
        rb.notes.append("no ProfilerStep annotations: the whole trace is one window")
    s, e, k = ts[keep], ts[keep] + dur[keep], kind[keep]
    rb.events_used = int(s.size)
    if s.size == 0:
        rb.notes.append("no GPU activity left to analyse")
        return rb
    all_u = union_arrays(s, e)
    comp_u = union_arrays(s[k == 1], e[k == 1])
    comm_u = union_arrays(s[k == 2], e[k == 2])
    mem_u = union_arrays(s[k == 4], e[k == 4])
    rb.span_us = float(all_u[1][-1] - all_u[0][0])
    rb.busy_us = float((all_u[1] - all_u[0]).sum())
    rb.idle_us = rb.span_us - rb.busy_us
    rb.compute_us = float((comp_u[1] - comp_u[0]).sum())
    rb.comm_us = float((comm_u[1] - comm_u[0]).sum())
    rb.memory_us = float((mem_u[1] - mem_u[0]).sum())
    rb.non_compute_us = max(0.0, rb.span_us - rb.idle_us - rb.compute_us)
    combos = exclusive_lengths([comp_u, comm_u, mem_u])
    rb.overlap_us = sum(v for m, v in combos.items() if m & 1 and m & 2)
    rb.exposed_comm_us = sum(v for m, v in combos.items() if m & 2 and not m & 1)
    rb.kernel_types_us = {_combo_name(m): v for m, v in sorted(combos.items())}
    t0 = float(all_u[0][0])
    rb.timeline = {
        "compute": _downsample(comp_u, t0, timeline_points),
        "comm": _downsample(comm_u, t0, timeline_points),
    }
    rb.steps = _gpu_steps(trace, s, e, k, corr[keep], launch_corr, launch_ts)
    return rb


def _gpu_steps(
    trace: KinetoTrace, s: Any, e: Any, k: Any, corr: Any, launch_corr: Any, launch_ts: Any
) -> list[StepBreakdown]:
    import numpy as np

    if not trace.steps or launch_corr.size == 0:
        return []
    order = np.argsort(launch_corr, kind="stable")
    lc, lt = launch_corr[order], launch_ts[order]
    pos = np.searchsorted(lc, corr)
    pos = np.clip(pos, 0, lc.size - 1)
    found = lc[pos] == corr
    lts = np.where(found, lt[pos], np.nan)
    starts = np.array([st for _, st, _ in trace.steps])
    ends = np.array([en for _, _, en in trace.steps])
    out = []
    for i, (num, _st, _en) in enumerate(trace.steps):
        m = found & (lts >= starts[i]) & (lts < ends[i])
        if not m.any():
            continue
        ss, ee, kk = s[m], e[m], k[m]
        all_u = union_arrays(ss, ee)
        comp_u = union_arrays(ss[kk == 1], ee[kk == 1])
        comm_u = union_arrays(ss[kk == 2], ee[kk == 2])
        combos = exclusive_lengths([comp_u, comm_u])
        span = float(all_u[1][-1] - all_u[0][0])
        busy = float((all_u[1] - all_u[0]).sum())
        out.append(
            StepBreakdown(
                num,
                span,
                float((comp_u[1] - comp_u[0]).sum()),
                float((comm_u[1] - comm_u[0]).sum()),
                combos.get(2, 0.0),
                span - busy,
            )
        )
    return out


def _downsample(u: tuple[Any, Any], t0: float, n: int) -> list[tuple[float, float]]:
    """At most ``n`` intervals for a plot: merge gaps shorter than span/(4n) until few enough remain."""
    import numpy as np

    s, e = u
    if s.size == 0:
        return []
    if s.size > n:
        gap_min = float(e[-1] - s[0]) / (4 * n)
        while s.size > n:
            gaps = s[1:] - e[:-1]
            keep = np.concatenate(([True], gaps >= gap_min))
            first = np.flatnonzero(keep)
            last = np.append(first[1:] - 1, s.size - 1)
            s, e = s[first], e[last]
            gap_min *= 2
    return [(round(float(a) - t0, 3), round(float(b) - t0, 3)) for a, b in zip(s, e)]


def _cpu_breakdown(trace: KinetoTrace, timeline_points: int) -> RankBreakdown:
    import numpy as np

    rb = RankBreakdown(trace.rank, trace.path, "cpu")
    comm = [c for c in trace.comm_records if COMM_ANNOTATION_RE.match(c.name)]
    if not comm and not len(trace.cpu_ts):
        rb.notes.append("no GPU activity and no CPU communication records")
        return rb
    comm_tids = {c.tid for c in comm}
    cts = np.frombuffer(trace.cpu_ts, dtype=np.float64) if len(trace.cpu_ts) else np.zeros(0)
    cdur = np.frombuffer(trace.cpu_dur, dtype=np.float64) if len(trace.cpu_dur) else np.zeros(0)
    ctid = np.frombuffer(trace.cpu_tid, dtype=np.int64) if len(trace.cpu_tid) else np.zeros(0, np.int64)
    not_comm_thread = ~np.isin(ctid, np.array(sorted(comm_tids), dtype=np.int64))
    comp_u = union_arrays(cts[not_comm_thread], cts[not_comm_thread] + cdur[not_comm_thread])
    cs = np.array([c.ts for c in comm])
    ce = np.array([c.ts + c.dur for c in comm])
    comm_u = union_arrays(cs, ce)
    all_u = union_arrays(np.concatenate([comp_u[0], comm_u[0]]), np.concatenate([comp_u[1], comm_u[1]]))
    if all_u[0].size == 0:
        return rb
    rb.span_us = float(all_u[1][-1] - all_u[0][0])
    rb.busy_us = float((all_u[1] - all_u[0]).sum())
    rb.idle_us = rb.span_us - rb.busy_us
    rb.compute_us = float((comp_u[1] - comp_u[0]).sum())
    rb.comm_us = float((comm_u[1] - comm_u[0]).sum())
    rb.non_compute_us = max(0.0, rb.span_us - rb.idle_us - rb.compute_us)
    combos = exclusive_lengths([comp_u, comm_u])
    rb.overlap_us = combos.get(3, 0.0)
    rb.exposed_comm_us = combos.get(2, 0.0)
    rb.kernel_types_us = {_combo_name(m): v for m, v in sorted(combos.items())}
    rb.events_used = int(cts.size + cs.size)
    t0 = float(all_u[0][0])
    rb.timeline = {
        "compute": _downsample(comp_u, t0, timeline_points),
        "comm": _downsample(comm_u, t0, timeline_points),
    }
    rb.notes.append(
        "CPU-only trace: communication = backend work (gloo:/nccl: annotations) on its threads, "
        "compute = CPU operators on the other threads"
    )
    return rb


def _breakdown_lists(trace: KinetoTrace, timeline_points: int) -> RankBreakdown:
    """The same breakdown as the numpy path, with plain lists (see :func:`rank_breakdown`)."""
    gpu = trace.has_gpu
    rb = RankBreakdown(trace.rank, trace.path, "gpu" if gpu else "cpu")
    per: dict[int, list[tuple[float, float]]] = {0: [], 1: [], 2: [], 4: []}
    launch: dict[int, float] = {}
    if gpu:
        bits = [_TYPE_BITS.get(k, 0) for k in trace.kinds]
        idx: Iterable[int] = range(len(trace.ts))
        if len({s for s, _, _ in trace.steps}) >= 2:
            last_start = max(st for _, st, _ in trace.steps)
            allowed = {c for c, t in zip(trace.launch_corr, trace.launch_ts) if t < last_start}
            idx = [i for i, c in enumerate(trace.corr) if c >= 0 and c in allowed]
            rb.events_dropped_last_step = len(trace.ts) - len(idx)
            rb.notes.append(
                f"{rb.events_dropped_last_step} GPU events launched in the last (incomplete) ProfilerStep "
                "or without a launch record were left out, as HTA does"
            )
        elif not trace.steps:
            rb.notes.append("no ProfilerStep annotations: the whole trace is one window")
        ts, dur, nid = trace.ts, trace.dur, trace.name_id
        lists = [per[b] for b in bits]  # the interval list of each name id's kernel type
        if isinstance(idx, range):
            for s, d, n in zip(ts, dur, nid):
                lists[n].append((s, s + d))
        else:
            for i in idx:
                s = ts[i]
                lists[nid[i]].append((s, s + dur[i]))
        rb.events_used = sum(len(v) for v in per.values())
        if trace.steps:
            launch = dict(zip(trace.launch_corr, trace.launch_ts))
    else:
        comm = [c for c in trace.comm_records if COMM_ANNOTATION_RE.match(c.name)]
        if not comm and not len(trace.cpu_ts):
            rb.notes.append("no GPU activity and no CPU communication records")
            return rb
        comm_tids = {c.tid for c in comm}
        per[2] = [(c.ts, c.ts + c.dur) for c in comm]
        per[1] = [
            (s, s + d) for s, d, t in zip(trace.cpu_ts, trace.cpu_dur, trace.cpu_tid) if t not in comm_tids
        ]
        rb.events_used = len(per[1]) + len(per[2])
        rb.notes.append(
            "CPU-only trace: communication = backend work (gloo:/nccl: annotations) on its threads, "
            "compute = CPU operators on the other threads"
        )
    all_u = union(x for v in per.values() for x in v)
    if not all_u:
        rb.notes.append("no GPU activity left to analyse" if gpu else "no activity to analyse")
        return rb
    comp_u, comm_u, mem_u = union(per[1]), union(per[2]), union(per[4])
    rb.span_us = all_u[-1][1] - all_u[0][0]
    rb.busy_us = sum(e - s for s, e in all_u)
    rb.idle_us = rb.span_us - rb.busy_us
    rb.compute_us = sum(e - s for s, e in comp_u)
    rb.comm_us = sum(e - s for s, e in comm_u)
    rb.memory_us = sum(e - s for s, e in mem_u)
    rb.non_compute_us = max(0.0, rb.span_us - rb.idle_us - rb.compute_us)
    combos = exclusive_lengths_lists([comp_u, comm_u, mem_u] if gpu else [comp_u, comm_u])
    rb.overlap_us = sum(v for m, v in combos.items() if m & 1 and m & 2)
    rb.exposed_comm_us = sum(v for m, v in combos.items() if m & 2 and not m & 1)
    rb.kernel_types_us = {_combo_name(m): v for m, v in sorted(combos.items())}
    t0 = all_u[0][0]
    rb.timeline = {
        "compute": _downsample_lists(comp_u, t0, timeline_points),
        "comm": _downsample_lists(comm_u, t0, timeline_points),
    }
    if gpu and launch:
        rb.steps = _steps_lists(trace, per, launch)
    return rb


def _steps_lists(
    trace: KinetoTrace, per: dict[int, list[tuple[float, float]]], launch: dict[int, float]
) -> list[StepBreakdown]:
    # Re-walk the kept events with their launch times (same selection as _breakdown_lists).
    bits = [_TYPE_BITS.get(k, 0) for k in trace.kinds]
    import bisect

    by_step: dict[int, dict[int, list[tuple[float, float]]]] = {}
    windows = trace.steps  # sorted by step number; ProfilerSteps follow each other in time
    starts = [st for _, st, _ in windows]
    kept = {iv for v in per.values() for iv in v}
    launch_get, bisect_right = launch.get, bisect.bisect_right
    for s, d, c, n in zip(trace.ts, trace.dur, trace.corr, trace.name_id):
        lt = launch_get(c)
        if lt is None:
            continue
        iv = (s, s + d)
        if iv not in kept:
            continue
        j = bisect_right(starts, lt) - 1
        if j >= 0 and lt < windows[j][2]:
            by_step.setdefault(windows[j][0], {0: [], 1: [], 2: [], 4: []})[bits[n]].append(iv)
    out = []
    for num, _st, _en in windows:
        d = by_step.get(num)
        if not d:
            continue
        all_u = union(x for v in d.values() for x in v)
        comp_u, comm_u = union(d[1]), union(d[2])
        combos = exclusive_lengths_lists([comp_u, comm_u])
        span = all_u[-1][1] - all_u[0][0]
        out.append(
            StepBreakdown(
                num,
                span,
                sum(e - s for s, e in comp_u),
                sum(e - s for s, e in comm_u),
                combos.get(2, 0.0),
                span - sum(e - s for s, e in all_u),
            )
        )
    return out


def _downsample_lists(u: list[tuple[float, float]], t0: float, n: int) -> list[tuple[float, float]]:
    if len(u) > n:
        gap_min = (u[-1][1] - u[0][0]) / (4 * n)
        while len(u) > n:
            merged = [u[0]]
            for s, e in u[1:]:
                if s - merged[-1][1] < gap_min:
                    merged[-1] = (merged[-1][0], e)
                else:
                    merged.append((s, e))
            u = merged
            gap_min *= 2
    return [(round(a - t0, 3), round(b - t0, 3)) for a, b in u]


# -- collectives -----------------------------------------------------------------------------------


class CollectiveCall(msgspec.Struct):
    """One collective as one rank ran it."""

    rank: int | None
    pg: str
    seq: int
    op: str
    ts: float
    dur: float
    nbytes: int | None
    dtype: str | None
    group_size: int | None


def collectives_of(trace: KinetoTrace) -> list[CollectiveCall]:
    """The collectives of one rank: NCCL kernels on GPU traces, backend work on CPU traces."""
    items: list[tuple[float, float, str, dict[str, Any]]] = []
    if trace.has_gpu:
        for i in range(len(trace.ts)):
            nid = trace.name_id[i]
            if trace.kinds[nid] != COMM:
                continue
            meta = trace.coll_meta.get(i, {})
            name = meta.get("collective")
            if not name:
                m = _KERNEL_COLL.search(trace.names[nid])
                name = m.group(1) if m else trace.names[nid]
            items.append((trace.ts[i], trace.dur[i], name, meta))
    else:
        for c in trace.comm_records:
            if COMM_ANNOTATION_RE.match(c.name):
                items.append((c.ts, c.dur, c.name, c.meta))
    items.sort(key=lambda x: x[0])
    counters: dict[str, int] = defaultdict(int)
    out = []
    for ts, dur, name, meta in items:
        pg = str(meta.get("pg_name", "0"))
        seq = meta.get("seq")
        if not isinstance(seq, int):
            seq = counters[pg]
        counters[pg] += 1
        op = normalize_collective(name)
        n_el = meta.get("out_nelems") if op == "all_gather" else meta.get("in_nelems")
        if not isinstance(n_el, int):
            n_el = meta.get("in_nelems") if isinstance(meta.get("in_nelems"), int) else None
        dtype = meta.get("dtype") if isinstance(meta.get("dtype"), str) else None
        size = dtype_bytes(dtype)
        nbytes = n_el * size if isinstance(n_el, int) and size else None
        gs = meta.get("group_size")
        out.append(
            CollectiveCall(
                trace.rank,
                pg,
                seq,
                op,
                ts,
                dur,
                nbytes,
                dtype,
                gs if isinstance(gs, int) else trace.world_size,
            )
        )
    return out


class CollectiveGroup(msgspec.Struct):
    """One collective matched across ranks."""

    pg: str
    seq: int
    op: str
    nbytes: int | None
    dtype: str | None
    group_size: int | None
    calls: dict[int, CollectiveCall]
    mismatch: list[str] = msgspec.field(default_factory=list)

    @property
    def true_us(self) -> float:
        return min(c.dur for c in self.calls.values())

    @property
    def max_us(self) -> float:
        return max(c.dur for c in self.calls.values())

    @property
    def skew_us(self) -> float:
        starts = [c.ts for c in self.calls.values()]
        return max(starts) - min(starts)

    @property
    def last_rank(self) -> int | None:
        return max(self.calls.items(), key=lambda kv: kv[1].ts)[0] if len(self.calls) > 1 else None

    def algbw_gbs(self) -> float | None:
        t = self.true_us
        return self.nbytes / (t * 1e3) if self.nbytes and t > 0 else None

    def busbw_gbs(self) -> float | None:
        a = self.algbw_gbs()
        if a is None:
            return None
        return a * busbw_factor(self.op, self.group_size or len(self.calls))


def match_collectives(per_rank: dict[int, list[CollectiveCall]]) -> list[CollectiveGroup]:
    """Join the ranks' collectives by (process group, sequence number) and note mismatches."""
    groups: dict[tuple[str, int], CollectiveGroup] = {}
    for rank, calls in per_rank.items():
        for c in calls:
            key = (c.pg, c.seq)
            g = groups.get(key)
            if g is None:
                g = groups[key] = CollectiveGroup(c.pg, c.seq, c.op, c.nbytes, c.dtype, c.group_size, {})
            g.calls[rank] = c
    for g in groups.values():
        if len(g.calls) < 2:
            continue
        ops = {c.op for c in g.calls.values()}
        if len(ops) > 1:
            g.mismatch.append("collective type differs: " + _by_rank(g, "op"))
        sizes = {c.nbytes for c in g.calls.values() if c.nbytes is not None}
        if len(sizes) > 1 and ops <= {"all_reduce", "broadcast", "reduce"}:
            g.mismatch.append("size differs: " + _by_rank(g, "nbytes"))
        dts = {c.dtype.lower() for c in g.calls.values() if c.dtype}
        if len(dts) > 1:
            g.mismatch.append("dtype differs: " + _by_rank(g, "dtype"))
    return sorted(groups.values(), key=lambda g: (g.pg, g.seq))


def _by_rank(g: CollectiveGroup, attr: str) -> str:
    return ", ".join(f"rank {r}: {getattr(c, attr)}" for r, c in sorted(g.calls.items()))


class CollectiveSummary(msgspec.Struct):
    """Collectives of one type and size, aggregated (the size/bandwidth table)."""

    op: str
    nbytes: int | None
    dtype: str | None
    count: int
    ranks: int
    true_us_mean: float
    max_us_mean: float
    skew_us_mean: float
    skew_us_max: float
    algbw_gbs: float | None
    busbw_gbs: float | None

    def as_dict(self) -> dict[str, Any]:
        d = msgspec.structs.asdict(self)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 3)
        return d


def summarize_collectives(groups: Sequence[CollectiveGroup]) -> list[CollectiveSummary]:
    by: dict[tuple[str, int | None, str | None], list[CollectiveGroup]] = defaultdict(list)
    for g in groups:
        by[(g.op, g.nbytes, g.dtype)].append(g)
    out = []
    for (op, nbytes, dtype), gs in by.items():
        true = [g.true_us for g in gs]
        algs = [a for a in (g.algbw_gbs() for g in gs) if a is not None]
        buss = [b for b in (g.busbw_gbs() for g in gs) if b is not None]
        out.append(
            CollectiveSummary(
                op,
                nbytes,
                dtype,
                len(gs),
                max(len(g.calls) for g in gs),
                _mean(true),
                _mean(g.max_us for g in gs),
                _mean(g.skew_us for g in gs),
                max(g.skew_us for g in gs),
                _median(algs) if algs else None,
                _median(buss) if buss else None,
            )
        )
    out.sort(key=lambda s: (s.op, s.nbytes or 0))
    return out


class Straggler(msgspec.Struct):
    rank: int
    late_count: int
    matched: int
    mean_late_us: float  # mean of (its start − earliest start) where it was last

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "late_count": self.late_count,
            "matched": self.matched,
            "mean_late_us": round(self.mean_late_us, 3),
        }


def stragglers(groups: Sequence[CollectiveGroup], min_skew_us: float = 0.0) -> list[Straggler]:
    """How often each rank was the last to enter a matched collective (HTA's start-time metric)."""
    late: dict[int, list[float]] = defaultdict(list)
    matched = 0
    for g in groups:
        if len(g.calls) < 2 or g.skew_us <= min_skew_us:
            continue
        matched += 1
        r = g.last_rank
        if r is not None:
            late[r].append(g.skew_us)
    out = [Straggler(r, len(v), matched, _mean(v)) for r, v in late.items()]
    out.sort(key=lambda s: (-s.late_count, s.rank))
    return out


# -- hangs -----------------------------------------------------------------------------------------


class Hang(msgspec.Struct):
    """A stuck or mismatched collective and the ranks that caused it."""

    kind: str  # "not_joined", "lagging", "mismatch", "timeout", "pending"
    source: str
    group: str | None
    seq: int | None
    op: str | None
    culprit_ranks: tuple[int, ...]
    detail: str
    line: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in msgspec.structs.asdict(self).items()}


def hangs_from_nccl_logs(logs: Iterable[NcclLog]) -> list[Hang]:
    """Lagging ranks (lower last opCount on a communicator) and mismatched COLL records.

    Ranks are joined across all the logs given (one file per rank, or one interleaved file): a
    communicator is identified by its size (``[nranks=N]``), since each rank prints its own comm pointer.
    """
    logs = list(logs)
    out: list[Hang] = []
    last: dict[tuple[str, int], int] = {}
    recs: dict[tuple[str, int], dict[int, tuple[str, int, int]]] = defaultdict(dict)
    paths: list[str] = []
    for log in logs:
        if log.colls:
            paths.append(log.path)
        for c in log.colls:
            rank = log.rank_of_comm(c.comm, c.proc)
            if rank is None:
                continue
            gid = f"nranks={c.nranks}" if c.nranks else c.comm
            key = (gid, rank)
            if c.op_count >= last.get(key, -1):
                last[key] = c.op_count
            recs[(gid, c.op_count)][rank] = (c.op, c.count, c.datatype)
    source = ", ".join(paths)
    by_group: dict[str, dict[int, int]] = defaultdict(dict)
    for (gid, rank), opc in last.items():
        by_group[gid][rank] = opc
    for gid, ranks in by_group.items():
        if len(ranks) < 2:
            continue
        top = max(ranks.values())
        lag = tuple(sorted(r for r, v in ranks.items() if v < top))
        if lag:
            low = min(ranks.values())
            out.append(
                Hang(
                    "lagging",
                    source,
                    gid,
                    low,
                    None,
                    tuple(sorted(r for r, v in ranks.items() if v == low)),
                    f"last opCount per rank: {_fmt_counts(ranks)}; ranks {list(lag)} are behind (max 0x{top:x})",
                )
            )
    for (gid, opc), per in sorted(recs.items()):
        vals = set(per.values())
        if len(per) > 1 and len(vals) > 1:
            in_rank_order = [per[r] for r in sorted(per)]  # a tie goes to the lowest rank's value
            common = max(in_rank_order, key=in_rank_order.count)
            odd = tuple(sorted(r for r, v in per.items() if v != common))
            detail = "; ".join(
                f"rank {r}: {v[0]} count {v[1]} datatype {v[2]}" for r, v in sorted(per.items())
            )
            out.append(
                Hang(
                    "mismatch",
                    source,
                    gid,
                    opc,
                    common[0],
                    odd,
                    f"collective differs at opCount 0x{opc:x}: {detail}",
                )
            )
    for log in logs:
        out.extend(_watchdog_hangs(log))
    return out


def _fmt_counts(ranks: dict[int, int]) -> str:
    items = sorted(ranks.items())
    if len(items) > 16:
        items = items[:16]
    return ", ".join(f"{r}:0x{v:x}" for r, v in items) + (" …" if len(ranks) > 16 else "")


def _watchdog_hangs(log: NcclLog) -> list[Hang]:
    out = []
    if log.watchdog_timeouts:
        seqs = defaultdict(list)
        for w in log.watchdog_timeouts:
            seqs[(w.seq, w.op)].append(w)
        for (seq, op), ws in sorted(seqs.items()):
            ranks = tuple(sorted({w.rank for w in ws if w.rank is not None}))
            t = ws[0]
            out.append(
                Hang(
                    "timeout",
                    log.path,
                    None,
                    seq,
                    op,
                    (),
                    f"watchdog timeout on {op} SeqNum={seq}"
                    + (f" after {t.ran_ms} ms (timeout {t.timeout_ms} ms)" if t.ran_ms else "")
                    + (f", reported by ranks {list(ranks)}" if ranks else "")
                    + "; the culprit is a rank that never reached this collective (not one that reports it)",
                    t.line,
                )
            )
    for s in log.watchdog_status:
        if s.last_enqueued > s.last_completed:
            out.append(
                Hang(
                    "pending",
                    log.path,
                    None,
                    s.seq,
                    None,
                    (),
                    f"rank {s.rank if s.rank is not None else '?'}: work {s.seq} failed; last enqueued "
                    f"{s.last_enqueued}, last completed {s.last_completed} "
                    f"({s.last_enqueued - max(s.last_completed, 0)} queued but unfinished)",
                    s.line,
                )
            )
    return out


def hangs_from_flight_recorder(items: Iterable[FrDump | FrTraceReport]) -> list[Hang]:
    """Missing ranks and mismatches across Flight Recorder dumps of several ranks, and torchfrtrace reports."""
    items = list(items)
    if not items:
        return []  # without importing the Flight Recorder parser
    from clusterdoctor.observe.flight_recorder import FrTraceReport

    out: list[Hang] = []
    dumps: list[FrDump] = []
    for it in items:
        if isinstance(it, FrTraceReport):
            for m in it.mismatches:
                out.append(
                    Hang(
                        "not_joined" if m.kind == "not all ranks joining" else "mismatch",
                        it.path,
                        m.group,
                        m.collective_seq_id,
                        m.collective,
                        m.missing_ranks,
                        f"torchfrtrace: {m.kind}"
                        + (f" collective {m.collective_seq_id}" if m.collective_seq_id is not None else "")
                        + (f" ({m.collective})" if m.collective else "")
                        + (f"; missing ranks {set(m.missing_ranks)}" if m.missing_ranks else "")
                        + (f"; expected ranks {m.expected_ranks}" if m.expected_ranks else "")
                        + (f"; state {m.state}" if m.state else ""),
                        m.line,
                    )
                )
        else:
            dumps.append(it)
    ranked = [d for d in dumps if d.rank is not None]
    if len(ranked) >= 2:
        out.extend(_fr_cross_rank(ranked))
    for d in dumps:
        for pg, st in d.pg_status.items():
            enq, comp = st.get("last_enqueued_collective"), st.get("last_completed_collective")
            if isinstance(enq, int) and isinstance(comp, int) and enq > comp:
                out.append(
                    Hang(
                        "pending",
                        d.path,
                        pg,
                        comp + 1,
                        None,
                        (),
                        f"rank {d.rank if d.rank is not None else '?'}, process group {pg}: last enqueued "
                        f"collective {enq}, last completed {comp}",
                    )
                )
    return out


def _fr_cross_rank(dumps: list[FrDump]) -> list[Hang]:
    out: list[Hang] = []
    per_pg: dict[str, dict[int, dict[int, Any]]] = defaultdict(lambda: defaultdict(dict))
    expected: dict[str, set[int]] = {}
    for d in dumps:
        for e in d.entries:
            if e.is_p2p or e.collective_seq_id is None:
                continue
            pg = e.pg_name or str(e.pg_id)
            per_pg[pg][d.rank][e.collective_seq_id] = e  # type: ignore[index]
            ranks = d.pg_ranks(pg)
            if ranks:
                expected[pg] = set(ranks)
    for pg, by_rank in per_pg.items():
        exp = expected.get(pg, set(by_rank))
        max_seq = {r: max(s) for r, s in by_rank.items()}
        all_seqs = sorted({s for s in (k for v in by_rank.values() for k in v)})
        reported = False
        for seq in all_seqs:
            present = {r for r, v in by_rank.items() if seq in v}
            # A rank is missing when it has a dump but never reached this sequence number, or has no dump.
            missing = tuple(
                sorted(r for r in exp if r not in present and (r not in max_seq or max_seq[r] < seq))
            )
            entries = [by_rank[r][seq] for r in sorted(present)]
            if missing and not reported:
                e0 = entries[0]
                out.append(
                    Hang(
                        "not_joined",
                        ", ".join(sorted({d.path for d in dumps})),
                        pg,
                        seq,
                        e0.profiling_name,
                        missing,
                        f"not all ranks joined collective {seq} ({e0.profiling_name}) of group {pg}: "
                        f"missing ranks {set(missing)}; state on the others: {sorted({x.state or '?' for x in entries})}",
                    )
                )
                reported = True
            names = {x.profiling_name for x in entries}
            sizes = {repr(x.input_sizes) for x in entries}
            dts = {repr(x.input_dtypes) for x in entries}
            if len(entries) > 1 and (len(names) > 1 or len(sizes) > 1 or len(dts) > 1):
                what = "type" if len(names) > 1 else ("size" if len(sizes) > 1 else "dtype")
                out.append(
                    Hang(
                        "mismatch",
                        ", ".join(sorted({d.path for d in dumps})),
                        pg,
                        seq,
                        entries[0].profiling_name,
                        _odd_ranks(
                            {
                                r: (
                                    by_rank[r][seq].profiling_name,
                                    repr(by_rank[r][seq].input_sizes),
                                    repr(by_rank[r][seq].input_dtypes),
                                )
                                for r in present
                            }
                        ),
                        f"collective {seq} of group {pg}: {what} mismatch across ranks",
                    )
                )
    return out


def _odd_ranks(per: dict[int, Any]) -> tuple[int, ...]:
    """The ranks whose value differs from the most common one (a tie goes to the lowest rank's value,
    so that the result does not depend on set order, which varies between runs)."""
    vals = [per[r] for r in sorted(per)]
    common = max(vals, key=vals.count)
    return tuple(sorted(r for r, v in per.items() if v != common))


# -- init timings ----------------------------------------------------------------------------------


class InitOutlier(msgspec.Struct):
    rank: int
    total_s: float
    median_s: float
    parts: dict[str, float]
    source: str
    line: int | None


def init_outliers(
    logs: Iterable[NcclLog], *, factor: float = 2.0, min_excess_s: float = 1.0
) -> list[InitOutlier]:
    """Ranks whose ``Init timings`` total exceeds ``factor`` × the median and the median by ``min_excess_s``."""
    out = []
    for log in logs:
        tim = log.init_timings
        if len(tim) < 3:
            continue
        med = _median(t.total_s for t in tim)
        for t in tim:
            if t.total_s > factor * med and t.total_s - med >= min_excess_s:
                out.append(InitOutlier(t.rank, t.total_s, med, t.parts, log.path, t.line))
    return out


# -- everything ------------------------------------------------------------------------------------


class CommAnalysis(msgspec.Struct):
    """The result of analysing every communication source given."""

    ranks: list[RankBreakdown] = msgspec.field(default_factory=list)
    groups: list[CollectiveGroup] = msgspec.field(default_factory=list)
    collectives: list[CollectiveSummary] = msgspec.field(default_factory=list)
    stragglers: list[Straggler] = msgspec.field(default_factory=list)
    hangs: list[Hang] = msgspec.field(default_factory=list)
    init_outliers: list[InitOutlier] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)

    def mismatches(self) -> list[CollectiveGroup]:
        return [g for g in self.groups if g.mismatch]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ranks": [r.as_dict() for r in self.ranks],
            "collectives": [c.as_dict() for c in self.collectives],
            "collective_mismatches": [
                {"pg": g.pg, "seq": g.seq, "op": g.op, "problems": g.mismatch} for g in self.mismatches()
            ],
            "stragglers": [s.as_dict() for s in self.stragglers],
            "hangs": [h.as_dict() for h in self.hangs],
        }


def analyze_comm(
    traces: Sequence[KinetoTrace] = (),
    nccl_logs: Sequence[NcclLog] = (),
    flight_recorder: Sequence[FrDump | FrTraceReport] = (),
) -> CommAnalysis:
    """Run every analysis the given sources allow."""
    a = CommAnalysis()
    per_rank: dict[int, list[CollectiveCall]] = {}
    seen: set[int] = set()
    total = sum(_list_cost(t) for t in traces)
    for i, t in enumerate(sorted(traces, key=lambda t: (t.rank is None, t.rank or 0, t.path))):
        rb = rank_breakdown(t, vectorized=_vectorize(_list_cost(t), total))
        rank = t.rank if t.rank is not None else -(i + 1)
        if rank in seen:
            rank = -(i + 1)
            a.warnings.append(
                f"{t.path}: a second trace for rank {t.rank}; kept apart (key {rank}) and not matched with the others"
            )
        seen.add(rank)
        a.ranks.append(rb)
        per_rank.setdefault(rank, []).extend(collectives_of(t))
    a.groups = match_collectives(per_rank)
    a.collectives = summarize_collectives(a.groups)
    if len(per_rank) > 1:
        a.stragglers = stragglers(a.groups)
    a.hangs = hangs_from_nccl_logs(nccl_logs) + hangs_from_flight_recorder(flight_recorder)
    for g in a.mismatches():
        ranks = _odd_ranks({r: (c.op, c.nbytes, c.dtype) for r, c in g.calls.items()})
        a.hangs.append(Hang("mismatch", "traces", g.pg, g.seq, g.op, ranks, "; ".join(g.mismatch)))
    a.init_outliers = init_outliers(nccl_logs)
    return a
