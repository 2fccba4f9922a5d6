"""Synthetic clusters and workloads for scale tests (everything here is generated, and says so).

The job-shape mix defaults to the openb default trace's shape shares (computed from the fixture:
6989 one-GPU pods of which 3078 share a GPU, 1088 CPU-only, 16 two-GPU, 15 four-GPU, 44 eight-GPU);
durations are log-normal, arrivals Poisson at a rate that offers ``load`` x the cluster's GPUs.
"""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.traces import PodTrace

# (num_gpu, gpu_milli, share of jobs) — openb default shape shares (see module docstring)
OPENB_SHAPES = ((0, 0, 1088), (1, 500, 3078), (1, 1000, 3911), (2, 1000, 16), (4, 1000, 15), (8, 1000, 44))


def synthetic_cluster(gpus: int = 10_000, gpus_per_node: int = 8, model: str = "H100-SXM5",
                      cpu_milli: int = 192_000, memory_mib: int = 2_097_152) -> Cluster:  # fmt: skip
    """``gpus`` GPUs in nodes of ``gpus_per_node`` (the last node takes the remainder)."""
    nodes = []
    left = gpus
    i = 0
    while left > 0:
        g = min(gpus_per_node, left)
        nodes.append(GpuNode(f"syn-node-{i:05d}", cpu_milli, memory_mib, g, model))
        left -= g
        i += 1
    return Cluster(nodes, source=f"synthetic:{gpus}x{model}", notes=["synthetic cluster"])


DESIGN_MIX = (("A100-SXM4", 0.42), ("H100-SXM5", 0.58))  # the design's fleet: 42 % A100, 58 % H100


def design_mix_cluster(gpus: int = 10_000, gpus_per_node: int = 8, mix=DESIGN_MIX) -> Cluster:
    """The design's A100/H100 fleet as a built-in scenario: ``gpus`` GPUs split by ``mix`` (whole nodes,
    rounded), 8 GPUs, 192 cores (Cluster.source ``design-mix``)."""
    nodes: list[GpuNode] = []
    n_nodes = max(1, gpus // gpus_per_node)
    counts = [round(n_nodes * share) for _, share in mix]
    counts[-1] = n_nodes - sum(counts[:-1])
    for (model, _), c in zip(mix, counts, strict=True):
        for _ in range(c):
            nodes.append(
                GpuNode(f"mix-{model.lower()}-{len(nodes):05d}", 192_000, 2_097_152, gpus_per_node, model)
            )
    share = ", ".join(f"{m} {c * gpus_per_node}" for (m, _), c in zip(mix, counts, strict=True))
    return Cluster(nodes, source="design-mix", notes=[f"synthetic design fleet: {share} GPUs"])


def synthetic_jobs(n: int, cluster: Cluster, seed: int = 0, load: float = 0.9, mean_duration_s: float = 3600.0,
                   shapes=OPENB_SHAPES, low_priority_share: float = 0.3) -> tuple[PodTrace, np.ndarray, np.ndarray]:  # fmt: skip
    """(pods, arrival times, durations): ``n`` jobs whose offered GPU load is ``load`` x capacity."""
    rng = np.random.default_rng(seed)
    w = np.array([s[2] for s in shapes], dtype=np.float64)
    pick = rng.choice(len(shapes), size=n, p=w / w.sum())
    num = np.array([shapes[k][0] for k in pick], dtype=np.int64)
    milli = np.array([shapes[k][1] for k in pick], dtype=np.int64)
    share = num == 1
    share &= milli < 1000
    milli[share] = rng.choice([160, 250, 320, 470, 500, 650, 810], size=int(share.sum()))
    sigma = 1.0
    dur = rng.lognormal(np.log(mean_duration_s) - sigma**2 / 2, sigma, size=n)
    demand = (num * milli).astype(np.float64) / 1000.0  # GPUs per job
    rate = load * cluster.total_gpus / max(float((demand * dur).mean()), 1e-9)  # jobs per second
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    cpu = np.where(num > 0, 8000 * np.maximum(num, 1), 4000).astype(np.int64)
    mem = (cpu // 1000 * 8192).astype(np.int64)
    prio = np.where(rng.random(n) < low_priority_share, 0, 2).astype(np.int64)
    pods = PodTrace(
        [f"syn-job-{i:06d}" for i in range(n)], cpu.tolist(), mem.tolist(), num.tolist(), milli.tolist(),
        [""] * n, prio.tolist(), arrivals.tolist(), (arrivals + dur).tolist(), source="synthetic",
    )  # fmt: skip
    return pods, arrivals, dur


def day_night_jobs(days: float, cluster: Cluster, seed: int = 0, day_load: float = 0.8, night_load: float = 0.2,
                   batch_load: float = 0.35, mean_duration_s: float = 3600.0,
                   batch_duration_s: float = 6 * 3600.0) -> tuple[PodTrace, np.ndarray, np.ndarray]:  # fmt: skip
    """A tidal workload: high-priority (2) interactive/training jobs whose offered load follows the clock
    (``day_load`` 08-20 h, ``night_load`` otherwise, as the Helios Earth VC swing suggests) plus
    low-priority (0) batch jobs at a steady ``batch_load``. Whole-GPU jobs of 1, 2, 4 or 8 GPUs."""
    rng = np.random.default_rng(seed)
    horizon = days * 86400.0
    gpus = cluster.total_gpus
    sizes = np.array([1, 2, 4, 8])
    p_size = np.array([0.55, 0.2, 0.15, 0.1])
    mean_gpus = float((sizes * p_size).sum())
    jobs: list[tuple[float, float, int, int]] = []
    for prio, load_at, mean_d in (
        (2, lambda h: day_load if 8 <= h < 20 else night_load, mean_duration_s),
        (0, lambda h: batch_load, batch_duration_s),
    ):
        peak = max(load_at(h) for h in range(24)) * gpus / (mean_gpus * mean_d)
        t = 0.0
        while True:
            t += rng.exponential(1.0 / peak)
            if t >= horizon:
                break
            rate = load_at(int((t % 86400.0) // 3600)) * gpus / (mean_gpus * mean_d)
            if rng.random() < rate / peak:  # thinning: non-homogeneous Poisson arrivals
                dur = rng.lognormal(np.log(mean_d) - 0.5, 1.0)
                jobs.append((t, dur, int(rng.choice(sizes, p=p_size)), prio))
    jobs.sort()
    n = len(jobs)
    arr = np.array([j[0] for j in jobs])
    dur = np.array([j[1] for j in jobs])
    num = [j[2] for j in jobs]
    pods = PodTrace(
        [f"tidal-job-{i:06d}" for i in range(n)], [8000 * k for k in num], [65536 * k for k in num], num,
        [1000] * n, [""] * n, [j[3] for j in jobs], arr.tolist(), (arr + dur).tolist(), source="synthetic day/night",
    )  # fmt: skip
    return pods, arr, dur
