"""Collectives matched across ranks: true time, skew, algbw/busbw, stragglers.

Across ranks: collectives are matched by (process group, sequence number — the ``Seq`` argument
when present, else their order in the group), then ``true time`` = the shortest duration among
ranks (the part all ranks spent communicating; TraceLens' NcclAnalyser takes the same minimum),
``skew`` = latest start − earliest start, and algbw/busbw with nccl-tests' factors
(doc/PERFORMANCE.md). Timestamps of different hosts come from unsynchronised clocks, so skew is
only meaningful for ranks on one host or with synchronised clocks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec

from clusterdoctor.analyze.busbw import busbw_factor
from clusterdoctor.analyze.comm.common import (
    KERNEL_COLLECTIVE_RE,
    dtype_bytes,
    mean_of,
    median_of,
    normalize_collective,
)
from clusterdoctor.observe.comm.kineto import COMM, COMM_ANNOTATION_RE, KinetoTrace


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
                m = KERNEL_COLLECTIVE_RE.search(trace.names[nid])
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
                mean_of(true),
                mean_of(g.max_us for g in gs),
                mean_of(g.skew_us for g in gs),
                max(g.skew_us for g in gs),
                median_of(algs) if algs else None,
                median_of(buss) if buss else None,
            )
        )
    out.sort(key=lambda s: (s.op, s.nbytes or 0))
    return out


class Straggler(msgspec.Struct):
    rank: int
    late_count: int
    matched: int
    mean_late_us: float  # mean of (its start − earliest start) where it was last
    partial: bool = False  # a trace of its job is truncated
    job: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "late_count": self.late_count,
            "matched": self.matched,
            "mean_late_us": round(self.mean_late_us, 3),
            "partial": self.partial,
            "job": self.job,
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
    out = [Straggler(r, len(v), matched, mean_of(v)) for r, v in late.items()]
    out.sort(key=lambda s: (-s.late_count, s.rank))
    return out
