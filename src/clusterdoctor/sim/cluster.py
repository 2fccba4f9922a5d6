"""The simulated cluster: GPU nodes with type, count, CPU and memory, and an intra-node topology.

Real node lists (Alibaba openb, PAI, spot-GPU) give GPU model and count but no NVLink or PCIe layout.
:func:`with_synthetic_topology` layers a documented synthetic layout on top (NVLink domains and PCIe
switches by GPU model and count) and marks the cluster ``topology_synthetic=True`` so every output can
say so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class GpuNode:
    """One machine: GPUs of one model, CPU (milli-cores) and memory (MiB).

    ``nvlink_domains`` groups GPU indices joined by NVLink/NVSwitch; ``pcie_switches`` groups GPU
    indices behind one PCIe switch. Empty tuples mean "unknown".
    """

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    nvlink_domains: tuple[tuple[int, ...], ...] = ()
    pcie_switches: tuple[tuple[int, ...], ...] = ()


@dataclass
class Cluster:
    """A list of nodes plus where it came from."""

    nodes: list[GpuNode]
    source: str = ""
    topology_synthetic: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def gpu_nodes(self) -> list[GpuNode]:
        return [n for n in self.nodes if n.gpus > 0]

    def gpus_by_model(self) -> dict[str, int]:
        """GPU count per model, largest first."""
        c: Counter[str] = Counter()
        for n in self.nodes:
            if n.gpus:
                c[n.model] += n.gpus
        return dict(c.most_common())

    def summary(self) -> dict[str, object]:
        return {
            "source": self.source,
            "nodes": len(self.nodes),
            "gpu_nodes": len(self.gpu_nodes),
            "gpus": self.total_gpus,
            "gpus_by_model": self.gpus_by_model(),
            "topology_synthetic": self.topology_synthetic,
        }


# Models whose 8-GPU servers are NVSwitch-connected (all 8 GPUs in one NVLink domain): SXM parts.
_NVSWITCH_MODELS = ("A100", "A800", "H100", "H800", "H200", "B200", "G2", "G3", "V100M32")
# Models sold as PCIe cards (no NVLink in the public node lists we model).
_PCIE_MODELS = ("T4", "A10", "P100", "P4", "2080", "1080", "M40", "3090", "L4", "L40")


def synthetic_topology(
    model: str, gpus: int
) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """(nvlink_domains, pcie_switches) for a node of ``gpus`` GPUs of ``model`` — a documented guess.

    SXM-style models with 8 GPUs: one NVLink domain of 8 (NVSwitch, as in DGX A100/H100); 4 GPUs: one
    domain of 4; PCIe models: no NVLink. PCIe: two GPUs per switch (DGX A100 pairs GPUs behind 4 PCIe
    switches). Used only where the trace carries no topology, and every result says so.
    """
    idx = tuple(range(gpus))
    up = model.upper()
    if gpus <= 0:
        return (), ()
    # NVSwitch names first: "A100-SXM4" starts with the PCIe card "A10"
    if any(up.startswith(m) for m in _NVSWITCH_MODELS):
        nv: tuple[tuple[int, ...], ...] = (idx,)
    elif any(up.startswith(m) for m in _PCIE_MODELS):
        nv = ()
    elif gpus in (4, 8):
        nv = (idx,)
    else:
        nv = ()
    sw = tuple(idx[i : i + 2] for i in range(0, gpus, 2))
    return nv, sw


def with_synthetic_topology(cluster: Cluster) -> Cluster:
    """A copy of ``cluster`` whose nodes carry a synthetic NVLink/PCIe layout (see :func:`synthetic_topology`)."""
    nodes = []
    for n in cluster.nodes:
        if n.nvlink_domains or n.pcie_switches:
            nodes.append(n)
            continue
        nv, sw = synthetic_topology(n.model, n.gpus)
        nodes.append(replace(n, nvlink_domains=nv, pcie_switches=sw))
    notes = [*cluster.notes, "intra-node topology (NVLink domains, PCIe switches) is synthetic"]
    return Cluster(nodes, cluster.source, topology_synthetic=True, notes=notes)
