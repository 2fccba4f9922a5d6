"""PCIe / device-placement rules: where GPUs and NICs sit relative to each other and the NUMA nodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import NotJudged, Observations, register_input, rule
from clusterdoctor.topology.model import Topology, path_rank

register_input("rdma_nics", "no RDMA NIC (InfiniBand/RoCE HCA) in the topology")

GDR_MAX_PATH = Threshold(
    "gdr_max_path",
    "PXB",
    "",
    "NCCL uses GPUDirect RDMA only when the GPU-to-NIC path is PXB or closer, unless NCCL_NET_GDR_LEVEL "
    "says otherwise (NVIDIA/nccl src/graph/paths.cc, ncclTopoCheckGdr; reference/numa.md section 4)",
    "worst path class at which GPUDirect RDMA is still used by default (PXB)",
)
GPU_SPREAD_MAX_DIFF = Threshold(
    "gpu_spread_max_diff",
    1,
    "GPUs",
    "clusterdoctor default: torchrun's exclusive policy splits a node's cores evenly among its GPUs "
    "(torch/numa/binding.py), so a node with 2+ more GPUs than another gives each of its ranks fewer cores",
    "largest allowed difference in GPU count between CPU-bearing NUMA nodes",
)


def _rdma_nics(topo: Topology) -> list:
    return [n for n in topo.nics if n.is_rdma]


@rule(
    id="PCIE001",
    name="gpu-nic-path-beyond-pxb",
    layer="pcie",
    title="GPU-to-NIC path too long for GPUDirect RDMA",
    requires=("topology", "gpus", "rdma_nics", "gpu_nic_paths"),
    thresholds=(GDR_MAX_PATH,),
    severity=Severity.WARNING,
)
def gpu_nic_path_beyond_pxb(obs: Observations) -> Iterator[Finding]:
    """A GPU's closest RDMA NIC is further than PXB (PHB, NODE or SYS).

    **Symptom**: inter-node all-reduce bandwidth well below the NIC's line rate; NCCL_DEBUG=INFO logs
    show ``NET/IB`` without ``GDRDMA`` for that GPU's channels.
    **Why**: NCCL enables GPUDirect RDMA only when the GPU and NIC share a PCIe switch (PIX/PXB). Across
    the host bridge or the CPU interconnect, traffic bounces through host memory, costing bandwidth,
    latency and CPU memory bandwidth; across sockets (SYS) it also crosses UPI/xGMI.
    **Fix**: use the NIC that shares the GPU's PCIe switch (NCCL_IB_HCA / the rank-to-NIC map), move
    the card to a slot under the same switch, or — if the platform supports it and you measured it —
    raise NCCL_NET_GDR_LEVEL to PHB.
    **Verify**: `nvidia-smi topo -m` and `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET ./all_reduce_perf -b 1G -e 1G`
    (look for GDRDMA on each channel).
    """
    topo: Topology = obs.get("topology")
    nics = _rdma_nics(topo)
    for gpu in topo.gpus:
        best = topo.best_nic_for(gpu, nics)
        if best is None:
            continue
        nic, kind = best
        if kind is None or path_rank(kind) <= path_rank(str(GDR_MAX_PATH.value)):
            continue
        sev = Severity.CRITICAL if path_rank(kind) >= path_rank("SYS") else Severity.WARNING
        yield gpu_nic_path_beyond_pxb.finding(
            f"{gpu.name} reaches its closest RDMA NIC {nic.name} only through {kind}; NCCL will not use "
            "GPUDirect RDMA for it by default.",
            evidence=[
                Evidence(f"path {gpu.name} -> {nic.name}", kind, "PXB or closer", source=topo.source),
                Evidence(f"{gpu.name} NUMA node", gpu.numa_node, source=topo.source),
                Evidence(f"{nic.name} NUMA node", nic.numa_node, source=topo.source),
            ],
            severity=sev,
            subject=gpu.name,
            confidence=0.9
            if topo.path(gpu.name, nic.name) and topo.path(gpu.name, nic.name).source == "source"
            else 0.7,  # type: ignore[union-attr]
        )


@rule(
    id="PCIE002",
    name="gpus-uneven-over-numa",
    layer="pcie",
    title="GPUs unevenly spread over NUMA nodes",
    requires=("topology", "gpus", "multi_numa"),
    thresholds=(GPU_SPREAD_MAX_DIFF,),
    severity=Severity.WARNING,
)
def gpus_uneven_over_numa(obs: Observations) -> Iterator[Finding]:
    """Some CPU-bearing NUMA nodes hold several more GPUs than others.

    **Symptom**: ranks on the crowded node run slower input pipelines and host-side work; per-rank step
    times differ with the GPU index.
    **Why**: each rank should use CPUs and memory of its GPU's node; a node with more GPUs splits its
    cores and memory bandwidth among more ranks, while another node's cores sit idle or get used remotely.
    **Fix**: move GPUs (or choose the GPUs a job uses) so each node has the same number, or bind with
    `clusterdoctor numa plan --policy socket` so ranks may use the whole package.
    **Verify**: `clusterdoctor numa topology` (GPUs per node) and `nvidia-smi topo -m` (NUMA Affinity column).
    """
    topo: Topology = obs.get("topology")
    counts = {n.id: 0 for n in topo.nodes if n.cpus}
    for g in topo.gpus:
        if g.numa_node in counts:
            counts[g.numa_node] += 1
    if len(counts) < 2 or sum(counts.values()) == 0:
        return
    diff = max(counts.values()) - min(counts.values())
    if diff > GPU_SPREAD_MAX_DIFF.value:
        yield gpus_uneven_over_numa.finding(
            "GPUs per NUMA node: " + ", ".join(f"node {k}: {v}" for k, v in sorted(counts.items())),
            evidence=[
                Evidence("max - min GPUs per CPU node", diff, GPU_SPREAD_MAX_DIFF.value, "GPUs", topo.source)
            ],
            confidence=0.7,
            subject=topo.hostname or topo.source,
        )


@rule(
    id="PCIE003",
    name="device-numa-unknown",
    layer="pcie",
    title="Device NUMA node unknown",
    requires=("topology", "multi_numa"),
    severity=Severity.WARNING,
)
def device_numa_unknown(obs: Observations) -> Iterator[Finding | NotJudged]:
    """A GPU or NIC whose NUMA node no source states, on a machine with several NUMA nodes.

    **Symptom**: launchers bind the rank to node 0 (torch maps numa_node -1 to 0) or to nothing;
    half of the ranks end up remote from their GPU.
    **Why**: firmware left the device's proximity (ACPI _PXM) empty, so sysfs says ``numa_node = -1``;
    without a local_cpulist that fits one node, nobody knows where the device sits.
    **Fix**: enable the BIOS option that reports PCIe proximity (e.g. "NUMA per socket"/SRAT for PCIe),
    update the firmware, or give clusterdoctor a source that states it (`nvidia-smi topo -m`, hwloc XML).
    **Verify**: `cat /sys/bus/pci/devices/<bdf>/numa_node /sys/bus/pci/devices/<bdf>/local_cpulist`
    """
    topo: Topology = obs.get("topology")
    not_stated: list[str] = []
    for d in [*topo.gpus, *topo.nics]:
        if d.numa_node is None and _source_cannot_state(topo, d):
            not_stated.append(d.name)
            continue
        if d.numa_node is None:
            yield device_numa_unknown.finding(
                f"{d.kind.upper()} {d.name} ({d.pci or 'no PCI address'}): NUMA node unknown; placement for it cannot be checked.",
                evidence=[Evidence("numa_node", "unknown", source=topo.source)],
                subject=d.name,
                confidence=0.9,
            )
    if not_stated:
        yield NotJudged(
            f"the topology source ({topo.source_kind}) does not state the NUMA node of "
            + ", ".join(not_stated[:8])
            + (f" and {len(not_stated) - 8} more" if len(not_stated) > 8 else "")
            + " (nvidia-smi topo -m names no NIC's node; a cut matrix no GPU's whose row is missing)"
        )


def _source_cannot_state(topo: Topology, d: Any) -> bool:
    """Whether the source format cannot say where ``d`` sits, so "unknown" is no fault of the machine:
    nvidia-smi topo -m prints no NUMA node for NICs (only GPUs' affinity), and a matrix cut short has
    no affinity for the GPUs whose rows are missing."""
    if topo.source_kind != "nvidia-smi-topo":
        return False
    return d.kind == "nic" or bool(d.attrs.get("row_missing"))
