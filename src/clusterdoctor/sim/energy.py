"""Cluster power by power state, and energy per useful TFLOP.

Power states (PWR's model, Lettich et al., CCGrid'25, arXiv 2412.17484, made per GPU generation):

- a GPU with any allocation is *busy* and draws its busy watts (``GpuPower.peak_w``; GPU-sharing pods
  keep the whole board powered);
- a GPU with no allocation on a node that runs something is *idle* (``idle_w``);
- a node with no pod at all may be *asleep* (suspend-to-RAM: ``NODE_SLEEP_W``, its GPUs off) when the
  operator allows it; both figures are reported: ``all_on_w`` (nothing sleeps) and ``sleep_w``;
- the host (CPUs, memory, fans) draws ``HOST_IDLE_W`` plus ``CORE_W`` per allocated core (2 vCPU per
  core, as PWR assumes).

Useful work: an allocated GPU share delivers that share of the GPU's dense FP16 TFLOPS
(``fp16_tflops``); ``j_per_tflop`` = watts / useful TFLOPS. All watts are facility-side x PUE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterdoctor.sim import power as pw
from clusterdoctor.sim.traces import MILLI

HOST_IDLE_W = 150.0  # assumption: a GPU server's host (2 sockets, memory, fans) at idle
CORE_W = 4.0  # assumption: extra watts per allocated physical core (2 vCPU)
NODE_SLEEP_W = 15.0  # assumption: a suspended node (BMC, memory self-refresh), GPUs off


@dataclass(frozen=True)
class PowerSnapshot:
    all_on_w: float  # every node powered
    sleep_w: float  # nodes without pods asleep
    useful_tflops: float
    busy_gpus: int
    idle_gpus: int
    sleeping_nodes: int

    @property
    def j_per_tflop_all_on(self) -> float:
        return self.all_on_w / self.useful_tflops if self.useful_tflops > 0 else float("nan")

    @property
    def j_per_tflop_sleep(self) -> float:
        return self.sleep_w / self.useful_tflops if self.useful_tflops > 0 else float("nan")

    def as_dict(self) -> dict:
        return {
            "all_on_kw": round(self.all_on_w / 1000, 3),
            "sleep_empty_nodes_kw": round(self.sleep_w / 1000, 3),
            "useful_tflops": round(self.useful_tflops, 1),
            "j_per_useful_tflop_all_on": round(self.j_per_tflop_all_on, 4),
            "j_per_useful_tflop_sleep": round(self.j_per_tflop_sleep, 4),
            "busy_gpus": self.busy_gpus,
            "idle_gpus": self.idle_gpus,
            "sleeping_nodes": self.sleeping_nodes,
        }


class PowerTable:
    """Per node type: busy and idle GPU watts and FP16 TFLOPS, from :mod:`clusterdoctor.sim.power`."""

    def __init__(self, type_names: list[str], pue: float | None = None) -> None:
        models = [pw.power_model(m) for m in type_names]
        self.busy_w = np.array([m.peak_w for m in models])
        self.idle_w = np.array([m.idle_w for m in models])
        self.tflops = np.array([pw.fp16_tflops(m) for m in models])
        self.pue = pw.PUE if pue is None else pue

    def node_watts(self, type_id, ngpu, gl, cpu_cap, cpu_left, pods_on) -> tuple[np.ndarray, np.ndarray]:
        """(watts per node if awake, whether the node may sleep) for node rows; no PUE."""
        busy = ((gl < MILLI) & (np.arange(gl.shape[1])[None, :] < ngpu[:, None])).sum(axis=1)
        idle = ngpu - busy
        cores = np.ceil((cpu_cap - cpu_left) / MILLI / 2)
        w = HOST_IDLE_W + CORE_W * cores + busy * self.busy_w[type_id] + idle * self.idle_w[type_id]
        return w, pods_on == 0

    def snapshot(self, state) -> PowerSnapshot:
        st = state
        w, empty = self.node_watts(st.type_id, st.ngpu, st.gl, st.cpu_cap, st.cpu_left, st.pods_on)
        used = np.where(st.gpu_exists, MILLI - st.gl, 0).sum(axis=1) / MILLI
        tflops = float((used * self.tflops[st.type_id]).sum())
        busy = int(((st.gl < MILLI) & st.gpu_exists).sum())
        return PowerSnapshot(
            float(w.sum()) * self.pue,
            float(np.where(empty, NODE_SLEEP_W, w).sum()) * self.pue,
            tflops,
            busy,
            int(st.ngpu.sum()) - busy,
            int(empty.sum()),
        )
