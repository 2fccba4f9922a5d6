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
    """A stuck or mismatched collective and the ranks that caused it.

    ``kind``: ``not_joined`` (ranks missing from a collective), ``lagging`` (ranks behind on a
    communicator), ``mismatch`` (ranks called different collectives), ``timeout`` (a watchdog or gloo
    timeout), ``rendezvous`` (the process group never formed: TCPStore/rendezvous timeouts),
    ``peer_lost`` (a peer closed its connection), ``pending`` (work enqueued but not completed).
    ``reporters`` are the ranks whose logs report it (victims, for a timeout); ``culprit_ranks`` the
    ranks that caused it, when the inputs say; ``missing`` ranks of the group that did not report it.
    ``first_collective``: no collective of the group ever completed (``last completed work: -1``, or
    SeqNum 1): the job never communicated, so the cause is rendezvous, topology, the network or a rank
    that never arrived, not a slow step. ``locations`` are ``path:line`` of every line it rests on.
    """

    kind: str
    source: str
    group: str | None
    seq: int | None
    op: str | None
    culprit_ranks: tuple[int, ...]
    detail: str
    line: int | None = None
    reporters: tuple[int, ...] = ()
    missing: tuple[int, ...] = ()
    group_size: int | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    first_collective: bool = False
    locations: tuple[str, ...] = ()
    partial: bool = False  # built from a truncated input
    op_kind: str | None = None  # the source's own kind where it refines ``kind`` ("desync")

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
    out.extend(_with_desync(watchdog_hangs(logs), dist_error_hangs(logs)))
    return out


def _with_desync(timeouts: list[Hang], errors: list[Hang]) -> list[Hang]:
    """A desync report (TORCH_NCCL_DESYNC_DEBUG) explains the watchdog timeout of the rank that printed
    it: its lagging/dead ranks become that timeout's culprits, and the report is not a finding of its own.
    A report whose timeout line is not in the logs stays one (``not_joined``)."""
    desync = [h for h in errors if h.op_kind == "desync"]
    if not desync:
        return [*timeouts, *errors]
    used: set[int] = set()
    for d in desync:
        for t in timeouts:
            if t.kind != "timeout" or not set(d.reporters) <= set(t.reporters) or not d.reporters:
                continue
            if not t.culprit_ranks:
                t.culprit_ranks = d.culprit_ranks
            t.detail += f"; {d.detail}"
            t.locations = tuple(dict.fromkeys((*t.locations, *d.locations)))
            used.add(id(d))
            break
    return [*timeouts, *(h for h in errors if id(h) not in used)]


def _fmt_counts(ranks: dict[int, int]) -> str:
    items = sorted(ranks.items())
    if len(items) > 16:
        items = items[:16]
    return ", ".join(f"{r}:0x{v:x}" for r, v in items) + (" …" if len(ranks) > 16 else "")


def ranks_label(ranks: Iterable[int]) -> str:
    """``rank 3``, ``ranks 0, 2, 5`` or ``ranks 0-127`` (runs of consecutive ranks joined)."""
    rs = sorted(set(ranks))
    if not rs:
        return "unknown rank"
    if len(rs) == 1:
        return f"rank {rs[0]}"
    parts: list[str] = []
    start = prev = rs[0]
    for r in [*rs[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(
            str(start) if start == prev else (f"{start}, {prev}" if prev == start + 1 else f"{start}-{prev}")
        )
        if r is not None:
            start = prev = r
    return "ranks " + ", ".join(parts)


# Collectives whose element counts give the group size: all-gather out = in x n, reduce-scatter in = out x n.
_GATHER_OPS = ("ALLGATHER", "_ALLGATHER_BASE", "ALLGATHER_COALESCED", "ALLGATHER_INTO_TENSOR_COALESCED")
_SCATTER_OPS = ("REDUCE_SCATTER", "_REDUCE_SCATTER_BASE", "REDUCESCATTER", "REDUCE_SCATTER_TENSOR_COALESCED")


def _group_size_from_numel(op: str, numel_in: int | None, numel_out: int | None) -> int | None:
    if not numel_in or not numel_out:
        return None
    if op.upper() in _GATHER_OPS and numel_out % numel_in == 0:
        return numel_out // numel_in
    if op.upper() in _SCATTER_OPS and numel_in % numel_out == 0:
        return numel_in // numel_out
    return None


def watchdog_hangs(logs: Iterable[NcclLog]) -> list[Hang]:
    """ProcessGroupNCCL watchdog timeouts across every log given (one per rank, or interleaved).

    The same timeout is one Hang however many files show it (a torchrun console and its ``--tee``
    files); its ``locations`` list them all. Lines are grouped by process group (from the status lines'
    ``[PG n Rank r]``; watchdog lines do not carry it) and SeqNum; ranks that report different OpTypes
    at one SeqNum called different collectives (a mismatch, the minority being the culprit).
    """
    logs = list(logs)
    status: dict[tuple[int | None, int | None], list[tuple[Any, str]]] = defaultdict(list)
    for log in logs:
        for st in log.watchdog_status:
            status[(st.rank, st.seq)].append((st, log.path))
    nranks = [log.nranks for log in logs if log.nranks]
    comm_size = max(nranks) if nranks else None
    by_seq: dict[int | None, list[tuple[Any, str, str | None]]] = defaultdict(list)
    used_status: set[int] = set()
    for log in logs:
        for w in log.watchdog_timeouts:
            sts = status.get((w.rank, w.seq), []) + status.get((w.rank, None), [])
            pg = next((st.pg for st, _ in sts if st.pg is not None), None)
            by_seq[w.seq].append((w, log.path, pg))
    # One unit per collective instance: ranks at one SeqNum with the same (op, sizes). Different
    # collectives at one SeqNum are a mismatch unless the status lines put them on different groups.
    units: list[tuple[str | None, int | None, list[tuple[Any, str]], bool]] = []
    for seq, found in sorted(by_seq.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        clusters: dict[tuple[str, int | None, int | None], list[tuple[Any, str, str | None]]] = defaultdict(
            list
        )
        for w, path, pg in found:
            clusters[(w.op, w.numel_in, w.numel_out)].append((w, path, pg))
        pgs = [{pg for _, _, pg in c if pg is not None} for c in clusters.values()]
        apart = all(len(x) == 1 for x in pgs) and len(set().union(*pgs)) == len(pgs)
        if len(clusters) == 1 or apart:
            for c, known in zip(clusters.values(), pgs, strict=True):
                units.append(
                    (next(iter(known)) if len(known) == 1 else None, seq, [(w, p) for w, p, _ in c], False)
                )
        else:
            labels = {pg for _, _, pg in found}
            pg = next(iter(labels)) if len(labels) == 1 else None  # named only when every rank's is known
            units.append((pg, seq, [(w, p) for w, p, _ in found], True))
    out: list[Hang] = []
    for pg, seq, items, mismatch in units:
        locs: list[str] = []
        by_rank: dict[int | None, Any] = {}
        for w, path in items:
            locs.append(f"{path}:{w.line}")
            by_rank.setdefault(w.rank, w)
        sts = []
        for r in by_rank:
            for st, path in status.get((r, seq), []) + status.get((r, None), []):
                if id(st) not in used_status:
                    used_status.add(id(st))
                    sts.append(st)
                    locs.append(f"{path}:{st.line}")
        # Ranks whose watchdog line is not in the logs but whose status line names this work.
        for (r, s_seq), found_st in status.items():
            if s_seq != seq or r in by_rank:
                continue
            for st, path in found_st:
                if id(st) not in used_status and (pg is None or st.pg in (None, pg)):
                    used_status.add(id(st))
                    sts.append(st)
                    locs.append(f"{path}:{st.line}")
        reporters = tuple(
            sorted({r for r in by_rank if r is not None} | {st.rank for st in sts if st.rank is not None})
        )
        ops = {w.op for w in by_rank.values()}
        w0 = next(iter(by_rank.values()))
        pg_label = f"process group {pg}" if pg is not None else "its process group"
        if mismatch:
            per = {r: (w.op, w.numel_in) for r, w in by_rank.items() if r is not None}
            values = list(per.values())
            common = max(values, key=values.count) if values else None
            # A culprit only when most ranks agree (with two ranks, either may be the odd one).
            odd = _odd_ranks(per) if values and values.count(common) * 2 > len(values) else ()
            detail = "; ".join(
                f"rank {r}: {w.op}" + (f" ({w.numel_in} elements)" if w.numel_in is not None else "")
                for r, w in sorted(by_rank.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
            )
            out.append(
                Hang(
                    "mismatch",
                    items[0][1],
                    pg,
                    seq,
                    "/".join(sorted(ops)),  # e.g. "ALLREDUCE/BROADCAST"
                    odd,
                    f"ranks called different collectives at SeqNum {seq} of {pg_label}: {detail}"
                    + (
                        ""
                        if pg is not None
                        else " (the watchdog lines do not name the process group: if these ranks "
                        "are on different groups, the SeqNums are unrelated)"
                    ),
                    w0.line,
                    reporters=reporters,
                    timeout_ms=w0.timeout_ms,
                    locations=tuple(locs),
                )
            )
            continue
        op = w0.op
        size = _group_size_from_numel(op, w0.numel_in, w0.numel_out)
        if size is None and (pg in (None, "0")) and comm_size:
            size = comm_size
        missing: tuple[int, ...] = ()
        if size and reporters and pg in (None, "0") and max(reporters) < size:
            missing = tuple(r for r in range(size) if r not in by_rank)
        elif not size and len(reporters) >= MIN_REPORTERS_FOR_GAPS and pg in (None, "0"):
            # the default group holds ranks 0..N-1: ranks below the highest reporter exist, and the ones
            # that did not report the timeout are the suspects (never reached it, died, or not pasted)
            missing = tuple(r for r in range(max(reporters)) if r not in reporters)
        completed = [st.last_completed for st in sts]
        enqueued = [st.last_enqueued for st in sts]
        never = bool(completed) and min(completed) < 0
        first = never or seq == 1
        lagging: tuple[int, ...] = ()
        if completed and len({st.last_completed for st in sts}) > 1:
            low = min(completed)
            lagging = tuple(
                sorted({st.rank for st in sts if st.last_completed == low and st.rank is not None})
            )
        ran = max((w.ran_ms for w in by_rank.values() if w.ran_ms is not None), default=None)
        numel = f", NumelIn={w0.numel_in}, NumelOut={w0.numel_out}" if w0.numel_in is not None else ""
        seq_txt = f" SeqNum={seq}" if seq is not None else ""
        parts = [
            f"{op}{seq_txt}{numel} of {pg_label} timed out"
            + (f" after {ran} ms (timeout {w0.timeout_ms} ms)" if ran is not None else "")
            + (f" on {ranks_label(reporters)}" if reporters else "")
        ]
        if completed:
            parts.append(
                f"last enqueued work {max(enqueued)}, last completed {min(completed)}"
                + (f" ({ranks_label(lagging)} behind the others)" if lagging else "")
            )
        if first:
            parts.append(
                "no collective of this group ever completed"
                if never
                else "it is the first collective of this group"
            )
        if missing:
            of = f" of the {size}" if size else ""
            parts.append(
                f"{ranks_label(missing)}{of} did not report it in these logs (never reached it, "
                "died earlier, or their logs are not here)"
            )
        elif size and reporters and len(reporters) == size:
            parts.append(
                f"all {size} ranks reported it: every rank arrived and the collective did not progress"
            )
        out.append(
            Hang(
                "timeout",
                items[0][1],
                pg,
                seq,
                op,
                lagging,
                "; ".join(parts),
                w0.line,
                reporters=reporters,
                missing=missing,
                group_size=size,
                numel_in=w0.numel_in,
                numel_out=w0.numel_out,
                timeout_ms=w0.timeout_ms,
                ran_ms=ran,
                last_enqueued=max(enqueued) if enqueued else None,
                last_completed=min(completed) if completed else None,
                first_collective=first,
                locations=tuple(locs),
            )
        )
    # Status lines without a watchdog line (only the dump-signal or status line was kept).
    rest: dict[tuple[int | None, int], list[tuple[Any, str]]] = defaultdict(list)
    for sts in status.values():
        for st, path in sts:
            if id(st) not in used_status and st.last_enqueued > st.last_completed:
                rest[(st.last_enqueued, st.last_completed)].append((st, path))
    for (enq, comp), sts2 in sorted(rest.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
        ranks = tuple(sorted({st.rank for st, _ in sts2 if st.rank is not None}))
        st0, p0 = sts2[0]
        never = comp < 0
        out.append(
            Hang(
                "pending",
                p0,
                st0.pg,
                st0.seq if st0.seq is not None else comp + 1,
                None,
                (),
                f"{ranks_label(ranks) if ranks else 'a rank'}: last enqueued work {enq}, last completed {comp} "
                f"({enq - max(comp, 0)} queued but unfinished)"
                + ("; no collective of this group ever completed" if never else ""),
                st0.line,
                reporters=ranks,
                last_enqueued=enq,
                last_completed=comp,
                first_collective=never,
                locations=tuple(f"{p}:{st.line}" for st, p in sts2),
            )
        )
    return out


# Two ranks reporting a timeout at one SeqNum (and none of the group's size known) are enough to name
# the lower ranks that did not report it as suspects; one reporter is not (a paste of one rank's line).
MIN_REPORTERS_FOR_GAPS = 2


def dist_error_hangs(logs: Iterable[NcclLog]) -> list[Hang]:
    """gloo, TCPStore and rendezvous failures, one Hang per failure however many files show it."""
    merged: dict[tuple[Any, ...], list[tuple[Any, str]]] = defaultdict(list)
    for log in logs:
        for e in log.dist_errors:
            merged[(e.kind, e.rank, e.op, e.ranks, e.peer, e.joined)].append((e, log.path))
    barrier_culprits = tuple(
        sorted(
            {
                r
                for (kind, *_), es in merged.items()
                if kind == "monitored_barrier"
                for e, _ in es
                for r in e.ranks
            }
        )
    )
    out: list[Hang] = []
    for (kind, rank, op, ranks, peer, _joined), items in merged.items():
        e, path = items[0]
        locs = tuple(f"{p}:{x.line}" for x, p in items)
        who = f"rank {rank}" if rank is not None else "a rank"
        reporters = (rank,) if rank is not None else ()
        if kind == "gloo_timeout":
            detail = (
                f"{who} timed out after {e.timeout_ms} ms waiting for a gloo {op}: a peer never sent its part "
                "(it never reached the collective, is stuck before it, or died)"
            )
            if barrier_culprits:
                detail += f"; TORCH_DISTRIBUTED_DEBUG=DETAIL names {ranks_label(barrier_culprits)}"
            out.append(
                Hang(
                    "timeout",
                    path,
                    None,
                    None,
                    f"gloo {op}",
                    barrier_culprits,
                    detail,
                    e.line,
                    reporters=reporters,
                    timeout_ms=e.timeout_ms,
                    locations=locs,
                )
            )
        elif kind == "monitored_barrier":
            out.append(
                Hang(
                    "not_joined",
                    path,
                    None,
                    None,
                    "monitoredBarrier",
                    ranks,
                    f"{ranks_label(ranks)} did not reach gloo's monitoredBarrier within {e.timeout_ms} ms "
                    f"(reported by {who}, TORCH_DISTRIBUTED_DEBUG=DETAIL): they never arrived at the collective",
                    e.line,
                    reporters=reporters,
                    timeout_ms=e.timeout_ms,
                    locations=locs,
                )
            )
        elif kind == "store_wait":
            detail = (
                f"{who} waited {e.timeout_ms} ms for the TCPStore key(s) {e.text} while creating the process "
                "group: "
                + (
                    f"{ranks_label(ranks)} never published its address (the last key component is the peer's rank)"
                    if ranks
                    else "a peer never published its address"
                )
            )
            out.append(
                Hang(
                    "rendezvous",
                    path,
                    None,
                    None,
                    "init_process_group",
                    ranks,
                    detail,
                    e.line,
                    reporters=reporters,
                    timeout_ms=e.timeout_ms,
                    first_collective=True,
                    locations=locs,
                )
            )
        elif kind in ("store_clients", "store_barrier"):
            missing_n = (e.world_size or 0) - (e.joined or 0)
            out.append(
                Hang(
                    "rendezvous",
                    path,
                    None,
                    None,
                    "init_process_group",
                    (),
                    f"only {e.joined} of {e.world_size} ranks joined the rendezvous"
                    + (f" within {e.timeout_ms // 1000} s" if e.timeout_ms else "")
                    + f" ({missing_n} never arrived: not started, crashed, or cannot reach the store)",
                    e.line,
                    reporters=reporters,
                    group_size=e.world_size,
                    timeout_ms=e.timeout_ms,
                    first_collective=True,
                    locations=locs,
                )
            )
        elif kind == "store_connect":
            out.append(
                Hang(
                    "rendezvous",
                    path,
                    None,
                    None,
                    "init_process_group",
                    (),
                    f"{who} could not connect to the rendezvous store at {peer} within {e.timeout_ms} ms "
                    "(MASTER_ADDR/MASTER_PORT wrong, the store's host not up yet, or a firewall)",
                    e.line,
                    reporters=reporters,
                    timeout_ms=e.timeout_ms,
                    first_collective=True,
                    locations=locs,
                )
            )
        elif kind == "desync":
            out.append(
                Hang(
                    "not_joined",
                    path,
                    None,
                    e.seq,
                    e.op,
                    ranks,
                    f"desync report by {who} (TORCH_NCCL_DESYNC_DEBUG): {e.text}",
                    e.line,
                    reporters=reporters,
                    locations=locs,
                    op_kind="desync",
                )
            )
        elif kind == "horovod_stall":
            out.append(
                Hang(
                    "not_joined",
                    path,
                    None,
                    None,
                    "horovod",
                    ranks,
                    f"Horovod's stall inspector: {ranks_label(ranks)} did not submit the tensors the other ranks "
                    f"have waited on for {(e.timeout_ms or 0) // 1000} s"
                    + (f" ({e.text})" if e.text else ""),
                    e.line,
                    reporters=reporters,
                    timeout_ms=e.timeout_ms,
                    locations=locs,
                    op_kind="stall",
                )
            )
        elif kind == "peer_closed":
            out.append(
                Hang(
                    "peer_lost",
                    path,
                    None,
                    None,
                    "gloo",
                    (),
                    f"{who}: the gloo peer at {peer} closed its connection: that process died or was killed "
                    "first; its own log holds the cause",
                    e.line,
                    reporters=reporters,
                    locations=locs,
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
                        m.missing_ranks or m.culprit_ranks,
                        f"torchfrtrace: {m.kind}"
                        + (f" collective {m.collective_seq_id}" if m.collective_seq_id is not None else "")
                        + (f" ({m.collective})" if m.collective else "")
                        + (f"; missing ranks {set(m.missing_ranks)}" if m.missing_ranks else "")
                        + (f"; expected ranks {m.expected_ranks}" if m.expected_ranks else "")
                        + (f"; state {m.state}" if m.state else "")
                        + (f"; {m.error}" if m.error else ""),
                        m.line,
                        group_size=m.expected_ranks,
                        locations=(f"{it.path}:{m.line}",),
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
