"""PWR (Lettich et al., "Power- and Fragmentation-aware Online Scheduling for GPU Datacenters",
CCGrid'25, arXiv 2412.17484) and our sleep-aware variant.

PWR scores a node by how much its power grows if the pod lands there (GPU and CPU power; a GPU already
busy costs nothing more, an idle one costs busy - idle watts), so it packs work onto GPUs that are
already powered. The paper combines it with FGD as a weighted sum; here ``alpha`` weighs the power score
and ``1 - alpha`` FGD's. Scores are normalised by a fixed bound per pod spec (the largest power step any
node could take), not the plugin's per-pod min-max over nodes: our scores are cached per node, and the
fixed bound keeps the argmax of pure PWR unchanged (a deviation only for mixed weights).

``pwr-sleep`` (ours): FGD's score first (``tiebreak``), and among FGD's best nodes the one whose power
grows least, counting that a node without pods is asleep (:mod:`clusterdoctor.sim.energy`): placing a
pod there also costs waking it (host idle watts + its idle GPUs - sleep watts), so work goes to awake
nodes and empty nodes stay empty. ``pwr-eff`` (ours) divides the power step by the useful TFLOPS the pod
adds there (TFLOPS/W per generation), so on a mixed fleet work goes to the more efficient GPUs. Pure PWR gives a sharing pod the tightest-fitting GPU (an already busy
one when there is); mixed with FGD, FGD's GPU choice.
"""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim import energy
from clusterdoctor.sim.policies.base import MAX_NODE_SCORE
from clusterdoctor.sim.policies.fgd import FGDPolicy
from clusterdoctor.sim.traces import MILLI


class PowerPolicy(FGDPolicy):
    name = "pwr"

    def __init__(self, alpha: float = 1.0, sleep: bool = False, tiebreak: bool = False,
                 per_tflop: bool = False) -> None:  # fmt: skip
        if not 0.0 <= alpha <= 1.0:
            raise ValueError("pwr: alpha must be within 0..1")
        self.alpha = float(alpha)
        self.sleep = bool(sleep)
        self.tiebreak = bool(tiebreak)  # FGD first, the power score only among FGD's best nodes
        self.per_tflop = bool(per_tflop)  # watts per useful TFLOPS added, not watts (mixed fleets)
        # pure PWR: tightest GPU (a busy one first); mixed with FGD: FGD's GPU choice
        self.gpu_select = "best" if self.alpha >= 1.0 else "own"

    def bind(self, ctx) -> None:
        super().bind(ctx)
        st, sp = ctx.state, ctx.specs
        self.table = energy.PowerTable(st.type_names, pue=1.0)
        step = self.table.busy_w - self.table.idle_w
        cores = np.ceil(sp.s_cpu / MILLI / 2)
        wake = energy.HOST_IDLE_W + st.g * float(self.table.idle_w.max()) - energy.NODE_SLEEP_W
        self.bound = sp.s_num * float(step.max()) + energy.CORE_W * cores + (wake if self.sleep else 0.0)
        self.bound = np.maximum(self.bound, 1.0)
        if self.per_tflop:  # the bound in W/TFLOPS: the largest step over the least efficient GPU
            work = np.maximum(sp.s_num * sp.s_milli / MILLI, 1e-3) * float(self.table.tflops.min())
            self.bound = self.bound / work

    def power_delta(self, rows: np.ndarray) -> np.ndarray:
        """Watts a node's draw grows by when a pod of each score spec lands there, shape (R, S)."""
        st, sp, tb = self.ctx.state, self.ctx.specs, self.table
        t = st.type_id[rows]
        gl = st.gl[rows]
        exists = st.gpu_exists[rows]
        step = (tb.busy_w - tb.idle_w)[t]
        used_cores = np.ceil((st.cpu_cap[rows] - st.cpu_left[rows]) / MILLI / 2)
        new_cores = np.ceil(
            (st.cpu_cap[rows, None] - st.cpu_left[rows, None] + sp.s_cpu[None, :]) / MILLI / 2
        )
        d = energy.CORE_W * (new_cores - used_cores[:, None])
        share = (sp.s_num == 1) & (sp.s_milli < MILLI)
        busy_room = ((gl < MILLI) & exists)[:, None, :] & (gl[:, None, :] >= sp.s_milli[None, :, None])
        gpu_cost = np.where(share[None, :] & busy_room.any(axis=2), 0.0, sp.s_num[None, :] * step[:, None])
        d = d + gpu_cost
        if self.sleep:
            wake = energy.HOST_IDLE_W + st.ngpu[rows] * tb.idle_w[t] - energy.NODE_SLEEP_W
            d = d + np.where(st.pods_on[rows] == 0, wake, 0.0)[:, None]
        if self.per_tflop:
            work = np.maximum(sp.s_num * sp.s_milli / MILLI, 1e-3)[None, :] * tb.tflops[t][:, None]
            d = d / work
        return d

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        pwr = MAX_NODE_SCORE * (1.0 - self.power_delta(rows) / self.bound[None, :])
        if self.alpha >= 1.0:
            return pwr.astype(np.int64)
        fgd = super().score_rows(rows)
        if self.tiebreak:
            return fgd * 1000 + np.clip(pwr * 10, 0, 999).astype(np.int64)
        return np.rint(self.alpha * pwr + (1.0 - self.alpha) * fgd).astype(np.int64)


class PwrFgdPolicy(PowerPolicy):
    name = "pwr-fgd"

    def __init__(self, alpha: float = 0.5, sleep: bool = False) -> None:
        super().__init__(alpha, sleep)


class PwrSleepPolicy(PowerPolicy):
    """Ours: FGD first; among FGD's best nodes the smallest power step, waking a node counted."""

    name = "pwr-sleep"

    def __init__(self, alpha: float = 0.5, sleep: bool = True, tiebreak: bool = True,
                 per_tflop: bool = False) -> None:  # fmt: skip
        super().__init__(alpha, sleep, tiebreak, per_tflop)


class PwrEffPolicy(PwrSleepPolicy):
    """Ours: pwr-sleep with the power step per useful TFLOPS added (a mixed fleet's H100 before A100)."""

    name = "pwr-eff"

    def __init__(self, alpha: float = 0.5, sleep: bool = True, tiebreak: bool = True,
                 per_tflop: bool = True) -> None:  # fmt: skip
        super().__init__(alpha, sleep, tiebreak, per_tflop)
