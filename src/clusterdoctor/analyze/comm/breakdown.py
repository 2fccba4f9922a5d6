"""Per-rank time breakdown of a Kineto trace: compute, communication, exposed communication, idle.

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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from clusterdoctor.analyze.intervals import exclusive_lengths, exclusive_lengths_lists, union, union_arrays
from clusterdoctor.observe.comm.kineto import COMM, COMM_ANNOTATION_RE, COMPUTE, MEMORY, KinetoTrace


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
    truncated: bool = False  # the trace file ends early: a partial input
    events_read: int = 0
    job: str = ""  # the job it belongs to (analyze.comm.jobs)
    compared: bool = True  # matched with the other ranks of its job (False: duplicate or unknown rank)

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
            "events_read": self.events_read,
            "truncated": self.truncated,
            "job": self.job,
            "compared_across_ranks": self.compared,
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
