"""Heterogeneity-aware placement on Sia's measured per-GPU-model speeds: Sia Saturn workloads 1-3 on a
mixed A100/T4/RTX2080Ti cluster (our shape), JCT p50 per policy; baseline first-fit in the same run.

    .venv/bin/python bench/sim_hetero.py
"""

from __future__ import annotations

import sys

import numpy as np

from clusterdoctor.sim.hetero import mixed_cluster, run_sia, sia_speeds
from clusterdoctor.sim.workloads import load_sia_workload
from clusterdoctor.testing import fixture_path


def main() -> int:
    root = fixture_path("sched/sia")
    if root is None:
        print("shared fixtures absent (set CLUSTERDOCTOR_FIXTURES)", file=sys.stderr)
        return 2
    speeds = sia_speeds(root / "throughput_profiles")
    print(f"cluster: {mixed_cluster().gpus_by_model()}; speeds (samples/s, 1 GPU): "
          + "; ".join(f"{a}: " + ", ".join(f"{m} {v:.0f}" for m, v in d.items()) for a, d in speeds.items()))  # fmt: skip
    for work in (300.0, 600.0):
        base = None
        for pol in ("first-fit", "best-fit", "hetero"):
            p50 = [run_sia(load_sia_workload(root / f"workloads_saturn/workload-{w}.csv"), speeds, pol, work_s=work)
                   .as_dict()["jct_s"]["p50"] for w in (1, 2, 3)]  # fmt: skip
            m = float(np.mean(p50))
            base = base or m
            print(f"work {work:.0f} s/job  {pol:<10} JCT p50 per workload {[round(x) for x in p50]}  mean {m:.0f} s  "
                  f"ratio to first-fit {m / base:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
