"""Tidal on a real day/night load: a Helios Earth virtual cluster (SC'21, HeliosArtifact per-minute
sequence in the shared fixtures), its demand curve rebuilt as jobs (clusterdoctor.sim.load_trace), on
the VC's own GPU count (8-GPU V100 nodes, synthetic NVLink/PCIe layout), with and without a synthetic
low-priority batch backfill. Idle GPU share by hour of day, per policy, against the design's claim
(daily idle GPUs 31.7 % -> 8.2 %).

    .venv/bin/python bench/sim_tidal_real.py [--vc vchbv] [--days 7] [--backfill 0.7] [--seed 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from clusterdoctor.sim.cluster import Cluster, GpuNode, with_synthetic_topology
from clusterdoctor.sim.engine import run_timed
from clusterdoctor.sim.load_trace import jobs_from_sequence, load_cluster_sequence
from clusterdoctor.sim.metrics import idle_share_by_hour, percentiles
from clusterdoctor.sim.traces import PodTrace
from clusterdoctor.testing import fixture_path

POLICIES = ["best-fit", "fgd", "tidal"]


def backfill(days: float, gpus: int, load: float, seed: int) -> tuple[PodTrace, np.ndarray, np.ndarray]:
    """Synthetic best-effort batch (priority 0): 1/2/4/8-GPU jobs, 2 h mean (exponential), Poisson
    arrivals offering ``load`` x capacity around the clock. Not from a trace."""
    rng = np.random.default_rng(seed)
    sizes = np.array([1, 2, 4, 8])
    mean_gpus = float(sizes.mean())
    rate = load * gpus / (mean_gpus * 7200.0)  # jobs per second
    n = int(rng.poisson(rate * days * 86400))
    arr = np.sort(rng.uniform(0, days * 86400, n))
    dur = rng.exponential(7200.0, n) + 60.0
    k = rng.choice(sizes, n)
    pods = PodTrace([f"batch-{i:06d}" for i in range(n)], list(8000 * k), [0] * n, list(k), [1000] * n,
                    [""] * n, [0] * n)  # fmt: skip
    return pods, arr, dur


def concat(a: PodTrace, b: PodTrace) -> PodTrace:
    return dataclasses.replace(a, names=a.names + b.names, cpu_milli=a.cpu_milli + b.cpu_milli,
                               memory_mib=a.memory_mib + b.memory_mib, num_gpu=a.num_gpu + b.num_gpu,
                               gpu_milli=a.gpu_milli + b.gpu_milli, gpu_spec=a.gpu_spec + b.gpu_spec,
                               priority=a.priority + b.priority)  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vc", default="vchbv")
    ap.add_argument("--days", type=float, default=31.0)
    ap.add_argument("--backfill", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    path = fixture_path(f"sched/helios/Earth_{a.vc}_cluster_sequence_vc.csv")
    if path is None:
        print("shared fixtures absent (set CLUSTERDOCTOR_FIXTURES)", file=sys.stderr)
        return 2
    seq = load_cluster_sequence(path)
    keep = seq.t < a.days * 86400
    seq = dataclasses.replace(seq, t=seq.t[keep], running=seq.running[keep], pending=seq.pending[keep],
                              total=seq.total[keep])  # fmt: skip
    gpus = int(seq.total.max())
    cluster = with_synthetic_topology(
        Cluster([GpuNode(f"{a.vc}-{i:03d}", 96_000, 786_432, 8, "V100") for i in range(gpus // 8)])
    )
    real = jobs_from_sequence(seq, priority=2)  # high priority: tidal reclaims batch work for it by day
    demand_idle = 100.0 * (1 - np.minimum(seq.demand, gpus).mean() / gpus)
    print(f"Helios Earth {a.vc}: {gpus} GPUs, {a.days:g} days from {seq.start:%Y-%m-%d}, "
          f"{len(real.pods)} rebuilt jobs")  # fmt: skip
    print(f"  idle share if every demanded GPU ran at once: {demand_idle:.1f} %")
    bpods, barr, bdur = backfill(a.days, gpus, a.backfill, a.seed)
    scen = {
        "real": (real.pods, real.arrivals, real.durations),
        f"real+batch{a.backfill:g}": (
            concat(real.pods, bpods),
            np.concatenate([real.arrivals, barr]),
            np.concatenate([real.durations, bdur]),
        ),  # fmt: skip
    }
    hourly: dict[str, dict[int, float]] = {}
    print(f"{'scenario':<15}{'policy':<9}{'idle %':>7}{'04h':>6}{'14h':>6}"
          f"{'hi q p50':>9}{'hi q p99':>9}{'preempt':>8}{'batch GPU-h*':>12}")  # fmt: skip
    end = a.days * 86400
    for name, (pods, arr, dur) in scen.items():
        for pol in POLICIES:
            r = run_timed(cluster, pods, pol, a.seed, arrivals=arr, durations=dur)
            keep_t = r.timeline_t <= end
            h = idle_share_by_hour(r.timeline_t[keep_t], r.timeline_used_milli[keep_t], gpus, t_end=end)
            hourly[f"{name}/{pol}"] = h
            idle = float(np.mean(list(h.values())))
            prio = np.asarray(pods.priority)
            qd = r.queue_delay_by_job
            hi = percentiles(qd[(prio == 2) & np.isfinite(qd)])
            lo_gpu_h = float(sum(dur[i] * pods.num_gpu[i] for i in np.flatnonzero(prio == 0)) / 3600)
            print(f"{name:<15}{pol:<9}{idle:>7.1f}{h.get(4, float('nan')):>6.1f}{h.get(14, float('nan')):>6.1f}"
                  f"{hi.get('p50') or 0:>9.0f}{hi.get('p99') or 0:>9.0f}{r.preemptions:>8}"
                  f"{lo_gpu_h if prio.min() == 0 else 0:>12.0f}")  # fmt: skip
    print("idle % by hour of day (0..23):")
    for k, h in hourly.items():
        vals = [h.get(i, float("nan")) for i in range(24)]
        print(f"  {k}")
        print("    " + " ".join(f"{v:.0f}" for v in vals))
    for note in real.notes:
        print(f"note: {note}")
    print("note: the batch backfill is synthetic (Poisson, 2 h mean, 1-8 GPUs); the GPU model is assumed")
    print("* batch GPU-hours offered (queued work that tidal may preempt), not completed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
