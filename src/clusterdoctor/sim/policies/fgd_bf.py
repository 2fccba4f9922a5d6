"""FGD-BF (ours): FGD with its ties broken by best-fit instead of by node order.

FGD's integer score (``int(sigmoid(dfrag / 1000) * 100)``) ties many nodes — a whole-GPU pod scores
the same on most nodes — and kube-scheduler then takes the first node in its order. FGD-BF ranks by
(FGD score, best-fit score): among nodes that fragment equally, the one left with the least free CPU
and GPU wins, which keeps whole nodes free for the 8-GPU pods that arrive late.
"""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.policies.best_fit import best_fit_scores
from clusterdoctor.sim.policies.fgd import FGDPolicy


class FGDBestFitPolicy(FGDPolicy):
    name = "fgd-bf"

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        fgd = super().score_rows(rows)
        st, sp = self.ctx.state, self.ctx.specs
        bf = best_fit_scores(st.cpu_left[rows], st.gl[rows].sum(axis=1), sp.s_cpu, sp.s_num * sp.s_milli)
        return fgd * 1000 + np.clip(bf, -499, 499)
