"""The fail-slow detector's data: the step table (ranks by steps) built from probe records, and what
the detector returns (episodes, silent ranks). numpy is imported here (the CLI imports this lazily).

:func:`table_from_records` aligns per-rank records by step index, best effort: restarts keep only the
latest run, out-of-order and repeated steps are sorted and deduplicated, ranks that joined late do not
cut the others' history, and hosts whose clocks disagree are corrected; each of these is a warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clusterdoctor.observe.watch.records import LinkRecord, RankIdentity, StepRecord

__all__ = [
    "Episode",
    "FailSlowResult",
    "SilentRank",
    "StepTable",
    "nanmedian",
    "ffill",
    "table_from_records",
]


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
    io: np.ndarray | None = None  # (R, S) storage bytes read + written per step (NaN: not recorded)
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

    kind: str  # compute | data | storage | communication | job | periodic
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
    level: str = "warning"  # info | warning | critical: from what it cost the job (see failslow_cost)
    why: str = ""  # why this rank (or link, or the whole job) and not its peers

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
    arrs = {k: np.full((R, S), np.nan) for k in ("t", "wall", "own", "coll", "wait", "data", "stall", "io")}
    last_t, last_step = {}, {}
    for i, rank in enumerate(ranks):
        recs = kept[rank]
        last_t[rank] = recs[-1].t
        last_step[rank] = recs[-1].step
        idx = np.array([r.step - lo for r in recs])
        ok = (idx >= 0) & (idx < S)
        idx = idx[ok]
        for k in arrs:
            vals = np.array([_val(getattr(r, k)) for r in recs], dtype=float)[ok]
            arrs[k][i, idx] = vals
    ids = {}
    for rank in ranks:
        lst = (identities or {}).get(rank) or []
        run = kept[rank][-1].run
        match = [x for x in lst if x.run == run] or lst
        if match:
            ids[rank] = match[-1]
    if not np.isfinite(arrs["io"]).any():
        arrs["io"] = None  # type: ignore[assignment]
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


def _val(v: float | None) -> float:
    return float("nan") if v is None else v


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
    ref = nanmedian(table.t[hosts[ref_host]], axis=0)
    for host, rows in sorted(hosts.items()):
        if host == ref_host:
            continue
        d = table.t[rows] - ref[None, :]
        o = float(nanmedian(d)) if np.isfinite(d).any() else 0.0
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


def nanmedian(a: np.ndarray, axis: int | None = None) -> Any:
    """np.nanmedian without the all-NaN warning."""
    import warnings as _w

    with _w.catch_warnings():
        _w.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(a, axis=axis)


def ffill(x: np.ndarray) -> np.ndarray:
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
    return np.stack([ffill(row) for row in x]) if len(x) < 64 else ffill_2d(x)


def ffill_2d(x: np.ndarray) -> np.ndarray:
    mask = np.isnan(x)
    idx = np.where(~mask, np.arange(x.shape[1])[None, :], 0)
    np.maximum.accumulate(idx, axis=1, out=idx)
    out = np.take_along_axis(x, idx, axis=1)
    return np.nan_to_num(out, nan=0.0)


@dataclass
class Signals:
    """Per-column job signals and the job's own noise, shared by the detector's passes."""

    W: np.ndarray  # (S,) job step time (median over ranks)
    late: np.ndarray  # (R, S) how long the others waited for each rank (see :func:`signals`)
    own_med: np.ndarray  # (S,)
    comm: np.ndarray  # (S,) the least wait of any rank (the collective itself)
    stall_med: np.ndarray  # (S,)
    data: np.ndarray  # (R, S)
    data_med: np.ndarray  # (S,)
    t: np.ndarray  # (S,) median end time
    last_row: np.ndarray | None = None  # (S,) the row that was the latest to be ready at each column
    io_med: np.ndarray | None = None  # (S,) the median rank's storage I/O bytes
    W0: float = 0.0  # the job's baseline step time
    sigma_late: float = 0.0  # robust sd of one rank's lateness (s), across ranks and over time
    sigma_W: float = 0.0  # robust sd of the job's step time over time (s)


MAD_SD = 1.4826  # the median absolute deviation times this estimates a normal sd (Hampel 1974)


def signals(tb: StepTable) -> Signals:
    """Per-column job signals. A rank's lateness is the largest of three views of the same thing
    (how long the others waited for it): it entered the collectives after the median rank (own
    work), it waited less than the median rank in them (it was what they waited for), or its
    process did not run (stall) while the others' did. Each is relative to the other ranks *at the
    same step*, so what every rank shares (other tenants, the machine, a slow start) cancels out, and
    a rank slow from step 1 stands out without a healthy past of its own."""
    W = ffill(nanmedian(tb.wall, axis=0))
    own_med = ffill(nanmedian(tb.own, axis=0))
    wait_med = ffill(nanmedian(tb.wait, axis=0))
    late = np.fmax(tb.own - own_med[None, :], wait_med[None, :] - tb.wait)
    stall_med = np.zeros(tb.shape[1])
    if tb.stall is not None and tb.stall.size:
        stall_med = ffill(nanmedian(tb.stall, axis=0))
        late = np.fmax(late, tb.stall - stall_med[None, :])
    late = np.where(np.isnan(late), 0.0, late)
    import warnings as _w

    with np.errstate(all="ignore"), _w.catch_warnings():
        _w.simplefilter("ignore", RuntimeWarning)
        comm = np.nanmin(tb.wait, axis=0)
    comm = ffill(comm)
    data = np.where(np.isnan(tb.data), 0.0, tb.data)
    data_med = np.median(data, axis=0) if data.size else np.zeros(tb.shape[1])
    t = nanmedian(tb.t, axis=0)
    last_row = np.argmax(late, axis=0) if late.size else None
    io_med = ffill(nanmedian(tb.io, axis=0)) if tb.io is not None else None
    return Signals(W, late, own_med, comm, stall_med, data, data_med, t, last_row, io_med)


def robust_sd(x: np.ndarray, axis: int = -1) -> Any:
    """The noise of ``x`` along ``axis``, robust to outliers and to level shifts: 1.4826 x the median
    absolute first difference / sqrt(2) (a change point is one large difference among many small ones,
    so the fault being looked for does not inflate the estimate of the noise it must stand out from)."""
    d = np.abs(np.diff(x, axis=axis))
    return MAD_SD * nanmedian(d, axis=axis) / np.sqrt(2.0)


def step_at(table: StepTable, col: int) -> int:
    """The step index of column ``col`` (clamped to the table)."""
    return int(table.steps[min(max(col, 0), len(table.steps) - 1)])


def time_at(sig: Signals, col: int) -> float | None:
    """The job's wall-clock time at column ``col`` (the nearest column with one)."""
    if 0 <= col < len(sig.t) and np.isfinite(sig.t[col]):
        return float(sig.t[col])
    finite = np.nonzero(np.isfinite(sig.t))[0]
    if not len(finite):
        return None
    j = finite[np.argmin(np.abs(finite - col))]
    return float(sig.t[j])


def steps_per(tb: StepTable, P: slice, n: int) -> np.ndarray:
    """Training steps each column of ``P`` covers (1 for probe files; more for Prometheus samples)."""
    return tb.steps_per_column[P] if tb.steps_per_column is not None else np.ones(n)
