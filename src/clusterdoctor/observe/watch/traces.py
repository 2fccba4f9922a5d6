"""Per-step records from recorded traces, for the fail-slow detector offline (``comm analyze DIR``).

* Kineto traces (PyTorch profiler, one per rank) with ``ProfilerStep#N`` annotations: a step is the
  annotation's span; own work runs from its start to the first collective the rank entered (the
  CPU-side ``record_param_comms``/``nccl:*``/``gloo:*`` record, or the first communication kernel on
  a GPU); the collective time runs from there to the end of the last one; the wait is the last
  collective's own duration. Data-loader waits are not in what the trace reader keeps: 0. In
  CPU-only traces the main thread's operator time fills the stall field (the detector compares it
  across ranks: a frozen or throttled process' operators take longer).
* Flight Recorder dumps (one per rank): each collective (by its sequence id in its process group) is
  one "step": own work from the end of the rank's previous collective until it created this one,
  wait = its duration.

:func:`load_step_records` reads many files in parallel (local processes by default, or a Ray
cluster), each worker returning only the compact step records — never whole traces — so a
directory of thousands of ranks fits in memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.watch.records import RankIdentity, StepRecord

__all__ = ["load_step_records", "steps_from_flight_recorder", "steps_from_kineto"]


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
        out.append(
            StepRecord(trace.rank, step, t, wall, min(own, wall), coll, wait, 0.0, ops, run=trace.path)
        )
    ident = RankIdentity(job="trace", rank=trace.rank, world_size=trace.world_size, run=trace.path)
    return out, ident, warns


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


def steps_from_flight_recorder(dump: Any) -> tuple[list[StepRecord], RankIdentity | None, list[str]]:
    """One record per collective of one rank's Flight Recorder dump (its default process group)."""
    if getattr(dump, "rank", None) is None or not getattr(dump, "entries", None):
        return [], None, []
    ents = [e for e in dump.entries if not e.is_p2p and e.collective_seq_id is not None and e.time_created_ns]
    if not ents:
        return [], None, [f"{dump.path}: no timed collectives (time_created_ns) in the dump"]
    pg = min({e.pg_id for e in ents if e.pg_id is not None} or {None}, key=lambda x: (x is None, x))
    ents = sorted((e for e in ents if e.pg_id == pg), key=lambda e: e.collective_seq_id)
    out = []
    prev_end = None
    for e in ents:
        created = e.time_created_ns / 1e9
        dur = (e.duration_ms or 0.0) / 1e3
        end = created + dur
        if prev_end is not None:
            wall = max(0.0, end - prev_end)
            own = max(0.0, created - prev_end)
            out.append(
                StepRecord(
                    dump.rank, int(e.collective_seq_id), end, wall, min(own, wall), dur, dur, run=dump.path
                )
            )
        prev_end = end
    ident = RankIdentity(job="flight-recorder", rank=dump.rank, run=dump.path)
    warns = (
        [] if any(e.duration_ms for e in ents) else [f"{dump.path}: no collective durations (enable them) "]
    )
    return out, ident, [w for w in warns if w]


def _one(path: str) -> tuple[str, list[StepRecord], RankIdentity | None, list[str]]:
    """Worker: read one file and keep only its step records (pickled back small)."""
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
                recs, ident, warns = steps_from_flight_recorder(fr)
                return path, recs, ident, warns
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
    results: list[tuple[str, list[StepRecord], RankIdentity | None, list[str]]] = []
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
    steps: list[StepRecord] = []
    ids: dict[int, list[RankIdentity]] = {}
    warns: list[str] = []
    seen: dict[int, str] = {}
    for path, recs, ident, w in results:
        warns.extend(w)
        if ident is None:
            continue
        if ident.rank in seen:
            warns.append(
                f"{path}: rank {ident.rank} again (also {seen[ident.rank]}); the later file is used for fail-slow"
            )
        seen[ident.rank] = path
        ids.setdefault(ident.rank, []).append(ident)
        steps.extend(recs)
    return steps, ids, warns


def _with_ray(files: list[str], address: str | None, workers: int | None, on_done: Any) -> list[Any]:
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray (pip install 'clusterdoctor[sim]')", "--ray") from None
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "ignore_reinit_error": True, "log_to_driver": False}
        if address:
            kw["address"] = address
        elif workers:
            kw["num_cpus"] = workers
        ray.init(**kw)
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
