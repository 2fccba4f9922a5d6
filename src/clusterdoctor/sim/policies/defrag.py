"""Defrag (ours): FGD placement plus migration under a budget when a pod fits nowhere.

Placement is FGD's (or FGD-CPU's with ``base="fgd-cpu"``); the engine hands a pod that fits nowhere to
:class:`clusterdoctor.sim.defrag.Defragmenter`, which may move up to ``max_victims`` pods off one node
to make room, within ``per_100`` migrations per 100 placed pods. ``per_100=0`` is FGD exactly.
"""

from __future__ import annotations

import numpy as np

from clusterdoctor.sim.defrag import DEFAULT_PER_100, DEFAULT_RESTART_S
from clusterdoctor.sim.policies.fgd import FGDPolicy
from clusterdoctor.sim.policies.fgd_cpu import FGDCpuPolicy
from clusterdoctor.sim.traces import MILLI


class _Defrag:
    """What makes a policy migrate: the engine reads ``defrag``; ``delta`` feeds the repacker."""

    keep_delta = True

    def __init__(self, per_100: float = DEFAULT_PER_100, max_victims: int = 2, min_gain_milli: int = MILLI,
                 restart_s: float = DEFAULT_RESTART_S, repack_every: int = 5,
                 min_frag_gain: float = 50.0, start_alloc: float = 0.85, mode: str = "repack",
                 max_left: int = 200, min_cpu_left: int = 11_000) -> None:  # fmt: skip
        if per_100 < 0 or max_victims < 1 or min_gain_milli < 1 or restart_s < 0 or repack_every < 0:
            raise ValueError(
                "defrag: per_100, restart_s, repack_every >= 0; max_victims, min_gain_milli >= 1"
            )
        self.defrag = {
            "per_100": float(per_100),
            "max_victims": int(max_victims),
            "min_gain_milli": int(min_gain_milli),
            "restart_s": float(restart_s),
            "repack_every": int(repack_every),
            "min_frag_gain": float(min_frag_gain),
            "start_alloc": float(start_alloc),
            "mode": mode,
            "max_left": int(max_left),
            "min_cpu_left": int(min_cpu_left),
        }

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        """FGD's integer scores; keeps the exact frag deltas (frag before - after) for the repacker."""
        if not hasattr(self, "delta"):
            self.delta = np.zeros((self.ctx.state.n, self.ctx.specs.n_score))
        out = super().score_rows(rows)
        self.delta[rows] = self._last_delta
        return out


class DefragPolicy(_Defrag, FGDPolicy):
    name = "defrag"


class DefragCpuPolicy(_Defrag, FGDCpuPolicy):
    name = "defrag-cpu"
