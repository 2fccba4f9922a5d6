"""Fail-slow from birth: a rank slow from its first step (more work than its peers: an unbalanced
shard, a slower device), which has no healthy past of its own and so no change point.

Each rank is compared with its peers *at the same steps* (cross-sectional), over the steps before
any episode found by the other passes began (what those explain is theirs), in two ways:

* :func:`_by_lateness`: the others waited for it (its lateness, median over the settled steps) a
  material share of a step, from the start, in most steps alike;
* :func:`_by_compute`: its own compute (the probe's ``own`` minus its data wait) was above every
  peer's at the same step in most steps, and by a material share of the peers' median: a rank with
  twice the work whose extra time the collectives partly hide (the others then wait for it a tenth of
  a step or less, at the floor of a busy host's lateness noise: bench/failslow-batch5.md) still stands
  out of its peers' spread in its compute at every step.

Either way the rank is then judged as any straggler
(:func:`~clusterdoctor.analyze.failslow_classify.straggler_episode`: the others wait for it in most
steps, it is the last to be ready in its share of them, its class), and its level follows what it
costs the job (:func:`~clusterdoctor.analyze.failslow_classify.level`). numpy is imported here.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from clusterdoctor.analyze.failslow_classify import MAX_TOGETHER, straggler_episode
from clusterdoctor.analyze.failslow_params import Params
from clusterdoctor.analyze.failslow_table import MAD_SD, Episode, Signals, StepTable, step_at

__all__ = ["born_slow", "compute_vs_peers"]

# up to this many peers, "out of the peers' spread" at a step is above every one of them; with more,
# above their median by 3 robust standard deviations (Hampel's identifier, Hampel 1974): the largest
# of many healthy peers grows with their number
MAX_PEERS_BY_MAX = MAX_TOGETHER


def born_slow(
    tb: StepTable, sig: Signals, first: int, blen: int, done: list[Episode], p: Params
) -> list[Episode]:
    """Ranks slow from their first step (:func:`_by_lateness`, then :func:`_by_compute` for the ranks
    it did not name)."""
    out = _by_lateness(tb, sig, first, blen, done, p)
    return out + _by_compute(tb, sig, first, blen, done + out, p)


def _window(sig: Signals, first: int, blen: int, done: list[Episode], p: Params) -> tuple[int, int]:
    """The columns the born-slow evidence is read on: from ``blen`` steps past the warm-up (settled)
    to where the first episode of another pass began (from the warm-up when that leaves fewer than
    ``p.min_steps``)."""
    S = sig.late.shape[1]
    begun = [e.onset_col for e in done if e.onset_col > first]
    stop = min([S, *begun])
    settled = first + blen if stop - first - blen >= p.min_steps else first
    return settled, stop


def _by_lateness(
    tb: StepTable, sig: Signals, first: int, blen: int, done: list[Episode], p: Params
) -> list[Episode]:
    """Named when the others waited ``p.born_min_lateness`` of a step or more for it (median over the
    steps once the run settled, ``blen`` steps past the warm-up: not only while the run settled) and
    ``p.born_early_lateness`` over those first ``blen`` (slow from the start, not since some later
    step) and it was the last to be ready in ``p.born_last_share`` of the settled steps or more (among
    N similar ranks each is last in about 1/N of them), late in most steps alike (its 90th percentile
    within ``p.born_max_spread`` times its median: not bursts from a later step).
    tests/data/failslow/imbalance-rank1: 4x the batch on rank 1."""
    R, S = sig.late.shape
    # the evidence is read on the settled steps, after the first blen past the warm-up: on a loaded
    # host one rank can be slow for a while after the start and then settle (b4-l-c10-clean: rank 1
    # kept the others waiting 82% of a step in its first 10 steps, ~10% after), which is no more
    # work than its peers; a rank with more work is as slow after those steps as in them
    # (when another episode began too soon for that, on the steps there are, from the warm-up)
    settled, stop = _window(sig, first, blen, done, p)
    n = stop - settled
    if n < max(p.min_steps, blen) or sig.last_row is None or sig.W0 <= 0:
        return []
    C = slice(settled, stop)
    med = np.median(sig.late[:, C], axis=1)
    # the bar: material, and above the noise of a median over these steps
    bar = max(p.born_min_lateness * sig.W0, p.noise_z * sig.sigma_late / math.sqrt(n))
    last = np.bincount(sig.last_row[C], minlength=R) / n
    early = np.median(sig.late[:, first : first + blen], axis=1)
    # a rank whose own episode already covers the start (the change-point pass found it from there)
    named = {e.rank for e in done if e.rank is not None and e.onset_col <= first + blen}
    q = p.replace(min_lateness=p.born_min_lateness)
    out: list[Episode] = []
    # already late in its first blen, so not a rank that became late at some later step (the
    # change-point pass is for that)
    early_bar = max(p.born_early_lateness * sig.W0, p.noise_z * sig.sigma_late / math.sqrt(blen))
    for row in np.nonzero((med >= bar) & (early >= early_bar) & (last >= p.born_last_share))[0]:
        row = int(row)
        if tb.ranks[row] in named:
            continue
        if float(np.percentile(sig.late[row, C], 90)) > p.born_max_spread * med[row]:
            continue  # late in bursts, not in most steps alike: not more work from step 1
        if settled == first and S - first - blen >= p.min_steps:
            # another episode began before the run settled, so the evidence above is the unsettled
            # steps': a rank with more work is as late on the settled steps of the whole run (the
            # clean-loaded-rank1-slow-start run under a fold's knobs: an info episode from step 20)
            if float(np.median(sig.late[row, first + blen :])) < p.born_min_lateness * sig.W0:
                continue
        alarm = min(S - 1, first + p.min_steps - 1)
        ep = straggler_episode(tb, sig, row, 0, alarm, None, q, explains=0.0)
        if ep is None:
            continue
        ep.detail["born_slow"] = True
        ep.detail["last_share_run"] = round(float(last[row]), 3)
        when = "" if stop == S else f" before step {step_at(tb, stop)}"
        ep.why = (
            f"slow from its first step: in the {n} steps after the first {settled - first} past the warm-up{when} it "
            f"was the last to be ready "
            f"in {last[row]:.0%} of them (each of {R} similar ranks would be in ~{1 / R:.0%}) and the others "
            f"waited {med[row] * 1000:.1f} ms a step for it ({med[row] / sig.W0:.0%} of a step), already in "
            f"its first {blen}; no rank that was not late made them wait more than "
            f"{ep.detail['peer_lateness_s'] * 1000:.1f} ms"
        )
        out.append(ep)
    return out


def _median(a: np.ndarray, axis: int) -> np.ndarray:
    return np.median(a, axis=axis) if np.isfinite(a).all() else np.nanmedian(a, axis=axis)


def compute_vs_peers(comp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row of ``comp`` (ranks by steps: each rank's own compute) against its peers at the same
    steps: (its median excess over the peers' median, as a share of it; the share of the steps in which
    it was out of the peers' spread: above every peer's, or with more than :data:`MAX_PEERS_BY_MAX`
    peers above their median by 3 robust sd). NaN (no sample) counts as not out, and a row with no
    comparable step has excess NaN."""
    R, S = comp.shape
    excess = np.full(R, np.nan)
    share = np.zeros(R)
    if R < 2 or S == 0:
        return excess, share
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if R - 1 > MAX_PEERS_BY_MAX:
            # many peers: one rank among them moves their median and spread by ~1/R; all ranks at once
            # (np.median where nothing is missing: nanmedian is several times slower on 10,000 ranks)
            med = _median(comp, 0)
            sd = MAD_SD * _median(np.abs(comp - med[None, :]), 0)
            fence = med + 3.0 * sd
            out = comp > fence[None, :]
            excess = _median(comp / med[None, :] - 1.0, 1)
            share = np.mean(out, axis=1)
        else:
            for i in range(R):
                peers = np.delete(comp, i, axis=0)
                med = np.nanmedian(peers, axis=0)
                ok = np.isfinite(comp[i]) & np.isfinite(med) & (med > 0)
                if not ok.any():
                    continue
                excess[i] = float(np.median(comp[i, ok] / med[ok] - 1.0))
                share[i] = float(np.mean(comp[i] > np.nanmax(peers, axis=0)))
    return excess, share


def _by_compute(
    tb: StepTable, sig: Signals, first: int, blen: int, done: list[Episode], p: Params
) -> list[Episode]:
    """Named when, over the settled steps (at least ``p.transient_steps`` of them: a shorter lead could
    be contention that passes), its own compute was out of its peers' spread at the same step in
    ``p.born_compute_share`` of the steps or more (among N similar ranks each is above all the others
    in ~1/N) and exceeded the peers' median by ``p.born_compute_excess`` of it or more (median over the
    steps), already above the peers' median in its first steps (the ``blen`` past the warm-up: not a
    rank slow only since some later step; on a busy host 10 steps of a rank with 4x the batch gave as
    little as +6% there, bench/failslow.py batch 5), and the others
    waited ``p.born_compute_lateness`` of a step or more for it (median over the run): more work that
    the others do not wait for costs the job nothing."""
    R, S = sig.late.shape
    settled, stop = _window(sig, first, blen, done, p)
    n = stop - settled
    if settled == first or n < p.transient_steps or sig.W0 <= 0:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        comp = tb.own - np.nan_to_num(tb.data)
    excess, share = compute_vs_peers(comp[:, settled:stop])
    early, _ = compute_vs_peers(comp[:, first:settled])
    named = {e.rank for e in done if e.rank is not None and e.onset_col <= first + blen}
    q = p.replace(min_lateness=p.born_compute_lateness)
    out: list[Episode] = []
    cand = (
        (np.nan_to_num(excess, nan=-1.0) >= p.born_compute_excess)
        & (share >= p.born_compute_share)
        & (np.nan_to_num(early, nan=-1.0) > 0.0)
    )
    for row in np.nonzero(cand)[0]:
        row = int(row)
        if tb.ranks[row] in named:
            continue
        alarm = min(S - 1, settled + p.transient_steps - 1)
        ep = straggler_episode(tb, sig, row, 0, alarm, None, q, explains=0.0)
        if ep is None:
            continue
        ep.detail["born_slow"] = True
        ep.detail["compute_excess"] = round(float(excess[row]), 3)
        ep.detail["compute_out_of_peers_share"] = round(float(share[row]), 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mine = float(np.nanmedian(comp[row, settled:stop]))
            peers = float(np.nanmedian(np.delete(comp[:, settled:stop], row, axis=0)))
        ep.detail["compute_s"] = round(mine, 6)
        ep.detail["compute_peers_s"] = round(peers, 6)
        when = "" if stop == S else f" before step {step_at(tb, stop)}"
        out_of = "above every peer's" if R - 1 <= MAX_PEERS_BY_MAX else "out of its peers' spread"
        ep.why = (
            f"slow from its first step: its own compute was {out_of} at the same step in "
            f"{share[row]:.0%} of the {n} settled steps{when} (each of {R} similar ranks would be in "
            f"~{1 / R:.0%}), {mine * 1000:.1f} ms against the peers' {peers * 1000:.1f} ms (median, "
            f"+{excess[row]:.0%}), already in its first {settled - first}; the others waited "
            f"{ep.detail['lateness_s'] * 1000:.1f} ms a step for it; no rank that was not late made them "
            f"wait more than {ep.detail['peer_lateness_s'] * 1000:.1f} ms"
        )
        out.append(ep)
    return out
