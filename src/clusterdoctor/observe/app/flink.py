"""Apache Flink REST checkpoint statistics → :class:`FlinkCheckpoints`.

Reads, by content:

* ``GET /jobs/:jobid/checkpoints`` in the 1.14 (``@class``; min/max/avg) and 1.15+ (``className``,
  ``checkpointed_size``, p50…p999; ``"NaN"`` strings for an empty history) layouts;
* a HistoryServer job archive (``{"archive":[{"path":…,"json":"<escaped JSON>"}]}``): the
  ``/checkpoints``, ``/checkpoints/config`` and job entries inside it;
* ``GET /jobs/:jobid/metrics?get=…`` and subtask metrics (``[{"id":…,"value":"…"}]``; values are
  strings): ``lastCheckpointDuration``, ``numberOfFailedCheckpoints``, ``checkpointAlignmentTime``,
  ``checkpointStartDelayNanos`` …;
* per-task checkpoint details (``/checkpoints/details/:id/subtasks/:vertexid``) whose ``summary``
  carries ``alignment.duration``, ``start_delay`` and ``end_to_end_duration``.

Durations are milliseconds as Flink writes them; timestamps are converted to epoch seconds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["Checkpoint", "FlinkCheckpoints", "load_flink", "parse_flink", "sniff_flink"]


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
        n = _num(it.get("value"))
        if n is None:
            continue
        key = str(it["id"])
        fc.metrics[key] = n
        short = key.rsplit(".", 1)[-1]
        if short in _METRIC_NS:
            setattr(fc, _METRIC_NS[short], n / 1e6)  # both gauges are nanoseconds
    if "lastCheckpointDuration" in fc.metrics and fc.end_to_end_ms is None:
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
        if not any(isinstance(x, dict) and "id" in x and "value" in x for x in v):
            raise InputError("JSON list is not Flink REST metrics ([{id, value}])", path)
        _apply_metrics(fc, v)
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
    if h.startswith(b"[") and b'"id"' in h and b'"value"' in h:
        return any(k in h for k in (b"Checkpoint", b"checkpoint", b"numRecords", b"isBackPressured"))
    return False


def load_flink(path: str | Path) -> dict[str, Any]:
    """Read a Flink REST JSON file → ``{"flink_checkpoints": [FlinkCheckpoints]}``."""
    p = Path(path)
    from clusterdoctor.observe.limits import read_input

    data = read_input(p)  # size-limited, one-line errors
    fc = parse_flink(data, str(p))
    return {"flink_checkpoints": [fc], "warnings": [f"{p}: {w}" for w in fc.warnings]}
