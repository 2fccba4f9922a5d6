"""The machine model, after hwloc's object model, reduced to what placement needs.

A :class:`Topology` holds NUMA nodes (with their CPUs and memory), the node distance matrix, per-CPU
core/SMT/L3 information, and PCI devices of interest (GPUs, NICs, NVMe) each with its NUMA node, plus
the GPU-to-NIC / GPU-to-GPU path classes (PIX/PXB/PHB/NODE/SYS/NV#) where the source tells them.

Anything a source does not say is ``None`` ("unknown") — never a guess of node 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.topology.cpu import CpuId

# NVIDIA's path classes, best to worst (nvidia-smi topo -m legend; NCCL src/include/graph.h orders
# PIX < PXB < PHB < SYS with NODE between PHB and SYS on newer drivers).
PATH_ORDER = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")


# HCA names of the kernel's RDMA drivers (drivers/infiniband/hw/*): mlx4/mlx5, hfi1, qib, bnxt_re,
# irdma (Intel), efa (AWS), erdma (Alibaba), rdmap (iWARP) and the generic ib* names of old dumps.
RDMA_NAME_RE = re.compile(
    r"^(mlx[45]_|mlx\d|hfi1_|qib|bnxt_re|irdma|efa_|rdmap|erdma_|ionic_|ocrdma|cxgb4_|usnic_)"
)


def path_rank(kind: str) -> int:
    """Order a path class: smaller is closer. ``NV12`` ranks as ``NV``; old ``SOC`` as ``SYS``."""
    k = kind.upper()
    if k.startswith("NV"):
        k = "NV"
    if k == "SOC":
        k = "SYS"
    try:
        return PATH_ORDER.index(k)
    except ValueError:
        return len(PATH_ORDER)


# ACPI SLIT: a node's distance to itself (include/linux/topology.h LOCAL_DISTANCE)
LOCAL_DISTANCE = 10


@dataclass
class NumaNode:
    """One NUMA node: its CPUs (may be empty: CXL/memory-only) and memory (None if not stated)."""

    id: int
    cpus: tuple[int, ...] = ()
    memory_bytes: int | None = None
    free_bytes: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cpus": list(self.cpus),
            "memory_bytes": self.memory_bytes,
            "free_bytes": self.free_bytes,
        }


@dataclass
class CpuInfo:
    """One logical CPU (PU): its package, physical core, SMT siblings and L3 group."""

    id: int
    node: int | None = None
    package: int | None = None
    core: int | None = None
    siblings: tuple[int, ...] = ()
    l3: tuple[int, ...] = ()

    def core_key(self) -> tuple[int, int]:
        """A key unique per physical core: (package, core), falling back to the first sibling."""
        if self.core is not None:
            return (self.package if self.package is not None else -1, self.core)
        return (-2, min(self.siblings) if self.siblings else self.id)


@dataclass
class Device:
    """A PCI device of interest: a GPU, NIC (HCA), NVMe drive or other."""

    name: str
    kind: str  # "gpu" | "nic" | "nvme" | "other"
    pci: str | None = None  # "0000:07:00.0", lower case
    numa_node: int | None = None
    # how numa_node was learnt: "numa_node" (sysfs), "local_cpulist" (sysfs/hwloc pci_locality fallback),
    # "source" (the file states it), "derived" (nvidia-smi: from a GPU it reaches within a node), "unknown"
    numa_source: str = "unknown"
    local_cpus: tuple[int, ...] | None = None
    vendor: str | None = None
    model: str | None = None
    index: int | None = None  # GPU index as the driver numbers it
    pci_chain: tuple[str, ...] = ()  # host bridge, bridges..., device (from sysfs/hwloc trees)
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def is_rdma(self) -> bool:
        """An RDMA-capable adapter (InfiniBand/RoCE HCA, EFA): stated by the source, else by its name."""
        if "rdma" in self.attrs:
            return bool(self.attrs["rdma"])
        return self.kind == "nic" and bool(RDMA_NAME_RE.match(self.name))

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "pci": self.pci,
            "numa_node": self.numa_node,
            "numa_source": self.numa_source,
            "local_cpus": list(self.local_cpus) if self.local_cpus is not None else None,
            "vendor": self.vendor,
            "model": self.model,
            "index": self.index,
        }
        if self.attrs:
            d["attrs"] = dict(self.attrs)
        return d


@dataclass(frozen=True)
class PathInfo:
    """The connection class between two devices as NVIDIA names it (PIX, PXB, PHB, NODE, SYS, NV#)."""

    a: str
    b: str
    kind: str
    source: str = "source"  # "source" when the file states it, "derived" when computed from the PCI tree


@dataclass
class Topology:
    """One machine. Build it with :mod:`clusterdoctor.topology.build`; every source gives this type."""

    source: str
    source_kind: str
    nodes: list[NumaNode] = field(default_factory=list)
    distances: list[list[int]] | None = None  # in the order of ``nodes``
    cpus: dict[int, CpuInfo] = field(default_factory=dict)
    gpus: list[Device] = field(default_factory=list)
    nics: list[Device] = field(default_factory=list)
    other_devices: list[Device] = field(default_factory=list)
    paths: list[PathInfo] = field(default_factory=list)
    hostname: str | None = None
    allowed_cpus: tuple[int, ...] | None = None  # the cgroup cpuset of the described machine, if known
    warnings: list[str] = field(default_factory=list)
    cpu: CpuId | None = None  # vendor/model as the source states it (None: the source does not say)

    # -- lookups ---------------------------------------------------------------------------
    @property
    def node_ids(self) -> list[int]:
        return [n.id for n in self.nodes]

    def node(self, node_id: int) -> NumaNode | None:
        for n in self.nodes:
            if n.id == node_id:
                return n
        return None

    def all_cpus(self) -> tuple[int, ...]:
        cpus: set[int] = set()
        for n in self.nodes:
            cpus.update(n.cpus)
        if not cpus:
            cpus.update(self.cpus)
        return tuple(sorted(cpus))

    def node_of_cpu(self, cpu: int) -> int | None:
        for n in self.nodes:
            if cpu in n.cpus:
                return n.id
        info = self.cpus.get(cpu)
        return info.node if info else None

    def nodes_of_cpus(self, cpus: object) -> set[int]:
        """The set of nodes that the given CPUs belong to (unknown CPUs are left out)."""
        out = set()
        for c in cpus:  # type: ignore[attr-defined]
            n = self.node_of_cpu(c)
            if n is not None:
                out.add(n)
        return out

    def distance_warnings(self) -> list[str]:
        """What is wrong with the node distance matrix by the ACPI SLIT rules the Linux kernel applies
        (``drivers/acpi/numa/srat.c`` ``slit_valid``: a node's distance to itself is 10, to any other
        node more than 10); a table that breaks them is rejected by the kernel, which then uses 10/20."""
        if not self.distances:
            return []
        ids = [n.id for n in self.nodes]
        out: list[str] = []
        for i, row in enumerate(self.distances):
            for j, d in enumerate(row):
                a, b = (ids[i] if i < len(ids) else i), (ids[j] if j < len(ids) else j)
                if i == j and d != LOCAL_DISTANCE:
                    out.append(
                        f"distance of node {a} to itself is {d}, not {LOCAL_DISTANCE} (ACPI SLIT): not a "
                        "table a kernel accepts (it would use 10/20 instead)"
                    )
                elif i != j and d <= LOCAL_DISTANCE:
                    out.append(
                        f"distance from node {a} to node {b} is {d}, not more than {LOCAL_DISTANCE} (ACPI "
                        "SLIT): not a table a kernel accepts (it would use 10/20 instead)"
                    )
        return out

    def distance(self, a: int, b: int) -> int | None:
        if self.distances is None:
            return None
        ids = self.node_ids
        try:
            return self.distances[ids.index(a)][ids.index(b)]
        except (ValueError, IndexError):
            return None

    def devices(self) -> list[Device]:
        return [*self.gpus, *self.nics, *self.other_devices]

    def find_device(self, key: str) -> Device | None:
        """Find a GPU/NIC by name (``GPU0``, ``mlx5_0``, ``cuda0``), PCI address or GPU index."""
        k = key.strip().lower()
        for d in self.devices():
            if d.name.lower() == k or (d.pci and (d.pci == k or d.pci.endswith(k))):
                return d
        if k.isdigit():
            for g in self.gpus:
                if g.index == int(k):
                    return g
        return None

    def gpu_by_index(self, index: int) -> Device | None:
        for g in self.gpus:
            if g.index == index:
                return g
        return None

    def path(self, a: str, b: str) -> PathInfo | None:
        for p in self.paths:
            if {p.a, p.b} == {a, b}:
                return p
        return None

    def best_nic_for(
        self, gpu: Device, candidates: list[Device] | None = None
    ) -> tuple[Device, str | None] | None:
        """The NIC closest to ``gpu``: by stated path class, else same NUMA node, else any."""
        nics = self.nics if candidates is None else candidates
        if not nics:
            return None
        ranked = []
        for nic in nics:
            p = self.path(gpu.name, nic.name)
            if p is not None:
                rank = path_rank(p.kind)
            elif gpu.numa_node is not None and nic.numa_node == gpu.numa_node:
                rank = path_rank("NODE")
            elif gpu.numa_node is not None and nic.numa_node is not None:
                rank = path_rank("SYS")
            else:
                rank = len(PATH_ORDER) + 1
            ranked.append((rank, nic.name, nic, p.kind if p else None))
        ranked.sort(key=lambda r: (r[0], r[1]))
        _, _, nic, kind = ranked[0]
        return nic, kind

    @property
    def is_multi_node(self) -> bool:
        return len([n for n in self.nodes if n.cpus]) > 1

    # -- output ----------------------------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        gpu_names = {g.name for g in self.gpus}
        nic_names = {n.name for n in self.nics}
        gpu_nic, gpu_gpu = [], []
        for p in self.paths:
            if p.a in gpu_names and p.b in nic_names:
                gpu_nic.append({"gpu": p.a, "nic": p.b, "type": p.kind, "source": p.source})
            elif p.b in gpu_names and p.a in nic_names:
                gpu_nic.append({"gpu": p.b, "nic": p.a, "type": p.kind, "source": p.source})
            elif p.a in gpu_names and p.b in gpu_names:
                gpu_gpu.append({"a": p.a, "b": p.b, "type": p.kind, "source": p.source})
        return {
            "schema": "clusterdoctor.topology/1",
            "source": self.source,
            "source_kind": self.source_kind,
            "hostname": self.hostname,
            "nodes": [n.as_dict() for n in self.nodes],
            "distances": self.distances,
            "gpus": [g.as_dict() for g in self.gpus],
            "nics": [n.as_dict() for n in self.nics],
            "other_devices": [d.as_dict() for d in self.other_devices],
            "paths": gpu_nic,
            "gpu_links": gpu_gpu,
            "allowed_cpus": list(self.allowed_cpus) if self.allowed_cpus is not None else None,
            "smt": self.smt_info(),
            "cpu": self.cpu.as_dict() if self.cpu is not None else None,
            "warnings": list(self.warnings),
        }

    def smt_info(self) -> dict[str, Any] | None:
        if not self.cpus:
            return None
        cores = {c.core_key() for c in self.cpus.values()}
        l3 = {c.l3 for c in self.cpus.values() if c.l3}
        return {"logical_cpus": len(self.cpus), "physical_cores": len(cores), "l3_groups": len(l3)}


def classify_pci_path(
    chain_a: tuple[str, ...], chain_b: tuple[str, ...], node_a: int | None, node_b: int | None
) -> str | None:
    """Derive NVIDIA's path class between two devices from their PCI ancestor chains.

    A chain is ``(host_bridge, bridge, ..., device)`` as sysfs paths (``pci0000:00/0000:00:01.0/…``)
    and hwloc trees give it. Definitions from the ``nvidia-smi topo -m`` legend: PIX = at most one
    PCIe bridge (devices behind the same switch), PXB = several bridges but no host bridge,
    PHB = through a host bridge, NODE = across host bridges within a NUMA node, SYS = across NUMA
    nodes. Returns None when the chains are missing (the source does not say).
    """
    if not chain_a or not chain_b:
        return None
    if chain_a[0] != chain_b[0]:
        if node_a is None or node_b is None:
            return None
        return "NODE" if node_a == node_b else "SYS"
    k = 0
    for x, y in zip(chain_a[:-1], chain_b[:-1]):
        if x != y:
            break
        k += 1
    if k <= 1:
        return "PHB"  # the only common ancestor is the host bridge
    below = (len(chain_a) - 1 - k) + (len(chain_b) - 1 - k)
    # Behind one switch: upstream port is the common ancestor, each device sits under one
    # downstream port (below <= 2) -> one bridge traversed in NVIDIA's sense.
    return "PIX" if below <= 2 else "PXB"
