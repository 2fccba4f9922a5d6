"""First-fit: the first node (in the run's node order) where the pod fits; the first GPU with room."""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.policies.base import Policy


class FirstFitPolicy(Policy):
    name = "first-fit"
    gpu_select = "first"

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        rank = self.ctx.node_rank[rows]
        return np.repeat((-rank)[:, None], self.ctx.specs.n_score, axis=1).astype(np.int64)
