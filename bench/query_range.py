"""Benchmark: a 24 h query_range of ~50 series from a local Prometheus into the rules, target < 2 s.

No Prometheus here holds a day of real history, so the bench writes a day of etcd-shaped series
(WAL fsync, backend commit and peer RTT histograms with a 5-minute disk stall every 2 hours, a
leader change at hour 20, has_leader, slow applies, heartbeat failures: 55 series at 15 s) as
OpenMetrics, backfills them with the real ``promtool tsdb create-blocks-from openmetrics``, starts
the real Prometheus on that TSDB (127.0.0.1, free port) and then measures, in the same run:

- baseline: the same range queries fetched and JSON-decoded with plain urllib (no processing);
- ours: ``collect_for_rules(url, 86400)`` → ``observations_from_metrics`` → ``run_rules``.

Prints both times, the ratio ours/baseline and whether ours is under 2 s. Needs /usr/bin/prometheus
and /usr/bin/promtool (Debian ``prometheus``). Run: ``.venv/bin/python bench/query_range.py``.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from _prometheus import backfill, serving  # bench/_prometheus.py (the script's folder is on sys.path)
from clusterdoctor.analyze.metric_window import observations_from_metrics
from clusterdoctor.observe.control.prom_api import collect_for_rules
from clusterdoctor.rules.registry import Observations, run_rules

STEP = 15
DAY = 86400
BOUNDS = [0.001 * 2**k for k in range(14)]


def _bucket_counts(lat: float, n: int) -> list[int]:
    return [n if lat <= b else 0 for b in BOUNDS] + [n]


def write_openmetrics(path: Path, end: int) -> int:
    """A day of etcd-shaped series ending at ``end``; returns the number of series written."""
    start = end - DAY
    ts = list(range(start, end, STEP))
    series = 0
    with path.open("w") as f:
        for hist, base, stall in (
            ("etcd_disk_wal_fsync_duration_seconds", 0.003, 0.2),
            ("etcd_disk_backend_commit_duration_seconds", 0.008, 0.4),
            ("etcd_network_peer_round_trip_time_seconds", 0.0005, 0.0005),
        ):
            f.write(f"# TYPE {hist} histogram\n")
            cum = [0] * (len(BOUNDS) + 1)
            total = 0.0
            labels = 'instance="etcd-0:2379",job="etcd"' + (
                ',To="b66b2921ec552136"' if "peer" in hist else ""
            )
            for t in ts:
                in_stall = ((t - start) % 7200) < 300
                lat = stall if in_stall else base
                for i, c in enumerate(_bucket_counts(lat, 20)):
                    cum[i] += c
                total += lat * 20
                for i, b in enumerate([*BOUNDS, math.inf]):
                    le = "+Inf" if math.isinf(b) else repr(b)
                    f.write(f'{hist}_bucket{{{labels},le="{le}"}} {cum[i]} {t}\n')
                f.write(f"{hist}_count{{{labels}}} {cum[-1]} {t}\n{hist}_sum{{{labels}}} {total:.6f} {t}\n")
            series += len(BOUNDS) + 3
        for name, fn in (
            ("etcd_server_leader_changes_seen_total", lambda t: 1 + ((t - start) >= 20 * 3600)),
            ("etcd_server_has_leader", lambda t: 0 if 20 * 3600 <= (t - start) < 20 * 3600 + 30 else 1),
            ("etcd_server_slow_apply_total", lambda t: (t - start) // 7200),
            ("etcd_server_heartbeat_send_failures_total", lambda t: (t - start) // 7200 * 3),
        ):
            typ = "counter" if name.endswith("_total") else "gauge"
            fam = name[: -len("_total")] if typ == "counter" else name
            f.write(f"# TYPE {fam} {typ}\n")
            for t in ts:
                f.write(f'{name}{{instance="etcd-0:2379",job="etcd"}} {fn(t)} {t}\n')
            series += 1
        f.write("# EOF\n")
    return series


def baseline_fetch(url: str, queries: list[str], start: float, end: float, step: float) -> int:
    points = 0
    for q in queries:
        body = urllib.parse.urlencode({"query": q, "start": start, "end": end, "step": step}).encode()
        with urllib.request.urlopen(f"{url}/api/v1/query_range", data=body, timeout=30) as r:
            doc = json.loads(r.read())
        points += sum(len(x["values"]) for x in doc["data"]["result"])
    return points


def main() -> int:
    prom, promtool = (
        shutil.which("prometheus") or "/usr/bin/prometheus",
        shutil.which("promtool") or "/usr/bin/promtool",
    )
    if not (Path(prom).exists() and Path(promtool).exists()):
        print("skip: prometheus/promtool not installed (apt-get install prometheus)")
        return 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        end = int(time.time()) // 3600 * 3600
        om = tmp / "day.om"
        t0 = time.perf_counter()
        n_series = write_openmetrics(om, end)
        tsdb = tmp / "tsdb"
        backfill(promtool, om, tsdb)
        print(f"backfilled {n_series} series x {DAY // STEP} samples in {time.perf_counter() - t0:.1f} s")
        with serving(prom, tsdb, tmp) as url:
            res = collect_for_rules(url, DAY, end=end)  # warm-up (Prometheus loads blocks lazily)
            queries = sorted({s.name for lst in res["window"].series.values() for s in lst})
            step = res["step"]
            best_base = best_ours = math.inf
            for _ in range(3):
                t1 = time.perf_counter()
                pts = baseline_fetch(url, queries, end - DAY, end, step)
                best_base = min(best_base, time.perf_counter() - t1)
                t2 = time.perf_counter()
                res = collect_for_rules(url, DAY, end=end)
                findings, _, _ = run_rules(Observations(observations_from_metrics(res)))
                best_ours = min(best_ours, time.perf_counter() - t2)
            n = sum(len(lst) for lst in res["window"].series.values())
            print(f"series pulled: {n}, points: {pts}, step {step:g} s")
            print(f"baseline (urllib + json only): {best_base:.3f} s")
            print(
                f"ours (query_range -> window -> rules): {best_ours:.3f} s  ratio {best_ours / best_base:.2f}x of baseline"
            )
            for f in findings:
                print(f"  {f.rule} {f.severity}: {f.summary}")
            ok = best_ours < 2.0
            print(f"target < 2 s: {'met' if ok else 'NOT met'}")
            return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
