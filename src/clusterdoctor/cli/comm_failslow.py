"""The fail-slow part of ``clusterdoctor comm analyze``: per-step times per rank from the traces and
Flight Recorder dumps, the straggler, its class and onset (the same rules as ``clusterdoctor watch``).

Kept apart from :mod:`clusterdoctor.cli.comm` so that the comm command's own loading can change
without touching it: :func:`failslow_report` takes the step summaries the parallel load made, or what
``load_comm_observations`` loaded, or reads the paths in parallel keeping only step records.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


def failslow_report(
    data: dict[str, Any] | None,
    paths: Sequence[str | os.PathLike[str]],
    workers: int = 0,
    use_ray: bool = False,
    ray_address: str | None = None,
    results: list[Any] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """(findings, section of the comm report). ``results``: the per-file step summaries the parallel
    load already made (:func:`clusterdoctor.observe.comm.parallel.load_comm_parallel`); else
    ``workers``/``use_ray`` read ``paths`` in parallel (only step records travel back), else the
    traces ``data`` holds are used."""
    from clusterdoctor.observe.watch.traces import load_step_records, steps_from_loaded

    if results is not None:
        from clusterdoctor.observe.watch.traces import join_step_sources

        steps, ids, warns = join_step_sources(results)
    elif use_ray or workers > 1 or data is None:
        steps, ids, warns = load_step_records(
            paths, workers=workers or None, ray_address=ray_address, use_ray=use_ray
        )
    else:
        steps, ids, warns = steps_from_loaded(data.get("kineto", []), data.get("flight_recorder", []))
    section: dict[str, Any] = {"ranks": len(ids), "steps": 0, "episodes": [], "silent": [], "warnings": warns}
    if len(ids) < 2 or not steps:
        section["warnings"] = [
            *warns,
            "fail-slow: needs step records of 2+ ranks (ProfilerStep#N or Flight Recorder)",
        ]
        return [], section
    # the detector (numpy) only once two ranks' steps are there: one rank's log never imports it
    from clusterdoctor.analyze.failslow import table_from_records
    from clusterdoctor.rules.failslow import failslow_analysis, run_failslow_rules
    from clusterdoctor.rules.registry import Observations

    table = table_from_records(steps, ids, (), warns)
    obs = Observations()
    obs.put("watch", table)
    obs.put("watch_source", "traces")
    findings, _sk, _ran = run_failslow_rules(obs)
    res = failslow_analysis(obs)
    from clusterdoctor.analyze.step_plot import step_plot

    section.update(
        plot=step_plot(table, res.episodes),
        steps=table.shape[1],
        baseline_step_s=res.baseline_s,
        episodes=[e.as_dict() for e in res.episodes],
        silent=[s.__dict__ for s in res.silent],
        warnings=res.warnings,
    )
    return findings, section
