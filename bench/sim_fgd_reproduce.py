"""Reproduce the FGD paper's allocation table on openb_pod_list_default (seeds 42-51, tune 1.3) and print
ours next to the published numbers (analysis_allo_discrete.csv), then the sweep's wall and CPU seconds
beside the Go simulator's reported 10 minutes per run on 2 vCPU (hkust-adsl/kubernetes-scheduler-simulator,
experiments/README.md). Default: the six published policies; ``--extra`` adds ours.

    .venv/bin/python bench/sim_fgd_reproduce.py [--jobs 1] [--seeds 42-51] [--extra]
"""

from __future__ import annotations

import argparse
import sys
import time

from clusterdoctor.cli.sim import parse_seeds
from clusterdoctor.sim.policies import FGD_LABELS
from clusterdoctor.sim.reproduce import average_curves, compare, parse_published, run_sweep
from clusterdoctor.testing import fixture_path

POLICIES = ["random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd"]
EXTRA = ["first-fit", "tidal", "fgd-bf", "fgd-cpu"]
GO_SECONDS_PER_RUN = 600.0  # "10 minutes for 1 experiment on 2 vCPU" (the artifact's experiments/README.md)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", "--workers", dest="workers", type=int, default=1)
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--extra", action="store_true", help="also " + ",".join(EXTRA))
    a = ap.parse_args()
    nodes = fixture_path("sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv")
    pods = fixture_path("sched/alibaba_gpu_v2023/openb_pod_list_default.csv")
    pubp = fixture_path("sched/fgd_expected_results/analysis_allo_discrete.csv")
    if not (nodes and pods and pubp):
        print("shared fixtures absent (set CLUSTERDOCTOR_FIXTURES)", file=sys.stderr)
        return 2
    pub = parse_published(pubp.read_bytes())["openb_pod_list_default"]
    seeds = parse_seeds(a.seeds)
    pols = a.policies.split(",") + (EXTRA if a.extra else [])
    secs: dict[str, list[float]] = {}
    cpu: list[float] = []

    def done(r) -> None:
        secs.setdefault(r[0], []).append(r[4])
        cpu.append(r[5])

    t0, c0 = time.perf_counter(), time.process_time()
    sweep = run_sweep(nodes, pods, pols, seeds, 1.3, a.workers, on_done=done)
    wall = time.perf_counter() - t0
    cpu_s = sum(cpu) if a.workers > 1 else time.process_time() - c0
    comps = compare({p: average_curves(sweep[p]) for p in pols}, pub, FGD_LABELS)
    print(f"openb_pod_list_default, 6212 GPUs, tune 1.3, seeds {a.seeds}: mean alloc %")
    print(f"{'policy':<15}{'ours@130':>9}{'paper':>7}{'diff':>7}{'max|d| 0..130':>14}"
          f"{'ours@100':>9}{'paper':>7}{'s/run':>7}")  # fmt: skip
    for c in comps:
        has = bool(c.published)
        print(f"{c.policy:<15}{c.final_ours:>9.2f}"
              f"{(f'{c.final_published:.2f}' if has else '-'):>7}"
              f"{(f'{c.final_ours - c.final_published:+.2f}' if has else '-'):>7}"
              f"{(f'{c.max_abs_diff:.2f} @{c.worst_column}' if has else '-'):>14}"
              f"{c.ours.get(100, float('nan')):>9.2f}"
              f"{(f'{c.published[100]:.2f}' if has else '-'):>7}"
              f"{sum(secs[c.policy]) / len(secs[c.policy]):>7.2f}")  # fmt: skip
    worst = max((c.max_abs_diff for c in comps if c.published), default=float("nan"))
    print(f"worst |ours - paper|, all published policies, columns 0..130: {worst:.2f} points")
    ff = sum(secs["first-fit"]) / len(secs["first-fit"]) if "first-fit" in secs else None
    if ff and "fgd" in secs:
        fgd = sum(secs["fgd"]) / len(secs["fgd"])
        n = 10_850  # ~pods per run (8152 + copies up to 130 %)
        print(
            f"FGD {n / fgd:,.0f} pods/s vs first-fit {n / ff:,.0f} pods/s (same run): "
            f"{fgd / ff:.2f}x the time"
        )
    runs = len(pols) * len(seeds)
    print(f"{runs} runs ({len(pols)} policies x {len(seeds)} seeds), {a.workers} job(s): "
          f"wall {wall:.1f} s, CPU {cpu_s:.1f} s")  # fmt: skip
    print(f"ours {wall / runs:.2f} s/run; Go simulator (FGD artifact, reported): "
          f"~{GO_SECONDS_PER_RUN / 60:.0f} min/run on 2 vCPU")  # fmt: skip
    print(f"  = ~{runs * GO_SECONDS_PER_RUN / 3600:.0f} h for these runs; "
          f"ours {GO_SECONDS_PER_RUN * runs / wall:,.0f}x faster")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
