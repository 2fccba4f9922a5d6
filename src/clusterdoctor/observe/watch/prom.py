"""The probe's series read back from Prometheus (``clusterdoctor watch --prometheus URL``).

The query step and the ``increase`` window follow the probes' scrape interval, read from the spacing
of their samples (:func:`scrape_interval`): a window shorter than the interval holds one sample and
``increase`` returns nothing. One ``query_range`` per counter gives, for each rank and each query step, the mean per training
step of wall time, own work, collective time and wait, data wait and stall (``increase`` of the
``*_seconds_total`` counter over the step divided by the ``increase`` of ``steps_total``; counter
resets of restarted ranks are handled by ``increase``). Columns are query steps, so the detector's
"steps" are samples here; the step index of each column is the probe's ``clusterdoctor_watch_step``.

The training job's name is the ``job`` label the probe exports; scrape the probes with
``honor_labels: true`` (deploy/prometheus/failslow-scrape.yml) or it arrives as ``exported_job``,
which is read as well.
"""

from __future__ import annotations

from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.watch.records import RankIdentity

__all__ = ["load_watch_prometheus"]

COUNTERS = {
    "wall": "clusterdoctor_watch_step_seconds_total",
    "own": "clusterdoctor_watch_own_seconds_total",
    "coll": "clusterdoctor_watch_collective_seconds_total",
    "wait": "clusterdoctor_watch_collective_wait_seconds_total",
    "data": "clusterdoctor_watch_data_wait_seconds_total",
    "stall": "clusterdoctor_watch_stall_seconds_total",
}
STEPS = "clusterdoctor_watch_steps_total"


def _job_of(labels: dict[str, str]) -> str:
    return (
        labels.get("exported_job")
        if "exported_job" in labels and "rank" in labels
        else labels.get("job", "job")
    )  # type: ignore[return-value]


def _selector(job: str | None) -> str:
    if not job:
        return ""
    esc = job.replace("\\", "\\\\").replace('"', '\\"')
    return f'{{job="{esc}"}}'


# Prometheus' increase() needs two samples in its window; a window of 2 scrape intervals always holds
# two (Prometheus docs, "rate()": the range should be at least 2x the scrape interval; Grafana's
# $__rate_interval is max(4 x scrape interval, step + scrape interval)).
WINDOW_SCRAPES = 2.0
MIN_STEP_S = 2.0  # the query step never below 2 s (the probe's own metrics refresh at most that often)


def scrape_interval(client: Any, sel: str, end: float, since: float) -> float | None:
    """The probes' scrape interval, from the spacing of the samples of ``steps_total`` in the last
    ``min(since, 10m)`` (the median over ranks of each rank's median gap); None when Prometheus holds
    fewer than two samples of any rank (no probe series)."""
    import statistics

    look = min(max(since, 60.0), 600.0)
    gaps = []
    for s in client.query(f"{STEPS}{sel}[{look:g}s]", end):
        ts = [t for t, _v in s.points]
        d = [b - a for a, b in zip(ts, ts[1:]) if b > a]
        if d:
            gaps.append(statistics.median(d))
    return statistics.median(gaps) if gaps else None


def query_windows(since: float, step: float | None, interval: float | None) -> tuple[float, float]:
    """(query step, increase() window) in seconds: the step as asked (default since/600), never finer
    than the scrape interval (a finer step repeats the same samples); the window the step or
    WINDOW_SCRAPES scrape intervals, whichever is longer."""
    st = float(step) if step else max(MIN_STEP_S, since / 600)
    if interval:
        st = max(st, interval)
        return st, max(st, WINDOW_SCRAPES * interval)
    return st, max(st, MIN_STEP_S)


def load_watch_prometheus(
    url: str,
    job: str | None = None,
    since: float = 900.0,
    step: float | None = None,
    timeout: float = 10.0,
    client: Any = None,
) -> tuple[dict[str, Any], float]:
    """``({job: StepTable}, server_now)`` from the probe's series on a Prometheus server (``client``: a
    ready :class:`~clusterdoctor.observe.control.prom_api.PromClient`, e.g. with auth)."""  # fmt: skip
    import numpy as np

    from clusterdoctor.analyze.failslow import StepTable
    from clusterdoctor.observe.control.prom_api import PromClient

    client = client or PromClient(url, timeout=timeout)
    end = client.server_time()
    start = end - since
    sel = _selector(job)
    interval = scrape_interval(client, sel, end, since)
    if interval is None and job:
        # scraped without honor_labels: the training job's name is in exported_job
        sel = sel.replace("job=", "exported_job=", 1)
        interval = scrape_interval(client, sel, end, since)
    st, window = query_windows(since, step, interval)
    win = f"{window:g}s"
    steps_series = client.query_range(f"increase({STEPS}{sel}[{win}])", start, end, st) if interval else []
    if not steps_series:
        what = f" for job {job!r}" if job else ""
        raise InputError(f"no fail-slow probe series ({STEPS}){what} in the last {since:g} s", url)
    values: dict[str, dict[tuple[str, int], dict[float, float]]] = {}
    idents: dict[tuple[str, int], RankIdentity] = {}

    def key(labels: dict[str, str]) -> tuple[str, int] | None:
        try:
            return _job_of(labels), int(labels["rank"])
        except (KeyError, ValueError):
            return None

    for s in steps_series:
        k = key(s.labels)
        if k is None:
            continue
        values.setdefault("steps", {})[k] = dict(s.points)
        lr = s.labels.get("local_rank")
        idents[k] = RankIdentity(
            job=k[0],
            rank=k[1],
            local_rank=int(lr) if lr and lr.isdigit() else None,
            host=s.labels.get("host"),
            gpu=s.labels.get("gpu"),
        )
    for name, metric in COUNTERS.items():
        for s in client.query_range(f"increase({metric}{sel}[{win}])", start, end, st):
            k = key(s.labels)
            if k is not None:
                values.setdefault(name, {})[k] = dict(s.points)
    step_idx = {}
    for s in client.query_range(f"clusterdoctor_watch_step{sel}", start, end, st):
        k = key(s.labels)
        if k is not None:
            step_idx[k] = dict(s.points)
    last = {}
    for s in client.query(
        f"max_over_time(clusterdoctor_watch_last_step_timestamp_seconds{sel}[{since:g}s])", end
    ):
        k = key(s.labels)
        if k is not None and s.points:
            last[k] = s.points[-1][1]
    lastsel = {}
    for s in client.query(f"max_over_time(clusterdoctor_watch_step{sel}[{since:g}s])", end):
        k = key(s.labels)
        if k is not None and s.points:
            lastsel[k] = int(s.points[-1][1])
    warns: list[str] = []
    starts = client.query(f"changes(clusterdoctor_watch_start_time_seconds{sel}[{since:g}s])", end)
    for s in starts:
        k = key(s.labels)
        if k is not None and s.points and s.points[-1][1] > 0:
            warns.append(f"job {k[0]} rank {k[1]} restarted {int(s.points[-1][1])} time(s) in the window")
    tables: dict[str, Any] = {}
    for jobname in sorted({k[0] for k in values["steps"]}):
        keys = sorted((k for k in values["steps"] if k[0] == jobname), key=lambda k: k[1])
        times = sorted({t for k in keys for t in values["steps"][k]})
        if not times:
            continue
        col = {t: i for i, t in enumerate(times)}
        R, S = len(keys), len(times)
        n = np.full((R, S), np.nan)
        for i, k in enumerate(keys):
            for t, v in values["steps"][k].items():
                n[i, col[t]] = v
        arrs: dict[str, Any] = {}
        with np.errstate(all="ignore"):
            for name in COUNTERS:
                a = np.full((R, S), np.nan)
                for i, k in enumerate(keys):
                    for t, v in values.get(name, {}).get(k, {}).items():
                        a[i, col[t]] = v
                a = np.where(n > 0, a / np.where(n > 0, n, 1), np.nan)
                arrs[name] = a
        tmat = np.where(n > 0, np.array(times)[None, :], np.nan)
        sidx = np.full((R, S), np.nan)
        for i, k in enumerate(keys):
            for t, v in step_idx.get(k, {}).items():
                if t in col:
                    sidx[i, col[t]] = v
        import warnings as _w

        with _w.catch_warnings():
            _w.simplefilter("ignore", RuntimeWarning)
            cols = np.nanmedian(sidx, axis=0)
            per = np.nanmedian(np.where(n > 0, n, np.nan), axis=0)
        cols = np.where(np.isfinite(cols), cols, -1).astype(int)
        # drop columns where no rank made a step (before the job started, after it ended)
        keep = np.isfinite(per) & (per > 0)
        table = StepTable(
            ranks=[k[1] for k in keys],
            steps=cols[keep],
            t=tmat[:, keep],
            wall=arrs["wall"][:, keep],
            own=arrs["own"][:, keep],
            coll=arrs["coll"][:, keep],
            wait=arrs["wait"][:, keep],
            data=arrs["data"][:, keep],
            stall=arrs["stall"][:, keep],
            identities={k[1]: idents[k] for k in keys},
            unit="sample",
            steps_per_column=per[keep],
            last_t={k[1]: last[k] for k in keys if k in last},
            last_step={k[1]: lastsel.get(k, -1) for k in keys},
            warnings=[w for w in warns if w.startswith(f"job {jobname} ")],
        )
        tables[jobname] = table
    return tables, end
