"""FGD — Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC'23).

Score of a node for a pod = ``int(sigmoid((frag_before - frag_after) / 1000) * 100)``: the node whose
fragmentation (see :mod:`clusterdoctor.sim.frag`) grows least (or shrinks most) wins. For a GPU-sharing
pod every GPU with room is tried and the best one is also the GPU the pod gets (first index on ties);
whole-GPU pods take the first fully idle GPUs.
"""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.frag import node_parts
from clusterdoctor.sim.policies.base import MAX_NODE_SCORE, Policy, SimContext
from clusterdoctor.sim.traces import MILLI

_CHUNK = 48  # rows per vectorised block when scoring many nodes (bounds memory: rows x specs x GPUs x T)


def _score(delta: np.ndarray) -> np.ndarray:
    """int64(sigmoid(delta / 1000) * 100), as the FGD plugin computes it."""
    return (1.0 / (1.0 + np.exp(-delta / 1000.0)) * MAX_NODE_SCORE).astype(np.int64)


class FGDPolicy(Policy):
    name = "fgd"
    gpu_select = "own"

    def bind(self, ctx: SimContext) -> None:
        super().bind(ctx)
        sp = ctx.specs
        self.cpu_specs = np.flatnonzero(sp.s_num == 0)
        self.whole_specs = np.flatnonzero((sp.s_num > 0) & (sp.s_milli >= MILLI))
        self.share_specs = np.flatnonzero((sp.s_num == 1) & (sp.s_milli < MILLI))
        other = np.flatnonzero((sp.s_num > 1) & (sp.s_milli < MILLI))
        if len(other):
            raise ValueError("FGD: multi-GPU pods with a GPU share are not supported")
        self.gpu_pick = np.full((ctx.state.n, sp.n_score), -1, dtype=np.int64)

    def frag_after(self, rows: np.ndarray):
        """(frag now (R,), frag after each score spec (R,S) with the best GPU, best GPU (R,S))."""
        st, sp, tp = self.ctx.state, self.ctx.specs, self.ctx.typical
        c = st.cpu_left[rows]
        gl = st.gl[rows]
        a, cnt, total, acc = node_parts(c, gl, st.type_id[rows], tp)
        tc, tn, tm, tf, cf = tp.cpu, tp.num, tp.milli, tp.freq, tp.cpu_only_freq
        r = len(rows)
        ok_now = (cnt >= tn) & (c[:, None] >= tc) & acc
        frag_now = np.where(ok_now, a, total[:, None]) @ tf + cf * total
        after = np.empty((r, sp.n_score), dtype=np.float64)
        gpu = np.full((r, sp.n_score), -1, dtype=np.int64)
        # CPU-only specs: only CPU changes.
        if len(self.cpu_specs):
            cs = self.cpu_specs
            c2 = c[:, None] - sp.s_cpu[cs][None, :]
            ok = (cnt[:, None, :] >= tn) & (c2[:, :, None] >= tc) & acc[:, None, :]
            after[:, cs] = np.where(ok, a[:, None, :], total[:, None, None]) @ tf + cf * total[:, None]
        # Whole-GPU specs: k idle GPUs (1000 milli each) become 0: A unchanged, cnt - k.
        if len(self.whole_specs):
            ws = self.whole_specs
            k = sp.s_num[ws]
            c2 = c[:, None] - sp.s_cpu[ws][None, :]
            cnt2 = cnt[:, None, :] - k[None, :, None]
            tot2 = total[:, None] - MILLI * k[None, :]
            ok = (cnt2 >= tn) & (c2[:, :, None] >= tc) & acc[:, None, :]
            after[:, ws] = np.where(ok, a[:, None, :], tot2[:, :, None]) @ tf + cf * tot2
        # Shared-GPU specs: try each GPU with room.
        if len(self.share_specs):
            ss = self.share_specs
            m = sp.s_milli[ss]
            c2 = c[:, None] - sp.s_cpu[ss][None, :]  # (R,S)
            lg = gl[:, None, :, None]  # (R,1,G,1)
            lp = lg - m[None, :, None, None]  # (R,S,G,1)
            tm4 = tm[None, None, None, :]
            a2 = a[:, None, None, :] - lg * (lg < tm4) + lp * (lp < tm4)
            cnt2 = cnt[:, None, None, :] - (lg >= tm4) + (lp >= tm4)
            tot2 = total[:, None] - m[None, :]  # (R,S)
            ok = (cnt2 >= tn) & (c2[:, :, None, None] >= tc) & acc[:, None, None, :]
            fr = np.where(ok, a2, tot2[:, :, None, None]) @ tf + cf * tot2[:, :, None]  # (R,S,G)
            sc = _score(frag_now[:, None, None] - fr)
            room = gl[:, None, :] >= m[None, :, None]
            sc = np.where(room, sc, -1)
            best = sc.argmax(axis=2)  # first GPU with the highest integer score
            gpu[:, ss] = best
            after[:, ss] = np.take_along_axis(fr, best[:, :, None], axis=2)[:, :, 0]
        return frag_now, after, gpu

    keep_delta = False  # subclasses that need the exact deltas (frag before - after) set this

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), self.ctx.specs.n_score), dtype=np.int64)
        delta = np.empty(out.shape) if self.keep_delta else None
        for i in range(0, len(rows), _CHUNK):
            blk = rows[i : i + _CHUNK]
            now, after, gpu = self.frag_after(blk)
            d = now[:, None] - after
            out[i : i + len(blk)] = _score(d)
            if delta is not None:
                delta[i : i + len(blk)] = d
            self.gpu_pick[blk] = gpu
        self._last_delta = delta
        return out

    def own_gpus(self, node: int, score_spec: int) -> list[int]:
        g = int(self.gpu_pick[node, score_spec])
        if g < 0:
            raise AssertionError("FGD: no GPU chosen for a shared pod on a node where it fits")
        return [g]
