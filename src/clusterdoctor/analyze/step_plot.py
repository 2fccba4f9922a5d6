"""Plot data for the fail-slow step-time chart: the job's step time, how long the other ranks waited
for each rank at each step (the detector's own signal, ``failslow_table.signals``: in a synchronous
job every rank's wall time is the same, this is what tells the straggler apart), and the onset of
each episode.

The pipeline prepares it once (``diagnose``, ``watch``, ``comm analyze``); the HTML reports only draw
it. A job of thousands of ranks is drawn as the band (min to max) and median of the ranks no episode
names, plus the named ranks each on its own line; long runs keep every ``k``-th column.
"""

from __future__ import annotations

import math
from typing import Any

MAX_LINES = 16  # ranks drawn one by one; above it, the others become a band
MAX_POINTS = 600  # columns kept per line


def _ms(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v) * 1000.0, 3)


def step_plot(table: Any, episodes: list[Any] | None = None) -> dict[str, Any]:
    """{"unit", "steps", "job_ms", "series", "lines": [{"rank", "ms", "flagged"}],
    "band": {"ranks", "min", "median", "max"} | None, "onsets": [{"rank", "step", "kind", "level"}]} for a :class:`~clusterdoctor.analyze.failslow_table.StepTable`
    (its ``wall`` in seconds) and the detector's episodes. Empty dict when there is nothing to draw."""
    import numpy as np

    wall = getattr(table, "wall", None)
    if wall is None or wall.size == 0:
        return {}
    R, S = wall.shape
    keep = list(range(0, S, max(1, math.ceil(S / MAX_POINTS))))
    if keep[-1] != S - 1:
        keep.append(S - 1)
    steps = [int(s) for s in np.asarray(table.steps)[keep]]
    try:
        from clusterdoctor.analyze.failslow_table import signals

        per_rank, what = np.maximum(signals(table).late, 0.0), "waited for"
    except Exception:  # a table the detector cannot read is drawn by its wall times
        per_rank, what = wall, "step time"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        job = np.nanmedian(wall[:, keep], axis=0)
    eps = list(episodes or [])
    named = sorted({e.rank for e in eps if getattr(e, "rank", None) is not None})
    ranks = list(table.ranks)
    shown = ranks if R <= MAX_LINES else [r for r in ranks if r in named][:MAX_LINES]
    lines = [
        {"rank": int(r), "ms": [_ms(v) for v in per_rank[ranks.index(r), keep]], "flagged": r in named}
        for r in shown
    ]
    band = None
    rest = [i for i, r in enumerate(ranks) if r not in shown]
    if rest:
        sub = per_rank[np.ix_(rest, keep)]
        with np.errstate(all="ignore"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                band = {
                    "ranks": len(rest),
                    "min": [_ms(v) for v in np.nanmin(sub, axis=0)],
                    "median": [_ms(v) for v in np.nanmedian(sub, axis=0)],
                    "max": [_ms(v) for v in np.nanmax(sub, axis=0)],
                }
    onsets = [
        {
            "rank": None if e.rank is None else int(e.rank),
            "step": int(e.onset_step),
            "kind": str(e.kind),
            "level": str(getattr(e, "level", "warning")),
        }
        for e in eps
    ]
    return {
        "unit": getattr(table, "unit", "step"),
        "steps": steps,
        "job_ms": [_ms(v) for v in job],
        "series": what,
        "lines": lines,
        "band": band,
        "onsets": onsets,
    }
