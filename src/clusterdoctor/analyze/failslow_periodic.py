"""Fail-slow that recurs: short spikes on one rank at a regular spacing (a 300 ms stop every 10 s, a
checkpoint written and fsynced every N steps), and straggler episodes that come back again and again.

A spike is one step (or two) in which one rank kept the others waiting a whole step or more
(``p.spike_min``, and ``p.noise_z`` robust standard deviations of the job's lateness above zero);
each spike is far too short for the change-point passes, whose increments are clipped. Spikes of
one rank are accumulated per period instead: ``p.spike_min_events`` or more whose gaps (in steps or
in seconds) vary by at most ``p.spike_cv`` are one periodic episode, whose cost is the step time
the job lost in them. A spike whose rank read or wrote ``p.io_spike_bytes`` of storage in it while
its peers did not is a storage spike (class ``storage``: a checkpoint, a log flush); one in which
its process did not run is a stall (``periodic`` of ``compute``); one spent in its data loader,
``periodic`` of ``data``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from clusterdoctor.analyze.failslow_params import Params
from clusterdoctor.analyze.failslow_table import Episode, Signals, StepTable, step_at, time_at

__all__ = ["merge_periodic", "periodic_by_acf", "periodic_by_rank", "spike_episodes"]


def _cv(x: np.ndarray) -> float:
    m = float(np.mean(x)) if len(x) else 0.0
    return float(np.std(x) / m) if m > 0 else 1.0


def spike_episodes(
    tb: StepTable, sig: Signals, busy: dict[int, list[tuple[int, int]]], p: Params
) -> list[Episode]:
    """Periodic spike episodes, one per rank at most. ``busy``: per row, the column spans already
    explained by a sustained episode of that rank (not counted as spikes)."""
    R, S = sig.late.shape
    W0 = sig.W0
    noise = p.noise_z * sig.sigma_late
    thr = max(p.spike_min * W0, noise)
    # a step in which the rank moved storage (and its peers did not) needs less to count: the I/O
    # counters corroborate it (a checkpoint's fsync keeps the others waiting a fraction of a step)
    thr_io = max(p.io_spike_min * W0, noise)
    io_rows = _io_heavy(tb, sig, p)
    out = []
    for row in range(R):
        y = sig.late[row].copy()
        for a, b in busy.get(row, []):
            y[a:b] = 0.0
        hit = y >= thr
        if io_rows is not None and io_rows[row].any():
            # the lateness shows in the step of the write or the next (the others wait at its collective)
            heavy = io_rows[row] | np.concatenate(([False], io_rows[row][:-1]))
            hit |= heavy & (y >= thr_io)
        cols = np.nonzero(hit)[0]
        if len(cols) < p.spike_min_events:
            continue
        # a spike that spans two columns is one event
        events: list[list[int]] = []
        for c in cols:
            if events and c - events[-1][-1] <= 1:
                events[-1].append(int(c))
            else:
                events.append([int(c)])
        # only what made this rank, not everyone, late: the others were on time in those steps
        events = [e for e in events if _alone(sig, row, e)]
        if len(events) < p.spike_min_events:
            continue
        starts = np.array([e[0] for e in events])
        gaps = np.diff(starts).astype(float)
        times = np.array([time_at(sig, c) or np.nan for c in starts], dtype=float)
        tgaps = np.diff(times)
        cv_steps = _regular_cv(gaps)
        cv_time = _regular_cv(tgaps) if np.isfinite(tgaps).all() else 1.0
        cv = min(cv_steps, cv_time)
        if cv > p.spike_cv:
            continue
        ep = _spike_episode(tb, sig, row, events, gaps, tgaps, cv, cv_steps <= cv_time, p)
        if ep is not None:
            out.append(ep)
    return out


def _regular_cv(gaps: np.ndarray) -> float:
    """The coefficient of variation of the gaps between recurrences, a gap of twice the period counted
    as two (one recurrence hidden: another rank was late in the same step); at most a third of the
    gaps may be doubled."""
    if len(gaps) < 2:
        return 1.0
    base = float(np.median(gaps))
    if base <= 0:
        return 1.0
    mult = np.clip(np.round(gaps / base), 1, 2)
    if float(np.mean(mult > 1)) > 1 / 3:
        return _cv(gaps)
    return _cv(gaps / mult)


def _io_heavy(tb: StepTable, sig: Signals, p: Params) -> np.ndarray | None:
    """(R, S) steps in which a rank read or wrote ``p.io_spike_bytes`` or more of storage and ten times
    the median rank's; None without I/O counters."""
    if tb.io is None or sig.io_med is None:
        return None
    io = np.nan_to_num(tb.io)
    return (io >= p.io_spike_bytes) & (io >= 10 * np.maximum(sig.io_med[None, :], 1.0))


def _alone(sig: Signals, row: int, event: list[int]) -> bool:
    late = sig.late[:, event].max(axis=1)
    others = np.delete(late, row)
    return bool(len(others) == 0 or others.max() < 0.5 * late[row])


def _spike_episode(
    tb: StepTable,
    sig: Signals,
    row: int,
    events: list[list[int]],
    gaps: np.ndarray,
    tgaps: np.ndarray,
    cv: float,
    by_steps: bool,
    p: Params,
) -> Episode | None:
    S = len(sig.W)
    W0 = sig.W0
    ev_cols = [c for e in events for c in e]
    lost = float(np.sum(np.clip(sig.late[row, ev_cols], 0, None)) / W0)
    sizes = [float(sig.late[row, e].sum()) for e in events]
    # what the rank did in its spikes: stalled, waited for its loader, or read/wrote storage
    stall = 0.0
    if tb.stall is not None and tb.stall.size:
        stall = float(np.nansum(tb.stall[row, ev_cols] - sig.stall_med[ev_cols]))
    data = float(np.sum(sig.data[row, ev_cols] - sig.data_med[ev_cols]))
    io_hits = 0
    io_bytes = 0.0
    if tb.io is not None:
        for e in events:
            lo, hi = max(0, e[0] - 1), e[-1] + 1  # the write may land in the step before the stall
            mine = float(np.nansum(tb.io[row, lo:hi]))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                peers = float(np.nanmedian(np.nansum(np.delete(tb.io[:, lo:hi], row, axis=0), axis=1)))
            if mine >= p.io_spike_bytes and mine >= 10 * max(peers if np.isfinite(peers) else 0.0, 1.0):
                io_hits += 1
                io_bytes += mine
    total = float(sum(sizes))
    if io_hits >= 0.5 * len(events):
        kind, of = "storage", "storage"
        what = f"it read or wrote {io_bytes / io_hits / (1 << 20):.1f} MiB of storage in each (the probe's I/O counters)"
    elif stall >= 0.5 * total:
        kind, of = "periodic", "compute"
        what = "its process did not run in them (stopped, frozen or throttled)"
    elif data >= 0.5 * total:
        kind, of = "periodic", "data"
        what = "it waited for its data loader in them"
    else:
        kind, of = "periodic", "compute"
        what = "its own work took that much longer in them"
    period_steps = float(np.median(gaps))
    period_s = float(np.nanmedian(tgaps)) if np.isfinite(tgaps).any() else None
    if kind == "periodic" and period_s and period_s < p.throttle_period_s:
        # recurring at the rhythm of a CPU quota's enforcement (CFS period, 100 ms) on the rank or on its
        # loader: a sustained slowdown of that side, not a periodic event
        kind, of = of, None
        what += f"; recurring every {period_s:.2f} s, the rhythm of a CPU quota (CFS): a sustained slowdown"
    first, nth = events[0][0], events[min(len(events), p.spike_min_events) - 1][-1]
    others = np.delete(sig.late[:, ev_cols], row, axis=0)
    peer_max = float(others.max()) if others.size else 0.0
    why = (
        f"{len(events)} spikes of {np.median(sizes) * 1000:.0f} ms (median) in which the others waited for "
        f"it, every {period_steps:.0f} steps ({period_s:.1f} s)"
        if period_s
        else ""
    ) or f"{len(events)} spikes every {period_steps:.0f} steps"
    why += (
        f", gaps varying by {cv:.0%} (by {'steps' if by_steps else 'time'}); no other rank kept them waiting "
        f"more than {peer_max * 1000:.0f} ms in those steps; {what}"
    )
    Wp = float(np.median(sig.W[ev_cols]))
    return Episode(
        kind=kind,
        rank=tb.ranks[row],
        onset_col=first,
        detect_col=nth,
        end_col=None,
        onset_step=step_at(tb, first),
        detect_step=step_at(tb, nth),
        onset_t=time_at(sig, first),
        detect_t=time_at(sig, nth),
        factor=round(Wp / W0, 3),
        steps_lost=round(lost, 2),
        confidence=round(min(0.97, 0.6 + 0.4 * (1 - cv / max(p.spike_cv, 1e-9))), 3),
        baseline_s=W0,
        during_s=Wp,
        detail={
            "spikes": len(events),
            "spike_s": round(float(np.median(sizes)), 6),
            "lateness_s": round(float(np.median(sizes)), 6),
            "gap_cv": round(cv, 3),
            "onset_steps": [step_at(tb, e[0]) for e in events][:32],
            "stall_s": round(stall / max(1, len(events)), 6),
            "data_wait_s": round(data / max(1, len(events)), 6),
            "io_spikes": io_hits,
            "columns": S - first,
            "peer_lateness_s": round(peer_max, 6),
        },
        periodic_of=of,
        period_steps=round(period_steps, 1),
        period_s=round(period_s, 2) if period_s else None,
        recurrences=len(events),
        why=why,
    )


def periodic_by_acf(
    episodes: list[Episode], tb: StepTable, sig: Signals, y: np.ndarray, p: Params
) -> list[Episode]:
    """A straggler whose lateness, from its first onset on, repeats with a period (autocorrelation,
    :func:`clusterdoctor.analyze.periodicity.detect_period`) is one periodic episode, even when some
    of its recurrences were too short or too close to be separate episodes."""
    from clusterdoctor.analyze.periodicity import detect_period

    out: list[Episode] = []
    done: set[int | None] = set()
    for e in episodes:
        if e.kind not in ("compute", "data") or e.rank in done:
            if e.rank not in done or e.kind not in ("compute", "data"):
                out.append(e)
            continue
        mine = [x for x in episodes if x.rank == e.rank and x.kind in ("compute", "data")]
        row = tb.ranks.index(e.rank)  # type: ignore[arg-type]
        seg = y[row, e.onset_col :]
        per = detect_period(
            list(enumerate(seg.tolist())), min_period=2 * p.min_steps, min_cycles=2.5, min_strength=0.4
        )
        if per is None:
            out.append(e)
            continue
        done.add(e.rank)
        on = seg > 0.5 * float(np.percentile(seg, 90))
        dt = float(np.nanmedian(np.diff(sig.t))) if len(sig.t) > 1 else None
        out.append(
            dataclasses.replace(
                e,
                kind="periodic",
                periodic_of=max({x.kind for x in mine}, key=lambda k: sum(x.kind == k for x in mine)),
                end_col=mine[-1].end_col,
                factor=round(
                    float(np.median(sig.W[e.onset_col :][on]) / e.baseline_s) if on.any() else e.factor, 3
                ),
                steps_lost=round(sum(x.steps_lost for x in mine), 2),
                period_steps=round(per.period, 1),
                period_s=round(per.period * dt, 2) if dt and np.isfinite(dt) else None,
                recurrences=max(len(mine), int(per.cycles)),
                confidence=round(min(0.97, 0.5 + 0.5 * per.strength), 3),
                detail={
                    **e.detail,
                    "acf_strength": round(per.strength, 3),
                    "onset_steps": [x.onset_step for x in mine],
                },
                why=f"{e.why}; its lateness repeats every {per.period:.0f} steps (autocorrelation "
                f"{per.strength:.2f})",
            )
        )
    return out


def merge_periodic(episodes: list[Episode], p: Params) -> list[Episode]:
    """The same rank straggling again and again at a regular spacing is one periodic cause, whether
    its recurrences were judged compute or data (a throttled process also drains its loader's queue
    late)."""
    groups: dict[tuple[str, int | None], list[Episode]] = {}
    for e in episodes:
        key = "straggler" if e.kind in ("compute", "data") else e.kind
        groups.setdefault((key, e.rank), []).append(e)
    out: list[Episode] = []
    for (_kind, _rank), eps in groups.items():
        if len(eps) >= p.periodic_min and _kind == "straggler":
            onsets = np.array([e.onset_step for e in eps], dtype=float)
            gaps = np.diff(onsets)
            cv = _cv(gaps)
            if cv < 0.35:
                out.append(_merged(eps, gaps, cv))
                continue
        out.extend(eps)
    out.sort(key=lambda e: e.onset_col)
    return out


def _merged(eps: list[Episode], gaps: np.ndarray, cv: float) -> Episode:
    times = [e.onset_t for e in eps if e.onset_t is not None]
    period_s = float(np.median(np.diff(times))) if len(times) >= 2 else None
    first, last = eps[0], eps[-1]
    detail: dict[str, Any] = {
        **first.detail,
        "onset_steps": [e.onset_step for e in eps],
        "gap_cv": round(cv, 3),
    }
    return Episode(
        kind="periodic",
        rank=first.rank,
        onset_col=first.onset_col,
        detect_col=first.detect_col,
        end_col=last.end_col,
        onset_step=first.onset_step,
        detect_step=first.detect_step,
        onset_t=first.onset_t,
        detect_t=first.detect_t,
        factor=round(float(np.median([e.factor for e in eps])), 3),
        steps_lost=round(sum(e.steps_lost for e in eps), 2),
        confidence=round(min(0.97, float(np.mean([e.confidence for e in eps])) + 0.1 * (1 - cv)), 3),
        baseline_s=first.baseline_s,
        during_s=float(np.median([e.during_s for e in eps])),
        detail=detail,
        periodic_of=max({e.kind for e in eps}, key=lambda k: sum(e.kind == k for e in eps)),
        period_steps=float(np.median(gaps)),
        period_s=period_s,
        recurrences=len(eps),
        link=first.link,
        why=f"{first.why}; the same rank straggled {len(eps)} times, every {float(np.median(gaps)):.0f} steps",
    )


def periodic_by_rank(
    episodes: list[Episode], tb: StepTable, sig: Signals, first: int, p: Params
) -> list[Episode]:
    """A rank late in bursts that recur at a regular period *in time* (a CPU quota switched on and off
    every second, a cron job): its lateness from the warm-up on, on the wall clock (the steps of a
    throttled phase are longer, so a period in seconds is not one in steps), repeats with an
    autocorrelation of ``p.periodic_strength`` or more over 3 cycles or more, at a period of
    ``2 x p.throttle_period_s`` or more (faster is a CPU quota's own rhythm: sustained), and the
    lateness it accumulated over the run is ``p.periodic_stand_out`` times any peer's or more (this
    rank's bursts, not every rank's), and it was late (``p.min_lateness``) in fewer than
    ``p.persistence`` of the steps since its first burst (in more it is a sustained straggler: a CPU
    quota's 100 ms rhythm made b3-l-f13-quota's lateness repeat at 1.2 s, late in 63% of the steps). Each burst alone can be too short or too weak for the
    change-point passes (b5-q-f18-periodic: frozen inside the collectives for a few steps a cycle);
    accumulated per period they are one periodic episode, which replaces that rank's own straggler
    and frozen episodes. Its level follows the share of the job's time the bursts cost."""
    from clusterdoctor.analyze.periodicity import detect_period

    R, S = sig.late.shape
    if R < 3 or S - first < 8 or sig.W0 <= 0:
        return episodes
    done = {e.rank for e in episodes if e.kind in ("periodic", "storage")}
    x = np.clip(sig.late[:, first:] / sig.W0, 0.0, p.clip)
    t = sig.t[first:]
    ok = np.isfinite(t)
    total = x.sum(axis=1)
    out = list(episodes)
    for row in np.argsort(-total)[:1]:  # the rank that kept the others waiting the longest
        row = int(row)
        rank = tb.ranks[row]
        peers = float(np.max(np.delete(total, row))) if R > 1 else 0.0
        if rank in done or total[row] < p.periodic_stand_out * max(peers, 1e-9):
            continue
        per = detect_period(
            list(zip(t[ok].tolist(), x[row, ok].tolist())),
            min_period=2 * p.throttle_period_s,
            min_cycles=3.0,
            min_strength=p.periodic_strength,
        )
        if per is None or not _beats_shuffles(t[ok], x[row, ok], per.strength, p):
            continue
        onset = _burst_onset(x[row], p) + first
        late_share = float(np.mean(sig.late[row, onset:] >= p.min_lateness * sig.W0))
        if late_share >= p.persistence:
            continue  # late in most steps since: a sustained straggler (its own episodes say so), not bursts
        t0 = float(sig.t[onset]) if np.isfinite(sig.t[onset]) else None
        seen = np.nonzero(np.isfinite(sig.t) & (sig.t >= (t0 or 0.0) + 3 * per.period))[0]
        detect = int(seen[0]) if len(seen) else S - 1
        P = slice(onset, S)
        lost = float(np.sum(np.clip(sig.late[row, P], 0, None)) / sig.W0)
        on = sig.late[row, P] >= 0.5 * float(np.percentile(sig.late[row, P], 90))
        mine = [e for e in episodes if e.rank == rank]
        stall = 0.0
        if tb.stall is not None and tb.stall.size:
            stall = float(np.nansum(tb.stall[row, P] - sig.stall_med[P]))
        data = float(np.sum(sig.data[row, P] - sig.data_med[P]))
        of = "data" if data >= 0.5 * lost * sig.W0 and data > stall else "compute"
        cycles = int(per.cycles)
        Wp = float(np.median(sig.W[P][on])) if on.any() else float(np.median(sig.W[P]))
        why = (
            f"it kept the others waiting in bursts every {per.period:.1f} s (autocorrelation of its "
            f"lateness {per.strength:.2f} over {per.cycles:.0f} cycles): {lost:.1f} steps lost since step "
            f"{step_at(tb, onset)}, {total[row] / max(peers, 1e-9):.1f}x what any other rank cost; "
            + (
                "its process did not run in them (stopped, frozen or throttled)"
                if of == "compute" and stall > 0
                else (
                    "it waited for its data loader in them"
                    if of == "data"
                    else "its own work took longer in them"
                )
            )
        )
        ep = Episode(
            kind="periodic",
            rank=rank,
            onset_col=onset,
            detect_col=detect,
            end_col=None,
            onset_step=step_at(tb, onset),
            detect_step=step_at(tb, detect),
            onset_t=time_at(sig, onset),
            detect_t=time_at(sig, detect),
            factor=round(Wp / sig.W0, 3),
            steps_lost=round(lost, 2),
            confidence=round(min(0.97, 0.5 + 0.5 * per.strength), 3),
            baseline_s=sig.W0,
            during_s=Wp,
            detail={
                "acf_strength": round(per.strength, 3),
                "lateness_total_steps": round(float(total[row]), 2),
                "peer_lateness_total_steps": round(peers, 2),
                "stall_s": round(stall, 6),
                "data_wait_s": round(data, 6),
                "columns": S - onset,
                "replaces": [f"{e.kind}@{e.onset_step}" for e in mine][:8],
            },
            periodic_of=of,
            period_steps=round(float(per.period / max(float(np.nanmedian(np.diff(sig.t))), 1e-9)), 1),
            period_s=round(per.period, 2),
            recurrences=max(2, cycles),
            why=why,
        )
        out = [e for e in out if e.rank != rank] + [ep]
    out.sort(key=lambda e: (e.onset_col, e.rank if e.rank is not None else -1))
    return out


SHUFFLES = 19  # a permutation test at 1 in 20 (p < 0.05): the period must beat all 19 shuffles


def _beats_shuffles(t: np.ndarray, x: np.ndarray, strength: float, p: Params) -> bool:
    """Whether ``strength`` (the autocorrelation at the period found in ``x`` on times ``t``) exceeds
    what the same values in a random order reach at any period (:data:`SHUFFLES` shuffles, a fixed
    seed): a few spikes at random times can line up at some lag (tests/analyze/
    test_failslow_generalise.py::test_random_spikes_are_not_a_period), bursts at a period do not
    survive shuffling."""
    from clusterdoctor.analyze.periodicity import detect_period

    rng = np.random.default_rng(20)
    # each step moves with its own duration (a late step is a long one: kept together, the shuffled
    # series spans the same time and its late steps as much of it)
    dt = np.diff(t, prepend=t[0] - (float(np.median(np.diff(t))) if len(t) > 1 else 0.0))
    for _ in range(SHUFFLES):
        order = rng.permutation(len(x))
        per = detect_period(
            list(zip((t[0] + np.cumsum(dt[order])).tolist(), x[order].tolist())),
            min_period=2 * p.throttle_period_s,
            min_cycles=3.0,
            min_strength=0.0,
        )
        if per is not None and per.strength >= strength:
            return False
    return True


def _burst_onset(x: np.ndarray, p: Params) -> int:
    """The column where the first burst of ``x`` (lateness in baseline steps, from the warm-up) began:
    the start of the first excursion of a one-sided CUSUM past ``p.late_h`` whose allowance is a
    straggler's bar (``p.min_lateness``: a busy host's small lags do not accumulate); 0 when none."""
    s, start = 0.0, 0
    for j, v in enumerate(x):
        s = max(0.0, s + float(v) - p.min_lateness)
        if s == 0.0:
            start = j + 1
        elif s > p.late_h:
            return min(start, j)
    return 0
