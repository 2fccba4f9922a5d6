"""Binding plans: per local rank, the CPUs for compute threads, for communication/data threads, and
the memory node — all local to the rank's GPU.

Policies follow ``torchrun --numa-binding`` (torch/numa/binding.py) so users can compare:

- ``node``: every allowed CPU of the GPU's NUMA node (shared by the ranks on that node);
- ``socket``: every allowed CPU of the NUMA nodes in the GPU's package;
- ``exclusive``: the node's physical cores split evenly among the planned GPUs on that node, SMT
  siblings kept together, the lowest ranks taking the remainder; refused with fewer cores than GPUs;
- ``core-complex``: one L3 group per GPU, round-robin when there are more GPUs than L3 groups.

Unlike torchrun, a GPU whose NUMA node is unknown is refused (never guessed as node 0), the memory
node is planned too, and a small separate CPU set for communication threads is carved out nearest
the NIC the GPU should use.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.errors import InputError, UsageError
from clusterdoctor.topology.cpuset import format_cpulist
from clusterdoctor.topology.model import CpuInfo, Device, Topology, path_rank

POLICIES = ("node", "socket", "exclusive", "core-complex")

# A communication core is carved out only when each rank keeps at least this many physical compute
# cores; below it, communication threads share the compute set (a tiny node is better used whole).
MIN_COMPUTE_CORES_FOR_COMM_SPLIT = 2


class PlanError(UsageError):
    """A plan that cannot be made (unknown GPU node, too few CPUs, unknown GPU)."""


@dataclass
class RankPlan:
    local_rank: int
    gpu: str
    gpu_index: int | None
    gpu_pci: str | None
    numa_node: int
    compute_cpus: tuple[int, ...]
    comm_cpus: tuple[int, ...]
    memory_node: int | None
    nic: str | None = None
    nic_path: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "local_rank": self.local_rank,
            "gpu": self.gpu,
            "gpu_index": self.gpu_index,
            "gpu_pci": self.gpu_pci,
            "numa_node": self.numa_node,
            "compute_cpus": list(self.compute_cpus),
            "compute_cpulist": format_cpulist(self.compute_cpus),
            "comm_cpus": list(self.comm_cpus),
            "comm_cpulist": format_cpulist(self.comm_cpus),
            "memory_node": self.memory_node,
            "nic": self.nic,
            "nic_path": self.nic_path,
            "notes": list(self.notes),
        }


@dataclass
class Plan:
    policy: str
    topology_source: str
    allowed_cpus: tuple[int, ...]
    ranks: list[RankPlan]
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": "clusterdoctor.numa-plan/1",
            "policy": self.policy,
            "topology_source": self.topology_source,
            "allowed_cpus": format_cpulist(self.allowed_cpus),
            "ranks": [r.as_dict() for r in self.ranks],
            "warnings": list(self.warnings),
        }

    def for_rank(self, local_rank: int) -> RankPlan:
        for r in self.ranks:
            if r.local_rank == local_rank:
                return r
        raise PlanError(f"no local rank {local_rank} in the plan (ranks 0-{len(self.ranks) - 1})")


def parse_gpu_list(text: str) -> list[str]:
    """``"0,1,2"`` or ``"0-3"`` or ``"GPU0,GPU1"`` -> list of GPU keys."""
    out: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if sep and lo.isdigit() and hi.isdigit():
            if int(hi) < int(lo) or int(hi) - int(lo) >= 4096:  # no node has 4,096 GPUs
                raise InputError(f"bad GPU range {part!r}", "--gpus")
            out.extend(str(i) for i in range(int(lo), int(hi) + 1))
        else:
            out.append(part)
    if not out:
        raise InputError("empty GPU list", "--gpus")
    return out


def visible_devices(env: dict[str, str] | None = None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it (indices, GPU-UUIDs or MIG ids); None when unset or ``all``."""
    from clusterdoctor.topology.placement import parse_visible_devices

    e = os.environ if env is None else env
    v = e.get("CUDA_VISIBLE_DEVICES")
    return None if v is None else parse_visible_devices(v)


def resolve_gpus(topo: Topology, keys: Sequence[str], visible: list[str] | None) -> list[Device]:
    """Map GPU keys as the process sees them (after CUDA_VISIBLE_DEVICES remapping) to devices."""
    out = []
    for key in keys:
        phys_key = key
        if visible is not None and key.isdigit():
            i = int(key)
            if i >= len(visible):
                raise PlanError(
                    f"GPU {key} is not visible: CUDA_VISIBLE_DEVICES={','.join(visible)} exposes {len(visible)} GPU(s)"
                )
            phys_key = visible[i]
        dev = _find_gpu(topo, phys_key)
        if dev is None:
            names = ", ".join(g.name for g in topo.gpus) or "none"
            hint = f" (CUDA_VISIBLE_DEVICES maps {key} to {phys_key})" if phys_key != key else ""
            raise PlanError(
                f"GPU {phys_key}{hint} not found in the topology from {topo.source}; GPUs there: {names}"
            )
        out.append(dev)
    return out


def _find_gpu(topo: Topology, key: str) -> Device | None:
    k = key.lower()
    if k.isdigit():
        return topo.gpu_by_index(int(k))
    for g in topo.gpus:
        uuid = str(g.attrs.get("uuid", "")).lower()
        if g.name.lower() == k or (uuid and (uuid == k or k.startswith(uuid))):
            return g
        if g.pci and (g.pci == k or g.pci.endswith(k)):
            return g
    return None


def _cores(cpus: Sequence[int], info: dict[int, CpuInfo]) -> list[tuple[int, ...]]:
    """Group CPUs into physical cores (SMT siblings together), in CPU order of each core's first CPU."""
    groups: dict[tuple[int, int], list[int]] = {}
    for c in sorted(cpus):
        ci = info.get(c)
        key = ci.core_key() if ci else (-3, c)
        groups.setdefault(key, []).append(c)
    return sorted((tuple(v) for v in groups.values()), key=lambda g: g[0])


def _package_nodes(topo: Topology, node: int) -> list[int]:
    pkgs = (
        {topo.cpus[c].package for c in topo.node(node).cpus if c in topo.cpus} if topo.node(node) else set()
    )
    pkgs.discard(None)
    if not pkgs:
        return [node]
    return sorted(
        n.id for n in topo.nodes if n.cpus and {topo.cpus[c].package for c in n.cpus if c in topo.cpus} & pkgs
    )


def _memory_node(topo: Topology, node: int, notes: list[str]) -> int | None:
    n = topo.node(node)
    if n is None:
        return None
    if n.memory_bytes is None or n.memory_bytes > 0:
        return node
    # Memory-less CPU node: nearest node that has memory, by distance.
    best = None
    for other in topo.nodes:
        if other.id == node or not other.memory_bytes:
            continue
        d = topo.distance(node, other.id)
        key = (d if d is not None else 1 << 30, other.id)
        if best is None or key < best[0]:
            best = (key, other.id)
    if best is None:
        notes.append(f"node {node} has no memory and no other node states any; memory policy left unset")
        return None
    notes.append(f"node {node} has no memory; nearest node with memory is {best[1]}")
    return best[1]


def make_plan(
    topo: Topology,
    gpu_keys: Sequence[str] | None = None,
    policy: str = "node",
    *,
    allowed_cpus: Sequence[int] | None = None,
    env: dict[str, str] | None = None,
) -> Plan:
    """Plan CPU and memory binding for one local rank per GPU in ``gpu_keys`` (default: all visible).

    ``allowed_cpus`` is the cgroup cpuset to respect; by default the topology's own (a dump's CPUs
    count, not this machine's), else every CPU of the described machine.
    """
    if policy not in POLICIES:
        raise PlanError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if not topo.nodes:
        raise PlanError(f"no NUMA information in {topo.source}; cannot plan a binding")
    if not topo.gpus:
        raise PlanError(f"no GPU in the topology from {topo.source}; nothing to bind to")
    visible = visible_devices(env)
    if gpu_keys is None:
        gpu_keys = (
            [str(i) for i in range(len(visible))]
            if visible is not None
            else [str(g.index) for g in topo.gpus]
        )
    gpus = resolve_gpus(topo, gpu_keys, visible)
    machine = set(topo.all_cpus())
    if allowed_cpus is None:
        allowed_cpus = topo.allowed_cpus
    allowed = set(allowed_cpus) & machine if allowed_cpus is not None else set(machine)
    warnings: list[str] = []
    if allowed_cpus is not None and not allowed:
        raise PlanError(
            f"the allowed CPUs ({format_cpulist(allowed_cpus)}) share no CPU with the machine in {topo.source}"
        )
    if allowed != machine:
        warnings.append(f"cgroup cpuset restricts CPUs to {format_cpulist(allowed)}")
    if not topo.cpus:
        warnings.append(
            f"{topo.source} does not describe cores or SMT siblings: each CPU is treated as a core, so SMT "
            "siblings may be split between sets (use a sysfs or hwloc source for core-aware plans)"
        )

    unknown = [g.name for g in gpus if g.numa_node is None]
    if unknown:
        raise PlanError(
            f"NUMA node unknown for {', '.join(unknown)} in {topo.source} (firmware numa_node=-1 and no usable "
            "local_cpulist); give a source that states it (nvidia-smi topo -m, hwloc XML) — refusing to guess node 0"
        )

    by_node: dict[int, list[int]] = {}
    for rank, g in enumerate(gpus):
        by_node.setdefault(g.numa_node, []).append(rank)  # type: ignore[arg-type]

    pools: dict[int, list[tuple[int, ...]]] = {}  # rank -> list of cores (each a tuple of CPUs)
    for rank, g in enumerate(gpus):
        node = g.numa_node
        assert node is not None
        nobj = topo.node(node)
        if nobj is None:
            raise PlanError(
                f"{g.name} is on NUMA node {node}, which the topology from {topo.source} does not list"
            )
        if policy == "socket":
            cpus = [c for n in _package_nodes(topo, node) for c in topo.node(n).cpus if c in allowed]  # type: ignore[union-attr]
        else:
            cpus = [c for c in nobj.cpus if c in allowed]
        if not cpus:
            raise PlanError(
                f"{g.name} is on NUMA node {node}, but no allowed CPU is on that node "
                f"(allowed: {format_cpulist(allowed)}; node {node}: {format_cpulist(nobj.cpus) or 'no CPUs'})"
            )
        cores = _cores(cpus, topo.cpus)
        peers = by_node[node]
        if policy == "exclusive":
            if len(cores) < len(peers):
                raise PlanError(
                    f"exclusive policy: NUMA node {node} has {len(cores)} allowed physical core(s) for "
                    f"{len(peers)} GPU(s); use --policy node to share them"
                )
            i = peers.index(rank)
            base, extra = divmod(len(cores), len(peers))
            start = i * base + min(i, extra)
            pools[rank] = cores[start : start + base + (1 if i < extra else 0)]
        elif policy == "core-complex":
            groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
            for core in cores:
                l3 = topo.cpus[core[0]].l3 if core[0] in topo.cpus and topo.cpus[core[0]].l3 else ("?",)
                groups.setdefault(tuple(l3), []).append(core)  # type: ignore[arg-type]
            ordered = [groups[k] for k in sorted(groups, key=lambda k: groups[k][0][0])]
            if len(ordered) == 1 and ("?",) in groups:
                warnings.append(
                    f"no L3 information for node {node}; core-complex falls back to the whole node"
                )
            pools[rank] = ordered[peers.index(rank) % len(ordered)]
        else:
            pools[rank] = cores

    # Carve communication cores: per node, distinct cores for each rank, nearest the rank's NIC.
    comm: dict[int, tuple[int, ...]] = {}
    taken: set[int] = set()
    ranks_out: list[RankPlan] = []
    nic_choice: dict[int, tuple[Device | None, str | None]] = {}
    nic_use: dict[str, int] = {}
    for rank, g in enumerate(gpus):
        nic, kind = _nic_for(topo, g, nic_use)
        nic_choice[rank] = (nic, kind)
        if nic is not None:
            nic_use[nic.name] = nic_use.get(nic.name, 0) + 1
    for rank, g in enumerate(gpus):
        cores = pools[rank]
        sharing = [r for r in by_node[g.numa_node] if pools[r] == cores]  # type: ignore[index]
        per_rank = len(cores) // max(1, len(sharing))
        notes: list[str] = []
        if per_rank - 1 >= MIN_COMPUTE_CORES_FOR_COMM_SPLIT:
            nic, _ = nic_choice[rank]
            near = set(nic.local_cpus) if nic is not None and nic.local_cpus else set()
            candidates = [c for c in reversed(cores) if not (set(c) & taken)]
            candidates.sort(key=lambda c: 0 if set(c) <= near else 1)  # stable: NIC-local last cores first
            chosen = candidates[0] if candidates else cores[-1]
            comm[rank] = chosen
            taken.update(chosen)
        else:
            comm[rank] = ()
            notes.append(
                f"only {len(cores)} physical core(s) for {len(sharing)} rank(s): communication threads share the compute CPUs"
            )
    for rank, g in enumerate(gpus):
        cores = pools[rank]
        all_cpus = sorted(c for core in cores for c in core)
        comm_cpus = tuple(sorted(comm[rank])) if comm[rank] else tuple(all_cpus)
        compute = tuple(c for c in all_cpus if c not in taken) if comm[rank] else tuple(all_cpus)
        notes = []
        if not comm[rank]:
            notes.append(
                "too few cores to give communication threads their own core; they share the compute set"
            )
        mem = _memory_node(topo, g.numa_node, notes)  # type: ignore[arg-type]
        nic, kind = nic_choice[rank]
        if nic is not None and nic.numa_node is not None and nic.numa_node != g.numa_node:
            notes.append(
                f"nearest NIC {nic.name} is on node {nic.numa_node}, not the GPU's node {g.numa_node}"
            )
        ranks_out.append(
            RankPlan(
                local_rank=rank,
                gpu=g.name,
                gpu_index=g.index,
                gpu_pci=g.pci,
                numa_node=g.numa_node,  # type: ignore[arg-type]
                compute_cpus=compute,
                comm_cpus=comm_cpus,
                memory_node=mem,
                nic=nic.name if nic else None,
                nic_path=kind,
                notes=notes,
            )
        )
    return Plan(policy, topo.source, tuple(sorted(allowed)), ranks_out, warnings)


def _nic_for(topo: Topology, gpu: Device, used: dict[str, int]) -> tuple[Device | None, str | None]:
    """The NIC this GPU should use: RDMA NICs first, the closest by path class / node, and among
    equally close NICs the one fewest earlier ranks took (two GPUs behind one switch with two HCAs
    get one each)."""
    rdma = [n for n in topo.nics if n.is_rdma]
    pool = rdma or topo.nics
    if not pool:
        return None, None
    best = topo.best_nic_for(gpu, pool)
    if best is None:
        return None, None
    _, best_kind = best
    target = _closeness(topo, gpu, best[0])
    ties = [n for n in pool if _closeness(topo, gpu, n) == target]
    ties.sort(key=lambda n: (used.get(n.name, 0), n.name))
    nic = ties[0]
    p = topo.path(gpu.name, nic.name)
    return nic, p.kind if p else best_kind


def _closeness(topo: Topology, gpu: Device, nic: Device) -> int:
    p = topo.path(gpu.name, nic.name)
    if p is not None:
        return path_rank(p.kind)
    if gpu.numa_node is not None and nic.numa_node == gpu.numa_node:
        return path_rank("NODE")
    if gpu.numa_node is not None and nic.numa_node is not None:
        return path_rank("SYS")
    return 99
