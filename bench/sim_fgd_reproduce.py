"""Reproduce the FGD paper's allocation table on openb_pod_list_default (seeds 42-51, tune 1.3) and print
ours next to the published numbers (analysis_allo_discrete.csv). Also prints FGD's jobs/s against
first-fit measured in the same run.

    .venv/bin/python bench/sim_fgd_reproduce.py [--workers 2] [--seeds 42-51]
"""

from __future__ import annotations

import argparse
import sys
import time

from clusterdoctor.cli.sim import parse_seeds
from clusterdoctor.sim.policies import FGD_LABELS
from clusterdoctor.sim.reproduce import average_curves, compare, parse_published, run_sweep
from clusterdoctor.testing import fixture_path

POLICIES = [
    "random",
    "dot-product",
    "gpu-clustering",
    "gpu-packing",
    "best-fit",
    "fgd",
    "first-fit",
    "tidal",
    "fgd-bf",
    "fgd-cpu",
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--policies", default=",".join(POLICIES))
    a = ap.parse_args()
    nodes = fixture_path("sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv")
    pods = fixture_path("sched/alibaba_gpu_v2023/openb_pod_list_default.csv")
    pubp = fixture_path("sched/fgd_expected_results/analysis_allo_discrete.csv")
    if not (nodes and pods and pubp):
        print("shared fixtures absent (set CLUSTERDOCTOR_FIXTURES)", file=sys.stderr)
        return 2
    pub = parse_published(pubp.read_bytes())["openb_pod_list_default"]
    seeds = parse_seeds(a.seeds)
    pols = a.policies.split(",")
    secs: dict[str, list[float]] = {}
    t0 = time.perf_counter()
    sweep = run_sweep(nodes, pods, pols, seeds, 1.3, a.workers,
                      on_done=lambda r: secs.setdefault(r[0], []).append(r[4]))  # fmt: skip
    wall = time.perf_counter() - t0
    comps = compare({p: average_curves(sweep[p]) for p in pols}, pub, FGD_LABELS)
    print(f"openb_pod_list_default, 6212 GPUs, tune 1.3, seeds {a.seeds}: mean GPU allocation (%)")
    print(f"{'policy':<15}{'FGD label':<18}{'ours@130':>9}{'paper@130':>10}{'diff':>7}{'max|diff| 0..130':>18}"
          f"{'ours@100':>9}{'paper@100':>10}{'s/run':>7}")  # fmt: skip
    for c in comps:
        has = bool(c.published)
        print(f"{c.policy:<15}{c.label:<18}{c.final_ours:>9.2f}"
              f"{(f'{c.final_published:.2f}' if has else '-'):>10}"
              f"{(f'{c.final_ours - c.final_published:+.2f}' if has else '-'):>7}"
              f"{(f'{c.max_abs_diff:.2f} @{c.worst_column}' if has else '-'):>18}"
              f"{c.ours.get(100, float('nan')):>9.2f}"
              f"{(f'{c.published[100]:.2f}' if has else '-'):>10}"
              f"{sum(secs[c.policy]) / len(secs[c.policy]):>7.2f}")  # fmt: skip
    worst = max(c.max_abs_diff for c in comps if c.published)
    print(f"worst |ours - paper| over all published policies and columns 0..130: {worst:.2f} points")
    ff = sum(secs["first-fit"]) / len(secs["first-fit"]) if "first-fit" in secs else None
    if ff and "fgd" in secs:
        fgd = sum(secs["fgd"]) / len(secs["fgd"])
        n = 10_850  # ~pods per run (8152 + copies up to 130 %)
        print(
            f"FGD {n / fgd:,.0f} pods/s vs first-fit (baseline, same run) {n / ff:,.0f} pods/s: "
            f"FGD takes {fgd / ff:.2f}x the baseline's time per run"
        )
    print(f"wall {wall:.1f} s with {a.workers} worker(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
