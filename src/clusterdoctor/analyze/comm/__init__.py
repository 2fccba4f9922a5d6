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
    "analyze_comm",
    "collectives_of",
    "dtype_bytes",
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
