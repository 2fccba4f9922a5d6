"""The fail-slow detector's thresholds and knobs (numpy-free, so the rule catalog imports fast).

Each threshold is a named :class:`~clusterdoctor.model.Threshold` with its source; :class:`Params`
carries them into :func:`clusterdoctor.analyze.failslow.detect`.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterdoctor.model import Threshold

# -- thresholds (each a named constant with its source) ------------------------------------------
CUSUM_ALLOWANCE = Threshold(
    "failslow_cusum_allowance",
    0.15,
    "x baseline step",
    "clusterdoctor default: Page's CUSUM drift allowance k, half the smallest shift worth an alarm "
    "(Montgomery, Introduction to Statistical Quality Control, 6th ed., sec. 9.1: k = delta/2); we care "
    "about slowdowns of 1.3x and more (Greyhound ATC'25 reports fail-slows delaying jobs 1.34x on average)",
    "step-time growth per step below which nothing accumulates",
)
CUSUM_LIMIT = Threshold(
    "failslow_cusum_limit",
    2.0,
    "x baseline step",
    "clusterdoctor default: decision interval h; with increments clipped at 1 per step, a single outlier "
    "step cannot reach it, a 2x slowdown does in 3 steps and 1.5x in 6 (tuned on bench/failslow.py's clean "
    "runs: no alarm on 40+ clean 4-rank jobs on a shared 2-core machine)",
    "accumulated excess step time that raises an alarm",
)
LATE_ALLOWANCE = Threshold(
    "failslow_late_allowance",
    0.15,
    "x baseline step",
    "clusterdoctor default: the others waiting for one rank for more than a tenth of a step, consistently, "
    "is a straggler (C4, HPCA'25: the last rank to arrive at the sync point is the suspect)",
    "lateness per step below which nothing accumulates for a rank",
)
LATE_LIMIT = Threshold(
    "failslow_late_limit",
    2.0,
    "x baseline step",
    "clusterdoctor default (bench/failslow.py): accumulated lateness of one rank that raises an alarm",
    "accumulated lateness of one rank that raises an alarm",
)
MIN_LATENESS = Threshold(
    "failslow_min_lateness",
    0.25,
    "x baseline step",
    "clusterdoctor default, measured (bench/failslow.py): in clean runs on the shared machine one rank's "
    "lateness stayed below 0.2 of a step; every injected straggler made the others wait 0.3 of a step or more",
    "how long the others must wait for one rank, per step, to call it a straggler",
)
MIN_FACTOR = Threshold(
    "failslow_min_factor",
    1.2,
    "x",
    "clusterdoctor default: a slowdown below 1.2x is within the run-to-run noise of real jobs (MegaScale, "
    "NSDI'24, treats <10-20% iteration-time drift as noise) and is not reported",
    "smallest job slowdown reported",
)
MIN_STEPS = Threshold(
    "failslow_min_steps",
    10,
    "steps",
    "clusterdoctor default, measured (bench/failslow.py): on a shared machine one rank can lag for up to ~5 "
    "steps when the scheduler favours the others; a straggler that recovered sooner than this is not reported",
    "shortest straggler episode reported once it is over",
)
JOB_MIN_FACTOR = Threshold(
    "failslow_job_min_factor",
    1.8,
    "x",
    "clusterdoctor default, measured (bench/failslow.py): on the shared 2-core bench machine other tenants "
    "slowed a whole job by up to ~1.6x for tens of steps; a job-wide or collective slowdown (no single rank to blame) must exceed "
    "that to be told apart from them",
    "smallest whole-job or collective slowdown reported",
)
JOB_MIN_STEPS = Threshold(
    "failslow_job_min_steps",
    15,
    "steps",
    "clusterdoctor default: a whole-job or collective slowdown must last 15 steps before it is reported (a "
    "checkpoint or evaluation step is a one-off; other tenants' bursts on the bench machine last ~10 steps)",
    "shortest whole-job slowdown reported",
)
SILENT_AFTER = Threshold(
    "failslow_silent_after",
    30.0,
    "s",
    "clusterdoctor default: twice Prometheus' default 15 s scrape interval; also at least 20 baseline steps",
    "a rank whose last step is this much older than the others' is silent",
)
PERIODIC_MIN_EPISODES = Threshold(
    "failslow_periodic_min_episodes",
    3,
    "episodes",
    "clusterdoctor default: three recurrences at a regular spacing make a period (two could be chance)",
    "recurrences needed to call a slowdown periodic",
)
SLOW_LINK_RATIO = Threshold(
    "failslow_slow_link_ratio",
    3.0,
    "x median link",
    "clusterdoctor default: a transfer 3x slower than the median of the job's links is a slow link "
    "(Minder, NSDI'25: the outlier machine among similar peers is the culprit)",
    "link transfer time, as a multiple of the median link, that marks a slow link",
)

FROZEN_SHARE = Threshold(
    "failslow_frozen_share",
    0.15,
    "x step growth",
    "clusterdoctor default, measured (tests/training/test_faultlab.py in CI, and bench/failslow.py's re-run "
    "of 2026-12-01): a rank held to 15% of a CPU froze in every other step or so, mostly inside the "
    "collective, so it was seldom last to arrive and every rank's collective stretched; the probe's own "
    "stall of that rank grew by 0.24 and 0.39 of the job's step growth (the stall counts only part of a "
    "freeze) while no other rank's grew. One rank's stall explaining this share, every other rank's under "
    "a fifth of it, in a quarter of the steps or more, names that rank",
    "share of the job's step growth that one rank's own process stall must explain to name it",
)

THRESHOLDS = (
    CUSUM_ALLOWANCE,
    CUSUM_LIMIT,
    LATE_ALLOWANCE,
    LATE_LIMIT,
    MIN_STEPS,
    MIN_LATENESS,
    MIN_FACTOR,
    JOB_MIN_FACTOR,
    JOB_MIN_STEPS,
    SILENT_AFTER,
    PERIODIC_MIN_EPISODES,
    SLOW_LINK_RATIO,
    FROZEN_SHARE,
)


@dataclass(frozen=True)
class Params:
    """The detector's knobs (defaults: the thresholds above)."""

    warmup: int = 3
    baseline: int = 10
    k: float = float(CUSUM_ALLOWANCE.value)
    h: float = float(CUSUM_LIMIT.value)
    late_k: float = float(LATE_ALLOWANCE.value)
    late_h: float = float(LATE_LIMIT.value)
    clip: float = 1.0
    min_steps: int = int(MIN_STEPS.value)
    min_lateness: float = float(MIN_LATENESS.value)
    min_factor: float = float(MIN_FACTOR.value)
    job_min_factor: float = float(JOB_MIN_FACTOR.value)
    job_min_steps: int = int(JOB_MIN_STEPS.value)
    job_persistence: float = 0.6
    silent_after_s: float = float(SILENT_AFTER.value)
    periodic_min: int = int(PERIODIC_MIN_EPISODES.value)
    slow_link_ratio: float = float(SLOW_LINK_RATIO.value)
    frozen_share: float = float(FROZEN_SHARE.value)


DEFAULTS = Params()
