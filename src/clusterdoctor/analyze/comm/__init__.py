"""Communication analysis: per-rank time breakdown, collectives across ranks, stragglers and hangs.

One module per analysis: :mod:`.breakdown` (per rank and per step, HTA's definitions and where we
differ), :mod:`.collectives` (matched across ranks, true time, skew, bandwidth, stragglers),
:mod:`.hangs` (NCCL logs, watchdog lines, Flight Recorder), :mod:`.init_timings`; :func:`analyze_comm`
runs every analysis the sources allow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from clusterdoctor.analyze.comm.breakdown import (
    CPU_EVENT_WEIGHT,
    NUMPY_IMPORT_EVENTS,
    SMALL_TRACE_EVENTS,
    RankBreakdown,
    StepBreakdown,
    _list_cost,
    _vectorize,
    rank_breakdown,
)
from clusterdoctor.analyze.comm.collectives import (
    CollectiveCall,
    CollectiveGroup,
    CollectiveSummary,
    Straggler,
    collectives_of,
    match_collectives,
    stragglers,
    summarize_collectives,
)
from clusterdoctor.analyze.comm.common import DTYPE_BYTES, dtype_bytes, normalize_collective
from clusterdoctor.analyze.comm.hangs import (
    Hang,
    _odd_ranks,
    hangs_from_flight_recorder,
    hangs_from_nccl_logs,
)
from clusterdoctor.analyze.comm.init_timings import InitOutlier, init_outliers
from clusterdoctor.analyze.comm.jobs import TraceJob, group_traces
from clusterdoctor.observe.comm.kineto import KinetoTrace

if TYPE_CHECKING:  # parsers of the other sources are imported only when their data is analysed
    from clusterdoctor.observe.comm.flight_recorder import FrDump, FrTraceReport
    from clusterdoctor.observe.comm.nccl_log import NcclLog

__all__ = [
    "CPU_EVENT_WEIGHT",
    "CollectiveCall",
    "CollectiveGroup",
    "CollectiveSummary",
    "CommAnalysis",
    "DTYPE_BYTES",
    "Hang",
    "InitOutlier",
    "NUMPY_IMPORT_EVENTS",
    "RankBreakdown",
    "SMALL_TRACE_EVENTS",
    "StepBreakdown",
    "Straggler",
    "TraceJob",
    "analyze_comm",
    "collectives_of",
    "dtype_bytes",
    "group_traces",
    "hangs_from_flight_recorder",
    "hangs_from_nccl_logs",
    "init_outliers",
    "match_collectives",
    "normalize_collective",
    "rank_breakdown",
    "stragglers",
    "summarize_collectives",
]


class CommAnalysis(msgspec.Struct):
    """The result of analysing every communication source given."""

    ranks: list[RankBreakdown] = msgspec.field(default_factory=list)
    groups: list[CollectiveGroup] = msgspec.field(default_factory=list)
    collectives: list[CollectiveSummary] = msgspec.field(default_factory=list)
    stragglers: list[Straggler] = msgspec.field(default_factory=list)
    hangs: list[Hang] = msgspec.field(default_factory=list)
    init_outliers: list[InitOutlier] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    jobs: list[TraceJob] = msgspec.field(default_factory=list)

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
            "jobs": [
                {
                    "job": j.label,
                    "ranks": {str(r): t.path for r, t in j.ranks.items()},
                    "not_compared": [t.path for t in j.unmatched],
                    "duplicate_ranks": {str(r): ps for r, ps in j.duplicate_ranks.items()},
                    "copies": dict(j.copies),
                    "partial": j.partial,
                }
                for j in self.jobs
            ],
        }


def analyze_comm(
    traces: Sequence[KinetoTrace] = (),
    nccl_logs: Sequence[NcclLog] = (),
    flight_recorder: Sequence[FrDump | FrTraceReport] = (),
) -> CommAnalysis:
    """Run every analysis the given sources allow. Traces are compared across ranks only within their
    job (:func:`~clusterdoctor.analyze.comm.jobs.group_traces`)."""
    a = CommAnalysis()
    jobs, a.warnings = group_traces(traces)
    a.jobs = jobs
    total = sum(_list_cost(t) for t in traces)
    for job in jobs:
        per_rank: dict[int, list[CollectiveCall]] = {}
        for rank, t in job.ranks.items():
            a.ranks.append(_breakdown(t, total, job, compared=True))
            per_rank[rank] = collectives_of(t)
        for t in job.unmatched:
            a.ranks.append(_breakdown(t, total, job, compared=False))
        groups = match_collectives(per_rank)
        a.groups.extend(groups)
        if len(per_rank) > 1:
            for s in stragglers(groups):
                s.partial, s.job = job.partial, job.label
                a.stragglers.append(s)
        source = ", ".join(t.path for t in job.ranks.values())
        for g in groups:
            if g.mismatch:
                ranks = _odd_ranks({r: (c.op, c.nbytes, c.dtype) for r, c in g.calls.items()})
                a.hangs.append(
                    Hang(
                        "mismatch",
                        source,
                        g.pg,
                        g.seq,
                        g.op,
                        ranks,
                        "; ".join(g.mismatch),
                        partial=job.partial,
                    )
                )
    a.ranks.sort(key=lambda rb: (rb.rank is None, rb.rank if rb.rank is not None else 0, rb.source))
    a.stragglers.sort(key=lambda s: (-s.late_count, s.rank))
    a.collectives = summarize_collectives(a.groups)
    a.hangs = hangs_from_nccl_logs(nccl_logs) + hangs_from_flight_recorder(flight_recorder) + a.hangs
    a.init_outliers = init_outliers(nccl_logs)
    return a


def _breakdown(t: KinetoTrace, total: int, job: TraceJob, compared: bool) -> RankBreakdown:
    rb = rank_breakdown(t, vectorized=_vectorize(_list_cost(t), total))
    rb.truncated, rb.events_read, rb.job, rb.compared = t.truncated, t.events_read, job.label, compared
    return rb
