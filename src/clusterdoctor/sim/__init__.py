"""Trace-driven GPU cluster simulator: real traces in, allocation / fragmentation / cost out.

Public API (what users import)::

    from clusterdoctor.sim import load_openb_nodes, load_openb_pods, run_fgd_protocol, POLICY_NAMES

    nodes = load_openb_nodes("openb_node_list_gpu_node.csv")
    pods = load_openb_pods("openb_pod_list_default.csv")
    result = run_fgd_protocol(nodes, pods, policy="fgd", seed=42)
    result.allocation_curve  # allocated GPU % at each percent of arriving load, as in the FGD paper

numpy is imported by the modules that compute, never by this package's import.
"""

from __future__ import annotations

from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.policies import POLICY_NAMES
from clusterdoctor.sim.traces import PodTrace, load_openb_nodes, load_openb_pods

__all__ = [
    "POLICY_NAMES",
    "Cluster",
    "GpuNode",
    "PodTrace",
    "load_openb_nodes",
    "load_openb_pods",
    "run_fgd_protocol",
    "run_timed",
]


def run_fgd_protocol(*args, **kwargs):
    """See :func:`clusterdoctor.sim.engine.run_fgd_protocol` (imported lazily: it needs numpy)."""
    from clusterdoctor.sim.engine import run_fgd_protocol as _run

    return _run(*args, **kwargs)


def run_timed(*args, **kwargs):
    """See :func:`clusterdoctor.sim.engine.run_timed` (imported lazily: it needs numpy)."""
    from clusterdoctor.sim.engine import run_timed as _run

    return _run(*args, **kwargs)
