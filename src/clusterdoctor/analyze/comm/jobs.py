"""Which traces belong to one job, so that only ranks of one job are compared with each other.

An incident folder may hold traces of two jobs, or a copy of a file (``rank0.json`` and
``rank0 (1).json``). Traces are grouped by job: the ``distributedInfo`` a Kineto trace carries
(backend, world size, NCCL version and the default process group's size; the other process groups
differ between ranks of one job, so they are not part of the key), else the folder holding the file.
Within a job every rank must be claimed by one trace: an identical copy is set aside (analysed once),
and a rank claimed by two different traces is a duplicate — neither is matched with the other ranks,
and the report warns.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import msgspec

from clusterdoctor.observe.comm.kineto import KinetoTrace


class TraceJob(msgspec.Struct):
    """The traces of one job: ``ranks`` (rank -> trace, each claimed once) are compared across ranks;
    ``unmatched`` (duplicate ranks, traces without a rank) are analysed alone."""

    key: str
    label: str
    ranks: dict[int, KinetoTrace] = msgspec.field(default_factory=dict)
    unmatched: list[KinetoTrace] = msgspec.field(default_factory=list)
    copies: dict[str, str] = msgspec.field(default_factory=dict)  # path of a copy -> path kept
    duplicate_ranks: dict[int, list[str]] = msgspec.field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return any(t.truncated for t in self.ranks.values())


def job_key(t: KinetoTrace) -> tuple[str, str]:
    """(key, label) of the job a trace belongs to."""
    di = t.meta.get("distributedInfo")
    if isinstance(di, dict) and (t.world_size is not None or di.get("backend")):
        default_size = None
        cfg = di.get("pg_config")
        if isinstance(cfg, list):
            for pg in cfg:
                if isinstance(pg, dict) and str(pg.get("pg_name")) == "0":
                    default_size = pg.get("pg_size")
        parts = (
            str(di.get("backend")),
            str(t.world_size),
            str(di.get("nccl_version")),
            str(default_size),
        )
        label = f"{di.get('backend') or '?'} job of world size {t.world_size if t.world_size is not None else '?'}"
        if di.get("nccl_version"):
            label += f" (NCCL {di.get('nccl_version')})"
        return "di:" + "|".join(parts), label
    folder = os.path.dirname(os.path.abspath(t.path))
    return "dir:" + folder, f"traces in {os.path.dirname(t.path) or '.'} (no distributedInfo)"


def _fingerprint(t: KinetoTrace) -> tuple[Any, ...]:
    """What makes two trace files the same recording (a copied file)."""
    first = (t.ts[0], t.ts[-1]) if len(t.ts) else (None, None)
    cpu = (t.cpu_ts[0], t.cpu_ts[-1]) if len(t.cpu_ts) else (None, None)
    comm = (t.comm_records[0].ts, t.comm_records[-1].ts) if t.comm_records else (None, None)
    return (t.rank, t.events_read, len(t.ts), len(t.comm_records), first, cpu, comm, tuple(t.steps[:3]))


def group_traces(traces: Sequence[KinetoTrace]) -> tuple[list[TraceJob], list[str]]:
    """Group traces by job (in path order) and say what was set aside and why (warnings)."""
    jobs: dict[str, TraceJob] = {}
    warnings: list[str] = []
    claims: dict[tuple[str, int], list[KinetoTrace]] = {}
    seen: dict[tuple[Any, ...], KinetoTrace] = {}
    for t in sorted(traces, key=lambda t: t.path):
        key, label = job_key(t)
        job = jobs.setdefault(key, TraceJob(key, label))
        fp = _fingerprint(t)
        kept = seen.get(fp)
        if kept is not None:
            job.copies[t.path] = kept.path
            warnings.append(f"{t.path}: the same trace as {kept.path} (a copy); analysed once")
            continue
        seen[fp] = t
        if t.rank is None:
            job.unmatched.append(t)
            continue
        claims.setdefault((key, t.rank), []).append(t)
    for (key, rank), ts in claims.items():
        job = jobs[key]
        if len(ts) == 1:
            job.ranks[rank] = ts[0]
            continue
        job.unmatched.extend(ts)
        job.duplicate_ranks[rank] = [t.path for t in ts]
        warnings.append(
            f"rank {rank} is claimed by {len(ts)} different traces ({', '.join(t.path for t in ts)}): two jobs in "
            "one folder, or traces of two runs; none of them is compared with the other ranks"
        )
    out = sorted(jobs.values(), key=lambda j: j.key)
    for j in out:
        j.ranks = dict(sorted(j.ranks.items()))
    if len(out) > 1:
        warnings.append(
            f"the traces belong to {len(out)} jobs ({'; '.join(j.label for j in out)}); ranks are compared only "
            "within their job"
        )
    return out, warnings
