"""GPU clustering (FGD's 03-GpuClustering): keep pods of the same GPU shape (shared, 1, 2, 4, 8 GPUs)
together. Base 75 on a node holding only that shape, 50 when it holds that shape among others, 25 on a
node with no GPU pods, 0 otherwise; plus 25 x (8000 - idle GPU milli) / 8000. CPU-only pods score 0."""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.policies.base import MAX_NODE_SCORE, MAX_SPEC_GPU, Policy


class GpuClusteringPolicy(Policy):
    name = "gpu-clustering"

    def bind(self, ctx) -> None:
        super().bind(ctx)
        self.gpu_specs = np.flatnonzero(ctx.specs.s_tag >= 0)

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        st, sp = self.ctx.state, self.ctx.specs
        tags = st.tags[rows]
        total = st.gl[rows].sum(axis=1)
        kinds = (tags > 0).sum(axis=1)[:, None]
        fill = (MAX_NODE_SCORE // 4 * (MAX_SPEC_GPU - total) // MAX_SPEC_GPU)[:, None]
        out = np.zeros((len(rows), sp.n_score), dtype=np.int64)
        gs = self.gpu_specs
        has = tags[:, sp.s_tag[gs]] > 0  # (R,S)
        base = np.where(has, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        out[:, gs] = fill + base
        return out
