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

NOISE_Z = Threshold(
    "failslow_noise_z",
    3.0,
    "robust sd",
    "clusterdoctor default: a CUSUM allowance of at least 3 robust standard deviations of the signal "
    "(1.4826 x the median absolute deviation; Hampel's identifier, Hampel 1974) so that a busy host's "
    "noise never accumulates; chosen by bench/failslow.py's leave-one-fault-type-out search",
    "allowance, in robust standard deviations of the job's own noise, below which nothing accumulates",
)
PERSISTENCE = Threshold(
    "failslow_persistence",
    0.5,
    "share of steps",
    "clusterdoctor default: a straggler is late in half the steps of its episode or more (a CPU quota with "
    "a 100 ms period freezes a rank in every other step; a few late steps among many on time is "
    "contention that passed, not a slow rank)",
    "share of an episode's steps in which the rank must be late (half its median lateness or more)",
)
MIN_LAST_SHARE = Threshold(
    "failslow_min_last_share",
    0.3,
    "share of steps",
    "clusterdoctor default: the rank the others wait for is the last to be ready in 30% of the steps or "
    "more, shared with the ranks late at the same time (two stragglers: 15% each); among 10,000 ranks a "
    "rank that is late only by chance is almost never the last (C4, HPCA'25: the last rank to arrive at "
    "the sync point is the suspect)",
    "share of an episode's steps in which the rank must be the last to be ready",
)
SPIKE_MIN = Threshold(
    "failslow_spike_min",
    1.0,
    "x baseline step",
    "clusterdoctor default, chosen by bench/failslow.py's leave-one-fault-type-out search: one rank "
    "keeping the others waiting a whole step or more in a single step is a spike (a 300 ms stop or a "
    "checkpoint's fsync); the scheduler of a busy shared host delays one rank by a fraction of a step",
    "one rank's lateness in one step, as a multiple of the baseline step, that counts as a spike",
)
SPIKE_MIN_EVENTS = Threshold(
    "failslow_spike_min_events",
    4,
    "spikes",
    "clusterdoctor default: four spikes at a regular spacing (three gaps that agree) make a period; "
    "two or three could be chance on a shared host",
    "spikes of one rank at a regular spacing needed to report them as one periodic slowdown",
)
SPIKE_CV = Threshold(
    "failslow_spike_cv",
    0.3,
    "coefficient of variation",
    "clusterdoctor default: the gaps between a timer's recurrences vary by less than 30% (a checkpoint "
    "every N steps, a cron job every T seconds); random contention's gaps vary about as much as they "
    "are long (coefficient of variation ~1, exponential waiting times)",
    "largest coefficient of variation of the gaps (in steps or in seconds) between spikes of a period",
)
THROTTLE_PERIOD = Threshold(
    "failslow_throttle_period",
    0.5,
    "s",
    "Linux CFS bandwidth control enforces a cgroup CPU quota once per cpu.cfs_period_us (default 100 ms, "
    "kernel Documentation/scheduler/sched-bwc.rst): a throttled rank stops every ~0.1 s, which reads as "
    "stalls at a regular spacing; job-level timers (checkpoints, cron, a SIGSTOP loop) recur at seconds or "
    "more. clusterdoctor default: five times the CFS period",
    "slowdowns of one rank (or of its data loader) recurring faster than this are sustained (compute or "
    "data), not a periodic event",
)
IO_SPIKE_BYTES = Threshold(
    "failslow_io_spike_bytes",
    1 << 20,
    "bytes",
    "clusterdoctor default: a step in which the rank read or wrote 1 MiB or more of storage (the probe's "
    "/proc/self/io counters) while its peers did not; a training step that only logs writes a few KiB",
    "storage I/O in a spike step that makes it a storage spike",
)
IO_SPIKE_MIN = Threshold(
    "failslow_io_spike_min",
    0.2,
    "x baseline step",
    "clusterdoctor default: in a step in which the rank moved failslow_io_spike_bytes of storage, the "
    "others waiting a fifth of a step for it is a storage spike (the I/O counters corroborate what the "
    "lateness alone could not tell from noise; a 32 MiB checkpoint fsynced on the bench machine kept the "
    "others waiting 0.3-1 step)",
    "lateness in a step with the rank's own storage I/O that counts as a storage spike",
)
COMM_LOCAL_MIN_FACTOR = Threshold(
    "failslow_comm_local_min_factor",
    1.2,
    "x",
    "clusterdoctor default: a collective slowdown the probe's link tests localise to one rank is reported "
    "from the same 1.2x as a straggler (the link test, not the size of the slowdown, tells it apart from "
    "other tenants); without a localisation it needs failslow_job_min_factor",
    "smallest collective slowdown reported when the link tests name a rank",
)
TRANSIENT_STEPS = Threshold(
    "failslow_transient_steps",
    30,
    "steps",
    "clusterdoctor default: contention that lasted less than 30 steps and recovered cost the job a few "
    "steps; it is reported as info (shared hosts have such bursts; Greyhound, ATC'25, counts only "
    "fail-slows that persist)",
    "a recovered episode shorter than this is info, whatever its factor",
)
CRITICAL_FACTOR = Threshold(
    "failslow_critical_factor",
    1.5,
    "x",
    "clusterdoctor default: a job running 1.5x slower or worse, still going, loses a third of its "
    "GPU-hours (Greyhound, ATC'25: fail-slows delay jobs 1.34x on average)",
    "slowdown of an ongoing episode that makes it critical",
)
CRITICAL_LOST_SHARE = Threshold(
    "failslow_critical_lost_share",
    0.2,
    "share of steps",
    "clusterdoctor default: a periodic slowdown that costs a fifth of the job's time since it began",
    "share of the job's time lost to a periodic slowdown that makes it critical",
)
INFO_LOST_SHARE = Threshold(
    "failslow_info_lost_share",
    0.03,
    "share of steps",
    "clusterdoctor default: a periodic slowdown costing under 3% of the job's time is within run-to-run "
    "noise (MegaScale, NSDI'24) and is info",
    "share of the job's time lost below which a periodic slowdown is info",
)

BORN_MIN_LATENESS = Threshold(
    "failslow_born_min_lateness",
    0.12,
    "x baseline step",
    "clusterdoctor default: a rank slow from its first step (more work than its peers: an unbalanced shard, "
    "a slower device) has no healthy past of its own, so no change point; judged against its peers at the "
    "same steps once the run settled, the others waiting over a tenth of a step for it (median) is "
    "material (MegaScale, NSDI'24, treats <10% iteration-time drift as noise); 0.12, not 0.1: on a host at "
    "load 15-20 the most-late rank of a clean run reaches 0.110 of a step (b4-l-c06-clean; max over the 86 "
    "clean runs of fault-lab batches 3 and 4, settled steps), while 4x the batch on one rank gives 0.13-0.26 "
    "(b3-l-f08-imbalance, 0.111, is then missed)",
    "median lateness over the whole run, against the healthy peers, that names a rank slow from step 1",
)
BORN_EARLY_LATENESS = Threshold(
    "failslow_born_early_lateness",
    0.1,
    "x baseline step",
    "clusterdoctor default: a rank slow from step 1 is already late in its first steps after the warm-up "
    "(median over the baseline's steps); a tenth of a step is material (MegaScale, NSDI'24); below it, the "
    "rank became late later and the change-point pass is for it (b4-l-f01-stop and b4-l-f14-stop, 0.07 and "
    "0.09 there before their fault at step 29; 4x the batch on one rank: 0.10-0.28 over batches 3 and 4)",
    "median lateness in the first steps after the warm-up of a rank named slow from step 1",
)
BORN_LAST_SHARE = Threshold(
    "failslow_born_last_share",
    0.5,
    "share of steps",
    "clusterdoctor default: a rank slow from step 1 is the last to be ready in most steps (shared with the "
    "other ranks slow with it); on a busy shared host every rank is the last now and then, and among N "
    "similar ranks each is last in about 1/N of the steps, so a majority is never chance",
    "share of the run's steps in which a rank slow from step 1 must be the last to be ready",
)
BORN_MAX_SPREAD = Threshold(
    "failslow_born_max_spread",
    4.0,
    "x median lateness",
    "clusterdoctor default, measured (bench/failslow.py, batches 3-4): a rank with more work than its peers "
    "is late in most steps alike, its 90th-percentile lateness 1.55-2.34x its median over the settled "
    "steps (the 14 imbalance runs named slow from step 1); a rank late in bursts from a later step is not "
    "slow from step 1 (b4-l-f31-periodic: a CPU quota 1 s on / 1 s off from step 29 on a rank a little "
    "late before it, 6.7x); 4, about the geometric middle of 2.34 and 6.7",
    "the most a born-slow rank's 90th-percentile lateness may be, as a multiple of its median",
)

BORN_COMPUTE_EXCESS = Threshold(
    "failslow_born_compute_excess",
    0.5,
    "x peers' compute",
    "clusterdoctor default, chosen on the dev batches 3-5 of bench/failslow.py (round 6, 2026-12-04; "
    "bench/RESULTS.md): a rank with more work than its peers from step 1 computes longer at every step; "
    "4x the batch on one rank of the fault lab gave +53% to +159% over the peers' median compute (20 "
    "runs), while the most any rank of the 112 clean runs exceeded its peers by was +60% (b3-l-c27-clean, "
    "rank 2, above all its peers in only 33% of the steps), the next +42%; 0.3, 0.4 and 0.5 scored alike "
    "on batches 3-5 (0.6 lost a run), and 0.5 is the highest bar among them",
    "how much more compute than its peers' median (median over the settled steps) names a rank slow from "
    "step 1 (with failslow_born_compute_share)",
)
BORN_COMPUTE_SHARE = Threshold(
    "failslow_born_compute_share",
    0.4,
    "share of steps",
    "clusterdoctor default, chosen on the dev batches 3-5 of bench/failslow.py (round 6): among N similar "
    "ranks each computes longest at about 1/N of the steps (25% of 4); a rank with 4x the batch was above "
    "every peer in 42-77% of the settled steps (20 runs), no rank of a clean run with its compute +50% over "
    "its peers' in more than 33%; 0.35 and 0.4 scored alike on batches 3-5 (0.5 lost a run)",
    "share of the settled steps in which a rank's compute must be out of its peers' spread (above all of "
    "them) to name it slow from step 1",
)
BORN_COMPUTE_LATENESS = Threshold(
    "failslow_born_compute_lateness",
    0.05,
    "x baseline step",
    "clusterdoctor default: a rank with more compute that the others wait for less than 5% of a step "
    "costs the job under 5%, what bench/failslow.py counts as no cost (NO_COST); 4x the batch on one rank "
    "made the others wait 0.086-0.18 of a step",
    "lateness (median over the run, against the healthy peers) a rank named from its compute must cause",
)

PERIODIC_STRENGTH = Threshold(
    "failslow_periodic_strength",
    0.3,
    "autocorrelation",
    "clusterdoctor default, chosen on the dev batches 3-5 of bench/failslow.py (round 6, 2026-12-04): the "
    "autocorrelation at its period of the lateness (on the wall clock) of the rank that kept the others "
    "waiting longest; a CPU quota on one rank 1 s on / 1 s off gave 0.34-0.77 at 1.8-2.1 s (20 runs), the "
    "112 clean runs 0.33 at most (that rank 0.1x its peers' lateness, far from failslow_periodic_stand_out); "
    "of 0.3, 0.4 and 0.5, 0.3 scored best on batches 3-5 (it adds b4-q-f31-periodic, rank 3, onset step 30, "
    "and loses no run)",
    "autocorrelation of a rank's lateness that makes its bursts periodic",
)
PERIODIC_STAND_OUT = Threshold(
    "failslow_periodic_stand_out",
    1.5,
    "x peers' lateness",
    "clusterdoctor default, chosen on the dev batches 3-5 of bench/failslow.py (round 6): the rank named "
    "periodic kept the others waiting, summed over the run, 1.5 times as long as any other rank or more "
    "(the periodic quota's victim: 1.8-4.1x over 20 runs; every rank of a clean run or a job-wide "
    "slowdown about alike); 1.2 scored higher on batches 3-5 with two short-stop runs found from step 4, "
    "25 steps before their fault, so 1.5 was kept",
    "how much more lateness, summed over the run, the rank of a periodic slowdown caused than any peer",
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
    NOISE_Z,
    PERSISTENCE,
    MIN_LAST_SHARE,
    SPIKE_MIN,
    SPIKE_MIN_EVENTS,
    SPIKE_CV,
    THROTTLE_PERIOD,
    IO_SPIKE_BYTES,
    IO_SPIKE_MIN,
    COMM_LOCAL_MIN_FACTOR,
    TRANSIENT_STEPS,
    CRITICAL_FACTOR,
    CRITICAL_LOST_SHARE,
    INFO_LOST_SHARE,
    BORN_MIN_LATENESS,
    BORN_EARLY_LATENESS,
    BORN_LAST_SHARE,
    BORN_MAX_SPREAD,
    BORN_COMPUTE_EXCESS,
    BORN_COMPUTE_SHARE,
    BORN_COMPUTE_LATENESS,
    PERIODIC_STRENGTH,
    PERIODIC_STAND_OUT,
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
    noise_z: float = float(NOISE_Z.value)
    persistence: float = float(PERSISTENCE.value)
    min_last_share: float = float(MIN_LAST_SHARE.value)
    spike_min: float = float(SPIKE_MIN.value)
    spike_min_events: int = int(SPIKE_MIN_EVENTS.value)
    spike_cv: float = float(SPIKE_CV.value)
    throttle_period_s: float = float(THROTTLE_PERIOD.value)
    io_spike_bytes: float = float(IO_SPIKE_BYTES.value)
    io_spike_min: float = float(IO_SPIKE_MIN.value)
    comm_local_min_factor: float = float(COMM_LOCAL_MIN_FACTOR.value)
    transient_steps: int = int(TRANSIENT_STEPS.value)
    critical_factor: float = float(CRITICAL_FACTOR.value)
    critical_lost_share: float = float(CRITICAL_LOST_SHARE.value)
    info_lost_share: float = float(INFO_LOST_SHARE.value)
    born_min_lateness: float = float(BORN_MIN_LATENESS.value)
    born_early_lateness: float = float(BORN_EARLY_LATENESS.value)
    born_last_share: float = float(BORN_LAST_SHARE.value)
    born_max_spread: float = float(BORN_MAX_SPREAD.value)
    born_compute_excess: float = float(BORN_COMPUTE_EXCESS.value)
    born_compute_share: float = float(BORN_COMPUTE_SHARE.value)
    born_compute_lateness: float = float(BORN_COMPUTE_LATENESS.value)
    periodic_strength: float = float(PERIODIC_STRENGTH.value)
    periodic_stand_out: float = float(PERIODIC_STAND_OUT.value)

    def replace(self, **kw: float) -> Params:
        """A copy with some knobs changed (the bench's threshold search)."""
        import dataclasses

        return dataclasses.replace(self, **kw)  # type: ignore[arg-type]


DEFAULTS = Params()
