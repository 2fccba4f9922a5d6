"""openb's default trace from the shared fixtures, for the simulator benchmarks (imported by them; not a
benchmark itself)."""

from __future__ import annotations

import sys
from typing import Any

from clusterdoctor.sim.traces import load_openb_nodes, load_openb_pods
from clusterdoctor.testing import fixture_path

NODES = "sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv"
PODS = "sched/alibaba_gpu_v2023/openb_pod_list_default.csv"


def openb_default() -> tuple[Any, list] | None:
    """(cluster, pods) of openb_pod_list_default on its 6212-GPU node list; None (said on stderr) when the
    shared fixtures are absent."""
    nodes_p, pods_p = fixture_path(NODES), fixture_path(PODS)
    if not (nodes_p and pods_p):
        print("shared fixtures absent (set CLUSTERDOCTOR_FIXTURES)", file=sys.stderr)
        return None
    return load_openb_nodes(nodes_p), load_openb_pods(pods_p)
