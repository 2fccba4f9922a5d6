"""Per-step records from recorded traces, for the fail-slow detector offline (``comm analyze DIR``).

* Kineto traces (PyTorch profiler, one per rank) with ``ProfilerStep#N`` annotations: a step is the
  annotation's span; own work runs from its start to the first collective the rank entered (the
  CPU-side ``record_param_comms``/``nccl:*``/``gloo:*`` record, or the first communication kernel on
  a GPU); the collective time runs from there to the end of the last one; the wait is the last
  collective's own duration. The data-loader wait is the time in the step under the DataLoader's
  ``enumerate(DataLoader)#...__next__`` annotations (one per batch). In CPU-only traces the main thread's operator time fills the stall field (the detector compares it
  across ranks: a frozen or throttled process' operators take longer).
* Flight Recorder dumps (one per rank): the collectives of the default process group, by sequence
  id, grouped into training steps by the job's repeating pattern of collectives; the time inside
  them from the calls and the collectives' ends (durations when recorded, else the last rank's
  call), across ranks (:func:`steps_from_flight_recorder`).

:func:`load_step_records` reads many files in parallel (local processes by default, or a Ray
cluster), each worker returning only the compact step records — never whole traces — so a
directory of thousands of ranks fits in memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.watch.records import RankIdentity, StepRecord

__all__ = [
    "FrRankLog",
    "fr_collectives",
    "join_step_sources",
    "load_step_records",
    "steps_from_flight_recorder",
    "steps_from_loaded",
    "steps_from_kineto",
]


def steps_from_kineto(trace: Any) -> tuple[list[StepRecord], RankIdentity | None, list[str]]:
    """Step records of one rank's :class:`~clusterdoctor.observe.comm.kineto.KinetoTrace`."""
    from clusterdoctor.observe.comm.kineto import COMM

    warns: list[str] = []
    if trace.rank is None:
        return [], None, [f"{trace.path}: no rank in the trace (distributedInfo); not used for fail-slow"]
    if not trace.steps:
        return [], None, [f"{trace.path}: no ProfilerStep#N annotations; not used for fail-slow"]
    colls: list[tuple[float, float]] = [(c.ts, c.ts + c.dur) for c in trace.comm_records]
    for i in range(len(trace.ts)):
        if trace.kinds[trace.name_id[i]] == COMM:
            colls.append((trace.ts[i], trace.ts[i] + trace.dur[i]))
    colls.sort()
    base = trace.meta.get("baseTimeNanoseconds")
    base_us = float(base) / 1000.0 if isinstance(base, (int, float)) else 0.0
    if not base_us:
        warns.append(f"{trace.path}: no baseTimeNanoseconds; step times are relative to the trace start")
    out = []
    import bisect

    starts = [c[0] for c in colls]
    busy = _main_thread_busy(trace)
    steps = sorted(trace.steps)
    if len(steps) > 1 and steps[-1][2] - steps[-1][1] < 0.5 * (steps[-2][2] - steps[-2][1]):
        steps = steps[:-1]  # the last ProfilerStep is cut short when the profiler stops
    loader = _loader_wait(trace)
    for step, ts, end in steps:
        wall = (end - ts) / 1e6
        lo = bisect.bisect_left(starts, ts)
        hi = bisect.bisect_left(starts, end)
        inside = colls[lo:hi]
        if inside:
            first = inside[0][0]
            last_start, last_end = max(inside, key=lambda c: c[1])
            own = (first - ts) / 1e6
            coll = (max(c[1] for c in inside) - first) / 1e6
            wait = (last_end - last_start) / 1e6
        else:
            own, coll, wait = wall, 0.0, 0.0
        t = (base_us + end) / 1e6
        ops = busy(ts, end) / 1e6 if busy is not None else 0.0
        data = min(loader(ts, end) / 1e6, wall) if loader is not None else 0.0
        out.append(
            StepRecord(trace.rank, step, t, wall, min(own, wall), coll, wait, data, ops, run=trace.path)
        )
    ident = RankIdentity(job="trace", rank=trace.rank, world_size=trace.world_size, run=trace.path)
    return out, ident, warns


def _loader_wait(trace: Any) -> Any:
    """``wait(start, end)``: time in [start, end) under the DataLoader's ``__next__`` annotations
    (they do not nest: one batch at a time), or None when the trace has none."""
    import numpy as np

    if not len(getattr(trace, "loader_ts", ())):
        return None
    order = np.argsort(np.asarray(trace.loader_ts))
    ls = np.asarray(trace.loader_ts)[order]
    le = ls + np.asarray(trace.loader_dur)[order]

    def wait(lo: float, hi: float) -> float:
        i, j = max(0, int(np.searchsorted(ls, lo)) - 1), int(np.searchsorted(ls, hi))
        if j <= i:
            return 0.0
        return float(np.sum(np.clip(np.minimum(le[i:j], hi) - np.maximum(ls[i:j], lo), 0.0, None)))

    return wait


def _main_thread_busy(trace: Any) -> Any:
    """``busy(start, end)``: time covered by the main thread's CPU operators in [start, end) (CPU-only
    traces keep them). It stands in for the probe's stall signal: a frozen or throttled process'
    operators take longer than the same operators on the other ranks. None when not available."""
    import numpy as np

    if not len(trace.cpu_ts):
        return None
    ts = np.asarray(trace.cpu_ts)
    end = ts + np.asarray(trace.cpu_dur)
    tid = np.asarray(trace.cpu_tid)
    vals, counts = np.unique(tid, return_counts=True)
    keep = tid == vals[np.argmax(counts)]
    order = np.argsort(ts[keep])
    ts, end = ts[keep][order], end[keep][order]
    merged_s: list[float] = []
    merged_e: list[float] = []
    for a, b in zip(ts.tolist(), end.tolist()):  # nested operators -> top-level intervals
        if merged_e and a < merged_e[-1]:
            merged_e[-1] = max(merged_e[-1], b)
        else:
            merged_s.append(a)
            merged_e.append(b)
    ms, me = np.asarray(merged_s), np.asarray(merged_e)

    def busy(lo: float, hi: float) -> float:
        i, j = np.searchsorted(ms, lo), np.searchsorted(ms, hi)
        return float(np.sum(np.minimum(me[i:j], hi) - ms[i:j])) if j > i else 0.0

    return busy


@dataclass(frozen=True)
class FrRankLog:
    """One rank's collectives of one process group, from its Flight Recorder dump (compact: this is
    what a parallel worker sends back). ``sigs`` names each collective by op and sizes, so that the
    job's repeating pattern (one training step) can be found; times are seconds since the epoch."""

    path: str
    rank: int
    pg: int | None
    seqs: tuple[int, ...]
    sigs: tuple[str, ...]
    created: tuple[float, ...]
    durations: tuple[float | None, ...]


def fr_collectives(dump: Any) -> tuple[FrRankLog | None, list[str]]:
    """The collectives (not p2p) of the dump's default process group (the lowest pg id), by sequence id."""
    if getattr(dump, "rank", None) is None or not getattr(dump, "entries", None):
        return None, []
    ents = [e for e in dump.entries if not e.is_p2p and e.collective_seq_id is not None and e.time_created_ns]
    if not ents:
        return None, [f"{dump.path}: no timed collectives (time_created_ns) in the dump"]
    pg = min({e.pg_id for e in ents if e.pg_id is not None} or {None}, key=lambda x: (x is None, x))
    by_seq = {e.collective_seq_id: e for e in ents if e.pg_id == pg}
    ents = [by_seq[k] for k in sorted(by_seq)]
    return (
        FrRankLog(
            dump.path,
            int(dump.rank),
            pg,
            tuple(int(e.collective_seq_id) for e in ents),
            tuple(f"{e.op}{_shape(e.input_sizes)}" for e in ents),
            tuple(e.time_created_ns / 1e9 for e in ents),
            tuple(e.duration_ms / 1e3 if e.duration_ms is not None else None for e in ents),
        ),
        [],
    )


def _shape(sizes: Any) -> str:
    try:
        return str([list(x) for x in sizes]) if sizes else "[]"
    except TypeError:
        return str(sizes)


MAX_PERIOD = 256  # collectives per training step looked for (FSDP: 2-3 per wrapped module)


def _period(sigs: list[str]) -> tuple[int, int] | None:
    """(period, first index of the repeating run) of the signature sequence, or None: the smallest
    period ``p`` such that, from the first place where two whole periods repeat, 90 % of the rest
    repeats too, over at least three periods and half the sequence (a warm-up is left before it)."""
    import numpy as np

    n = len(sigs)
    codes: dict[str, int] = {}
    ids = np.array([codes.setdefault(x, len(codes)) for x in sigs], dtype=np.int64)
    for p in range(1, min(MAX_PERIOD, n // 3) + 1):
        last = int(n - max(3 * p, n / 2))  # the latest start that still covers enough
        if last < 0:
            continue
        m = ids[p:] == ids[:-p]  # m[i]: sigs[i + p] repeats sigs[i]
        c = np.concatenate(([0], np.cumsum(m)))
        s = np.arange(last + 1)
        two = c[s + p] - c[s] == p  # two whole periods repeat from s
        rest = c[n - p] - c[s] >= 0.9 * (n - p - s)  # and 90 % of what follows
        ok = np.nonzero(two & rest)[0]
        if len(ok):
            return p, int(ok[0])
    return None


def steps_from_flight_recorder(
    logs: Sequence[FrRankLog],
) -> tuple[list[StepRecord], dict[int, list[RankIdentity]], list[str]]:
    """Per-step records of a job from its ranks' Flight Recorder collectives (:func:`fr_collectives`).

    1. **Steps.** A training step issues the same collectives in the same order every time (DDP's
       bucket all-reduces, FSDP's all-gathers and reduce-scatters): the period of the sequence of
       (op, sizes), over all ranks' sequence ids, is one step, and a step begins after the longest
       pause of the pattern (the forward pass and the optimizer run between the last collective of
       a step and the first of the next). The warm-up before the pattern settles is left out. No
       period: each collective is one step (with a warning).
    2. **When each collective completed.** With durations (NCCL with ``TORCH_NCCL_ENABLE_TIMING=1``):
       its start plus its duration, per rank. Without (gloo, NCCL without timing): not before the
       last rank called it, so the last call of any rank is taken as its end — which assumes the
       hosts' clocks agree (NTP: milliseconds; a constant offset shifts one rank's lateness but is
       no change point). A rank that is frozen *after* its call (a coarse CPU throttle, SIGSTOP)
       holds every rank inside the collective without being seen: the step grows for all.
    3. **Per rank and step**: ``wall`` from the previous step's end to this one's; ``coll`` = ``wait``
       the time inside the step's collectives (from each call to the collective's end, their union);
       ``own`` the rest (its work and data wait). A straggler spends the least time inside (the
       others wait there for it). A step's ``t`` is its end.
    """
    warns: list[str] = []
    logs = [lg for lg in logs if lg.seqs]
    if not logs:
        return [], {}, warns
    sig_of: dict[int, str] = {}
    for lg in logs:
        for k, sg in zip(lg.seqs, lg.sigs):
            sig_of.setdefault(k, sg)
    seqs = sorted(sig_of)
    sigs = [sig_of[k] for k in seqs]
    timed = all(d is not None for lg in logs for d in lg.durations)
    # when each collective ended, per rank (durations) or for all (the last call)
    last_call: dict[int, float] = {}
    for lg in logs:
        for k, c in zip(lg.seqs, lg.created):
            last_call[k] = max(last_call.get(k, c), c)
    # step boundaries: the start index of each step, in positions of ``seqs``
    per = _period(sigs)
    if per is None:
        bounds = list(range(len(seqs)))
        warns.append(
            "Flight Recorder: no repeating pattern of collectives found; each collective is taken as one step"
        )
    else:
        p, start = per
        gaps = [0.0] * len(seqs)
        for i in range(1, len(seqs)):
            gaps[i] = last_call[seqs[i]] - last_call[seqs[i - 1]]
        phase = max(range(p), key=lambda o: _median([gaps[i] for i in range(start + o, len(seqs), p)]))
        first = start + phase
        head = sigs[first]
        once = sum(1 for i in range(first, first + p) if sigs[i] == head) == 1
        if once:  # split at each occurrence: an extra collective (evaluation, logging) shifts nothing
            bounds = [i for i in range(first, len(seqs)) if sigs[i] == head]
        else:
            bounds = list(range(first, len(seqs), p))
    if not timed:
        warns.append(
            "Flight Recorder dumps without collective durations (gloo, or NCCL without "
            "TORCH_NCCL_ENABLE_TIMING=1): a collective's end is taken as the last rank's call, which "
            "assumes the hosts' clocks agree; a rank frozen after its call holds the others up unseen "
            "(read as a whole-job slowdown)"
        )
    out: list[StepRecord] = []
    ids: dict[int, list[RankIdentity]] = {}
    for lg in logs:
        pos = {k: i for i, k in enumerate(lg.seqs)}
        prev_end: float | None = None
        for b, (i0, i1) in enumerate(zip(bounds, [*bounds[1:], len(seqs)])):
            mine = [pos[seqs[i]] for i in range(i0, i1) if seqs[i] in pos]
            if len(mine) != i1 - i0 or (i1 == len(seqs) and per is not None and i1 - i0 < per[0]):
                prev_end = None  # a step this rank's buffer holds only in part (ring buffer, end)
                continue
            spans = []
            for j in mine:
                c = lg.created[j]
                d = lg.durations[j]
                end = c + d if timed and d is not None else max(c, last_call[lg.seqs[j]])
                spans.append((c, end))
            end = max(e for _, e in spans)
            if prev_end is not None and end > prev_end:
                wall = end - prev_end
                inside = _union(spans, lo=prev_end)
                coll = min(inside, wall)
                out.append(StepRecord(lg.rank, b + 1, end, wall, wall - coll, coll, coll, run=lg.path))
            prev_end = end
        ids.setdefault(lg.rank, []).append(RankIdentity(job="flight-recorder", rank=lg.rank, run=lg.path))
    return out, ids, warns


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0.0


def _union(spans: list[tuple[float, float]], lo: float) -> float:
    """Total length of the union of the spans, counted from ``lo`` on."""
    total, cur_s, cur_e = 0.0, None, None
    for a, b in sorted((max(a, lo), b) for a, b in spans if b > lo):
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total


def _one(path: str) -> tuple[str, list[StepRecord] | FrRankLog, RankIdentity | None, list[str]]:
    """Worker: read one file and keep only its step records, or a dump's compact collective log
    (its steps need the other ranks'), pickled back small."""
    from clusterdoctor.observe.comm.sources import HEAD_BYTES, classify

    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
        kinds = classify(head, os.path.basename(path))
        if "kineto" in kinds:
            from clusterdoctor.observe.comm.kineto import load_kineto

            recs, ident, warns = steps_from_kineto(load_kineto(path))
            return path, recs, ident, warns
        if "flight_recorder" in kinds:
            from clusterdoctor.observe.comm.flight_recorder import FrDump, load_flight_recorder

            fr = load_flight_recorder(path)
            if isinstance(fr, FrDump):
                log, warns = fr_collectives(fr)
                if log is not None:
                    return path, log, RankIdentity(job="flight-recorder", rank=log.rank, run=path), warns
                return path, [], None, warns
        return path, [], None, []
    except InputError as e:
        return path, [], None, [e.one_line()]
    except OSError as e:
        return path, [], None, [f"{path}: cannot read: {e.strerror or e}"]


def _files(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    out = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                out.extend(os.path.join(root, n) for n in sorted(names))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise InputError("no such file or directory", p)
    return out


def load_step_records(
    paths: Sequence[str | os.PathLike[str]],
    workers: int | None = None,
    ray_address: str | None = None,
    use_ray: bool = False,
    on_done: Any = None,
) -> tuple[list[StepRecord], dict[int, list[RankIdentity]], list[str]]:
    """Step records of every Kineto trace / Flight Recorder dump under ``paths``, read in parallel.

    ``workers``: local processes (default: the CPUs); ``use_ray``: a Ray cluster instead
    (``ray_address`` or a local one), the ``sim`` extra. Returns records, identities, warnings.
    """
    files = _files(paths)
    results: list[tuple[str, list[StepRecord] | FrRankLog, RankIdentity | None, list[str]]] = []
    if use_ray:
        results = _with_ray(files, ray_address, workers, on_done)
    elif (workers or os.cpu_count() or 1) > 1 and len(files) > 1:
        from concurrent.futures import ProcessPoolExecutor

        n = min(len(files), workers or os.cpu_count() or 1)
        with ProcessPoolExecutor(max_workers=n) as ex:
            for r in ex.map(_one, files, chunksize=max(1, len(files) // (n * 8))):
                results.append(r)
                if on_done:
                    on_done(r)
    else:
        for f in files:
            results.append(_one(f))
            if on_done:
                on_done(results[-1])
    return join_step_sources(results)


def join_step_sources(
    results: Iterable[tuple[str, list[StepRecord] | FrRankLog, RankIdentity | None, list[str]]],
) -> tuple[list[StepRecord], dict[int, list[RankIdentity]], list[str]]:
    """Step records, identities and warnings of what each file gave (traces' step records, dumps'
    collective logs made into steps together); a rank given twice keeps its later file."""
    steps: list[StepRecord] = []
    ids: dict[int, list[RankIdentity]] = {}
    warns: list[str] = []
    seen: dict[int, str] = {}
    fr_logs: dict[int, FrRankLog] = {}
    for path, recs, ident, w in sorted(results, key=lambda r: r[0]):
        warns.extend(w)
        if ident is None:
            continue
        if ident.rank in seen:
            warns.append(
                f"{path}: rank {ident.rank} again (also {seen[ident.rank]}); the later file is used for fail-slow"
            )
            steps = [r for r in steps if r.rank != ident.rank]
            fr_logs.pop(ident.rank, None)
            ids.pop(ident.rank, None)
        seen[ident.rank] = path
        if isinstance(recs, FrRankLog):
            fr_logs[ident.rank] = recs
            continue
        ids.setdefault(ident.rank, []).append(ident)
        steps.extend(recs)
    if fr_logs:
        if ids:
            warns.append(
                "Flight Recorder dumps and profiler traces together: the traces' steps are used for fail-slow"
            )
        else:
            steps, ids, w = steps_from_flight_recorder(list(fr_logs.values()))
            warns.extend(w)
    return steps, ids, warns


def steps_from_loaded(
    kineto: Iterable[Any] = (), flight_recorder: Iterable[Any] = ()
) -> tuple[list[StepRecord], dict[int, list[RankIdentity]], list[str]]:
    """Step records of traces and Flight Recorder dumps already loaded (``diagnose``, ``comm analyze``):
    what :func:`join_step_sources` makes of them."""
    from clusterdoctor.observe.comm.flight_recorder import FrDump

    got: list[Any] = []
    for tr in kineto:
        r, i, w = steps_from_kineto(tr)
        got.append((str(tr.path), r, i, w))
    for fr in flight_recorder:
        if isinstance(fr, FrDump):
            log, w = fr_collectives(fr)
            ident = RankIdentity(job="flight-recorder", rank=log.rank, run=fr.path) if log else None
            got.append((fr.path, log if log is not None else [], ident, w))
    return join_step_sources(got)


def _with_ray(files: list[str], address: str | None, workers: int | None, on_done: Any) -> list[Any]:
    from clusterdoctor.ray_cluster import start_ray

    ray, _mine = start_ray(address, workers)  # InputError (one line) when Ray does not start
    remote = ray.remote(_one)
    pending = [remote.remote(f) for f in files]
    out = []
    while pending:
        done, pending = ray.wait(pending, num_returns=min(len(pending), 16))
        for r in ray.get(done):
            out.append(r)
            if on_done:
                on_done(r)
    return out
