"""Random: a uniformly random node among those where the pod fits (FGD's 01-Random); a GPU-sharing pod
gets a random GPU with room."""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.policies.base import Policy


class RandomPolicy(Policy):
    name = "random"
    random_node = True
    gpu_select = "random"

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        return np.zeros((len(rows), self.ctx.specs.n_score), dtype=np.int64)
