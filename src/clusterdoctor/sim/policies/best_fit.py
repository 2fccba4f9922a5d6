"""Best-fit (FGD's 05-BestFit): the node left with the least free CPU and GPU after placing the pod.

score = int((1 - (0.5 (cpu_free - cpu_req) / 128000 + 0.5 (gpu_free - gpu_req) / 8000)) * 100); the
plugin's min-max normalisation does not change which nodes share the maximum, so it is omitted.
"""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.policies.base import MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU, Policy


def best_fit_scores(
    cpu_left: np.ndarray, total_left: np.ndarray, s_cpu: np.ndarray, s_gpu: np.ndarray
) -> np.ndarray:
    waste = (cpu_left[:, None] - s_cpu[None, :]) / MAX_SPEC_CPU * 0.5
    waste = waste + (total_left[:, None] - s_gpu[None, :]) / MAX_SPEC_GPU * 0.5
    return ((1.0 - waste) * MAX_NODE_SCORE).astype(np.int64)


class BestFitPolicy(Policy):
    name = "best-fit"

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        c, _, total = self.rows_view(rows)
        sp = self.ctx.specs
        return best_fit_scores(c, total, sp.s_cpu, sp.s_num * sp.s_milli)
