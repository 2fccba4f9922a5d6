"""GPU fragmentation as the FGD paper (Weng et al., USENIX ATC'23) defines it, vectorised over nodes.

Given the "typical pods" (the most frequent pod specs, together 95 % of the workload, with their
frequencies), a node's fragmentation is the expected amount of its idle GPU milli that the next
typical pod could not use:

- a typical pod the node can host (enough CPU, enough GPUs with room, model allowed): only the idle
  milli on GPUs too small for it counts as fragment;
- otherwise (it lacks CPU or GPU room, or the model is excluded) all idle GPU milli counts;
- a CPU-only typical pod counts all idle GPU milli (FGD's "XL/XR" classes are fragment too).

``frag(node) = sum_t f_t * frag_t(node)``; the cluster's fragment is the sum over nodes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from clusterdoctor.sim.state import DEFAULT_MILLI_CPU
from clusterdoctor.sim.traces import MILLI, PodTrace

POPULARITY_THRESHOLD = 0.95  # FGD artifact: podPopularityThreshold 95 (scripts/generate_config_and_run.py)


@dataclass
class TypicalPods:
    """GPU typical pods as arrays plus the summed frequency of CPU-only typical pods."""

    cpu: np.ndarray
    milli: np.ndarray
    num: np.ndarray
    freq: np.ndarray
    access: np.ndarray  # (T, node types) bool
    cpu_only_freq: float

    def __len__(self) -> int:
        return len(self.cpu)


def typical_pods(
    pods: PodTrace, type_names: list[str], threshold: float = POPULARITY_THRESHOLD
) -> TypicalPods:
    """The most frequent (CPU, GPU milli, GPU count, model constraint) specs covering ``threshold`` of
    the pods, frequencies renormalised to 1 (FGD ``GetTypicalPods``; ties ordered by larger spec first)."""
    counts: Counter[tuple[int, int, int, str]] = Counter()
    for i in range(len(pods)):
        counts[
            (pods.cpu_milli[i] or DEFAULT_MILLI_CPU, pods.gpu_milli[i], pods.num_gpu[i], pods.gpu_spec[i])
        ] += 1
    total = sum(counts.values())
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    chosen: list[tuple[tuple[int, int, int, str], int]] = []
    cum = 0
    for key, cnt in ranked:
        if cum >= threshold * total:
            break
        chosen.append((key, cnt))
        cum += cnt
    gpu = [(k, c) for k, c in chosen if k[2] > 0]
    cpu_freq = sum(c for k, c in chosen if k[2] == 0) / cum
    access = np.ones((len(gpu), len(type_names)), dtype=bool)
    for j, ((_, _, _, spec), _) in enumerate(gpu):
        if spec:
            allowed = set(spec.split("|"))
            access[j] = [t in allowed for t in type_names]
    return TypicalPods(
        np.array([k[0] for k, _ in gpu], dtype=np.int64),
        np.array([k[1] for k, _ in gpu], dtype=np.int64),
        np.array([k[2] for k, _ in gpu], dtype=np.int64),
        np.array([c / cum for _, c in gpu], dtype=np.float64),
        access,
        float(cpu_freq),
    )


def node_parts(cpu: np.ndarray, gl: np.ndarray, type_id: np.ndarray, tp: TypicalPods):
    """Per-node building blocks: A (idle milli on GPUs too small for each typical pod), cnt (GPUs with
    room for it), total idle milli, and the model-access mask. Shapes (R,T), (R,T), (R,), (R,T)."""
    lg = gl[:, :, None]
    small = lg < tp.milli[None, None, :]
    a = (lg * small).sum(axis=1)
    cnt = (~small).sum(axis=1)
    total = gl.sum(axis=1)
    acc = tp.access[:, type_id].T
    return a, cnt, total, acc


def node_frag(cpu: np.ndarray, gl: np.ndarray, type_id: np.ndarray, tp: TypicalPods) -> np.ndarray:
    """FGD fragmentation (expected fragmented GPU milli) of each node row."""
    a, cnt, total, acc = node_parts(cpu, gl, type_id, tp)
    ok = (cnt >= tp.num[None, :]) & (cpu[:, None] >= tp.cpu[None, :]) & acc
    per_t = np.where(ok, a, total[:, None])
    return per_t @ tp.freq + tp.cpu_only_freq * total


def gpu_milli_free_whole(gl: np.ndarray) -> np.ndarray:
    """Fully idle GPUs per node (for reports)."""
    return (gl == MILLI).sum(axis=1)
