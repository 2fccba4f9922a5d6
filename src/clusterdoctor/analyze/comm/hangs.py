"""Hangs and mismatches, with the culprit rank.

Hangs: NCCL COLL opCounts per rank and communicator, watchdog SeqNum lines, Flight Recorder
dumps (who never joined a collective, mismatched op/size/dtype) and ``torchfrtrace`` reports.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:  # parsers of the other sources are imported only when their data is analysed
    from clusterdoctor.observe.comm.flight_recorder import FrDump, FrTraceReport
    from clusterdoctor.observe.comm.nccl_log import NcclLog


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
    from clusterdoctor.observe.comm.flight_recorder import FrTraceReport

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
