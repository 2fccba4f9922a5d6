"""Tidal (ours): topology- and priority-aware scoring, re-scored every 30 s with day/night reclaim.

Node score for a pod::

    score = (0.4 * (1 - NVLink utilisation) + 0.35 * (1 - PCIe congestion) + 0.25 * free GPU memory ratio)
            * job priority

- NVLink utilisation: share of the GPUs in the node's NVLink domains held by pods that span two or more
  GPUs of the node (only those talk over NVLink; 1 on a node without NVLink: no headroom to offer);
- PCIe congestion: mean over the node's PCIe switches of the share of the GPUs behind the switch held by
  pods whose GPUs sit behind more than one switch (their traffic crosses the switch uplink), plus, on a
  node without NVLink, every multi-GPU pod (its peer traffic rides PCIe);
- free GPU memory ratio: idle GPU milli / node GPU milli (openb's GPU milli is a GPU-memory share).

Both come from where pods are placed (``placed``/``removed`` keep per-GPU loads), not from constants.
Real node lists carry no NVLink/PCIe layout; the engine layers the synthetic one of
:func:`clusterdoctor.sim.cluster.synthetic_topology` and says so in every result. The priority factor
scales all nodes alike for one pod, so it decides *which pod* wins contention (reclaim, re-scoring in
:func:`clusterdoctor.sim.engine.run_timed`), not where a pod goes. Scores are kept as integers x1000.
"""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.cluster import synthetic_topology
from clusterdoctor.sim.policies.base import Policy, SimContext
from clusterdoctor.sim.traces import MILLI

W_NVLINK, W_PCIE, W_MEM = 0.4, 0.35, 0.25
RESCORE_INTERVAL_S = 30.0
DAY_START_H, DAY_END_H = 8, 20  # reclaim low-priority work for high-priority jobs during the day
MIGRATION_PENALTY_S = 120.0  # progress a migrated/reclaimed job loses (restart from last checkpoint)
MIGRATION_COOLDOWN_S = 1800.0  # a job is not moved again within this time (no bouncing)
MIGRATION_MIN_GAIN = 0.15  # move only when the score improves by at least this much (hysteresis)


def tidal_score(
    nvlink_util: float, pcie_congestion: float, free_mem_ratio: float, priority: float = 1.0
) -> float:
    """The tidal score of one node for one job (inputs in 0..1)."""
    return (W_NVLINK * (1 - nvlink_util) + W_PCIE * (1 - pcie_congestion) + W_MEM * free_mem_ratio) * priority


class TidalPolicy(Policy):
    name = "tidal"
    timed_extras = True

    def bind(self, ctx: SimContext) -> None:
        super().bind(ctx)
        st = ctx.state
        models = [st.type_names[t] for t in st.type_id]
        g = st.g
        nv = np.zeros((st.n, g), dtype=bool)
        n_sw = max(1, (g + 1) // 2)
        sw = np.zeros((st.n, n_sw, g), dtype=bool)
        self.has_nvlink = np.zeros(st.n, dtype=bool)
        topo = ctx.extra.get("topology")  # optional [(nvlink_domains, pcie_switches)] per node
        for i in range(st.n):
            domains, switches = topo[i] if topo else synthetic_topology(models[i], int(st.ngpu[i]))
            for d in domains:
                nv[i, list(d)] = True
            for j, s in enumerate(switches[:n_sw]):
                sw[i, j, list(s)] = True
            self.has_nvlink[i] = bool(domains)
        self.nv_mask = nv
        self.sw_mask = sw
        self.sw_size = sw.sum(axis=2)
        self.nv_load = np.zeros((st.n, g))  # milli per GPU held by pods spanning >= 2 GPUs
        self.pcie_load = np.zeros((st.n, g))  # milli per GPU held by pods whose traffic crosses switches

    def _account(self, node: int, gpus: list[int], full_spec: int, sign: int) -> None:
        if len(gpus) < 2:
            return
        milli = sign * int(self.ctx.specs.milli[full_spec])
        self.nv_load[node, gpus] += milli
        switches = {j for j in range(self.sw_mask.shape[1]) if self.sw_mask[node, j, gpus].any()}
        if len(switches) > 1 or not self.has_nvlink[node]:
            self.pcie_load[node, gpus] += milli

    def placed(self, node: int, gpus: list[int], full_spec: int) -> None:
        self._account(node, gpus, full_spec, 1)

    def removed(self, node: int, gpus: list[int], full_spec: int) -> None:
        self._account(node, gpus, full_spec, -1)

    def node_terms(self, rows: np.ndarray):
        """(NVLink utilisation, PCIe congestion, free GPU memory ratio) of each node row."""
        st = self.ctx.state
        gl = st.gl[rows]
        nv = self.nv_mask[rows]
        nv_cap = nv.sum(axis=1) * MILLI
        nv_util = np.where(nv_cap > 0, (self.nv_load[rows] * nv).sum(axis=1) / np.maximum(nv_cap, 1), 1.0)
        sw = self.sw_mask[rows]
        size = self.sw_size[rows]
        sw_busy = (self.pcie_load[rows][:, None, :] * sw).sum(axis=2)
        used_sw = size > 0
        sw_util = np.where(used_sw, sw_busy / np.maximum(size * MILLI, 1), 0.0)
        cong = np.where(used_sw.any(axis=1), sw_util.sum(axis=1) / np.maximum(used_sw.sum(axis=1), 1), 1.0)
        cap = st.ngpu[rows] * MILLI
        free = np.where(cap > 0, gl.sum(axis=1) / np.maximum(cap, 1), 0.0)
        return nv_util, cong, free

    def node_scores(self, rows: np.ndarray) -> np.ndarray:
        nv, cong, free = self.node_terms(rows)
        return W_NVLINK * (1 - nv) + W_PCIE * (1 - cong) + W_MEM * free

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        s = np.round(self.node_scores(rows) * 1000).astype(np.int64)
        return np.repeat(s[:, None], self.ctx.specs.n_score, axis=1)
