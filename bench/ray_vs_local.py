"""``comm analyze DIR``: Ray (``--ray``, a local cluster) against local processes (``--workers N``) and
one process, by input size, on this machine (issue 21 item 6).

Inputs: N rank traces derived from the real 2-rank AllReduce Kineto fixture
(../shared/fixtures/comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz, 8.6 MB of JSON): each file
is the fixture's events with ``distributedInfo.rank`` set to its rank and ``world_size`` to N, and its
kernel durations scaled by 1 + rank/1000 so that no two ranks are copies. Written to /tmp, not
committed.

Each measurement is the whole CLI process (``clusterdoctor comm analyze DIR --format json -o FILE``),
as a user runs it: for Ray that includes starting the local cluster. Runs are paired — local then Ray,
Ray then local on the next repetition — so that the shared machine's load weighs on both alike; the
ratio Ray / local is taken per pair and its median reported, with the load average before each run.

Also printed: how large a parsed trace (what a worker sends back) is against the file's JSON bytes.

Usage: python bench/ray_vs_local.py [--ranks 2,8,16] [--reps 2] [--workers 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterdoctor.testing import fixture_path

FIXTURE = "comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz"


def write_ranks(src: Path, d: Path, n: int) -> int:
    """``n`` rank files under ``d``; returns their total bytes."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    total = 0
    for r in range(n):
        di = dict(doc["distributedInfo"], rank=r, world_size=n)
        events = []
        for e in doc["traceEvents"]:
            if r and isinstance(e.get("dur"), (int, float)) and e.get("cat") == "kernel":
                e = dict(e, dur=e["dur"] * (1 + r / 1000))
            events.append(e)
        p = d / f"rank{r}.json"
        p.write_text(json.dumps(dict(doc, distributedInfo=di, traceEvents=events)))
        total += p.stat().st_size
    return total


def run(d: Path, mode: list[str], out: Path) -> tuple[float, int, float]:
    """(wall s, exit code, 1-min load average before)."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "clusterdoctor.cli.main",
            "comm",
            "analyze",
            str(d),
            "--format",
            "json",
            "-o",
            str(out),
            *mode,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        print(f"    {' '.join(mode) or 'serial'}: exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
    return wall, p.returncode, load


def fit(xy: list[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line."""
    n = len(xy)
    mx, my = sum(x for x, _ in xy) / n, sum(y for _, y in xy) / n
    sxx = sum((x - mx) ** 2 for x, _ in xy) or 1.0
    b = sum((x - mx) * (y - my) for x, y in xy) / sxx
    return my - b * mx, b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,8,16")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    src = fixture_path(FIXTURE)
    if src is None or not src.is_file():
        sys.exit(f"shared fixture absent: {FIXTURE}")
    tmp = Path(tempfile.mkdtemp(prefix="cd_ray_bench_", dir="/tmp"))
    w = str(args.workers)
    print(f"machine: {os.cpu_count()} CPUs; Ray and local processes both get {w}")
    try:
        from clusterdoctor.observe.comm.kineto import load_kineto

        one = tmp / "one"
        one.mkdir()
        write_ranks(src, one, 1)
        f = one / "rank0.json"
        parsed = len(pickle.dumps(load_kineto(str(f))))
        print(f"a parsed trace pickled: {parsed / 1e6:.2f} MB for {f.stat().st_size / 1e6:.2f} MB of JSON "
              f"({100 * parsed / f.stat().st_size:.0f} %)")  # fmt: skip
        rows = []
        for n in [int(x) for x in args.ranks.split(",")]:
            d = tmp / f"r{n}"
            d.mkdir()
            mb = write_ranks(src, d, n) / 1e6
            out = tmp / "out.json"
            serial, _, load_s = run(d, [], out)
            pairs = []
            for rep in range(args.reps):
                order = [("local", ["--workers", w]), ("ray", ["--ray", "--workers", w])]
                got = {}
                for name, mode in order if rep % 2 == 0 else order[::-1]:
                    got[name] = run(d, mode, out)
                pairs.append(got)
                print(f"  {n:3d} ranks {mb:7.1f} MB  rep {rep}: local {got['local'][0]:6.1f} s (load "
                      f"{got['local'][2]:.1f})  ray {got['ray'][0]:6.1f} s rc {got['ray'][1]} (load {got['ray'][2]:.1f})")  # fmt: skip
            ok = [p for p in pairs if p["ray"][1] in (0, 1)]
            rows.append(
                {
                    "ranks": n,
                    "mb": mb,
                    "serial_s": serial,
                    "local_s": statistics.median(p["local"][0] for p in pairs),
                    "ray_s": statistics.median(p["ray"][0] for p in ok) if ok else None,
                    "ratio": statistics.median(p["ray"][0] / p["local"][0] for p in ok) if ok else None,
                    "ray_failed": len(pairs) - len(ok),
                    "load": [round(p[k][2], 1) for p in pairs for k in ("local", "ray")] + [round(load_s, 1)],
                }
            )
            shutil.rmtree(d)
        print()
        print(f"comm analyze, whole process, median of {args.reps} pairs, {w} workers")
        print(" ranks      MB  serial s  local s    ray s  ray/local  ray failed  load (1 min)")
        for r in rows:
            ray_s = f"{r['ray_s']:8.1f}" if r["ray_s"] is not None else "       -"
            ratio = f"{r['ratio']:9.2f}" if r["ratio"] is not None else "        -"
            print(f"{r['ranks']:6d} {r['mb']:7.1f} {r['serial_s']:9.1f} {r['local_s']:8.1f} {ray_s} {ratio}"
                  f"  {r['ray_failed']:10d}  {min(r['load'])}-{max(r['load'])}")  # fmt: skip
        ok = [r for r in rows if r["ratio"] is not None]
        beats = [r for r in ok if r["ratio"] < 1]
        top = max(r["mb"] for r in rows)
        if beats:
            print(f"ray beats local processes from {min(r['mb'] for r in beats):.0f} MB on")
        else:
            print(f"ray beats local processes at no measured size (up to {top:.0f} MB)")
        if len(ok) >= 2:
            lf, rf = fit([(r["mb"], r["local_s"]) for r in ok]), fit([(r["mb"], r["ray_s"]) for r in ok])
            print(f"least squares: local {lf[0]:.1f} s + {lf[1] * 1000:.1f} ms/MB, "
                  f"ray {rf[0]:.1f} s + {rf[1] * 1000:.1f} ms/MB")  # fmt: skip
            if rf[1] < lf[1]:
                print(
                    f"  lines cross at {(rf[0] - lf[0]) / (lf[1] - rf[1]):,.0f} MB (an extrapolation of noisy slopes)"
                )
            else:
                print("  they never cross: Ray costs no less per MB and more to start")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
