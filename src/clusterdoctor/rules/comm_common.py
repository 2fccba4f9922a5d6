"""What the communication rules share: the NCCL logs of a diagnosis, the cross-source analysis (computed
once per diagnosis), one finding per instance, host labels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Finding
from clusterdoctor.rules.registry import Observations


def _one_per_instance(items: Any) -> Iterator[Finding]:
    """Findings keyed by the instance they are about, in order; the same instance seen again (the same
    log in a console capture and a ``--tee`` file, a dump taken twice) adds its evidence to the first."""
    merged: dict[Any, Finding] = {}
    for key, f in items:
        first = merged.get(key)
        if first is None:
            merged[key] = f
            continue
        seen = {(e.description, e.source) for e in first.evidence}
        first.evidence.extend(e for e in f.evidence if (e.description, e.source) not in seen)
        first.confidence = max(first.confidence, f.confidence)
    yield from merged.values()


def _hosts_label(hosts: Any) -> str | None:
    hs = sorted(h for h in hosts if h)
    if not hs:
        return None
    return (
        ("host " if len(hs) == 1 else "hosts ")
        + ", ".join(hs[:4])
        + (f" and {len(hs) - 4} more" if len(hs) > 4 else "")
    )


def _logs(obs: Observations) -> list[Any]:
    return list(obs.get("nccl_log") or [])


def comm_analysis(obs: Observations) -> Any:
    """The cross-source analysis of the comm inputs, computed once per Observations."""
    cached = obs.get("_comm_analysis")
    if cached is not None:
        return cached
    from clusterdoctor.analyze.comm import analyze_comm

    a = analyze_comm(obs.get("kineto") or [], _logs(obs), obs.get("flight_recorder") or [])
    obs.put("_comm_analysis", a)
    return a
