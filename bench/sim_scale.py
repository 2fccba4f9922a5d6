"""Simulator speed: (1) the openb default trace (8,152 pods + copies to 130 %, 6,212 GPUs) through FGD,
target < 10 s; (2) a synthetic 10,000-GPU, 100,000-job timed run, target < 120 s on one core. Each
prints jobs per second and the ratio to first-fit measured in the same run.

    .venv/bin/python bench/sim_scale.py [--jobs 100000] [--gpus 10000]
"""

from __future__ import annotations

import argparse
import sys
import time

from clusterdoctor.sim.engine import run_fgd_protocol, run_timed
from clusterdoctor.sim.synthetic import synthetic_cluster, synthetic_jobs
from clusterdoctor.sim.traces import load_openb_nodes, load_openb_pods
from clusterdoctor.testing import fixture_path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--gpus", type=int, default=10_000)
    ap.add_argument("--policy", default="fgd")
    a = ap.parse_args()
    nodes = fixture_path("sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv")
    pods = fixture_path("sched/alibaba_gpu_v2023/openb_pod_list_default.csv")
    if nodes and pods:
        c, p = load_openb_nodes(nodes), load_openb_pods(pods)
        base = run_fgd_protocol(c, p, "first-fit", 42)
        res = run_fgd_protocol(c, p, a.policy, 42)
        print(f"openb default, {c.total_gpus} GPUs, {res.pods_arrived} pods: {a.policy} {res.seconds:.2f} s "
              f"({res.pods_arrived / res.seconds:,.0f} pods/s); first-fit {base.seconds:.2f} s "
              f"({base.pods_arrived / base.seconds:,.0f} pods/s); ratio {res.seconds / base.seconds:.2f}x; "
              f"target < 10 s: {'OK' if res.seconds < 10 else 'MISSED'}")  # fmt: skip
    else:
        print("openb fixtures absent: skipping part 1 (set CLUSTERDOCTOR_FIXTURES)")
    cl = synthetic_cluster(a.gpus)
    jp, arr, dur = synthetic_jobs(a.jobs, cl, seed=1, load=0.9)
    t = time.perf_counter()
    base = run_timed(cl, jp, "first-fit", 1, arrivals=arr, durations=dur)
    tb = time.perf_counter() - t
    t = time.perf_counter()
    res = run_timed(cl, jp, a.policy, 1, arrivals=arr, durations=dur)
    tr = time.perf_counter() - t
    print(f"synthetic {cl.total_gpus} GPUs ({len(cl.nodes)} nodes), {a.jobs} jobs: {a.policy} {tr:.1f} s "
          f"({a.jobs / tr:,.0f} jobs/s); first-fit {tb:.1f} s ({a.jobs / tb:,.0f} jobs/s); ratio {tr / tb:.2f}x; "
          f"target < 120 s: {'OK' if tr < 120 else 'MISSED'}")  # fmt: skip
    d = res.as_dict()
    print(f"  {a.policy}: JCT p50 {d['jct_s']['p50']:.0f} s p99 {d['jct_s']['p99']:.0f} s, queue p99 "
          f"{d['queue_delay_s']['p99']:.0f} s, mean allocation {d['mean_allocation_pct']:.1f} %, "
          f"{res.energy_kwh:,.0f} kWh")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
