"""The machine as a model: NUMA nodes, CPUs, PCI devices (GPUs, NICs), distances and paths.

Public API: :class:`Topology` and friends from :mod:`.model`, :func:`load_topology` from :mod:`.build`.
"""

from clusterdoctor.topology.model import CpuInfo, Device, NumaNode, PathInfo, Topology

__all__ = ["CpuInfo", "Device", "NumaNode", "PathInfo", "Topology"]
