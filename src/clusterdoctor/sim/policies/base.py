"""What every placement policy provides to the engine.

A policy scores whole node rows against every score spec (``score_rows``); the engine keeps the
matrix, re-scores only the node a placement or a departure changed, and places each pod on a node
with the highest score among those where it fits (ties broken uniformly at random with the run's
seeded generator, as kube-scheduler's ``selectHost`` does). Scores are integers (kube-scheduler plugin
scores are int64 in 0..100), which is what makes ties, and therefore the tie-break, matter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from clusterdoctor.sim.frag import TypicalPods
from clusterdoctor.sim.state import ClusterState, Specs
from clusterdoctor.sim.traces import MILLI

MAX_NODE_SCORE = 100
MAX_SPEC_CPU = 128_000  # FGD artifact open-gpu-share/utils/const.go: MaxSpecCpu (milli)
MAX_SPEC_GPU = 8_000  # MaxSpecGpu (milli)


@dataclass
class SimContext:
    """Everything a policy may read."""

    state: ClusterState
    specs: Specs
    typical: TypicalPods
    rng: np.random.Generator
    node_rank: np.ndarray  # position of each node in the (seeded) node order, for first-fit
    extra: dict = field(default_factory=dict)


class Policy:
    """Base class. ``random_node`` policies skip scoring and pick a random feasible node."""

    name = "base"
    random_node = False
    gpu_select = "best"  # best | first | random | own

    def bind(self, ctx: SimContext) -> None:
        self.ctx = ctx

    def score_rows(self, rows: np.ndarray) -> np.ndarray:
        """Integer scores, shape (len(rows), n score specs); higher is better."""
        raise NotImplementedError

    def placed(self, node: int, gpus: list[int], full_spec: int) -> None:
        """Called after a pod of ``full_spec`` took ``gpus`` on ``node`` (before the node is re-scored)."""

    def removed(self, node: int, gpus: list[int], full_spec: int) -> None:
        """Called after that pod left (before the node is re-scored)."""

    def own_gpus(self, node: int, score_spec: int) -> list[int]:
        """GPU choice for ``gpu_select == 'own'`` policies."""
        raise NotImplementedError

    def pick_gpus(self, node: int, full_spec: int) -> list[int]:
        st, sp = self.ctx.state, self.ctx.specs
        num, milli = int(sp.num[full_spec]), int(sp.milli[full_spec])
        if num == 0:
            return []
        if milli >= MILLI or self.gpu_select == "best":
            return st.default_gpus(node, num, milli)
        row = st.gl[node]
        cand = np.flatnonzero(row >= milli)
        if self.gpu_select == "first":
            return [int(cand[0])]
        if self.gpu_select == "random":
            return [int(cand[self.ctx.rng.integers(len(cand))])]
        return self.own_gpus(node, int(sp.score_id[full_spec]))

    # helpers shared by several policies -------------------------------------------------------------
    def rows_view(self, rows: np.ndarray):
        st = self.ctx.state
        return st.cpu_left[rows], st.gl[rows], st.gl[rows].sum(axis=1)
