"""Fail-slow detection: change points in per-rank step times, and the straggler and its class.

Input: a :class:`StepTable` (:mod:`clusterdoctor.analyze.failslow_table`) — ranks by columns (a
column is one training step when the probe's files are read, one query step when Prometheus is
read), holding each rank's step wall time, own work (time until it entered its first collective),
collective wait, data-loader wait, process stall, storage I/O and the wall-clock end of the step.

Detection is CUSUM (E. S. Page, "Continuous inspection schemes", Biometrika 41, 1954), one-sided,
on signals normalised by the job's baseline step time, in four passes:

1. **Stragglers**, one CUSUM per rank on its lateness: how long the others waited for it *at the
   same step* (cross-sectional: what every rank shares — other tenants, the machine, warm-up —
   cancels out, and a rank slow from step 1 stands out without a healthy past of its own). Every
   rank is followed on its own, so two stragglers at once are two episodes.
2. **The job's step time** (median over ranks) where no straggler explains it: one rank frozen
   inside the collectives (named by its own stall), a communication slowdown (localised to a rank
   by the probe's link tests, and then reported from a small factor; unlocalised only when large),
   or every rank slower together.
3. **Spikes**: a rank that keeps the others waiting a whole step or more in single steps at a regular
   spacing (short stops, checkpoints: storage when its I/O counters say so), accumulated per period
   (:mod:`clusterdoctor.analyze.failslow_periodic`).
4. Recurring straggler episodes become one **periodic** episode.

The CUSUM allowance is at least ``p.noise_z`` robust standard deviations of a mean over
``p.min_steps`` steps of the job's own noise (per-step noise from the median absolute first
difference: robust to outliers and to the change point itself; for lateness the median over ranks,
robust to the stragglers themselves), so a
busy shared host raises the bar instead of the alarm. Increments are clipped so that one outlier
step never raises an alarm on its own. Each episode carries its cost (steps lost, factor) and a
level from it (:func:`clusterdoctor.analyze.failslow_classify.level`: a recovered transient is info)
and ``why``: why this rank and not its peers.

Greyhound (Wu et al., USENIX ATC'25) runs Bayesian online change-point detection (BOCD, Adams &
MacKay 2007) on iteration time; we use CUSUM because it is O(1) per sample and vectorises over
10,000 ranks in one pass (bench/failslow.py), and its excursion start is the onset estimate.
numpy is imported here (the CLI imports this lazily).
"""

from __future__ import annotations

import dataclasses
import heapq
import math

import numpy as np

from clusterdoctor.analyze.failslow_born import born_slow
from clusterdoctor.analyze.failslow_classify import (
    consistent_straggler,
    frozen_ranks,
    frozen_siblings,
    healthy_reference,
    job_episode,
    level,
    straggler_episode,
)
from clusterdoctor.analyze.failslow_params import DEFAULTS, Params
from clusterdoctor.analyze.failslow_periodic import (
    merge_periodic,
    periodic_by_acf,
    periodic_by_rank,
    spike_episodes,
)
from clusterdoctor.analyze.failslow_table import (
    Episode,
    FailSlowResult,
    Signals,
    SilentRank,
    StepTable,
    nanmedian,
    robust_sd,
    signals,
    step_at,
    table_from_records,
    time_at,
)

# log of the likelihood ratio that moves a straggler's onset earlier (:func:`_onset_of_last`): 20 : 1,
# the usual "strong evidence" (Kass & Raftery 1995: a Bayes factor of 20 and more is strong)
ONSET_EVIDENCE = math.log(20.0)

__all__ = [
    "DEFAULTS",
    "Episode",
    "FailSlowResult",
    "Params",
    "SilentRank",
    "StepTable",
    "detect",
    "table_from_records",
]


def _cusum_alarm(x: np.ndarray, start: int, k: float, h: float) -> tuple[int, int] | None:
    """First alarm of a one-sided CUSUM of ``x`` from column ``start``: (onset, alarm) or None."""
    s, onset = 0.0, start
    for j in range(start, len(x)):
        s = max(0.0, s + x[j] - k)
        if s == 0.0:
            onset = j + 1
        elif s > h:
            return min(onset, j), j
    return None


def _rows_alarming(y: np.ndarray, start: int, k: float, h: float) -> np.ndarray:
    """Rows whose one-sided CUSUM from ``start`` ever exceeds ``h`` (one vectorised pass over columns:
    10,000 ranks cost as much as a few)."""
    R, S = y.shape
    s = np.zeros(R)
    hit = np.zeros(R, dtype=bool)
    for j in range(start, S):
        s = np.maximum(0.0, s + y[:, j] - k)
        hit |= s > h
    return np.nonzero(hit)[0]


def _refine_onset(x: np.ndarray, onset: int, alarm: int) -> int:
    """The maximum-likelihood start of a mean shift within [onset, alarm]: the shift's size is read
    just after the alarm, and the start is where the sum of ``x - size/2`` up to the alarm peaks."""
    if alarm <= onset:
        return onset
    size = float(np.median(x[alarm : alarm + 5]))
    if size <= 0:
        return onset
    seg = x[onset : alarm + 1] - size / 2
    tail = np.cumsum(seg[::-1])[::-1]  # sum from tau to the alarm
    return onset + int(np.argmax(tail))


def _recovery(x: np.ndarray, start: int, k: float, h: float) -> int | None:
    """Column where the signal returned to its baseline (a CUSUM of ``k - x``), or None."""
    s, begin = 0.0, start
    for j in range(start, len(x)):
        s = max(0.0, s + (k - x[j]))
        if s == 0.0:
            begin = j + 1
        elif s > h:
            return begin
    return None


def _noise(sig: Signals, first: int) -> tuple[float, float]:
    """Robust sd of one rank's lateness (the median over ranks of each rank's, over time: the
    stragglers' own do not count) and of the job's step time over time, in seconds."""
    late = sig.late[:, first:]
    per_rank = robust_sd(late, axis=1) if late.shape[1] > 1 else np.zeros(1)
    s_late = float(np.median(per_rank)) if len(per_rank) else 0.0
    w = sig.W[first:]
    s_w = float(robust_sd(w)) if w.size > 1 else 0.0
    return (s_late if math.isfinite(s_late) else 0.0), (s_w if math.isfinite(s_w) else 0.0)


def detect(
    table: StepTable, params: Params = DEFAULTS, now: float | None = None, live: bool = False
) -> FailSlowResult:
    """Episodes of fail-slow in ``table`` and the ranks that went silent."""
    R, S = table.shape
    warns = list(table.warnings)
    p = params
    silent, job_silent = _silent(table, p, now, live)
    first = p.warmup if S > p.warmup + 4 else 0
    blen = min(p.baseline, max(3, (S - first) // 3))
    if R == 0 or S - first < blen + 3:
        if R:
            warns.append(f"only {S} {table.unit}s of data: too few to judge (need {first + blen + 3})")
        return FailSlowResult([], silent, None, R, S, table.unit, warns, job_silent)
    sig = signals(table)
    base = slice(first, first + blen)
    # warm-up and other tenants can make the first steps slow: never take a baseline above the
    # run's 40th percentile
    W0 = min(float(np.median(sig.W[base])), float(np.percentile(sig.W[first:], 40)))
    if not W0 > 0:
        warns.append("baseline step time is zero; nothing to compare")
        return FailSlowResult([], silent, None, R, S, table.unit, warns, job_silent)
    sig.W0 = W0
    sig.sigma_late, sig.sigma_W = _noise(sig, first)
    # the noise of a mean over min_steps steps (what an episode must stand out from)
    n = math.sqrt(max(1, p.min_steps))
    k_late = max(p.late_k, p.noise_z * sig.sigma_late / W0 / n)
    k_job = max(p.k, p.noise_z * sig.sigma_W / W0 / n)
    y = np.clip(sig.late / W0, -p.clip, p.clip)
    episodes, together = _stragglers(table, sig, y, first, k_late, p) if R > 2 else ([], [])
    episodes += _frozen_beside(table, sig, episodes, p)
    episodes += _job_pass(table, sig, first, base, k_job, episodes, p)
    named_together = _named_together(together, episodes)
    episodes = _collectives_behind_together(episodes, named_together, p) + named_together
    episodes += born_slow(table, sig, first, blen, episodes, p) if R > 2 else []
    busy: dict[int, list[tuple[int, int]]] = {}
    for e in episodes:
        if e.rank is not None:
            busy.setdefault(table.ranks.index(e.rank), []).append((e.onset_col, e.end_col or S))
    if R > 2:
        episodes += spike_episodes(table, sig, busy, p)
    episodes.sort(key=lambda e: (e.onset_col, e.rank if e.rank is not None else -1))
    episodes = merge_periodic(episodes, p)
    episodes = periodic_by_acf(episodes, table, sig, y, p)
    episodes = periodic_by_rank(episodes, table, sig, first, p)
    for e in episodes:
        e.level = level(e, S, p)
        if e.end_col is not None:
            e.detail["end_step"] = step_at(table, e.end_col)
    return FailSlowResult(episodes, silent, W0, R, S, table.unit, warns, job_silent)


def _stragglers(
    tb: StepTable, sig: Signals, y: np.ndarray, first: int, k: float, p: Params
) -> tuple[list[Episode], list[Episode]]:
    """Pass 1: every rank's own lateness episodes (each rank followed on its own); and those that
    explain the job's growth only together with the ranks late at the same time (kept for
    :func:`_named_together`, after the other passes)."""
    S = y.shape[1]
    out: list[Episode] = []
    later: list[Episode] = []
    cand = _rows_alarming(y, first, k, p.late_h)
    if not len(cand):
        return out, later
    rest = np.ones(y.shape[0], dtype=bool)
    rest[cand] = False
    rest_top = sig.late[rest].max(axis=0) if rest.any() else None
    ref = healthy_reference(tb, sig, cand)
    for row in cand:
        x = y[row]
        col = first
        while col < S - 1:
            a = _cusum_alarm(x, col, k, p.late_h)
            if a is None:
                break
            onset, alarm = a
            end = _recovery(x, alarm + 1, k, p.late_h)
            onset = _refine_onset(x, onset, alarm)
            if onset <= first + 1 and first > 0 and float(np.median(x[:first])) > k:
                onset = 0  # late from step 1 (more work than its peers): the warm-up steps show it too
            ep = straggler_episode(tb, sig, int(row), onset, alarm, end, p, cand, rest_top, ref)
            dest = out
            if ep is None:
                ep = straggler_episode(
                    tb, sig, int(row), onset, alarm, end, p, cand, rest_top, ref, together_explain=True
                )
                dest = later
            if ep is not None:
                # an alarm needs min_steps of evidence: it is raised once the episode has lasted that long
                need = min(S - 1, ep.onset_col + p.min_steps - 1)
                if ep.detect_col < need:
                    ep.detect_col, ep.detect_step, ep.detect_t = need, step_at(tb, need), time_at(sig, need)
                # a gradual onset: the rank began to be the last to be ready before its lateness was
                # large enough to accumulate; the onset is where that began
                early = _onset_of_last(sig, int(row), max(col, first), ep.onset_col, alarm, first, p)
                if early < ep.onset_col:
                    ep.detail["onset_from_last_to_be_ready"] = True
                    ep.detail["lateness_onset_step"] = ep.onset_step
                    ep.onset_col, ep.onset_step, ep.onset_t = early, step_at(tb, early), time_at(sig, early)
                dest.append(ep)
            if end is None:
                break
            col = max(end, alarm + 1)
    return out, later


def _named_together(later: list[Episode], done: list[Episode]) -> list[Episode]:
    """The straggler episodes that explain the job's growth only together with the other ranks late
    at the same time (several stragglers, each the last in some of the steps: tests/data/failslow/
    two-quota-*-b4), for the ranks that no other pass named over the same steps: a rank already
    named (frozen inside the collectives, beside a straggler) keeps that episode and its onset, and a
    slowdown of every rank's own work together (a job-wide quota: tests/data/failslow/jobwide-quota,
    where two ranks happen to be the latest in turn) is the job's."""
    out: list[Episode] = []
    for e in later:
        stop = e.end_col if e.end_col is not None else 1 << 62
        if not any(
            (d.rank == e.rank or (d.rank is None and d.kind == "job"))
            and d.onset_col < stop
            and (d.end_col is None or d.end_col > e.onset_col)
            for d in done + out
        ):
            out.append(e)
    return out


def _collectives_behind_together(done: list[Episode], together: list[Episode], p: Params) -> list[Episode]:
    """``done`` without the collective slowdowns that no link test localised and that began within
    ``p.min_steps`` of two or more stragglers named together (:func:`_named_together`) over the same
    steps: two throttled ranks each freeze inside the collectives in some steps, so every rank's
    collectives stretch while no link is slower (b5-l-f09-two, b5-l-f35-two: 10-44 ms of the collectives'
    growth, link scores under 1.3x or on both stragglers' links); the stragglers explain the growth
    together, and each keeps its own episode and ``why``."""
    out: list[Episode] = []
    for e in done:
        if e.kind == "communication" and e.rank is None:
            stop = e.end_col if e.end_col is not None else 1 << 62
            mates = {
                t.rank
                for t in together
                if abs(t.onset_col - e.onset_col) <= p.min_steps
                and t.onset_col < stop
                and (t.end_col is None or t.end_col > e.onset_col)
            }
            if len(mates) >= 2:
                for t in together:
                    if t.rank in mates:
                        t.detail["collectives_slower_s"] = e.detail.get("collective_s")
                        t.why += (
                            f"; the collectives took {e.detail.get('collective_s', 0.0) * 1000:.1f} ms longer "
                            f"over the same steps with no link slower (ranks {', '.join(map(str, sorted(mates)))} "
                            "froze inside them in turn)"
                        )
                continue
        out.append(e)
    return out


def _onset_of_last(sig: Signals, row: int, lo: int, onset: int, alarm: int, first: int, p: Params) -> int:
    """The maximum-likelihood start, in [lo, onset], of a rise in how often ``row`` is the last to be
    ready (a Bernoulli change point: from its share in the job's baseline steps, at least 1/R, to its
    share from ``onset`` to ``min_steps`` past the alarm); ``onset`` when it did not rise."""
    if sig.last_row is None or onset <= lo:
        return onset
    R = sig.late.shape[0]
    is_last = sig.last_row == row
    base = is_last[first : first + p.baseline]
    p0 = min(0.95, max(1.0 / R, float(np.mean(base)) if len(base) else 0.0))
    after = is_last[onset : alarm + p.min_steps]
    p1 = float(np.mean(after)) if len(after) else 0.0
    if not p1 > p0 or p1 >= 1.0:
        p1 = min(p1, 1 - 1e-3)
        if not p1 > p0:
            return onset
    llr = np.where(is_last[lo : alarm + 1], math.log(p1 / p0), math.log((1 - p1) / (1 - p0)))
    tail = np.cumsum(llr[::-1])[::-1]  # evidence of the rise from tau to the alarm
    i = int(np.argmax(tail[: onset - lo + 1]))
    # moved only on strong evidence: the earlier start must be 20x likelier than the lateness onset
    if tail[i] - tail[onset - lo] < ONSET_EVIDENCE:
        return onset
    return min(lo + i, onset)


def _frozen_beside(tb: StepTable, sig: Signals, done: list[Episode], p: Params) -> list[Episode]:
    """Ranks frozen inside the collectives during a straggler's episode, beside it (two throttled
    ranks: one is late to the collectives, the other freezes inside them, so only its own stall
    shows it; tests/data/failslow/two-quota-rank0-rank2): each named on its own stall by
    :func:`~clusterdoctor.analyze.failslow_classify.frozen_ranks`, when it has no episode of its own."""
    out: list[Episode] = []
    S = len(sig.W)
    for ep in list(done):
        if ep.kind != "compute" or ep.rank is None:
            continue
        stop = ep.end_col if ep.end_col is not None else S
        P = slice(ep.onset_col, stop)
        dW = float(np.median(sig.W[P])) - sig.W0
        group = frozen_ranks(tb, ep.onset_col, P, dW, sig.W0, p)
        row = tb.ranks.index(ep.rank)
        if row not in group or len(group) < 2:
            continue
        named = {e.rank for e in done + out if e.onset_col < stop and (e.end_col or S) > ep.onset_col}
        mates = [tb.ranks[i] for i in group if i != row and tb.ranks[i] not in named]
        if not mates:
            continue
        lead = dataclasses.replace(ep, detail={**ep.detail, "frozen_together": mates})
        for e in frozen_siblings(tb, sig, lead, group=[row, *(tb.ranks.index(r) for r in mates)], p=p):
            e.detail["frozen_in_collective"] = True
            e.detail["beside_straggler"] = ep.rank
            e.why += f"; rank {ep.rank} was late to the collectives at the same time"
            out.append(e)
    return out


def _job_pass(
    tb: StepTable, sig: Signals, first: int, base: slice, k: float, done: list[Episode], p: Params
) -> list[Episode]:
    """Pass 2: the job's step time where no straggler episode explains it."""
    S = len(sig.W)
    x = np.clip((sig.W - sig.W0) / sig.W0, -p.clip, p.clip)
    out: list[Episode] = []
    col = first + (base.stop - base.start)
    # Linear in steps (issue 26): a CUSUM started later never rises above one started earlier, so
    # once no recovery is found from some column, none is from any later one (no rescan); and the
    # median up to the end for ever later onsets is kept by a structure that drops the front.
    no_recovery_from = S
    tail = _TailMedian(sig.W)
    while col < S - 1:
        a = _cusum_alarm(x, col, k, p.h)
        if a is None:
            break
        onset, alarm = a
        end = None if alarm + 1 >= no_recovery_from else _recovery(x, alarm + 1, k, p.h)
        if end is None:
            no_recovery_from = min(no_recovery_from, alarm + 1)
        stop = end if end is not None else S
        growth = (tail.median_from(onset) if stop == S else float(np.median(sig.W[onset:stop]))) - sig.W0
        explained = any(
            e.onset_col < stop
            and (e.end_col is None or e.end_col > onset)
            and (e.rank is None or e.detail.get("lateness_s", 0.0) >= 0.3 * growth)
            for e in done + out
        )
        ep = None
        if not explained:
            onset = _refine_onset(x, onset, alarm)
            ep = job_episode(tb, sig, onset, alarm, end, base, p)
        if ep is not None and ep.kind == "communication":
            ep = _straggler_behind(tb, sig, ep, p) or ep
        if ep is not None:
            if ep.kind in ("job", "communication"):
                _onset_of_cause(ep, tb, sig, p)
            out.append(ep)
            out += frozen_siblings(tb, sig, ep, p=p)  # several ranks frozen at once: each named
            if end is None:
                break
            col = max(end, alarm + 1)
        else:
            col = alarm + 1  # noise or explained: look again from here
    return out


def _straggler_behind(tb: StepTable, sig: Signals, ep: Episode, p: Params) -> Episode | None:
    """A communication episode that one rank's lateness causes: the straggler episode of that rank (:func:`~clusterdoctor.analyze.failslow_classify.consistent_straggler`: last to be ready in
    nearly every step, its peers waiting for it, no other rank late), judged without the share of the
    growth its lateness must explain; None when there is no such rank or it is not a straggler."""
    stop = ep.end_col if ep.end_col is not None else len(sig.W)
    row = consistent_straggler(sig, slice(ep.onset_col, stop), p)
    if row is None:
        return None
    out = straggler_episode(tb, sig, row, ep.onset_col, ep.detect_col, ep.end_col, p, explains=0.0)
    if out is None:
        return None
    growth = out.detail["step_growth_s"]
    out.detail["collective_s"] = ep.detail.get("collective_s")
    out.detail["behind_collective_slowdown"] = True
    if ep.rank is not None and ep.rank != out.rank:
        # the link tests ran while the straggler's thread was slow: a skew there does not outweigh
        # every step's order of arrival
        out.detail["link_tests_named"] = ep.rank
    out.why += (
        f"; the job's step grew by {growth * 1000:.1f} ms, more than they waited for it at its first "
        "collective: its late start delays every later collective (sharded models gather each layer), "
        "so the collectives only look slower"
    )
    return out


class _TailMedian:
    """``np.median(w[i:])`` for non-decreasing ``i``, each in O(log n) (built on first use, in
    O(n log n)): two heaps around the median, values before ``i`` removed lazily. NaN as numpy."""

    def __init__(self, w: np.ndarray) -> None:
        self.w = w
        self.i = 0
        self.ready = False

    def _build(self) -> None:
        w = self.w
        self.nan_after = np.isnan(w)[::-1].cumsum()[::-1]
        order = sorted((float(w[j]), j) for j in range(len(w)) if not math.isnan(w[j]))
        half = (len(order) + 1) // 2
        self.lo = [(-v, j) for v, j in order[:half]]  # max-heap (negated) of the lower half
        self.hi = list(order[half:])  # min-heap of the upper half
        heapq.heapify(self.lo)
        heapq.heapify(self.hi)
        self.side = np.zeros(len(w), dtype=np.int8)  # 1: in lo, 2: in hi, 0: removed or NaN
        for _, j in self.lo:
            self.side[j] = 1
        for _, j in self.hi:
            self.side[j] = 2
        self.n_lo, self.n_hi = len(self.lo), len(self.hi)
        self.ready = True

    def _clean(self) -> None:
        side = self.side
        while self.lo and side[self.lo[0][1]] != 1:
            heapq.heappop(self.lo)
        while self.hi and side[self.hi[0][1]] != 2:
            heapq.heappop(self.hi)

    def _balance(self) -> None:
        self._clean()
        while self.n_lo > self.n_hi + 1:
            v, j = heapq.heappop(self.lo)
            heapq.heappush(self.hi, (-v, j))
            self.side[j] = 2
            self.n_lo, self.n_hi = self.n_lo - 1, self.n_hi + 1
            self._clean()
        while self.n_hi > self.n_lo:
            v, j = heapq.heappop(self.hi)
            heapq.heappush(self.lo, (-v, j))
            self.side[j] = 1
            self.n_lo, self.n_hi = self.n_lo + 1, self.n_hi - 1
            self._clean()

    def median_from(self, i: int) -> float:
        if i >= len(self.w):
            return float("nan")
        if not self.ready:
            self._build()
        if self.nan_after[i] > 0:
            return float("nan")
        side = self.side
        while self.i < i:
            j = self.i
            self.i += 1
            if side[j] == 1:
                self.n_lo -= 1
            elif side[j] == 2:
                self.n_hi -= 1
            side[j] = 0
        self._balance()
        if self.n_lo == 0:
            return float("nan")
        if self.n_lo > self.n_hi:
            return -self.lo[0][0]
        return (-self.lo[0][0] + self.hi[0][0]) / 2


def _onset_of_cause(ep: Episode, tb: StepTable, sig: Signals, p: Params) -> None:
    """Move a job-level episode's onset to where the component that explains it (the collectives,
    every rank's stalls or own work) changed: the step time alone also carries other tenants' noise."""
    d = ep.detail
    series = {"communication": sig.comm, "stall": sig.stall_med, "own": sig.own_med}
    key = (
        "communication"
        if ep.kind == "communication"
        else ("stall" if d["common_stall_s"] >= d["common_own_s"] else "own")
    )
    z = series[key]
    lo = max(0, ep.onset_col - 5)
    base = (
        float(np.median(z[max(0, lo - 10) : lo + 1])) if lo > 0 else float(np.median(z[: ep.onset_col + 1]))
    )
    zz = np.clip((z - base) / sig.W0, -p.clip, p.clip)
    stop = ep.end_col if ep.end_col is not None else len(z)
    hi = min(stop - 1, ep.detect_col + 15)
    if hi <= lo:
        return
    onset = _refine_onset(zz, lo, hi)
    if onset != ep.onset_col:
        ep.onset_col = onset
        ep.onset_step = step_at(tb, onset)
        ep.onset_t = time_at(sig, onset)
        need = p.job_min_steps if ep.rank is None else p.min_steps
        if ep.detect_col < onset + need - 1:
            ep.detect_col = min(len(z) - 1, onset + need - 1)
            ep.detect_step = step_at(tb, ep.detect_col)
            ep.detect_t = time_at(sig, ep.detect_col)


def _silent(tb: StepTable, p: Params, now: float | None, live: bool) -> tuple[list[SilentRank], float | None]:
    if not tb.last_t:
        return [], None
    W = nanmedian(tb.wall) if tb.wall.size else float("nan")
    after = max(p.silent_after_s, 20 * float(W) if np.isfinite(W) else 0.0)
    newest_rank = max(tb.last_t, key=lambda r: tb.last_t[r])
    newest = tb.last_t[newest_rank]
    out = []
    for r, t in sorted(tb.last_t.items()):
        if newest - t > after:
            out.append(SilentRank(r, tb.last_step.get(r, -1), t, tb.last_step.get(newest_rank, -1), newest))
    job_silent = newest if (live and now is not None and now - newest > after) else None
    return out, job_silent
