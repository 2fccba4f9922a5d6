"""Fail-slow episodes judged: which rank (or link, or the whole job), which class, what it cost.

:func:`straggler_episode` judges one rank's lateness episode (compute, data loader or storage
straggler), :func:`job_episode` an episode of the job's step time that no straggler explains (a rank
frozen inside the collectives, a communication slowdown localised by the probe's link tests, or the
whole job slower), and :func:`level` turns what an episode cost the job into info, warning or
critical. Every episode carries ``why``: why this rank (or link) and not its peers.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from clusterdoctor.analyze.failslow_params import Params
from clusterdoctor.analyze.failslow_table import (
    Episode,
    Signals,
    StepTable,
    nanmedian,
    step_at,
    steps_per,
    time_at,
)

__all__ = [
    "consistent_straggler",
    "frozen_ranks",
    "frozen_siblings",
    "healthy_reference",
    "job_episode",
    "level",
    "localise_link",
    "straggler_episode",
]


# clusterdoctor default (bench/failslow.py: the first detector required 30%): a straggler's lateness explains
# at least half the job's step growth (a rank slow from step 1: the growth is ~0 and it always does)
EXPLAINS = 0.5
# ...or 30% when it is the last to be ready in 80% of the steps or more: under FSDP a straggler delays
# every layer's all-gather, so the job slows by several times what the others wait at any one
# collective (tests/training/test_faultlab.py::test_fsdp_straggler_named, FSDP2: 1.6 steps of lateness,
# 4.4 of growth, last in 100% of the steps); a whole-job quota's "latest" rank changes step to step
# (tests/data/failslow/jobwide-quota: last in 35-43% of the steps)
EXPLAINS_ALWAYS_LAST = 0.3
ALWAYS_LAST = 0.8
# a collective slowdown the link tests pin on a rank is its network's when the collectives explain this
# share of the job's step growth or more: the share a straggler's lateness must explain (every injected
# slow link of bench/failslow.py batches 3-5: 0.71-1.40; b5-l-c07-clean, CPU contention under stress-ng
# while rank 2's link tests ran: 0.36; b4-q-c06-clean: 0.25)
COMM_EXPLAINS = EXPLAINS
MAX_TOGETHER = 8  # ranks late at the same time that can each be named a straggler (more: the job's)


def _ms(x: float) -> str:
    return f"{x * 1000:.1f} ms"


def straggler_episode(
    tb: StepTable,
    sig: Signals,
    row: int,
    onset: int,
    alarm: int,
    end: int | None,
    p: Params,
    candidates: np.ndarray | None = None,
    rest_top: np.ndarray | None = None,
    ref: tuple | None = None,
    explains: float | None = None,
    together_explain: bool = False,
) -> Episode | None:
    """Rank ``row`` late from ``onset`` (CUSUM alarm at ``alarm``, back to normal at ``end``): a
    straggler episode, or None when it is not a rank the others waited for (every rank late together,
    late in only a few of the steps, less than ``p.min_lateness`` of a step, or seldom the last to be
    ready). ``candidates``: the rows whose own CUSUM alarmed (the only ones that can be late together
    with it; default every row); ``rest_top``: per column, the largest lateness of the other rows;
    ``ref``: the healthy peers' medians (:func:`healthy_reference`); ``explains``: the share of the
    job's step growth its lateness must explain (default: :data:`EXPLAINS`, or
    :data:`EXPLAINS_ALWAYS_LAST` for a rank last in nearly every step); ``together_explain``: that
    share explained by its lateness and that of the ranks late at the same time together (two
    stragglers taking turns to be the last each make the others wait in only some of the steps)."""
    S = len(sig.W)
    stop = end if end is not None else S
    stop = max(stop, min(S, onset + 1))
    P = slice(onset, stop)
    n_cols = stop - onset
    if end is not None and n_cols < p.min_steps:
        return None  # a lag that passed within a few steps
    W0 = sig.W0
    R = sig.late.shape[0]
    mine = sig.late[row, P]
    if float(np.median(mine)) < 0.5 * p.min_lateness * W0:
        return None  # not even half the bar against the median rank (cheap test first)
    cand = np.arange(R) if candidates is None else np.asarray(candidates)
    # against the peers that are not late themselves: with two stragglers among four ranks the median
    # rank is half a straggler, and each straggler would look half as late as it is
    mine = _late_vs_healthy(tb, row, P, mine, ref)
    d_late = float(np.median(mine))
    if d_late < p.min_lateness * W0:
        return None
    persistent = float(np.mean(mine >= 0.5 * d_late))
    if persistent < p.persistence:
        return None  # late in a few steps only: spikes are judged apart (failslow_periodic)
    last_share = float(np.mean(sig.last_row[P] == row)) if sig.last_row is not None else 1.0
    if last_share < p.min_last_share / MAX_TOGETHER:
        return None  # seldom the last even with as many ranks late together as are ever named (cheap)
    med = np.median(sig.late[cand, P], axis=1)
    me = int(np.nonzero(cand == row)[0][0])
    together = [int(cand[i]) for i in range(len(cand)) if i != me and med[i] >= 0.5 * d_late]
    healthy_rest = R - len(cand)  # rows that never alarmed are not late
    healthy = [i for i in range(len(cand)) if i != me and med[i] < 0.5 * d_late]
    if not healthy and not healthy_rest:
        return None  # every rank late together: not one straggler
    peer_max = max([0.0, *(float(med[i]) for i in healthy)])
    if rest_top is not None and healthy_rest:
        peer_max = max(peer_max, float(np.median(rest_top[P])))
    # the last to be ready in its share of the steps (shared with the ranks late at the same time)
    if last_share < p.min_last_share / (1 + len(together)):
        return None
    also = [tb.ranks[i] for i in together]
    Wp = float(np.median(sig.W[P]))
    need = EXPLAINS_ALWAYS_LAST if last_share >= ALWAYS_LAST else EXPLAINS
    if explains is not None:
        need = explains
    d_together, with_me = d_late, []
    if together_explain and d_late < need * (Wp - W0):
        # the other ranks that alarmed and made the healthy ones wait a straggler's bar or more over the
        # same steps (measured against the healthy peers, as this rank is)
        # (cheap test first: half the bar against the median rank; more than MAX_TOGETHER: the job's)
        near = [int(cand[i]) for i in range(len(cand)) if i != me and med[i] >= 0.5 * p.min_lateness * W0]
        for i in near if len(near) < MAX_TOGETHER else []:
            li = float(np.median(_late_vs_healthy(tb, i, P, sig.late[i, P], ref)))
            if li >= p.min_lateness * W0:
                d_together += li
                with_me.append(tb.ranks[i])
    in_mean = False
    if d_together < need * (Wp - W0):
        # a rank frozen for whole steps in about half of them (a CPU quota at load 0.5: b5-q-f00-quota,
        # 3 steps late in 52% of the steps, ~0 in the rest) has a median lateness that understates what
        # the job lost to it: the time lost is the sum, so the means are compared
        mean_late = float(np.mean(np.clip(mine, 0, None)))
        mean_growth = float(np.mean(sig.W[P])) - W0
        others = np.delete(np.mean(np.clip(sig.late[:, P], 0, None), axis=1), row)
        # ...for it alone: under a job-wide quota every rank freezes in turn (b3-l-f32-job)
        alone = not len(others) or float(others.max()) < 0.5 * mean_late
        in_mean = alone and last_share >= p.min_last_share and mean_late >= need * mean_growth > 0
        if not in_mean:
            return None  # the job slowed far more than the others waited for it: a job-wide cause
    # how much slower the job is than it would be without waiting for this rank (a rank slow from step
    # 1 has no faster past: the job's own baseline already holds its lateness)
    factor = max(Wp / W0, Wp / max(Wp - d_late, 1e-9))
    n = steps_per(tb, P, n_cols)
    lost = float(np.sum(np.clip(sig.late[row, P], 0, None) / max(Wp - d_late, 1e-9) * n))
    # the cause: its own stall (process not running), its data loader, its storage I/O, or its work
    stall_r = 0.0
    if tb.stall is not None and tb.stall.size:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            stall_r = float(np.nanmean(tb.stall[row, P]) - np.nanmean(sig.stall_med[P]))
        stall_r = stall_r if np.isfinite(stall_r) else 0.0
    d_data = float(np.median(sig.data[row, P] - sig.data_med[P]))
    # its work outside the data wait (own includes the wait): a slow loader leaves it as it was, a slow
    # rank (a throttled training thread, a slower GPU) makes it grow with the wait
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        d_work = float(np.nanmedian((tb.own[row, P] - sig.data[row, P]) - (sig.own_med[P] - sig.data_med[P])))
    d_work = d_work if np.isfinite(d_work) else 0.0
    io_r, io_peers = _io(tb, sig, row, P)
    if d_data >= 0.5 * d_late and stall_r < 0.25 * d_late and d_work < d_data:
        kind = "data"
    elif io_r >= p.io_spike_bytes and io_r >= 10 * max(io_peers, 1.0):
        kind = "storage"
    else:
        kind = "compute"
    margin = d_late / (d_late + peer_max) if d_late > 0 else 0.0
    confidence = max(0.3, min(0.99, 0.4 * persistent + 0.4 * margin + 0.2 * min(1.0, 2 * last_share)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        own_during = float(nanmedian(tb.own[row, P]))
        own_peers = float(np.median(sig.own_med[P]))
    why = (
        f"the others waited {_ms(d_late)} a step for it (median over {n_cols} steps, late in "
        f"{persistent:.0%} of them); no rank that was not late made them wait more than {_ms(peer_max)}; "
        f"it was the last to be ready in {last_share:.0%} of the steps"
    )
    if also:
        why += f"; ranks {', '.join(map(str, also[:8]))} were late at the same time (judged on their own)"
    detail: dict[str, Any] = {
        "lateness_s": round(d_late, 6),
        "peer_lateness_s": round(peer_max, 6),
        "persistent": round(persistent, 3),
        "consistency": round(last_share, 3),
        "stall_s": round(stall_r, 6),
        "data_wait_s": round(d_data, 6),
        "own_during_s": round(own_during, 6),
        "own_peers_s": round(own_peers, 6) if np.isfinite(own_peers) else None,
        "step_growth_s": round(Wp - W0, 6),
        "columns": n_cols,
        "also_late": also[:8],
    }
    if io_r > 0:
        detail["io_bytes_per_step"] = round(io_r)
    if d_late < need * (Wp - W0):
        detail["explained_together_s"] = round(d_together, 6)
        detail["explained_with"] = with_me[:8]
        why += (
            f"; it explains {d_late / max(Wp - W0, 1e-12):.0%} of the job's step growth, with rank(s) "
            f"{', '.join(map(str, with_me[:8]))} late over the same steps {d_together / max(Wp - W0, 1e-12):.0%}"
        )
    return Episode(
        kind=kind,
        rank=tb.ranks[row],
        onset_col=onset,
        detect_col=alarm,
        end_col=end,
        onset_step=step_at(tb, onset),
        detect_step=step_at(tb, alarm),
        onset_t=time_at(sig, onset),
        detect_t=time_at(sig, alarm),
        factor=round(factor, 3),
        steps_lost=round(lost, 2),
        confidence=round(confidence, 3),
        baseline_s=W0,
        during_s=Wp,
        detail=detail,
        why=why,
    )


def consistent_straggler(sig: Signals, P: slice, p: Params) -> int | None:
    """The row that the others waited for in nearly every step of ``P``: the last to be ready in
    :data:`ALWAYS_LAST` of the steps or more, late by ``p.min_lateness`` of a step or more (median),
    while no other row is late by half as much; None when there is no such row.

    A job slowdown with such a rank is that rank's, not the network's, whatever share of the growth its
    lateness explains: under sharded data parallelism (FSDP) a late rank delays every layer's
    all-gather and its own collectives stretch too (its thread issues them late), so the collectives
    look slower by more than the others wait at its first one
    (tests/training/test_faultlab.py::test_fsdp_straggler_named: the lateness explained 0.40-0.58 of
    the growth in six local runs, under 0.3 in a CI run, which was then called a rankless
    communication slowdown). A communication slowdown has no such rank: every rank waits in the
    collectives and the last to be ready changes from step to step."""
    if sig.last_row is None or P.stop - P.start < 1:
        return None
    last = sig.last_row[P]
    rows, counts = np.unique(last, return_counts=True)
    i = int(np.argmax(counts))
    row = int(rows[i])
    if counts[i] < ALWAYS_LAST * len(last):
        return None
    med = np.median(sig.late[:, P], axis=1)
    mine = float(med[row])
    if mine < p.min_lateness * sig.W0:
        return None
    others = np.delete(med, row)
    if len(others) and float(others.max()) >= 0.5 * mine:
        return None
    return row


def healthy_reference(tb: StepTable, sig: Signals, cand: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """Per column, the median own work, wait and stall of the ranks whose own CUSUM never alarmed (the
    healthy peers), when there are two or more of them and two or more candidates; else None. Computed
    once per detection (10,000 ranks: one pass)."""
    R = sig.late.shape[0]
    if R - len(cand) < 2 or len(cand) < 2:
        return None
    healthy = np.ones(R, dtype=bool)
    healthy[cand] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        own = np.nanmedian(tb.own[healthy], axis=0)
        wait = np.nanmedian(tb.wait[healthy], axis=0)
        stall = np.nanmedian(tb.stall[healthy], axis=0) if tb.stall is not None and tb.stall.size else None
    return (own, wait, stall) if stall is not None else (own, wait)


def _late_vs_healthy(tb: StepTable, row: int, P: slice, late: np.ndarray, ref: tuple | None) -> np.ndarray:
    """Rank ``row``'s lateness over ``P`` against the healthy peers' medians (:func:`healthy_reference`),
    never less than ``late`` (against the median rank)."""
    if ref is None:
        return late
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.fmax(tb.own[row, P] - ref[0][P], ref[1][P] - tb.wait[row, P])
        if len(ref) > 2:
            out = np.fmax(out, tb.stall[row, P] - ref[2][P])  # type: ignore[index]
    out = np.where(np.isnan(out), late, out)
    return np.fmax(out, late)


def _io(tb: StepTable, sig: Signals, row: int, P: slice) -> tuple[float, float]:
    """Mean storage bytes a step of rank ``row`` and of the median rank, over ``P``."""
    if tb.io is None or sig.io_med is None:
        return 0.0, 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mine = float(np.nan_to_num(np.nanmean(tb.io[row, P])))
    return mine, float(np.nan_to_num(np.mean(sig.io_med[P])))


def job_episode(
    tb: StepTable, sig: Signals, onset: int, alarm: int, end: int | None, base: slice, p: Params
) -> Episode | None:
    """An episode of the job's step time that no straggler explains: one rank frozen inside the
    collectives (named by its own stall), the collectives slower (localised by the link tests), or
    every rank's own work slower together; None when it is too small or short to tell apart from other
    tenants' noise."""
    S = len(sig.W)
    stop = end if end is not None else S
    stop = max(stop, min(S, onset + 1))
    P = slice(onset, stop)
    n_cols = stop - onset
    W0 = sig.W0
    Wp = float(np.median(sig.W[P]))
    factor = Wp / W0
    dW = Wp - W0
    comm0 = float(np.median(sig.comm[base]))
    own0 = float(np.median(sig.own_med[base]))
    stall0 = float(np.median(sig.stall_med[base]))
    d_comm = float(np.median(sig.comm[P])) - comm0
    d_own = float(np.median(sig.own_med[P])) - own0
    d_stall = float(np.median(sig.stall_med[P])) - stall0
    d_job = max(d_own, d_stall)
    n = steps_per(tb, P, n_cols)
    lost = float(np.sum(np.clip((sig.W[P] - W0) / W0, 0, None) * n))
    if factor < p.min_factor:
        return None
    detail: dict[str, Any] = {
        "collective_s": round(d_comm, 6),
        "common_own_s": round(d_own, 6),
        "common_stall_s": round(d_stall, 6),
        "step_growth_s": round(dW, 6),
        "columns": n_cols,
    }
    late_p = np.median(sig.late[:, P], axis=1)
    group = frozen_ranks(tb, onset, P, dW, W0, p)
    frozen = group[0] if group else None
    rank: int | None = None
    link = None
    if frozen is not None:
        if end is not None and n_cols < p.min_steps:
            return None
        kind = "compute"
        rank = tb.ranks[frozen]
        grew = detail["stall_s"] = round(_stall_growth(tb, onset, P, p)[frozen], 6)
        detail["lateness_s"] = round(float(late_p[frozen]), 6)
        detail["frozen_in_collective"] = True
        if len(group) > 1:
            detail["frozen_together"] = [tb.ranks[i] for i in group[1:]]
        detail["consistency"] = round(float(np.mean(np.argmax(sig.late[:, P], axis=0) == frozen)), 3)
        confidence = min(0.95, 0.5 + 0.5 * min(1.0, grew / max(dW, 1e-12)))
        why = _frozen_why(tb, onset, P, dW, frozen, group, p)
    elif d_comm - max(d_stall, 0.0) > d_job:
        kind = "communication"
        share = d_comm / max(dW, 1e-12)
        confidence = max(0.3, min(0.95, share))
        rank, link, loc = localise_link(tb, time_at(sig, onset), p)
        detail.update(loc)
        if rank is not None and d_comm < COMM_EXPLAINS * dW:
            # the collectives explain under half the growth: the link tests ran while that rank was
            # short of CPU (b5-l-c07-clean, stress-ng in the background: rank 2's transfers 4.9x slower,
            # the collectives 36% of a 1.41x step; every injected slow link: 71% or more), so the
            # slowdown is not its network's and is judged as an unlocalised one
            detail["link_tests_named"] = rank
            detail["localised"] += (
                f", but the collectives explain only {d_comm / max(dW, 1e-12):.0%} of the job's step growth"
            )
            rank, loc = None, {**loc, "localised": detail["localised"]}
        if rank is not None:
            confidence = min(0.97, confidence + 0.1)
            why = f"{loc['localised']}; every rank reached the collectives on time"
        else:
            why = f"every rank reached the collectives on time and the collectives took {_ms(d_comm)} longer"
            why += f" ({loc['localised']})"
    else:
        kind = "job"
        share = d_job / dW if dW > 0 else 0.0
        confidence = max(0.3, min(0.95, 0.4 + 0.5 * share))
        why = (
            f"every rank's own work grew together (the median rank's by {_ms(d_own)}, its stalls by "
            f"{_ms(d_stall)}) and no rank kept the others waiting"
        )
    if kind == "job" or (kind == "communication" and rank is None):
        # nobody to blame: only a large, lasting slowdown is told apart from other tenants' noise
        if factor < p.job_min_factor or n_cols < p.job_min_steps:
            return None
        xs = (sig.W[P] - W0) / W0
        if float(np.mean(xs >= (factor - 1) / 2)) < p.job_persistence:
            return None
        alarm = max(alarm, onset + p.job_min_steps - 1)
    elif kind == "communication":
        # localised by the link tests: reported from a smaller slowdown, once it lasted min_steps
        if factor < p.comm_local_min_factor or n_cols < p.min_steps:
            return None
        alarm = max(alarm, onset + p.min_steps - 1)
    alarm = min(alarm, S - 1)
    return Episode(
        kind=kind,
        rank=rank,
        onset_col=onset,
        detect_col=alarm,
        end_col=end,
        onset_step=step_at(tb, onset),
        detect_step=step_at(tb, alarm),
        onset_t=time_at(sig, onset),
        detect_t=time_at(sig, alarm),
        factor=round(factor, 3),
        steps_lost=round(lost, 2),
        confidence=round(confidence, 3),
        baseline_s=W0,
        during_s=Wp,
        detail=detail,
        link=link,
        why=why,
    )


def _frozen_why(
    tb: StepTable, onset: int, P: slice, dW: float, row: int, group: list[int], p: Params | None = None
) -> str:
    """Why rank ``row`` (one of ``group``, the ranks frozen together) and not its peers."""
    g = _stall_growth(tb, onset, P, p)
    others = np.delete(g, group)
    why = (
        f"its own process stalls (time it did not run) grew by {_ms(float(g[row]))} a step, "
        f"{float(g[row]) / max(dW, 1e-12):.0%} of the job's step growth; no rank outside "
        f"{'it' if len(group) == 1 else 'ranks ' + ', '.join(str(tb.ranks[i]) for i in group)} grew by more "
        f"than {_ms(max(0.0, float(others.max())) if len(others) else 0.0)}"
    )
    if len(group) > 1:
        mates = [str(tb.ranks[i]) for i in group if i != row]
        why += f"; rank{'s' if len(mates) > 1 else ''} {', '.join(mates)} froze at the same time (judged the same way)"
    return why


def frozen_siblings(
    tb: StepTable, sig: Signals, ep: Episode, group: list[int] | None = None, p: Params | None = None
) -> list[Episode]:
    """The episodes of the other ranks frozen together with ``ep``'s (``detail["frozen_together"]``):
    each rank named on its own stall, with its own share and ``why``; ``group``: the rows frozen
    together, ``ep``'s first (default: ``ep``'s rank and its mates)."""
    mates = ep.detail.get("frozen_together") or []
    if not mates:
        return []
    stop = ep.end_col if ep.end_col is not None else len(sig.W)
    P = slice(ep.onset_col, stop)
    rows = [tb.ranks.index(ep.rank), *(tb.ranks.index(r) for r in mates)]  # type: ignore[arg-type]
    if group is not None:
        rows = group
    g = _stall_growth(tb, ep.onset_col, P, p)
    late_p = np.median(sig.late[:, P], axis=1)
    dW = float(ep.detail.get("step_growth_s", 0.0))
    out = []
    for row in rows[1:]:
        d = dict(ep.detail)
        d["stall_s"] = round(float(g[row]), 6)
        d["lateness_s"] = round(float(late_p[row]), 6)
        d["consistency"] = round(float(np.mean(np.argmax(sig.late[:, P], axis=0) == row)), 3)
        d["frozen_together"] = [tb.ranks[i] for i in rows if i != row]
        e = dataclasses.replace(ep, rank=tb.ranks[row], detail=d)
        e.confidence = round(min(0.95, 0.5 + 0.5 * min(1.0, float(g[row]) / max(dW, 1e-12))), 3)
        e.why = _frozen_why(tb, ep.onset_col, P, dW, row, rows, p)
        out.append(e)
    if ep.detail.get("frozen_in_collective"):
        ep.why = _frozen_why(tb, ep.onset_col, P, dW, rows[0], rows, p)
    return out


def _stall_growth(tb: StepTable, onset: int, P: slice, p: Params | None = None) -> np.ndarray:
    """Each rank's mean stall over ``P`` minus its mean in the 10 steps before ``onset``, or (``p``
    given) in the job's baseline steps after the warm-up when that is lower: an onset estimated a few
    steps late leaves the fault's first steps in the 10 before it."""
    base_cols = slice(max(0, onset - 10), onset) if onset > 0 else P
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        before = np.nanmean(tb.stall[:, base_cols], axis=1)  # type: ignore[index]
        if p is not None and onset > p.warmup + 3:
            early = np.nanmean(tb.stall[:, p.warmup : min(onset, p.warmup + p.baseline)], axis=1)  # type: ignore[index]
            before = np.fmin(before, early)
        return np.nan_to_num(np.nanmean(tb.stall[:, P], axis=1) - before)  # type: ignore[index]


def frozen_rank(tb: StepTable, onset: int, P: slice, dW: float, W0: float, p: Params) -> int | None:
    """The rank frozen inside the collectives that explains the most (:func:`frozen_ranks`), or None."""
    rows = frozen_ranks(tb, onset, P, dW, W0, p)
    return rows[0] if rows else None


def frozen_ranks(tb: StepTable, onset: int, P: slice, dW: float, W0: float, p: Params) -> list[int]:
    """The ranks whose own process stall (the probe's time the process did not run) grew while every
    other rank's did not, largest first; empty when no rank stands out or the probe recorded no stalls.

    One rank: its stall grew by ``p.frozen_share`` of the job's step growth or more, by
    ``p.min_lateness`` of a step or more, every other rank's by less than a fifth of it, and it stalled
    in a quarter of the steps or more (not one long freeze). Several ranks frozen at once (two throttled
    ranks: tests/data/failslow/two-quota-rank1-rank3): they share the job's growth and its stalled
    steps, so each needs ``p.frozen_share`` / n of the growth and a quarter / n of the steps, still a
    material ``p.min_lateness`` of a step, and every rank outside the group grew by less than a fifth of
    the smallest member's; at most half the ranks (more is every rank slower: a job-wide cause)."""
    if tb.stall is None or not tb.stall.size or tb.stall.shape[0] < 3 or dW <= 0:
        return []
    R = tb.stall.shape[0]
    # the mean, not the median: a process throttled in long periods freezes in every other step or so
    grew = _stall_growth(tb, onset, P, p)
    order = [int(i) for i in np.argsort(-grew, kind="stable")]
    best: list[int] = []
    for n in range(1, min(MAX_TOGETHER, R // 2) + 1):
        group, rest_rows = order[:n], order[n:]
        low = float(grew[group[-1]])
        rest = max(0.0, float(grew[rest_rows].max())) if rest_rows else 0.0
        if rest >= 0.2 * low:
            continue  # the next rank is frozen too (or nobody stands out): try a larger group
        ok = low >= p.min_lateness * W0 and float(grew[group].sum()) >= p.frozen_share * dW
        for i in group:
            # and not one long freeze: each stalls in its share of a quarter of the steps or more
            stalled = np.nan_to_num(tb.stall[i, P]) > p.min_lateness * W0
            ok = ok and float(grew[i]) >= p.frozen_share * dW / n and float(np.mean(stalled)) >= 0.25 / n
        if ok:
            best = group
        break
    return best


def localise_link(
    tb: StepTable, since: float | None, p: Params
) -> tuple[int | None, tuple[int, int] | None, dict[str, Any]]:
    """The rank whose links the probe's link tests found slow since ``since`` (its transfers
    ``p.slow_link_ratio`` x 2/3 slower than between the other ranks, and 1.5x the next rank's): (rank,
    its slowest link, detail); (None, slowest link or None, detail) when no rank stands out. A rank is
    only named from its own links' times: the ranks that waited for it are never named."""
    links = [lk for lk in tb.links if since is None or lk.t is None or lk.t >= since - 1.0]
    if not links:
        return None, None, {"localised": "no link test ran during the slowdown"}
    per: dict[tuple[int, int], list[float]] = {}
    for lk in links:
        per.setdefault((lk.src, lk.dst), []).append(lk.seconds)
    med = {k: float(np.median(v)) for k, v in per.items()}
    overall = float(np.median(list(med.values())))
    out: dict[str, Any] = {"links_timed": len(med), "median_link_s": round(overall, 6)}
    ranks = sorted({r for k in med for r in k})
    scores = {}
    for r in ranks:
        touching = [v for k, v in med.items() if r in k]
        others = [v for k, v in med.items() if r not in k]
        if touching and others:
            scores[r] = float(np.median(touching)) / max(float(np.median(others)), 1e-6)
    slow = sorted(
        (k for k, v in med.items() if v > p.slow_link_ratio * overall and v > 1e-3), key=lambda k: -med[k]
    )
    out["slow_links"] = [{"src": a, "dst": b, "s": round(med[(a, b)], 6)} for a, b in slow[:8]]
    if scores:
        order = sorted(scores, key=lambda r: -scores[r])
        best = order[0]
        second = scores[order[1]] if len(order) > 1 else 1.0
        out["link_scores"] = {str(r): round(scores[r], 2) for r in order[:8]}
        # beyond the noise healthy links showed on this host: its transfers since the onset slower
        # (median) than the slowest link test before it (b4-q-c06-clean, load 6.5: one round of link
        # tests after a small rise in the step time had rank 3's at 2.6 and 2.2 ms against 0.4-1.4 ms,
        # a 3x score, while before it one healthy link took 2.0 ms; a slowed link's take ~10 ms)
        before = [
            lk.seconds for lk in tb.links if since is not None and lk.t is not None and lk.t < since - 1.0
        ]
        touching_s = float(np.median([v for k, v in med.items() if best in k]))
        out["slowest_link_before_s"] = round(max(before), 6) if before else None
        beyond = not before or touching_s > max(before)
        if scores[best] >= p.slow_link_ratio * 2 / 3 and scores[best] >= 1.5 * max(second, 1.0) and beyond:
            worst = max((k for k in med if best in k), key=lambda k: med[k])
            out["localised"] = (
                f"the link tests' transfers to and from rank {best} are {scores[best]:.1f}x slower than "
                f"between the other ranks (next: {second:.1f}x)"
            )
            return best, worst, out
    if slow:
        out["localised"] = (
            f"slowest link {slow[0][0]} -> {slow[0][1]}, no rank's links slower than the others'"
        )
        return None, slow[0], out
    out["localised"] = "no rank's links slower than the others'"
    return None, None, out


def level(ep: Episode, columns: int, p: Params) -> str:
    """info, warning or critical from what ``ep`` cost the job: a recovered transient (shorter than
    ``p.transient_steps``) is info, and so is one begun fewer than ``p.min_steps`` steps before the
    end of the data (too little evidence yet); a periodic slowdown by the share of the job's time it
    takes; an ongoing slowdown of ``p.critical_factor`` or more is critical."""
    span = (ep.end_col if ep.end_col is not None else columns) - ep.onset_col
    if ep.end_col is None and span < p.min_steps and ep.recurrences <= 1:
        return "info"  # begun in the last few steps: too little evidence yet (live: it grows)
    if ep.kind in ("periodic", "storage") and ep.recurrences > 1:
        share = ep.steps_lost / max(1.0, span + ep.steps_lost)
        if share < p.info_lost_share:
            return "info"
        return "critical" if share >= p.critical_lost_share else "warning"
    if ep.end_col is not None and span < p.transient_steps:
        return "info"  # contention that passed: shared hosts have it
    if ep.end_col is None and ep.factor >= p.critical_factor:
        return "critical"
    return "warning"
