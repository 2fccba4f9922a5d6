"""Where each process really runs and keeps its memory, against the machine's topology.

:func:`audit_process` joins a :class:`~clusterdoctor.observe.node.procfs.ProcessInfo` (from ``/proc``)
with a :class:`~clusterdoctor.topology.model.Topology` and returns a :class:`Placement`: the NUMA
nodes of its allowed CPUs, its resident bytes per node, the GPUs and NICs it uses with their
nodes, and flags. It is pure: it reads nothing, so rules and reports can rely on it.

Definitions (used by the flags and by the rules that consume them):

* ``cpu_nodes``: the nodes that hold at least one CPU of ``Cpus_allowed_list`` (CPUs the topology
  does not know are left out).
* ``remote_memory_share``: bytes resident on nodes NOT in ``cpu_nodes``, divided by all resident
  bytes (``numa_maps``, through each VMA's page size). 0.0 .. 1.0; None when numa_maps is unknown,
  the process has no resident memory, or ``cpu_nodes`` is empty. For a process allowed on every
  node this is only the memory on CPU-less nodes (CXL, GPU memory nodes), so the share is
  meaningful for bound processes; ``gpu_remote_memory_share`` gives the share not on its GPUs' nodes.
* ``majority_memory_node``: the node with the most resident bytes (lowest id on a tie).
* ``memory_bound`` / ``memory_nodes_bound``: ``Mems_allowed_list`` leaves out a memory node of the
  topology (cgroup cpuset.mems), or node-steering policies (bind, prefer, prefer (many),
  interleave, weighted interleave) cover at least half of the resident bytes (a process-wide
  ``numactl --membind``, not one mbind()'ed buffer); the nodes are the union of those restrictions.
* ``bound``: some CPU the machine allows (the topology's cgroup cpuset ``allowed_cpus`` when known,
  else all its CPUs) is missing from ``Cpus_allowed_list``; None when the topology lists no CPUs.
* GPUs a process uses: NVML's list for its pid when NVML lists it (``ProcessInfo.nvml_gpus``;
  NVML is positive evidence only -- it cannot see pids of other pid namespaces); else the GPUs that
  ``CUDA_VISIBLE_DEVICES`` names (indices, ``GPU-<uuid>``; ``MIG-`` ids stay unknown), composed
  with ``NVIDIA_VISIBLE_DEVICES`` when that is a list; else the GPUs of its open ``/dev/nvidiaN``
  (N is the driver minor number: matched to ``attrs["minor_number"]`` when the topology has it,
  else taken as the GPU index). CUDA indices are taken as topology (PCI-order) indices unless
  ``CUDA_DEVICE_ORDER`` is not ``PCI_BUS_ID`` and the GPUs are of mixed models (then unknown).
  A GPU the topology cannot place is reported in ``gpu_details`` with ``numa_node: null`` and the
  reason -- never guessed.

Flags (each ``{"raised": bool, "checked": bool, "reason": str}``; ``checked`` False means an input
was missing or unknown, so "not raised" is not "healthy"):

* ``base_mismatch``: the node holding most of its memory is not in ``cpu_nodes``, or none of its
  GPUs' nodes is in ``cpu_nodes``.
* ``strong_mismatch``: ``remote_memory_share`` > :data:`REMOTE_MEMORY_STRONG`.
* ``io_remote``: it uses a GPU or NIC, is bound (CPUs, or memory via ``Mems_allowed`` / a bind
  policy), and the bound CPUs or memory nodes include none of its devices' nodes.
* ``unbound_on_multinode``: ``bound`` is False on a machine with more than one CPU-bearing node.
* ``thread_mismatch``: a thread whose allowed CPUs lie only on nodes that hold none of its
  process's GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.model import Threshold
from clusterdoctor.observe.node.procfs import ProcessInfo
from clusterdoctor.topology.model import Device, Topology

__all__ = [
    "FLAG_NAMES",
    "REMOTE_MEMORY_STRONG",
    "REMOTE_MEMORY_STRONG_THRESHOLD",
    "Flag",
    "GpuRef",
    "Placement",
    "ThreadPlacement",
    "audit",
    "audit_process",
    "parse_visible_devices",
]

# Issue #2 ("strong mismatch = more than 30% of its memory on remote nodes"), following the
# numastat convention of judging a process by the share of its pages on other nodes
# (numactl numastat.8, ``numastat -p``).
REMOTE_MEMORY_STRONG = 0.30
REMOTE_MEMORY_STRONG_THRESHOLD = Threshold(
    name="REMOTE_MEMORY_STRONG",
    value=REMOTE_MEMORY_STRONG,
    unit="ratio",
    source="issue #2 (strong mismatch: more than 30% of memory on remote nodes); numastat -p convention",
    meaning="share of a process's resident memory on nodes that hold none of its allowed CPUs",
)

FLAG_NAMES = ("base_mismatch", "strong_mismatch", "io_remote", "unbound_on_multinode", "thread_mismatch")

# CUDA C Programming Guide, "CUDA Environment Variables": CUDA_VISIBLE_DEVICES takes indices, GPU
# UUIDs and MIG ids; parsing stops at the first invalid entry. nvidia-container-toolkit:
# NVIDIA_VISIBLE_DEVICES is "all", "none", "void", empty, or a list of indices/UUIDs.
_NVIDIA_ALL = frozenset({"all"})
_NVIDIA_NONE = frozenset({"none", "void", ""})


@dataclass(frozen=True)
class Flag:
    """One placement verdict: raised or not, whether it could be checked, and why."""

    raised: bool
    checked: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"raised": self.raised, "checked": self.checked, "reason": self.reason}


@dataclass(frozen=True)
class GpuRef:
    """A GPU a process refers to: what it said (``ref``), which topology GPU that is, and its node."""

    ref: str
    source: str  # "nvml", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "/dev/nvidiaN"
    name: str | None = None
    numa_node: int | None = None
    reason: str | None = None  # why name or node is unknown

    def as_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "source": self.source,
            "name": self.name,
            "numa_node": self.numa_node,
            "reason": self.reason,
        }


@dataclass
class ThreadPlacement:
    """One thread: its allowed CPUs, their nodes, and whether it sits away from its process's GPUs."""

    tid: int
    name: str | None
    cpus: list[int] | None
    cpu_nodes: list[int]
    mismatch: bool | None = None  # None: not checked (no GPU node known, or CPUs unknown)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tid": self.tid,
            "name": self.name,
            "cpus": self.cpus,
            "cpu_nodes": self.cpu_nodes,
            "mismatch": self.mismatch,
        }


@dataclass
class Placement:
    """The placement of one process against the topology (see the module docstring for definitions)."""

    pid: int
    comm: str | None = None
    cmdline: list[str] = field(default_factory=list)
    error: str | None = None
    unreadable: dict[str, str] = field(default_factory=dict)
    kernel_thread: bool = False
    cpus_allowed: list[int] | None = None
    mems_allowed: list[int] | None = None
    cpu_nodes: list[int] = field(default_factory=list)
    memory_bytes_by_node: dict[int, int] | None = None
    memory_total_bytes: int | None = None
    majority_memory_node: int | None = None
    remote_memory_share: float | None = None
    gpu_remote_memory_share: float | None = None
    memory_policies: dict[str, int] = field(default_factory=dict)  # non-default policy -> bytes
    memory_bound: bool | None = None
    memory_nodes_bound: list[int] | None = None  # nodes its memory is restricted/steered to
    gpus: list[str] = field(default_factory=list)
    gpu_details: list[GpuRef] = field(default_factory=list)
    gpu_nodes: list[int] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    nic_nodes: list[int] = field(default_factory=list)
    unknown_devices: list[str] = field(default_factory=list)
    bound: bool | None = None
    local_rank: str | None = None
    rank: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    threads: list[ThreadPlacement] = field(default_factory=list)
    flags: dict[str, Flag] = field(default_factory=dict)

    def raised(self) -> list[str]:
        """Names of the flags raised."""
        return [k for k, f in self.flags.items() if f.raised]

    def as_dict(self) -> dict[str, Any]:
        by_node = self.memory_bytes_by_node
        return {
            "pid": self.pid,
            "comm": self.comm,
            "cmdline": list(self.cmdline),
            "error": self.error,
            "unreadable": dict(self.unreadable),
            "kernel_thread": self.kernel_thread,
            "cpus_allowed": self.cpus_allowed,
            "mems_allowed": self.mems_allowed,
            "cpu_nodes": list(self.cpu_nodes),
            "memory_bytes_by_node": {str(k): v for k, v in sorted(by_node.items())}
            if by_node is not None
            else None,
            "memory_total_bytes": self.memory_total_bytes,
            "majority_memory_node": self.majority_memory_node,
            "remote_memory_share": _round(self.remote_memory_share),
            "gpu_remote_memory_share": _round(self.gpu_remote_memory_share),
            "memory_policies": dict(self.memory_policies),
            "memory_bound": self.memory_bound,
            "memory_nodes_bound": self.memory_nodes_bound,
            "gpus": list(self.gpus),
            "gpu_details": [g.as_dict() for g in self.gpu_details],
            "gpu_nodes": list(self.gpu_nodes),
            "nics": list(self.nics),
            "nic_nodes": list(self.nic_nodes),
            "unknown_devices": list(self.unknown_devices),
            "bound": self.bound,
            "local_rank": self.local_rank,
            "rank": self.rank,
            "env": dict(self.env),
            "threads": [t.as_dict() for t in self.threads],
            "flags": {k: f.as_dict() for k, f in self.flags.items()},
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


# -- GPUs ----------------------------------------------------------------------------------------


def parse_visible_devices(value: str) -> list[str] | None:
    """Entries of a ``CUDA_VISIBLE_DEVICES``-style list, up to the first invalid one (CUDA's rule).

    Returns None for "no restriction" (NVIDIA's ``all``), [] for none visible.
    """
    v = value.strip()
    if v.lower() in _NVIDIA_ALL:
        return None
    if v.lower() in _NVIDIA_NONE:
        return []
    out = []
    for tok in v.split(","):
        t = tok.strip()
        if t.isascii() and t.isdigit():
            out.append(str(int(t)))
        elif t[:4] in ("GPU-", "MIG-"):
            out.append(t)
        else:
            break  # CUDA ignores this entry and everything after it
    return out


def _gpu_uuid(dev: Device) -> str | None:
    u = dev.attrs.get("uuid") if dev.attrs else None
    return str(u) if u else None


def _resolve_gpu(
    ref: str, source: str, topo: Topology, uuids: Mapping[str, int], index_ok: str | None
) -> GpuRef:
    """Map one entry (index or UUID, host numbering) to a topology GPU, or say why it cannot."""
    if ref.isdigit():
        if index_ok is not None:
            return GpuRef(ref, source, reason=index_ok)
        dev = topo.gpu_by_index(int(ref))
        if dev is None:
            return GpuRef(ref, source, reason=f"GPU index {ref} not in the topology")
    elif ref.startswith("MIG-"):
        return GpuRef(ref, source, reason="MIG device: its parent GPU is unknown without NVML")
    else:
        want = ref.lower()
        dev = next((g for g in topo.gpus if (_gpu_uuid(g) or "").lower() == want), None)
        if dev is None and ref in uuids:
            dev = topo.gpu_by_index(uuids[ref])
        if dev is None:
            return GpuRef(ref, source, reason=f"GPU UUID {ref} unknown to the topology")
    node = dev.numa_node
    return GpuRef(ref, source, dev.name, node, None if node is not None else f"{dev.name}: NUMA node unknown")


def _index_mapping_doubt(info: ProcessInfo, topo: Topology) -> str | None:
    """Why CUDA indices may not be topology (PCI-order) indices, or None when they are safe.

    CUDA numbers devices FASTEST_FIRST unless CUDA_DEVICE_ORDER=PCI_BUS_ID; on a machine whose
    GPUs are all the same model that is PCI order too (ties break by bus id).
    """
    order = info.env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST").strip().upper()
    models = {g.model for g in topo.gpus if g.model}
    if order != "PCI_BUS_ID" and len(models) > 1:
        return "CUDA index order is FASTEST_FIRST on a machine with mixed GPU models: index unknown"
    return None


def _gpus_of(info: ProcessInfo, topo: Topology, uuids: Mapping[str, int]) -> list[GpuRef]:
    if info.nvml_gpus:
        return [_resolve_gpu(str(i), "nvml", topo, uuids, None) for i in info.nvml_gpus]
    doubt = _index_mapping_doubt(info, topo)
    nvidia = info.env.get("NVIDIA_VISIBLE_DEVICES")
    host_list = parse_visible_devices(nvidia) if nvidia is not None else None
    cuda = info.env.get("CUDA_VISIBLE_DEVICES")
    if cuda is not None:
        entries = parse_visible_devices(cuda) or []
        if host_list is None:
            return [_resolve_gpu(e, "CUDA_VISIBLE_DEVICES", topo, uuids, doubt) for e in entries]
        # Inside a container that sees ``host_list``: CUDA index i is the i-th visible GPU.
        hosts = [_resolve_gpu(h, "NVIDIA_VISIBLE_DEVICES", topo, uuids, None) for h in host_list]
        if any(h.name is None for h in hosts):
            return [
                GpuRef(e, "CUDA_VISIBLE_DEVICES", reason="container GPU list unresolved") for e in entries
            ]
        dev_by_name = {g.name: g for g in topo.gpus}
        host_index = {h.name: dev_by_name[h.name].index for h in hosts if h.name in dev_by_name}
        if doubt is None and any(host_index.get(h.name) is None for h in hosts):
            doubt = "order of the container's GPUs unknown (GPU index missing in the topology)"
        ordered = sorted(hosts, key=lambda h: host_index.get(h.name) or 0)
        out = []
        for e in entries:
            if e.isdigit() and doubt is not None:
                out.append(GpuRef(e, "CUDA_VISIBLE_DEVICES", reason=doubt))
            elif e.isdigit():
                if int(e) < len(ordered):
                    h = ordered[int(e)]
                    out.append(
                        GpuRef(
                            e, "CUDA_VISIBLE_DEVICES+NVIDIA_VISIBLE_DEVICES", h.name, h.numa_node, h.reason
                        )
                    )
                else:
                    out.append(
                        GpuRef(e, "CUDA_VISIBLE_DEVICES", reason=f"index {e} beyond the container's GPUs")
                    )
            else:
                out.append(_resolve_gpu(e, "CUDA_VISIBLE_DEVICES", topo, uuids, None))
        return out
    if host_list:
        return [_resolve_gpu(h, "NVIDIA_VISIBLE_DEVICES", topo, uuids, None) for h in host_list]
    out = []
    for n in info.nvidia_devices:
        # /dev/nvidiaN: N is the driver's minor number, equal to the nvidia-smi index unless the
        # topology records otherwise (attrs["minor_number"]).
        by_minor = [g for g in topo.gpus if g.attrs.get("minor_number") is not None]
        dev = next((g for g in by_minor if str(g.attrs["minor_number"]).strip() == str(n)), None)
        if dev is None and not by_minor:
            dev = topo.gpu_by_index(n)
        if dev is None:
            out.append(
                GpuRef(f"/dev/nvidia{n}", "/dev/nvidiaN", reason=f"/dev/nvidia{n} not in the topology")
            )
        else:
            node = dev.numa_node
            out.append(
                GpuRef(
                    f"/dev/nvidia{n}",
                    "/dev/nvidiaN",
                    dev.name,
                    node,
                    None if node is not None else f"{dev.name}: NUMA node unknown",
                )
            )
    return out


# -- the audit -----------------------------------------------------------------------------------


def _nodes(topo: Topology, cpus: Iterable[int] | None) -> list[int]:
    if not cpus:
        return []
    return sorted(topo.nodes_of_cpus(cpus))


def audit_process(
    info: ProcessInfo, topo: Topology, *, gpu_uuids: Mapping[str, int] | None = None
) -> Placement:
    """Join one process with the topology. Pure; never raises for missing data (see module doc).

    ``gpu_uuids`` (``{"GPU-...": index}``, e.g. from :func:`clusterdoctor.observe.node.nvml.gpu_uuids`)
    resolves UUIDs in ``CUDA_VISIBLE_DEVICES`` when the topology does not carry them.
    """
    pl = Placement(
        pid=info.pid,
        comm=info.comm,
        cmdline=list(info.cmdline),
        error=info.error,
        unreadable=dict(info.unreadable),
        kernel_thread=info.kernel_thread,
        env=dict(info.env),
        local_rank=info.env.get("LOCAL_RANK"),
        rank=info.env.get("RANK"),
    )
    if info.error is not None:
        pl.flags = {k: Flag(False, False, f"process not read: {info.error}") for k in FLAG_NAMES}
        return pl

    # CPUs and their nodes
    pl.cpus_allowed = list(info.cpus_allowed) if info.cpus_allowed is not None else None
    pl.mems_allowed = list(info.mems_allowed) if info.mems_allowed is not None else None
    cpu_nodes = _nodes(topo, info.cpus_allowed)
    pl.cpu_nodes = cpu_nodes
    machine = set(topo.allowed_cpus) if topo.allowed_cpus is not None else set(topo.all_cpus())
    if info.cpus_allowed is not None and machine:
        pl.bound = not machine.issubset(info.cpus_allowed)

    # Memory
    nm = info.numa_maps
    if nm is not None:
        by_node = dict(nm.bytes_by_node)
        total = sum(by_node.values())
        pl.memory_bytes_by_node = by_node
        pl.memory_total_bytes = total
        if total > 0:
            top = max(by_node.values())
            pl.majority_memory_node = min(n for n, b in by_node.items() if b == top)
            if cpu_nodes:
                pl.remote_memory_share = sum(b for n, b in by_node.items() if n not in cpu_nodes) / total
        pl.memory_policies = {p: b for p, b in nm.policy_bytes.items() if p != "default"}
    mem_nodes = {n.id for n in topo.nodes if n.memory_bytes != 0} or set(topo.node_ids)
    steer: set[int] = set()
    if info.mems_allowed is not None and mem_nodes and not mem_nodes.issubset(info.mems_allowed):
        steer = set(info.mems_allowed)
    if nm is not None and pl.memory_total_bytes:
        # A process-wide policy (numactl --membind, set_mempolicy) covers most resident bytes; an
        # mbind() on one buffer does not make the process memory-bound.
        binding = [v for v in nm.policy_vmas if v.policy.binds and v.policy.nodes]
        bound_bytes = sum(sum(v.bytes_by_node.values()) for v in binding)
        if bound_bytes * 2 >= pl.memory_total_bytes:
            for v in binding:
                steer |= set(v.policy.nodes)
    if info.mems_allowed is not None or nm is not None:
        pl.memory_bound = bool(steer)
        pl.memory_nodes_bound = sorted(steer) if steer else None

    # Devices
    pl.gpu_details = _gpus_of(info, topo, gpu_uuids or {})
    pl.gpus = [g.name for g in pl.gpu_details if g.name is not None]
    pl.gpu_nodes = sorted({g.numa_node for g in pl.gpu_details if g.numa_node is not None})
    gpu_unknown = [g for g in pl.gpu_details if g.numa_node is None]
    pl.unknown_devices = [f"{g.ref} ({g.reason})" for g in gpu_unknown]
    nic_unknown: list[str] = []
    nic_nodes: set[int] = set()
    for idx, ibdev in sorted(info.uverbs.items()):
        if ibdev is None:
            nic_unknown.append(f"uverbs{idx} (RDMA device unknown: no sysfs infiniband_verbs entry)")
            continue
        dev = next((n for n in topo.nics if n.name == ibdev), None)
        pl.nics.append(ibdev)
        if dev is None:
            nic_unknown.append(f"{ibdev} (not in the topology)")
        elif dev.numa_node is None:
            nic_unknown.append(f"{ibdev} (NUMA node unknown)")
        else:
            nic_nodes.add(dev.numa_node)
    pl.nic_nodes = sorted(nic_nodes)
    pl.unknown_devices += nic_unknown
    if pl.gpu_nodes and pl.memory_bytes_by_node and pl.memory_total_bytes:
        far = sum(b for n, b in pl.memory_bytes_by_node.items() if n not in pl.gpu_nodes)
        pl.gpu_remote_memory_share = far / pl.memory_total_bytes

    # Threads
    gpu_nodes = set(pl.gpu_nodes)
    for t in info.threads:
        t_nodes = _nodes(topo, t.cpus_allowed)
        mismatch = None
        if gpu_nodes and t_nodes:
            mismatch = not (set(t_nodes) & gpu_nodes)
        pl.threads.append(
            ThreadPlacement(
                t.tid, t.name, list(t.cpus_allowed) if t.cpus_allowed is not None else None, t_nodes, mismatch
            )
        )

    pl.flags = _flags(pl, topo, gpu_unknown, nic_unknown)
    return pl


def _flags(
    pl: Placement, topo: Topology, gpu_unknown: list[GpuRef], nic_unknown: list[str]
) -> dict[str, Flag]:
    flags: dict[str, Flag] = {}
    cpu_nodes = set(pl.cpu_nodes)
    cpus_txt = f"CPUs on node(s) {_fmt(cpu_nodes)}"

    # base mismatch: memory majority node or GPU node outside the CPUs' nodes
    parts, unknown = [], []
    raised = False
    if not cpu_nodes:
        unknown.append("node of its CPUs unknown")
    if pl.majority_memory_node is None:
        unknown.append("memory placement unknown" if pl.memory_total_bytes is None else "no resident memory")
    elif cpu_nodes:
        if pl.majority_memory_node not in cpu_nodes:
            raised = True
            parts.append(f"most memory on node {pl.majority_memory_node}, {cpus_txt}")
        else:
            parts.append(f"most memory on node {pl.majority_memory_node}, within its CPUs' nodes")
    if pl.gpu_nodes and cpu_nodes:
        if not (set(pl.gpu_nodes) & cpu_nodes):
            raised = True
            parts.append(f"GPU(s) {', '.join(pl.gpus)} on node(s) {_fmt(pl.gpu_nodes)}, {cpus_txt}")
        else:
            parts.append(f"GPU node(s) {_fmt(pl.gpu_nodes)} within its CPUs' nodes")
    if gpu_unknown:
        unknown.append("GPU node unknown: " + "; ".join(g.reason or g.ref for g in gpu_unknown))
    flags["base_mismatch"] = Flag(raised, not unknown or raised, _join(parts, unknown))

    # strong mismatch: remote share above the threshold
    share = pl.remote_memory_share
    if share is None:
        why = (
            "memory placement unknown"
            if pl.memory_total_bytes is None
            else ("no resident memory" if not pl.memory_total_bytes else "node of its CPUs unknown")
        )
        flags["strong_mismatch"] = Flag(False, False, why)
    else:
        flags["strong_mismatch"] = Flag(
            share > REMOTE_MEMORY_STRONG,
            True,
            f"{share:.1%} of {pl.memory_total_bytes} bytes on nodes other than {_fmt(cpu_nodes)} "
            f"(threshold {REMOTE_MEMORY_STRONG:.0%})",
        )

    # io_remote: bound away from its devices' nodes
    dev_nodes = set(pl.gpu_nodes) | set(pl.nic_nodes)
    uses_devices = bool(pl.gpu_details or pl.nics or nic_unknown)
    if not uses_devices:
        flags["io_remote"] = Flag(False, True, "uses no GPU or NIC")
    elif not dev_nodes:
        flags["io_remote"] = Flag(False, False, "device NUMA node unknown: " + "; ".join(pl.unknown_devices))
    else:
        parts, raised = [], False
        if pl.bound and cpu_nodes and not (cpu_nodes & dev_nodes):
            raised = True
            parts.append(f"bound to {cpus_txt}, devices on node(s) {_fmt(dev_nodes)}")
        if pl.memory_bound and pl.memory_nodes_bound and not (set(pl.memory_nodes_bound) & dev_nodes):
            raised = True
            parts.append(
                f"memory bound to node(s) {_fmt(pl.memory_nodes_bound)}, devices on {_fmt(dev_nodes)}"
            )
        if not parts:
            parts.append(
                f"not bound away from its devices' node(s) {_fmt(dev_nodes)}"
                + ("" if pl.bound else " (CPUs not bound)")
            )
        unknown = (
            ["some device nodes unknown: " + "; ".join(pl.unknown_devices)] if pl.unknown_devices else []
        )
        checked = raised or (not unknown and pl.bound is not None)
        flags["io_remote"] = Flag(raised, checked, _join(parts, unknown))

    # unbound on a multi-node machine
    if pl.bound is None:
        flags["unbound_on_multinode"] = Flag(False, False, "allowed CPUs or machine CPUs unknown")
    elif not topo.is_multi_node:
        flags["unbound_on_multinode"] = Flag(False, True, "machine has one CPU-bearing NUMA node")
    else:
        flags["unbound_on_multinode"] = Flag(
            not pl.bound,
            True,
            "not bound: allowed on every CPU of the machine" if not pl.bound else f"bound to {cpus_txt}",
        )

    # per-thread
    if not pl.gpu_nodes:
        flags["thread_mismatch"] = Flag(
            False, not pl.gpu_details, "no GPU node known" if pl.gpu_details else "uses no GPU"
        )
    else:
        bad = [t for t in pl.threads if t.mismatch]
        if bad:
            desc = ", ".join(f"{t.tid}({t.name}) on node(s) {_fmt(t.cpu_nodes)}" for t in bad[:8])
            more = f" and {len(bad) - 8} more" if len(bad) > 8 else ""
            flags["thread_mismatch"] = Flag(
                True, True, f"{len(bad)} thread(s) away from GPU node(s) {_fmt(pl.gpu_nodes)}: {desc}{more}"
            )
        else:
            checked = bool(pl.threads) and all(t.mismatch is not None for t in pl.threads)
            flags["thread_mismatch"] = Flag(
                False, checked, "every thread may run on a GPU node" if pl.threads else "threads not read"
            )
    return flags


def _fmt(nodes: Iterable[int]) -> str:
    ns = sorted(nodes)
    return ",".join(str(n) for n in ns) if ns else "none"


def _join(parts: list[str], unknown: list[str]) -> str:
    text = "; ".join(parts)
    if unknown:
        text = (text + "; " if text else "") + "unknown: " + "; ".join(unknown)
    return text


def audit(
    infos: Iterable[ProcessInfo], topo: Topology, *, gpu_uuids: Mapping[str, int] | None = None
) -> list[Placement]:
    """:func:`audit_process` for each process, in order."""
    return [audit_process(i, topo, gpu_uuids=gpu_uuids) for i in infos]
