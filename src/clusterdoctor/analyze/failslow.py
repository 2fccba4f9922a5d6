"""Fail-slow detection: change points in per-rank step times, and the straggler and its class.

Input: a :class:`StepTable` — ranks by columns (a column is one training step when the probe's
files are read, one query step when Prometheus is read), holding each rank's step wall time, own
work (time until it entered its first collective), collective wait, data-loader wait and the
wall-clock end of the step.

Detection is CUSUM (E. S. Page, "Continuous inspection schemes", Biometrika 41, 1954), one-sided,
on three signals normalised by the job's baseline step time:

* the job's step time (median over ranks) — every fail-slow slows the whole synchronous job;
* each rank's lateness: its own work minus the median own work of all ranks in the same step
  (how long the others waited for it at the collective; the signal C4 and Greyhound use);
* the collective time of the rank that arrived last (it waited for nobody, so this is the
  transfer itself).

Greyhound (Wu et al., USENIX ATC'25) runs Bayesian online change-point detection (BOCD, Adams &
MacKay 2007) on iteration time; we use CUSUM because it is O(1) per sample and vectorises over
10,000 ranks in one pass (bench/failslow.py), and its excursion start is the onset estimate.
Increments are clipped so that one outlier step never raises an alarm on its own.

An alarm opens an episode at the onset (the step where the CUSUM last left zero); a second
CUSUM for the return to the baseline closes it. Each episode is classified by which part of the
step time grew: one rank's lateness (a **compute** straggler, or a **data**-loader straggler when
its loader wait explains the lateness), the collective itself (**communication**, localised to a
rank from the probe's per-link transfer times when it has them), or every rank's own work
together (**job**-wide slowdown). Episodes of the same kind and rank that recur at a regular
spacing become one **periodic** episode. numpy is imported here (the CLI imports this lazily).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clusterdoctor.observe.watch.records import LinkRecord, RankIdentity, StepRecord

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

from clusterdoctor.analyze.failslow_params import (
    DEFAULTS,
    Params,
)


@dataclass
class StepTable:
    """Ranks (rows) by columns. Arrays are float64 with NaN where a rank has no sample."""

    ranks: list[int]
    steps: np.ndarray  # (S,) step index of each column (last step of the sample for Prometheus)
    t: np.ndarray  # (R, S) wall-clock end (skew-corrected)
    wall: np.ndarray
    own: np.ndarray
    coll: np.ndarray
    wait: np.ndarray
    data: np.ndarray
    stall: np.ndarray | None = None
    identities: dict[int, RankIdentity] = field(default_factory=dict)
    links: list[LinkRecord] = field(default_factory=list)
    unit: str = "step"  # "step" or "sample" (one Prometheus query step)
    steps_per_column: np.ndarray | None = None  # (S,) steps each column covers (Prometheus)
    last_t: dict[int, float] = field(default_factory=dict)  # each rank's last report (wall clock)
    last_step: dict[int, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, int]:
        return self.wall.shape  # type: ignore[return-value]


@dataclass
class Episode:
    """One fail-slow: what, where, since when, how bad, how sure."""

    kind: str  # compute | data | communication | job | periodic
    rank: int | None
    onset_col: int
    detect_col: int
    end_col: int | None  # None: still going at the end of the data
    onset_step: int
    detect_step: int
    onset_t: float | None
    detect_t: float | None
    factor: float  # job step time during / before
    steps_lost: float
    confidence: float
    baseline_s: float
    during_s: float
    detail: dict[str, Any] = field(default_factory=dict)
    periodic_of: str | None = None
    period_steps: float | None = None
    period_s: float | None = None
    recurrences: int = 1
    link: tuple[int, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if v is not None}
        if self.link is not None:
            d["link"] = list(self.link)
        return d


@dataclass(frozen=True)
class SilentRank:
    rank: int
    last_step: int
    last_t: float
    others_step: int
    others_t: float


@dataclass
class FailSlowResult:
    episodes: list[Episode]
    silent: list[SilentRank]
    baseline_s: float | None
    ranks: int
    columns: int
    unit: str
    warnings: list[str]
    job_silent_since: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "episodes": [e.as_dict() for e in self.episodes],
            "silent": [s.__dict__ for s in self.silent],
            "baseline_step_s": self.baseline_s,
            "ranks": self.ranks,
            "columns": self.columns,
            "unit": self.unit,
            "warnings": list(self.warnings),
        }


# -- building the table from probe records -------------------------------------------------------
SKEW_WARN_S = 0.5


def table_from_records(
    steps: Sequence[StepRecord],
    identities: dict[int, list[RankIdentity]] | None = None,
    links: Sequence[LinkRecord] = (),
    warnings: Iterable[str] = (),
    max_columns: int | None = 4096,
) -> StepTable:
    """Align per-rank step records by step index (best effort, with warnings for bad input).

    A rank whose step counter went backwards or whose run id changed restarted: only its latest
    run is kept. Records out of order are sorted; a step seen twice keeps the last. Hosts whose
    clocks disagree (from the step end times, which a synchronous job shares) are corrected.
    """
    warns = list(warnings)
    by_rank: dict[int, list[StepRecord]] = {}
    for r in steps:
        by_rank.setdefault(r.rank, []).append(r)
    kept: dict[int, list[StepRecord]] = {}
    for rank, recs in sorted(by_rank.items()):
        runs: list[list[StepRecord]] = []
        cur_run: object = object()
        prev_step = None
        unordered = 0
        for rec in recs:
            # a new run id is a restart; without run ids, a step counter back near zero is one
            reset = rec.run is None and prev_step is not None and rec.step < prev_step - 2 and rec.step <= 2
            if rec.run != cur_run or reset:
                runs.append([])
                cur_run = rec.run
            elif prev_step is not None and rec.step < prev_step:
                unordered += 1
            runs[-1].append(rec)
            prev_step = rec.step
        if len(runs) > 1:
            warns.append(
                f"rank {rank} restarted {len(runs) - 1} time(s) (step counter reset or new process); "
                f"only its last run ({len(runs[-1])} steps) is analysed"
            )
        last = runs[-1]
        if unordered:
            warns.append(f"rank {rank}: {unordered} step record(s) out of order; sorted by step")
        dedup: dict[int, StepRecord] = {}
        for rec in last:
            dedup[rec.step] = rec
        if len(dedup) < len(last):
            warns.append(f"rank {rank}: {len(last) - len(dedup)} step(s) recorded twice; the last kept")
        kept[rank] = [dedup[s] for s in sorted(dedup)]
    ranks = sorted(kept)
    if not ranks:
        return _empty_table(warns)
    lo = max(min(r.step for r in kept[k]) for k in ranks) if len(ranks) > 1 else kept[ranks[0]][0].step
    hi = max(r.step for k in ranks for r in kept[k])
    lo = min(lo, hi)
    # a rank that joined late must not cut the others' history: use the steps most ranks have
    starts = sorted(kept[k][0].step for k in ranks)
    lo = starts[len(starts) // 2] if len(ranks) > 2 else lo
    if max_columns and hi - lo + 1 > max_columns:
        lo = hi - max_columns + 1
    cols = np.arange(lo, hi + 1)
    R, S = len(ranks), len(cols)
    arrs = {k: np.full((R, S), np.nan) for k in ("t", "wall", "own", "coll", "wait", "data", "stall")}
    last_t, last_step = {}, {}
    for i, rank in enumerate(ranks):
        recs = kept[rank]
        last_t[rank] = recs[-1].t
        last_step[rank] = recs[-1].step
        idx = np.array([r.step - lo for r in recs])
        ok = (idx >= 0) & (idx < S)
        idx = idx[ok]
        for k in arrs:
            vals = np.array([getattr(r, k) for r in recs], dtype=float)[ok]
            arrs[k][i, idx] = vals
    ids = {}
    for rank in ranks:
        lst = (identities or {}).get(rank) or []
        run = kept[rank][-1].run
        match = [x for x in lst if x.run == run] or lst
        if match:
            ids[rank] = match[-1]
    table = StepTable(
        ranks=ranks,
        steps=cols,
        identities=ids,
        links=list(links),
        last_t=last_t,
        last_step=last_step,
        warnings=warns,
        **arrs,
    )
    _correct_skew(table)
    return table


def _empty_table(warns: list[str]) -> StepTable:
    z = np.zeros((0, 0))
    return StepTable([], np.zeros(0), z, z, z, z, z, z, z, warnings=warns)


def _correct_skew(table: StepTable) -> None:
    """Hosts whose step end times sit consistently apart from the job's: a clock offset, removed."""
    R, S = table.shape
    if R < 2 or S < 3:
        return
    hosts: dict[str, list[int]] = {}
    for i, rank in enumerate(table.ranks):
        ident = table.identities.get(rank)
        hosts.setdefault((ident.host if ident and ident.host else f"rank{rank}"), []).append(i)
    if len(hosts) < 2:
        return
    # the reference clock: the host with the most ranks (ties: the host of the lowest rank)
    ref_host = min(hosts, key=lambda h: (-len(hosts[h]), min(hosts[h])))
    ref = _nanmedian(table.t[hosts[ref_host]], axis=0)
    for host, rows in sorted(hosts.items()):
        if host == ref_host:
            continue
        d = table.t[rows] - ref[None, :]
        o = float(_nanmedian(d)) if np.isfinite(d).any() else 0.0
        if abs(o) > SKEW_WARN_S:
            table.t[rows] -= o
            for i in rows:
                rank = table.ranks[i]
                if rank in table.last_t:
                    table.last_t[rank] -= o
            table.warnings.append(
                f"host {host}: clock {abs(o):.2f} s {'ahead of' if o > 0 else 'behind'} host {ref_host}'s "
                "(judged from the step end times all ranks share); times corrected"
            )


def _nanmedian(a: np.ndarray, axis: int | None = None) -> Any:
    import warnings as _w

    with _w.catch_warnings():
        _w.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(a, axis=axis)


def _ffill(x: np.ndarray) -> np.ndarray:
    """Forward-fill NaN along the last axis (missing samples take the previous value)."""
    x = x.copy()
    if x.ndim == 1:
        mask = np.isnan(x)
        if mask.all():
            return np.zeros_like(x)
        idx = np.where(~mask, np.arange(len(x)), 0)
        np.maximum.accumulate(idx, out=idx)
        out = x[idx]
        first = np.argmax(~mask)
        out[:first] = x[first]
        return out
    return np.stack([_ffill(row) for row in x]) if len(x) < 64 else _ffill_2d(x)


def _ffill_2d(x: np.ndarray) -> np.ndarray:
    mask = np.isnan(x)
    idx = np.where(~mask, np.arange(x.shape[1])[None, :], 0)
    np.maximum.accumulate(idx, axis=1, out=idx)
    out = np.take_along_axis(x, idx, axis=1)
    return np.nan_to_num(out, nan=0.0)


@dataclass
class _Signals:
    W: np.ndarray  # (S,) job step time
    late: np.ndarray  # (R, S) own - median own
    own_med: np.ndarray  # (S,)
    comm: np.ndarray  # (S,) the least wait of any rank (the collective itself)
    stall_med: np.ndarray  # (S,)
    data: np.ndarray  # (R, S)
    t: np.ndarray  # (S,) median end time


def _signals(tb: StepTable) -> _Signals:
    """Per-column job signals. A rank's lateness is the largest of three views of the same thing
    (how long the others waited for it): it entered the collectives after the median rank (own
    work), it waited less than the median rank in them (it was what they waited for), or its
    process did not run (stall) while the others' did."""
    W = _ffill(_nanmedian(tb.wall, axis=0))
    own_med = _ffill(_nanmedian(tb.own, axis=0))
    wait_med = _ffill(_nanmedian(tb.wait, axis=0))
    late = np.fmax(tb.own - own_med[None, :], wait_med[None, :] - tb.wait)
    stall_med = np.zeros(tb.shape[1])
    if tb.stall is not None and tb.stall.size:
        stall_med = _ffill(_nanmedian(tb.stall, axis=0))
        late = np.fmax(late, tb.stall - stall_med[None, :])
    late = np.where(np.isnan(late), 0.0, late)
    # the collective itself: the least any rank waited (the last to arrive waited for nobody)
    with np.errstate(all="ignore"):
        import warnings as _w

        with _w.catch_warnings():
            _w.simplefilter("ignore", RuntimeWarning)
            comm = np.nanmin(tb.wait, axis=0)
    comm = _ffill(comm)
    data = np.where(np.isnan(tb.data), 0.0, tb.data)
    t = _nanmedian(tb.t, axis=0)
    return _Signals(W, late, own_med, comm, stall_med, data, t)


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


def _cusum_alarm_rows(y: np.ndarray, start: int, k: float, h: float) -> tuple[int, int, int] | None:
    """The same over many rows at once: (row, onset, alarm) of the earliest alarm, or None."""
    R, S = y.shape
    if R == 0:
        return None
    s = np.zeros(R)
    onset = np.full(R, start)
    for j in range(start, S):
        s = np.maximum(0.0, s + y[:, j] - k)
        zero = s == 0.0
        onset[zero] = j + 1
        hit = s > h
        if hit.any():
            rows = np.nonzero(hit)[0]
            row = int(rows[np.argmax(s[rows])])
            return row, int(min(onset[row], j)), j
    return None


def _onset_of_cause(ep: Episode, tb: StepTable, sig: _Signals, W0: float, p: Params) -> None:
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
    zz = np.clip((z - base) / W0, -p.clip, p.clip)
    stop = ep.end_col if ep.end_col is not None else len(z)
    hi = min(stop - 1, ep.detect_col + 15)
    if hi <= lo:
        return
    # the start of the cause's shift, searched from a little before the onset to past the alarm
    onset = _refine_onset(zz, lo, hi)
    if onset != ep.onset_col:
        ep.onset_col = onset
        ep.onset_step = _step_at(tb, onset)
        ep.onset_t = _time_at(sig, onset)
        if ep.detect_col < onset + p.job_min_steps - 1:
            ep.detect_col = min(len(z) - 1, onset + p.job_min_steps - 1)
            ep.detect_step = _step_at(tb, ep.detect_col)
            ep.detect_t = _time_at(sig, ep.detect_col)


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


def detect(
    table: StepTable, params: Params = DEFAULTS, now: float | None = None, live: bool = False
) -> FailSlowResult:
    """Episodes of fail-slow in ``table`` and the ranks that went silent."""
    R, S = table.shape
    warns = list(table.warnings)
    silent, job_silent = _silent(table, params, now, live)
    p = params
    first = p.warmup if S > p.warmup + 4 else 0
    blen = min(p.baseline, max(3, (S - first) // 3))
    if R == 0 or S - first < blen + 3:
        if R:
            warns.append(f"only {S} {table.unit}s of data: too few to judge (need {first + blen + 3})")
        return FailSlowResult([], silent, None, R, S, table.unit, warns, job_silent)
    sig = _signals(table)
    base = slice(first, first + blen)
    # warm-up and other tenants can make the first steps slow: never take a baseline above the
    # run's 40th percentile
    W0 = min(float(np.median(sig.W[base])), float(np.percentile(sig.W[first:], 40)))
    if not W0 > 0:
        warns.append("baseline step time is zero; nothing to compare")
        return FailSlowResult([], silent, None, R, S, table.unit, warns, job_silent)
    # a healthy rank is not late: its baseline lateness is capped, so a rank that is slow from the
    # start (or during the baseline) still stands out
    late0 = np.clip(np.median(sig.late[:, base], axis=1), 0.0, 0.05 * W0)
    comm0 = float(np.median(sig.comm[base]))
    own0 = float(np.median(sig.own_med[base]))
    stall0 = float(np.median(sig.stall_med[base]))
    data0 = np.median(sig.data[:, base], axis=1)
    x = np.clip((sig.W - W0) / W0, -p.clip, p.clip)
    y = np.clip((sig.late - late0[:, None]) / W0, -p.clip, p.clip)
    args = (table, sig, W0, late0, comm0, own0, stall0, data0, p)
    start = first + blen
    # pass 1, stragglers: one rank's lateness (relative to the other ranks, so the noise every
    # rank shares — other tenants, the machine — cancels out)
    episodes: list[Episode] = []
    col = start
    while R > 2 and col < S - 1:
        a = _cusum_alarm_rows(y[:, col:], 0, p.late_k, p.late_h)
        if a is None:
            break
        row, onset, alarm = a[0], a[1] + col, a[2] + col
        end = _recovery(y[row], alarm + 1, p.late_k, p.late_h)
        onset = _refine_onset(y[row], onset, alarm)
        ep = _classify(*args[:1], sig, onset, alarm, end, *args[2:-1], row, p, want="straggler")
        if ep is not None:
            episodes.append(ep)
        if end is None:
            break
        col = max(end, alarm + 1)
    # pass 2, the whole job (slow collectives or every rank slower) where no straggler explains it
    col = start
    while col < S - 1:
        a = _cusum_alarm(x, col, p.k, p.h)
        if a is None:
            break
        onset, alarm = a
        end = _recovery(x, alarm + 1, p.k, p.h)
        stop = end if end is not None else S
        explained = any(e.onset_col < stop and (e.end_col is None or e.end_col > onset) for e in episodes)
        ep = None
        if not explained:
            onset = _refine_onset(x, onset, alarm)
            ep = _classify(*args[:1], sig, onset, alarm, end, *args[2:-1], None, p, want="job")
        if ep is not None:
            if ep.kind in ("job", "communication"):  # a frozen rank's onset is its step time's
                _onset_of_cause(ep, table, sig, W0, p)
            episodes.append(ep)
            if end is None:
                break
            col = max(end, alarm + 1)
        else:
            col = alarm + 1  # noise or explained: look again from here
    episodes.sort(key=lambda e: e.onset_col)
    episodes = _merge_periodic(episodes, p)
    episodes = _periodic_by_acf(episodes, table, sig, y, p)
    return FailSlowResult(episodes, silent, W0, R, S, table.unit, warns, job_silent)


def _step_at(table: StepTable, col: int) -> int:
    return int(table.steps[min(max(col, 0), len(table.steps) - 1)])


def _time_at(sig: _Signals, col: int) -> float | None:
    if 0 <= col < len(sig.t) and np.isfinite(sig.t[col]):
        return float(sig.t[col])
    finite = np.nonzero(np.isfinite(sig.t))[0]
    if not len(finite):
        return None
    j = finite[np.argmin(np.abs(finite - col))]
    return float(sig.t[j])


def _classify(
    tb: StepTable,
    sig: _Signals,
    onset: int,
    alarm: int,
    end: int | None,
    W0: float,
    late0: np.ndarray,
    comm0: float,
    own0: float,
    stall0: float,
    data0: np.ndarray,
    row: int | None,
    p: Params,
    want: str = "any",
) -> Episode | None:
    S = len(sig.W)
    stop = end if end is not None else S
    if stop <= onset:
        stop = min(S, onset + 1)
    P = slice(onset, stop)
    Wp = float(np.median(sig.W[P]))
    factor = Wp / W0
    dW = Wp - W0
    late_p = np.median(sig.late[:, P], axis=1) - late0
    r_idx = int(np.argmax(late_p)) if row is None else row
    if late_p[r_idx] < late_p.max() * 0.8:
        r_idx = int(np.argmax(late_p))
    d_late = float(late_p[r_idx])
    d_comm = float(np.median(sig.comm[P])) - comm0
    d_own = float(np.median(sig.own_med[P])) - own0
    d_stall = float(np.median(sig.stall_med[P])) - stall0
    d_job = max(d_own, d_stall)
    d_data = float(np.median(sig.data[r_idx, P]) - data0[r_idx])
    n_cols = stop - onset
    steps_per = tb.steps_per_column[P] if tb.steps_per_column is not None else np.ones(n_cols)
    lost = float(np.sum(np.clip((sig.W[P] - W0) / W0, 0, None) * steps_per))
    if factor < p.min_factor and d_late < 0.25 * W0:
        return None
    others = np.delete(late_p, r_idx)
    other_max = max(0.0, float(others.max())) if len(others) else 0.0
    margin = d_late / (d_late + other_max) if d_late > 0 else 0.0
    detail: dict[str, Any] = {
        "lateness_s": round(d_late, 6),
        "collective_s": round(d_comm, 6),
        "common_own_s": round(d_own, 6),
        "common_stall_s": round(d_stall, 6),
        "data_wait_s": round(d_data, 6),
        "step_growth_s": round(dW, 6),
        "columns": n_cols,
    }
    # one rank the others waited for (a slow link or a job-wide cause delays every rank alike)
    argmax = np.argmax(sig.late[:, P], axis=0)
    consistency = float(np.mean(argmax == r_idx))
    straggler = (
        d_late >= 0.3 * max(dW, 1e-12)
        and margin >= 0.6
        and d_late >= p.min_lateness * W0
        and consistency >= 0.4
    )
    if want == "straggler" and (not straggler or (end is not None and n_cols < p.min_steps)):
        return None  # not one rank, or a lag that passed within a few steps
    if want == "job" and straggler:
        return None  # pass 1 owns stragglers
    frozen = None if straggler else _frozen_rank(tb, onset, P, dW, W0, p)
    if frozen is not None and not (end is not None and n_cols < p.min_steps):
        # one rank's process stopped running (throttled, frozen) — often inside the collective, so it is
        # not the last to arrive and every rank's collective stretches: it is the straggler all the same
        straggler, r_idx = True, frozen
        d_late = float(late_p[r_idx])
        consistency = float(np.mean(argmax == r_idx))
        others = np.delete(late_p, r_idx)
        other_max = max(0.0, float(others.max())) if len(others) else 0.0
        margin = d_late / (d_late + other_max) if d_late > 0 else 0.0
        detail["lateness_s"] = round(d_late, 6)
        detail["frozen_in_collective"] = True
    top = "straggler" if straggler else ("communication" if d_comm - max(d_stall, 0.0) > d_job else "job")
    rank: int | None = None
    link = None
    if top == "straggler":
        rank = tb.ranks[r_idx]
        # its loader kept it waiting, and not because its whole process was throttled or frozen
        base_cols = slice(max(0, onset - 10), onset) if onset > 0 else P
        d_stall_r = 0.0
        if tb.stall is not None and tb.stall.size:
            avg = _nanmedian if frozen is None else np.nanmean  # frozen: stalls every other step or so
            d_stall_r = float(avg(tb.stall[r_idx, P]) - avg(tb.stall[r_idx, base_cols]))
            d_stall_r = d_stall_r if np.isfinite(d_stall_r) else 0.0
        detail["stall_s"] = round(d_stall_r, 6)
        kind = "data" if d_data >= 0.5 * d_late and d_stall_r < 0.25 * d_late else "compute"
        if kind == "data" and factor < p.min_factor:
            return None  # loaders of a busy machine lag a little now and then: only a costly lag counts
        confidence = max(0.3, min(0.99, 0.5 * consistency + 0.5 * margin))
        if frozen is not None:  # named by its own stall, not by who arrived last
            confidence = max(confidence, min(0.95, 0.5 + 0.5 * min(1.0, d_stall_r / max(dW, 1e-12))))
        own_before = float(np.median(tb.own[r_idx, slice(max(0, onset - 10), onset)])) if onset > 0 else None
        own_during = float(_nanmedian(tb.own[r_idx, P]))
        detail["own_before_s"] = (
            round(own_before, 6) if own_before is not None and np.isfinite(own_before) else None
        )
        detail["own_during_s"] = round(own_during, 6)
        detail["consistency"] = round(consistency, 3)
        detail["also_late"] = [tb.ranks[i] for i in np.nonzero(late_p > 0.5 * d_late)[0] if i != r_idx][:8]
    elif top == "communication":
        kind = "communication"
        share = d_comm / max(dW, 1e-12)
        confidence = max(0.3, min(0.95, share))
        rank, link, loc = _localise_link(tb, _time_at(sig, onset), p)
        detail.update(loc)
        if rank is not None:
            confidence = min(0.97, confidence + 0.1)
    else:
        kind = "job"
        share = d_job / dW if dW > 0 else 0.0
        confidence = max(0.3, min(0.95, 0.4 + 0.5 * share + 0.1 * (1 - margin)))
    if kind in ("job", "communication"):
        # nobody to blame: only a large, lasting slowdown is told apart from other tenants' noise
        if factor < p.job_min_factor or n_cols < p.job_min_steps:
            return None
        xs = (sig.W[P] - W0) / W0
        if float(np.mean(xs >= (factor - 1) / 2)) < p.job_persistence:
            return None
        alarm = max(alarm, onset + p.job_min_steps - 1)
    if kind != "job" and factor < p.min_factor and d_late < 0.25 * W0:
        return None
    return Episode(
        kind=kind,
        rank=rank,
        onset_col=onset,
        detect_col=alarm,
        end_col=end,
        onset_step=_step_at(tb, onset),
        detect_step=_step_at(tb, alarm),
        onset_t=_time_at(sig, onset),
        detect_t=_time_at(sig, alarm),
        factor=round(factor, 3),
        steps_lost=round(lost, 2),
        confidence=round(confidence, 3),
        baseline_s=W0,
        during_s=Wp,
        detail=detail,
        link=link,
    )


def _frozen_rank(tb: StepTable, onset: int, P: slice, dW: float, W0: float, p: Params) -> int | None:
    """The one rank whose own process stall (the probe's time the process did not run) grew by at least
    ``p.frozen_share`` of the job's step growth while every other rank's grew by less than a fifth of
    it; None when no rank stands out or the probe recorded no stalls."""
    if tb.stall is None or not tb.stall.size or tb.stall.shape[0] < 3 or dW <= 0:
        return None
    base_cols = slice(max(0, onset - 10), onset) if onset > 0 else P
    # the mean, not the median: a process throttled in long periods freezes in every other step or so
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        grew = np.nan_to_num(np.nanmean(tb.stall[:, P], axis=1) - np.nanmean(tb.stall[:, base_cols], axis=1))
    i = int(np.argmax(grew))
    rest = max(0.0, float(np.delete(grew, i).max()))
    if not (grew[i] >= p.frozen_share * dW and grew[i] >= p.min_lateness * W0 and rest < 0.2 * grew[i]):
        return None
    # and not one long freeze: it stalls in a quarter of the steps or more
    stalled = np.nan_to_num(tb.stall[i, P]) > p.min_lateness * W0
    return i if float(np.mean(stalled)) >= 0.25 else None


def _localise_link(
    tb: StepTable, since: float | None, p: Params
) -> tuple[int | None, tuple[int, int] | None, dict[str, Any]]:
    links = [lk for lk in tb.links if since is None or lk.t is None or lk.t >= since - 1.0] or list(tb.links)
    if not links:
        return None, None, {"localised": "no per-link transfer times (the probe's link test did not run)"}
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
        if scores[best] >= p.slow_link_ratio * 2 / 3 and scores[best] >= 1.5 * max(second, 1.0):
            worst = max((k for k in med if best in k), key=lambda k: med[k])
            out["localised"] = (
                f"transfers to and from rank {best} are {scores[best]:.1f}x slower than between the other ranks"
            )
            return best, worst, out
    if slow:
        out["localised"] = f"slowest link {slow[0][0]} -> {slow[0][1]}"
        return None, slow[0], out
    out["localised"] = "no rank's links slower than the others"
    return None, None, out


def _periodic_by_acf(
    episodes: list[Episode], tb: StepTable, sig: _Signals, y: np.ndarray, p: Params
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
        row = tb.ranks.index(e.rank)
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
            )
        )
    return out


def _merge_periodic(episodes: list[Episode], p: Params) -> list[Episode]:
    # the same rank straggling again and again is one periodic cause, whether its recurrences were
    # judged compute or data (a throttled process also drains its loader's queue late)
    groups: dict[tuple[str, int | None], list[Episode]] = {}
    for e in episodes:
        key = "straggler" if e.kind in ("compute", "data") else e.kind
        groups.setdefault((key, e.rank), []).append(e)
    out: list[Episode] = []
    for (_kind, _rank), eps in groups.items():
        if len(eps) >= p.periodic_min:
            onsets = np.array([e.onset_step for e in eps], dtype=float)
            gaps = np.diff(onsets)
            cv = float(np.std(gaps) / np.mean(gaps)) if len(gaps) and np.mean(gaps) > 0 else 1.0
            if cv < 0.35:
                times = [e.onset_t for e in eps if e.onset_t is not None]
                period_s = float(np.median(np.diff(times))) if len(times) >= 2 else None
                first, last = eps[0], eps[-1]
                merged = Episode(
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
                    confidence=round(
                        min(0.97, float(np.mean([e.confidence for e in eps])) + 0.1 * (1 - cv)), 3
                    ),
                    baseline_s=first.baseline_s,
                    during_s=float(np.median([e.during_s for e in eps])),
                    detail={
                        **first.detail,
                        "onset_steps": [e.onset_step for e in eps],
                        "gap_cv": round(cv, 3),
                    },
                    periodic_of=max({e.kind for e in eps}, key=lambda k: sum(e.kind == k for e in eps)),
                    period_steps=float(np.median(gaps)),
                    period_s=period_s,
                    recurrences=len(eps),
                    link=first.link,
                )
                out.append(merged)
                continue
        out.extend(eps)
    out.sort(key=lambda e: e.onset_col)
    return out


def _silent(tb: StepTable, p: Params, now: float | None, live: bool) -> tuple[list[SilentRank], float | None]:
    if not tb.last_t:
        return [], None
    W = _nanmedian(tb.wall) if tb.wall.size else float("nan")
    after = max(p.silent_after_s, 20 * float(W) if np.isfinite(W) else 0.0)
    newest_rank = max(tb.last_t, key=lambda r: tb.last_t[r])
    newest = tb.last_t[newest_rank]
    out = []
    for r, t in sorted(tb.last_t.items()):
        if newest - t > after:
            out.append(SilentRank(r, tb.last_step.get(r, -1), t, tb.last_step.get(newest_rank, -1), newest))
    job_silent = newest if (live and now is not None and now - newest > after) else None
    return out, job_silent


def _finite(v: float) -> float | None:
    return v if isinstance(v, float) and math.isfinite(v) else None
