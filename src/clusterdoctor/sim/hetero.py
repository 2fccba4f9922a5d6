"""Heterogeneous-cluster experiment: Sia workloads on a mixed A100 / T4 / RTX 2080Ti cluster with the
per-model speeds Sia measured (``sia/throughput_profiles``).

The cluster shape (2 DGX-A100 nodes x 8, 4 g4dn.12xlarge x 4 T4, 3 nodes x 8 RTX 2080Ti) and the job
lengths (each job's reference work is ``work_s`` seconds on its fastest model; Sia workloads carry no
durations) are our choices, stated in every result. The speeds are real: best single-GPU samples/s of
each application on each cluster type.
"""

from __future__ import annotations

from pathlib import Path

from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.workloads import DLJobs, load_sia_profile

SIA_CLUSTERS = {"dgx-ext": "A100-SXM4", "aws": "T4", "rtx": "RTX2080Ti"}


def sia_speeds(profile_dir: str | Path) -> dict[str, dict[str, float]]:
    """{app: {GPU model: best single-GPU samples/s}} from Sia ``<app>__placements-<cluster>.csv`` files."""
    out: dict[str, dict[str, float]] = {}
    for p in sorted(Path(profile_dir).glob("*__placements-*.csv")):
        app, cluster = p.stem.split("__placements-")
        if cluster not in SIA_CLUSTERS:
            continue
        prof = load_sia_profile(p)
        if "1" in prof:
            out.setdefault(app, {})[SIA_CLUSTERS[cluster]] = prof["1"]
    return out


def mixed_cluster() -> Cluster:
    nodes = [GpuNode(f"dgx-{i}", 256_000, 1_048_576, 8, "A100-SXM4") for i in range(2)]
    nodes += [GpuNode(f"aws-{i}", 48_000, 196_608, 4, "T4") for i in range(4)]
    nodes += [GpuNode(f"rtx-{i}", 64_000, 262_144, 8, "RTX2080Ti") for i in range(3)]
    return Cluster(
        nodes,
        source="mixed A100/T4/RTX2080Ti (our choice, after Sia's cluster types)",
        notes=["cluster shape and job lengths are our choices; per-model speeds are Sia's measurements"],
    )


def run_sia(
    jobs: DLJobs, speeds: dict[str, dict[str, float]], policy: str, seed: int = 1, work_s: float = 3600.0
):
    """Timed run of a Sia workload on :func:`mixed_cluster`; each job's duration at speed 1 is ``work_s``
    and ``speed`` is relative to the app's fastest model."""
    import numpy as np

    from clusterdoctor.sim.engine import run_timed

    rel = {a: {m: v / max(d.values()) for m, v in d.items()} for a, d in speeds.items()}
    pods = jobs.pods
    pods.app = list(jobs.app)
    arr = np.asarray(pods.creation, dtype=float)
    # a job's GPUs = its replicas, capped to a node (these runs do not gang across nodes)
    pods.num_gpu = [min(k, 8) for k in pods.num_gpu]
    pods.cpu_milli = [4000 * k for k in pods.num_gpu]
    pods.memory_mib = [16384 * k for k in pods.num_gpu]
    return run_timed(
        mixed_cluster(), pods, policy, seed, arrivals=arr, durations=np.full(len(pods), work_s), speed=rel
    )
