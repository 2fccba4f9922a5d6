"""Deep-learning workload and throughput loaders: Sia/Pollux workloads, Tiresias jobs, Gavel
throughputs, Sia step-time profiles, Helios/Philly cluster summaries. Parsers raise only
:class:`~clusterdoctor.errors.InputError`.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.sim.traces import MILLI, PodTrace, _float_or_none, _int, _read, _rows, _text

SIA_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
TIRESIAS_JOB_COLUMNS = (
    "job_id",
    "num_gpu",
    "submit_time",
    "iterations",
    "model_name",
    "duration",
    "interval",
)
SIA_PROFILE_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")


def _num(r: dict[str, str], col: str, path: str, line: int) -> float:
    v = _float_or_none(r, col, path, line)
    if v is None:
        raise InputError(f"column {col}: empty", path, line)
    return v


@dataclass
class DLJobs:
    """Jobs with an application (model) name: the pod columns plus ``app`` and, when the trace has it,
    the measured duration (Tiresias) in seconds."""

    pods: PodTrace
    app: list[str]
    duration: list[float] | None = None


def parse_sia_workload(data: str | bytes, path: str = "<workload.csv>") -> DLJobs:
    """Sia (SOSP'23) / Pollux (OSDI'21) workload: name,time (submit s),application,num_replicas,batch_size.
    Each job asks for ``num_replicas`` whole GPUs (the initial allocation; Sia/Pollux resize it)."""
    text = _text(data, path)
    _, rows = _rows(text, path, SIA_COLUMNS)
    names, t, app, n = [], [], [], []
    for line, r in rows:
        names.append(r["name"].strip())
        t.append(_num(r, "time", path, line))
        app.append(r["application"].strip())
        k = _int(r, "num_replicas", path, line, minimum=1)
        if k > 1024:
            raise InputError(f"num_replicas {k} is not plausible", path, line)
        n.append(k)
    if not names:
        raise InputError("no jobs", path)
    m = len(names)
    pods = PodTrace(names, [4000 * k for k in n], [16384 * k for k in n], n, [MILLI] * m, [""] * m, [1] * m,
                    t, [math.nan] * m, source=path)  # fmt: skip
    return DLJobs(pods, app)


def parse_tiresias_jobs(data: str | bytes, path: str = "<60_job.csv>") -> DLJobs:
    """Tiresias job list: job_id,num_gpu,submit_time,iterations,model_name,duration,interval."""
    text = _text(data, path)
    _, rows = _rows(text, path, TIRESIAS_JOB_COLUMNS)
    names, n, t, app, dur = [], [], [], [], []
    for line, r in rows:
        names.append(f"job-{r['job_id'].strip()}")
        n.append(_int(r, "num_gpu", path, line, minimum=1))
        t.append(_num(r, "submit_time", path, line))
        app.append(r["model_name"].strip())
        dur.append(_num(r, "duration", path, line))
    if not names:
        raise InputError("no jobs", path)
    m = len(names)
    pods = PodTrace(names, [4000 * k for k in n], [16384 * k for k in n], n, [MILLI] * m, [""] * m, [1] * m,
                    t, [a + d for a, d in zip(t, dur)], source=path)  # fmt: skip
    return DLJobs(pods, app, dur)


def parse_gavel_throughputs(
    data: str | bytes, path: str = "<simulation_throughputs.json>"
) -> dict[str, dict[str, float]]:
    """Gavel (OSDI'20) ``simulation_throughputs.json`` -> {job type: {GPU type: isolated steps/s}} at
    scale factor 1 (the ``"null"`` entry: the job alone on the GPU)."""
    text = _text(data, path)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise InputError(f"bad JSON: {e}", path) from None
    except RecursionError:
        raise InputError("JSON nested too deep to read", path) from None
    if not isinstance(doc, dict):
        raise InputError("expected an object of GPU types", path)
    out: dict[str, dict[str, float]] = {}
    for gpu, jobs in doc.items():
        if not isinstance(jobs, dict):
            raise InputError(f"{gpu}: expected an object of job types", path)
        for key, entry in jobs.items():
            try:
                job, sf = ast.literal_eval(key)
            except (ValueError, SyntaxError, TypeError):
                raise InputError(f"{gpu}: bad job key {key[:60]!r}", path) from None
            if sf != 1 or not isinstance(entry, dict) or not isinstance(entry.get("null"), (int, float)):
                continue
            out.setdefault(str(job), {})[str(gpu)] = float(entry["null"])
    if not out:
        raise InputError("no isolated (scale factor 1) throughputs", path)
    return out


def parse_sia_profile(data: str | bytes, path: str = "<placements.csv>") -> dict[str, float]:
    """A Sia step-time profile -> {placement: best samples/s} (placement digits = GPUs per node)."""
    text = _text(data, path)
    _, rows = _rows(text, path, SIA_PROFILE_COLUMNS)
    best: dict[str, float] = {}
    for line, r in rows:
        bsz = _num(r, "local_bsz", path, line)
        step = _num(r, "step_time", path, line)
        if step <= 0:
            raise InputError("step_time must be positive", path, line)
        pl = r["placement"].strip()
        gpus = sum(int(c) for c in pl if c.isdigit()) or 1
        best[pl] = max(best.get(pl, 0.0), bsz * gpus / step)
    if not best:
        raise InputError("no profile rows", path)
    return best


def parse_helios_summary(
    data: str | bytes, path: str = "<helios_cluster_summary.csv>"
) -> dict[str, dict[str, float]]:
    """Helios (SC'21) per-cluster summary -> {cluster: {column: value}}."""
    text = _text(data, path)
    header, rows = _rows(text, path, ("id", "gpu_num", "job_num"))
    out = {}
    for line, r in rows:
        out[r["id"].strip()] = {c: _num(r, c, path, line) for c in header if c != "id"}
    return out


def parse_utilisation_by_hour(data: str | bytes, path: str = "<sequence.csv>") -> dict[int, float]:
    """Mean utilisation by hour of day from a Helios per-minute series: ``gpu_utilization`` in a
    ``cluster_sequence_vc.csv``, or ``active/total`` in ``philly_node_sequence.csv``."""
    text = _text(data, path)
    header, rows = _rows(text, path, ("time",))
    use_util = "gpu_utilization" in header
    if not use_util and not {"active", "total"} <= set(header):
        raise InputError("needs gpu_utilization, or active and total", path, 1)
    sums = [0.0] * 24
    cnts = [0] * 24
    for line, r in rows:
        t = r["time"].strip()
        try:
            hour = int(t[11:13])
        except ValueError:
            raise InputError(f"bad time {t[:30]!r} (expected YYYY-MM-DD HH:MM:SS)", path, line) from None
        if not 0 <= hour < 24:
            raise InputError(f"bad hour in {t[:30]!r}", path, line)
        if use_util:
            v = _num(r, "gpu_utilization", path, line)
        else:
            tot = _num(r, "total", path, line)
            v = _num(r, "active", path, line) / tot if tot > 0 else 0.0
        sums[hour] += v
        cnts[hour] += 1
    return {h: sums[h] / cnts[h] for h in range(24) if cnts[h]}


def _load(parser, path, *args):
    return parser(_read(path), str(path), *args)


def load_sia_workload(path: str | Path) -> DLJobs:
    return _load(parse_sia_workload, path)


def load_tiresias_jobs(path: str | Path) -> DLJobs:
    return _load(parse_tiresias_jobs, path)


def load_gavel_throughputs(path: str | Path) -> dict[str, dict[str, float]]:
    return _load(parse_gavel_throughputs, path)


def load_sia_profile(path: str | Path) -> dict[str, float]:
    return _load(parse_sia_profile, path)


def load_helios_summary(path: str | Path) -> dict[str, dict[str, float]]:
    return _load(parse_helios_summary, path)


def load_utilisation_by_hour(path: str | Path) -> dict[int, float]:
    return _load(parse_utilisation_by_hour, path)
