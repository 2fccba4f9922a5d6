"""Heterogeneity-aware placement (ours, after Gavel OSDI'20 / Sia SOSP'23): put each job on the GPU model
where its application runs fastest relative to its best model, best-fit among equals.

Speeds come from measured per-model throughputs (Gavel ``simulation_throughputs.json``, Sia step-time
profiles) passed to :func:`clusterdoctor.sim.engine.run_timed` as ``speed``; without them every model
counts as equally fast and this is best-fit.
"""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.policies.base import Policy
from clusterdoctor.sim.policies.best_fit import best_fit_scores

MIN_RELATIVE_SPEED = 0.0  # >0: wait for a faster GPU rather than run below this share of the best speed


class HeteroPolicy(Policy):
    name = "hetero"

    def __init__(self, min_relative_speed: float = MIN_RELATIVE_SPEED) -> None:
        self.min_relative_speed = min_relative_speed
        self.min_score = None

    def bind(self, ctx) -> None:
        super().bind(ctx)
        if ctx.extra.get("speed") is not None and ctx.specs.s_app is not None:
            self.min_score = int(round(self.min_relative_speed * 1000)) * 1000 - 499

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        st, sp = self.ctx.state, self.ctx.specs
        bf = np.clip(
            best_fit_scores(st.cpu_left[rows], st.gl[rows].sum(axis=1), sp.s_cpu, sp.s_num * sp.s_milli),
            -499,
            499,
        )
        tab = self.ctx.extra.get("speed")
        if tab is None or sp.s_app is None:
            return bf
        rel = tab / np.maximum(tab.max(axis=1, keepdims=True), 1e-12)  # (apps, types) in 0..1
        app = np.maximum(sp.s_app, 0)
        s = rel[app][:, st.type_id[rows]].T  # (R, S)
        return np.round(s * 1000).astype(np.int64) * 1000 + bf
