"""Apache Flink REST checkpoint statistics → :class:`FlinkCheckpoints`.

Reads, by content:

* ``GET /jobs/:jobid/checkpoints`` in the 1.14 (``@class``; min/max/avg) and 1.15+ (``className``,
  ``checkpointed_size``, p50…p999; ``"NaN"`` strings for an empty history) layouts;
* a HistoryServer job archive (``{"archive":[{"path":…,"json":"<escaped JSON>"}]}``): the
  ``/checkpoints``, ``/checkpoints/config`` and job entries inside it;
* ``GET /jobs/:jobid/metrics?get=…`` and subtask metrics (``[{"id":…,"value":"…"}]``; values are
  strings): ``lastCheckpointDuration``, ``numberOfFailedCheckpoints``, ``checkpointAlignmentTime``,
  ``checkpointStartDelayNanos`` …;
* aggregated subtask metrics (``GET /jobs/:jid/vertices/:vid/subtasks/metrics?get=…``:
  ``[{"id", "min", "max", "avg", "sum", "skew"}]``): the max over subtasks is kept;
* per-task checkpoint details (``/checkpoints/details/:id/subtasks/:vertexid``) whose ``summary``
  carries ``alignment.duration``, ``start_delay`` and ``end_to_end_duration``, and whose ``subtasks``
  say which subtask waited (``slow_subtask``);
* the job itself (``GET /jobs/:jid``): its id, name, state and vertex names.

A job's statistics usually come in several files (the checkpoints, the job's metrics, each slow
vertex's subtask metrics or details): :func:`join_jobs` merges the parts of one job, so a rule judges
the start delay of one file against the checkpoint duration of another. Real captures of all of these,
from a Flink 2.3 job under backpressure: ``tests/data/app/flink_backpressure_pyflink``.

Durations are milliseconds as Flink writes them; timestamps are converted to epoch seconds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["Checkpoint", "FlinkCheckpoints", "join_jobs", "load_flink", "parse_flink", "sniff_flink"]


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of the history (or the ``latest`` block)."""

    id: int
    status: str
    trigger_time: float | None
    ack_time: float | None
    duration_ms: float | None
    is_savepoint: bool = False
    checkpoint_type: str | None = None
    alignment_buffered: float | None = None
    failure_time: float | None = None
    failure_message: str | None = None


@dataclass
class FlinkCheckpoints:
    """Checkpoint statistics of one job, with what was found where."""

    source: str
    job_id: str | None = None
    job_state: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    summary: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> {min,max,avg,p50…}
    history: list[Checkpoint] = field(default_factory=list)
    latest_failed: Checkpoint | None = None
    interval_ms: float | None = None  # from /checkpoints/config; None when not configured or unknown
    timeout_ms: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # REST metric gauges (numeric only)
    # alignment / start delay / end-to-end, from task details or gauges: name -> ms
    alignment_ms: float | None = None
    start_delay_ms: float | None = None
    end_to_end_ms: float | None = None
    checkpoint_id: int | None = None  # the checkpoint the details / wait times are of, when stated
    slow_subtask: int | None = None  # the subtask whose barrier waited longest (details)
    job_name: str | None = None
    vertices: dict[str, str] = field(default_factory=dict)  # vertex id -> name (GET /jobs/:jid)
    parts: list[str] = field(default_factory=list)  # the files joined into this job (join_jobs)
    wait_source: str | None = None  # the file that shows the longest alignment / start delay
    warnings: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return int(self.counts.get("failed", 0))

    @property
    def total(self) -> int:
        return int(self.counts.get("total", 0))


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        f = float(v)
        return None if math.isnan(f) else f
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
        return None if math.isnan(f) or math.isinf(f) else f
    return None


def _ts(v: Any) -> float | None:
    n = _num(v)
    return n / 1000.0 if n is not None and n > 0 else None


def _checkpoint(d: Any) -> Checkpoint | None:
    if not isinstance(d, dict):
        return None
    cid = _num(d.get("id"))
    if cid is None:
        return None
    return Checkpoint(
        id=int(cid),
        status=str(d.get("status", "?")),
        trigger_time=_ts(d.get("trigger_timestamp")),
        ack_time=_ts(d.get("latest_ack_timestamp")),
        duration_ms=_num(d.get("end_to_end_duration")),
        is_savepoint=bool(d.get("is_savepoint", False)),
        checkpoint_type=d.get("checkpoint_type") if isinstance(d.get("checkpoint_type"), str) else None,
        alignment_buffered=_num(d.get("alignment_buffered")),
        failure_time=_ts(d.get("failure_timestamp")),
        failure_message=str(d["failure_message"])[:300] if d.get("failure_message") else None,
    )


def _stats_block(v: Any) -> dict[str, float]:
    if not isinstance(v, dict):
        return {}
    return {str(k): n for k, x in v.items() if (n := _num(x)) is not None}


def _apply_checkpoints(fc: FlinkCheckpoints, d: dict[str, Any]) -> None:
    counts = d.get("counts")
    if isinstance(counts, dict):
        fc.counts = {str(k): int(n) for k, v in counts.items() if (n := _num(v)) is not None}
    summ = d.get("summary")
    if isinstance(summ, dict):
        for k, v in summ.items():
            block = _stats_block(v)
            if block:
                fc.summary[str(k)] = block
    hist = d.get("history")
    if isinstance(hist, list):
        fc.history = [c for c in (_checkpoint(x) for x in hist) if c is not None]
    latest = d.get("latest")
    if isinstance(latest, dict):
        fc.latest_failed = _checkpoint(latest.get("failed"))
    e2e = fc.summary.get("end_to_end_duration", {})
    if fc.end_to_end_ms is None and e2e.get("avg") is not None and fc.total:
        fc.end_to_end_ms = e2e["avg"]


def _apply_config(fc: FlinkCheckpoints, d: dict[str, Any]) -> None:
    iv = _num(d.get("interval"))
    # Long.MAX_VALUE means periodic checkpoints are off
    fc.interval_ms = iv if iv is not None and iv < 9.2e18 else None
    fc.timeout_ms = _num(d.get("timeout"))


def _apply_task_details(fc: FlinkCheckpoints, d: dict[str, Any]) -> None:
    cid = _num(d.get("id"))
    fc.checkpoint_id = int(cid) if cid is not None else None
    subs = [x for x in d.get("subtasks") or [] if isinstance(x, dict)]
    waits = [
        (max(_num(x.get("start_delay")) or 0.0, _num((x.get("alignment") or {}).get("duration")) or 0.0), x)
        for x in subs
        if isinstance(x.get("alignment", {}), dict)
    ]
    if waits:
        worst, sub = max(waits, key=lambda w: w[0])
        idx = _num(sub.get("index"))
        if worst > 0 and idx is not None:
            fc.slow_subtask = int(idx)
    summ = d.get("summary") or {}
    al = (summ.get("alignment") or {}).get("duration") if isinstance(summ.get("alignment"), dict) else None
    if isinstance(al, dict):
        fc.alignment_ms = _num(al.get("max"))
    sd = summ.get("start_delay")
    if isinstance(sd, dict):
        fc.start_delay_ms = _num(sd.get("max"))
    e2e = summ.get("end_to_end_duration")
    if isinstance(e2e, dict):
        fc.end_to_end_ms = _num(e2e.get("max"))


_METRIC_NS = {"checkpointStartDelayNanos": "start_delay_ms", "checkpointAlignmentTime": "alignment_ms"}


def _apply_metrics(fc: FlinkCheckpoints, items: list[Any]) -> None:
    for it in items:
        if not isinstance(it, dict) or "id" not in it:
            continue
        # [{id, value}] (job/task metrics) or the aggregated [{id, min, max, avg, sum, skew}]: the max
        n = _num(it.get("value")) if "value" in it else _num(it.get("max"))
        if n is None:
            continue
        key = str(it["id"])
        fc.metrics[key] = n
        short = key.rsplit(".", 1)[-1]
        if short in _METRIC_NS:
            setattr(fc, _METRIC_NS[short], n / 1e6)  # both gauges are nanoseconds
    if fc.metrics.get("lastCheckpointDuration", -1) > 0 and fc.end_to_end_ms is None:  # -1: none yet
        fc.end_to_end_ms = fc.metrics["lastCheckpointDuration"]
    if "numberOfFailedCheckpoints" in fc.metrics:
        fc.counts.setdefault("failed", int(fc.metrics["numberOfFailedCheckpoints"]))
    if "totalNumberOfCheckpoints" in fc.metrics:
        fc.counts.setdefault("total", int(fc.metrics["totalNumberOfCheckpoints"]))


def parse_flink(data: str | bytes, path: str | None = None) -> FlinkCheckpoints:
    """Parse one Flink REST response (or history archive); raises InputError when it is none of them."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    try:
        v = json.loads(text)
    except (ValueError, RecursionError):
        raise InputError("not valid JSON", path) from None
    fc = FlinkCheckpoints(source=path or "<flink>")
    if isinstance(v, dict) and isinstance(v.get("archive"), list):
        found = False
        for entry in v["archive"]:
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                continue
            p, body = entry["path"], entry.get("json")
            try:
                inner = json.loads(body) if isinstance(body, str) else body
            except (ValueError, RecursionError):
                fc.warnings.append(f"archive entry {p}: body is not JSON; skipped")
                continue
            if not isinstance(inner, dict):
                continue
            if p.endswith("/checkpoints"):
                _apply_checkpoints(fc, inner)
                found = True
            elif p.endswith("/checkpoints/config"):
                _apply_config(fc, inner)
            elif p.count("/") == 2 and p.startswith("/jobs/") and "state" in inner:
                fc.job_id = str(inner.get("jid", p.rsplit("/", 1)[-1]))
                fc.job_state = str(inner["state"])
        if not found:
            raise InputError("Flink archive without a /checkpoints entry", path)
        return fc
    if isinstance(v, list):
        if not v and path is not None:  # a metrics query for metrics the vertex does not have
            fc.warnings.append("empty metrics list (the vertex reports none of the metrics asked for)")
            return fc
        if not any(isinstance(x, dict) and "id" in x and ("value" in x or "max" in x) for x in v):
            raise InputError(
                "JSON list is not Flink REST metrics ([{id, value}] or [{id, min, max, ...}])", path
            )
        _apply_metrics(fc, v)
        return fc
    if isinstance(v, dict) and isinstance(v.get("jid"), str) and isinstance(v.get("vertices"), list):
        fc.job_id, fc.job_name = v["jid"], str(v.get("name") or "") or None
        fc.job_state = str(v.get("state") or "") or None
        fc.vertices = {
            str(x["id"]): str(x.get("name", "")) for x in v["vertices"] if isinstance(x, dict) and "id" in x
        }
        return fc
    if isinstance(v, dict):
        if "counts" in v and ("history" in v or "summary" in v):
            _apply_checkpoints(fc, v)
            return fc
        if isinstance(v.get("summary"), dict) and (
            "alignment" in v["summary"] or "start_delay" in v["summary"]
        ):
            _apply_task_details(fc, v)
            return fc
        if "interval" in v and "timeout" in v and "mode" in v:
            _apply_config(fc, v)
            return fc
    raise InputError("not a Flink checkpoint statistics, archive or metrics response", path)


def sniff_flink(head: bytes, name: str = "") -> bool:
    """True for Flink checkpoint statistics, a HistoryServer archive, or Flink REST metrics."""
    h = head.lstrip()
    if h[:1] not in (b"{", b"["):
        return False
    if h.startswith(b"{") and b'"counts"' in h and (b'"end_to_end_duration"' in h or b'"history"' in h):
        return True
    if h.startswith(b'{"archive"') and b"/checkpoints" in h:
        return True
    if h.startswith(b"[") and b'"id"' in h and (b'"value"' in h or (b'"max"' in h and b'"skew"' in h)):
        return any(
            k in h
            for k in (b"Checkpoint", b"checkpoint", b"numRecords", b"isBackPressured", b"BackPressured")
        )
    if h.startswith(b"{") and b'"summary"' in h and (b'"start_delay"' in h or b'"alignment"' in h):
        return b'"end_to_end_duration"' in h  # checkpoint details of one task (subtasks/:vertexid)
    if h.startswith(b"{") and b'"jid"' in h and b'"vertices"' in h and b'"timestamps"' in h:
        return True  # GET /jobs/:jid
    if h.startswith(b"{") and b'"interval"' in h and b'"timeout"' in h and b'"mode"' in h:
        return b'"max_concurrent"' in h or b'"externalization"' in h  # GET /jobs/:jid/checkpoints/config
    return False


def join_jobs(parts: list[FlinkCheckpoints]) -> list[FlinkCheckpoints]:
    """The parts of each job merged into one :class:`FlinkCheckpoints` per job.

    Parts that name their job (a ``/checkpoints`` archive, ``GET /jobs/:jid``) group by it; parts that
    cannot (metrics, checkpoint details) join the one job there is, or, when no part names one, each
    other. With several named jobs, the unnamed parts cannot be placed: they stay on their own, with
    a warning. Within a job the worst (largest) alignment and start delay are kept, and the checkpoint
    duration is taken, in this order, from the details of the checkpoint the wait belongs to, the
    job's ``lastCheckpointDuration`` or the history's average."""
    named: dict[str, list[FlinkCheckpoints]] = {}
    unnamed: list[FlinkCheckpoints] = []
    for p in parts:
        (named.setdefault(p.job_id, []) if p.job_id else unnamed).append(p)
    if len(named) > 1 and unnamed:
        for u in unnamed:
            u.warnings.append(
                f"cannot tell which of {len(named)} jobs this file belongs to ({', '.join(sorted(named))}): judged alone"
            )
        return [_merge(ps) for ps in named.values()] + unnamed
    if len(named) == 1:
        (only,) = named.values()
        return [_merge([*only, *unnamed])]
    if named:
        return [_merge(ps) for ps in named.values()]
    return [_merge(unnamed)] if unnamed else []


def _merge(ps: list[FlinkCheckpoints]) -> FlinkCheckpoints:
    if len(ps) == 1:
        ps[0].parts = [ps[0].source]
        return ps[0]
    base = next((p for p in ps if p.counts and (p.history or p.summary)), ps[0])
    out = FlinkCheckpoints(source=base.source, job_id=next((p.job_id for p in ps if p.job_id), None))
    for p in ps:
        out.job_state = out.job_state or p.job_state
        out.job_name = out.job_name or p.job_name
        out.vertices.update(p.vertices)
        for k, n in p.counts.items():
            out.counts[k] = max(out.counts.get(k, n), n)
        for k, blk in p.summary.items():
            out.summary.setdefault(k, blk)
        if len(p.history) > len(out.history):
            out.history = p.history
        out.latest_failed = out.latest_failed or p.latest_failed
        out.interval_ms = out.interval_ms if out.interval_ms is not None else p.interval_ms
        out.timeout_ms = out.timeout_ms if out.timeout_ms is not None else p.timeout_ms
        out.metrics.update(p.metrics)
        out.warnings.extend(p.warnings)
        out.parts.append(p.source)
    waits = [p for p in ps if (p.alignment_ms or 0) > 0 or (p.start_delay_ms or 0) > 0]
    if waits:
        worst = max(waits, key=lambda p: max(p.alignment_ms or 0, p.start_delay_ms or 0))
        out.alignment_ms = max((p.alignment_ms for p in ps if p.alignment_ms is not None), default=None)
        out.start_delay_ms = max((p.start_delay_ms for p in ps if p.start_delay_ms is not None), default=None)
        out.slow_subtask, out.checkpoint_id = worst.slow_subtask, worst.checkpoint_id
        out.wait_source = worst.source  # the wait's evidence points at the file that shows it
        if worst.end_to_end_ms is not None and worst.checkpoint_id is not None:
            out.end_to_end_ms = worst.end_to_end_ms  # the same checkpoint's duration
    if out.end_to_end_ms is None:
        last = out.metrics.get("lastCheckpointDuration")
        e2e = next((p.end_to_end_ms for p in ps if p.end_to_end_ms is not None), None)
        out.end_to_end_ms = last if last is not None and last > 0 else e2e
    return out


def load_flink(path: str | Path) -> dict[str, Any]:
    """Read a Flink REST JSON file → ``{"flink_checkpoints": [FlinkCheckpoints]}``."""
    p = Path(path)
    from clusterdoctor.observe.limits import read_input

    data = read_input(p)  # size-limited, one-line errors
    fc = parse_flink(data, str(p))
    return {"flink_checkpoints": [fc], "warnings": [f"{p}: {w}" for w in fc.warnings]}
