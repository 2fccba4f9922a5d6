"""A real day/night load as jobs: Helios per-minute cluster sequences turned into arrivals and departures.

Helios (SenseTime, SC'21; S-Lab-System-Group/HeliosArtifact) publishes, per virtual cluster and minute,
the GPUs held by running jobs and asked for by pending ones (``cluster_sequence_vc.csv``). The job log
itself (``cluster_log.csv``, in the 36 MB HeliosData archive) is not available here, so
:func:`jobs_from_sequence` rebuilds jobs from the demand curve D(t) = running + pending GPUs: every rise
of D by k GPUs is a job of k GPUs arriving that minute (split into pods of at most ``gpus_per_pod``),
every fall ends the most recently arrived jobs first (LIFO; a partly ended job is split). The demand
curve, and so its day/night swing, is the real one; job boundaries are reconstructed (every result
says so).

Bad input: a missing column, a non-numeric or negative count, or a time out of order is one
``InputError`` naming the file and row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from clusterdoctor.errors import InputError
from clusterdoctor.sim.traces import PodTrace, _int, _read, _rows, _text

REQUIRED = ("time", "running_gpu_num", "pending_gpu_num", "total_gpu_num")


@dataclass
class LoadSequence:
    t: np.ndarray  # seconds since the first row
    start: datetime  # wall-clock time of the first row (hour of day matters)
    running: np.ndarray
    pending: np.ndarray
    total: np.ndarray
    path: str

    @property
    def demand(self) -> np.ndarray:
        return self.running + self.pending


def parse_cluster_sequence(data: str | bytes, path: str = "<cluster_sequence_vc.csv>") -> LoadSequence:
    text = _text(data, path)
    _, rows = _rows(text, path, REQUIRED)
    if not rows:
        raise InputError("no data rows", path, 2)
    ts: list[float] = []
    run: list[int] = []
    pend: list[int] = []
    tot: list[int] = []
    start = None
    last = None
    for line, r in rows:
        raw = r["time"].strip()
        try:
            when = datetime.strptime(raw, "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise InputError(f"bad time {raw[:30]!r} (expected YYYY-MM-DD HH:MM:SS)", path, line) from None
        if start is None:
            start = when
        sec = (when - start).total_seconds()
        if last is not None and sec <= last:
            raise InputError(f"time {raw} is not after the previous row's", path, line)
        last = sec
        ts.append(sec)
        run.append(_int(r, "running_gpu_num", path, line))
        pend.append(_int(r, "pending_gpu_num", path, line))
        tot.append(_int(r, "total_gpu_num", path, line))
    return LoadSequence(np.array(ts), start, np.array(run), np.array(pend), np.array(tot), path)


def load_cluster_sequence(path: str | Path) -> LoadSequence:
    return parse_cluster_sequence(_read(path), str(path))


@dataclass
class RebuiltJobs:
    pods: PodTrace
    arrivals: np.ndarray
    durations: np.ndarray
    priorities: np.ndarray
    notes: list[str]


def jobs_from_sequence(seq: LoadSequence, gpus_per_pod: int = 8, cpu_per_gpu_milli: int = 8000,
                       priority: int = 1, name: str = "helios") -> RebuiltJobs:  # fmt: skip
    """Jobs whose summed GPUs follow the sequence's demand curve (see the module docstring)."""
    d = seq.demand
    open_jobs: list[list[float]] = []  # [arrival s, gpus] stack
    done: list[tuple[float, float, int]] = []  # (arrival, departure, gpus)
    prev = 0
    for t, now in zip(seq.t, d, strict=True):
        now = int(now)
        if now > prev:
            open_jobs.append([float(t), now - prev])
        elif now < prev:
            drop = prev - now
            while drop > 0 and open_jobs:
                a, g = open_jobs[-1]
                take = min(g, drop)
                done.append((a, float(t), int(take)))
                drop -= take
                if take == g:
                    open_jobs.pop()
                else:
                    open_jobs[-1][1] = g - take
        prev = now
    end = float(seq.t[-1]) + 60.0
    left = len(open_jobs)
    done.extend((a, end, int(g)) for a, g in open_jobs)
    arr, dur, gpus = [], [], []
    for a, e, g in sorted(done):
        while g > 0:
            k = min(g, gpus_per_pod)
            arr.append(a)
            dur.append(max(e - a, 60.0))
            gpus.append(k)
            g -= k
    n = len(arr)
    pods = PodTrace([f"{name}-{i:06d}" for i in range(n)], [cpu_per_gpu_milli * k for k in gpus], [0] * n,
                    gpus, [1000] * n, [""] * n, [priority] * n)  # fmt: skip
    notes = [
        f"jobs rebuilt from the per-minute demand of {Path(seq.path).name} (running + pending GPUs; "
        "job boundaries reconstructed, LIFO), not the Helios job log",
    ]
    if left:
        notes.append(f"{left} jobs still running at the end of the sequence end with it")
    return RebuiltJobs(pods, np.array(arr), np.array(dur), np.full(n, priority, dtype=np.int64), notes)
