"""Tidal vs FGD / best-fit on a synthetic day/night workload (high-priority load follows the clock, steady
low-priority batch): high-priority queueing delay, batch JCT, preemptions, migrations, allocation,
energy. Baseline: best-fit in the same run.

    .venv/bin/python bench/sim_tidal.py [--gpus 512] [--days 3]
"""

from __future__ import annotations

import argparse
import sys

from clusterdoctor.sim.engine import run_timed
from clusterdoctor.sim.synthetic import day_night_jobs, synthetic_cluster


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=512)
    ap.add_argument("--days", type=float, default=3)
    a = ap.parse_args()
    c = synthetic_cluster(a.gpus)
    pods, arr, dur = day_night_jobs(a.days, c, seed=1)
    print(f"{len(pods)} jobs over {a.days} days on {c.total_gpus} GPUs (synthetic day/night workload)")
    print(f"{'policy':<10}{'hi-prio queue p50/p99 (s)':>28}{'batch queue p99 (s)':>21}{'JCT p50 (s)':>13}"
          f"{'alloc %':>9}{'preempt':>9}{'migrate':>9}{'kWh':>9}{'sim s':>7}")  # fmt: skip
    for pol in ("best-fit", "fgd", "tidal"):
        r = run_timed(c, pods, pol, 1, arrivals=arr, durations=dur)
        d = r.as_dict()
        hi, lo = d["queue_delay_s_by_priority"].get("2", {}), d["queue_delay_s_by_priority"].get("0", {})
        print(f"{pol:<10}{hi.get('p50', 0):>13.0f} / {hi.get('p99', 0):<12.0f}{lo.get('p99', 0):>21.0f}"
              f"{d['jct_s']['p50']:>13.0f}{d['mean_allocation_pct']:>9.1f}{r.preemptions:>9}{r.migrations:>9}"
              f"{r.energy_kwh:>9.0f}{r.seconds:>7.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
