"""GPU packing (FGD's 04-GpuPacking): prefer, in order, (1) shared GPUs already in use (the fuller the
better), (2) idle GPUs on a node already in use, (3) an idle node (smaller first). CPU-only pods score
0 everywhere."""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.policies.base import MAX_NODE_SCORE, Policy
from clusterdoctor.sim.traces import MILLI


class GpuPackingPolicy(Policy):
    name = "gpu-packing"

    def bind(self, ctx) -> None:
        super().bind(ctx)
        sp = ctx.specs
        self.share = np.flatnonzero((sp.s_num > 0) & (sp.s_milli < MILLI))
        self.whole = np.flatnonzero((sp.s_num > 0) & (sp.s_milli >= MILLI))
        self.whole_score = np.maximum(MAX_NODE_SCORE // 2 - sp.s_num[self.whole], MAX_NODE_SCORE // 3)

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        st, sp = self.ctx.state, self.ctx.specs
        gl = st.gl[rows]
        nfree = st.nfree[rows]
        all_free = (nfree == st.ngpu[rows])[:, None]
        case3 = np.maximum(MAX_NODE_SCORE // 3 - nfree, nfree)[:, None]
        out = np.zeros((len(rows), sp.n_score), dtype=np.int64)
        out[:, self.whole] = np.where(all_free, case3, self.whole_score[None, :])
        if len(self.share):
            m = sp.s_milli[self.share]
            fit = np.where(gl[:, None, :] >= m[None, :, None], gl[:, None, :], MILLI + 1).min(axis=2)  # (R,S)
            case1 = np.maximum(MAX_NODE_SCORE - (fit * 100 // MILLI) // 10, MAX_NODE_SCORE // 2)
            case2 = max(MAX_NODE_SCORE // 2 - 1, MAX_NODE_SCORE // 3)
            out[:, self.share] = np.where(all_free, case3, np.where(fit >= MILLI, case2, case1))
        return out
