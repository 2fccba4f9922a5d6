"""The fail-slow rules' input: the step table (kind ``watch``) and the detector's result, once per
Observations. ``watch`` comes from ``clusterdoctor watch`` (probe files, Prometheus) or, for
``diagnose``, is derived from the probe files it was given or from per-rank traces; trace rules
(COMM006, COMM007) ask :func:`straggler_explains` whether a straggler explains what they see.
"""

from __future__ import annotations

from typing import Any

from clusterdoctor.rules.registry import Observations, register_derived, register_input

__all__ = ["failslow_analysis", "straggler_explains"]

_WATCH_HINT = (
    "no fail-slow probe data (clusterdoctor watch --from DIR / --prometheus URL, or per-rank traces "
    "with ProfilerStep annotations; install the probe with clusterdoctor.training.watch)"
)
register_input("watch", _WATCH_HINT)


def _derive_watch(obs: Observations) -> tuple[Any, str | None]:
    """The step table for ``diagnose``: from the probe files given (one job: the one with the most
    step records, the others named in a warning), else from per-rank profiler traces or Flight
    Recorder dumps (2+ ranks)."""
    files = obs.get("watch_files") or []
    kineto, fr = obs.get("kineto") or [], obs.get("flight_recorder") or []
    if not files and not kineto and not fr:
        return None, None
    from clusterdoctor.analyze.failslow_table import table_from_records

    warns = obs.data.setdefault("warnings_list", [])
    if files:
        from clusterdoctor.observe.watch.records import WatchFiles

        merged = WatchFiles()
        for wf in files:
            merged.extend(wf)
        jobs = merged.by_job()
        if not jobs:
            return None, "fail-slow probe files without step records"
        job = max(jobs, key=lambda j: (len({s.rank for s in jobs[j].steps}), len(jobs[j].steps), j))
        if len(jobs) > 1:
            others = ", ".join(sorted(j for j in jobs if j != job))
            warns.append(f"fail-slow probe files of {len(jobs)} jobs: judged {job!r}; not judged: {others} "
                         "(clusterdoctor watch --from DIR judges each)")  # fmt: skip
        wf = jobs[job]
        table = table_from_records(wf.steps, wf.identities, wf.links, wf.warnings)
        obs.put("watch_source", "fail-slow probe files")
    else:
        from clusterdoctor.observe.watch.traces import steps_from_loaded

        steps, ids, w = steps_from_loaded(kineto, fr)
        if len(ids) < 2 or not steps:
            return (
                None,
                "fail-slow from traces needs step records of 2+ ranks (ProfilerStep#N or Flight Recorder)",
            )
        table = table_from_records(steps, ids, (), w)
        obs.put("watch_source", "traces")
    warns.extend(f"fail-slow: {w}" for w in table.warnings)
    table.warnings = []
    return table, None


register_derived("watch", _derive_watch, _WATCH_HINT)


def straggler_explains(obs: Observations) -> Any:
    """The fail-slow episode (warning or above) that explains other ranks' waiting — a straggler of
    any class, or a communication slowdown — or None (no probe data or traces of 2+ ranks, or no such
    episode). Trace rules use it to mark their per-victim findings as symptoms of it."""
    if not obs.has("watch") and "watch" not in obs.absent_reasons:
        table, why = _derive_watch(obs)  # a catalogue run without this module's rules (comm analyze)
        if table is not None:
            obs.put("watch", table)
        elif why:
            obs.absent_reasons["watch"] = why
    if not obs.has("watch"):
        return None
    eps = [e for e in failslow_analysis(obs).episodes if e.level != "info"]
    return max(eps, key=lambda e: (e.factor, e.steps_lost), default=None)


def failslow_analysis(obs: Observations) -> Any:
    """The detector's result for ``obs["watch"]``, computed once per Observations."""
    cached = obs.get("_failslow")
    if cached is not None:
        return cached
    from clusterdoctor.analyze.failslow import DEFAULTS, detect

    res = detect(
        obs.get("watch"),
        obs.get("watch_params") or DEFAULTS,
        now=obs.get("now"),
        live=bool(obs.get("watch_live")),
    )
    obs.put("_failslow", res)
    return res
