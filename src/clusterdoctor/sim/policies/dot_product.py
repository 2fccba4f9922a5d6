"""Dot-product (FGD's 02-DotProd, after Tetris, SIGCOMM'14, with FGD's "merge" GPU dimension and
max-spec normalisation): node free vector (cpu/128000, gpu/8000) dotted with the pod's request vector;
score = int((1 - dot / 2) * 100), i.e. the smaller the product the higher the score."""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.policies.base import MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU, Policy


class DotProductPolicy(Policy):
    name = "dot-product"

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        c, _, total = self.rows_view(rows)
        sp = self.ctx.specs
        dot = (c[:, None] / MAX_SPEC_CPU) * (sp.s_cpu[None, :] / MAX_SPEC_CPU)
        dot = dot + (total[:, None] / MAX_SPEC_GPU) * ((sp.s_num * sp.s_milli)[None, :] / MAX_SPEC_GPU)
        return (MAX_NODE_SCORE * (1.0 - dot / 2.0)).astype(np.int64)
