"""NUMA placement rules: where each process's CPUs, memory and threads sit relative to its GPU and NIC.

They read the ``processes`` observation: a list of placement records
(:meth:`clusterdoctor.topology.placement.Placement.as_dict`), plus the ``topology``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, register_input, rule
from clusterdoctor.topology.cpu import CpuId, vendor_from_model_name
from clusterdoctor.topology.cpuset import format_cpulist

register_input("probe", "no host-device copy probe results (run `clusterdoctor numa probe` on a GPU node)")

REMOTE_MEMORY_STRONG = Threshold(
    "remote_memory_share",
    0.30,
    "fraction of resident memory",
    "issue #2 (strong mismatch: more than 30% of a process's memory on remote nodes); numastat -p shows the "
    "per-node split this is computed from (numactl numastat.8)",
    "share of a process's memory on nodes other than its CPUs' node above which placement is a strong mismatch",
)
MIN_MEMORY_FOR_VERDICT = Threshold(
    "min_memory_bytes",
    64 << 20,
    "bytes",
    "clusterdoctor default: below 64 MiB resident the per-node split is dominated by shared libraries",
    "processes with less mapped memory than this are not judged on memory placement",
)
H2D_REMOTE_LOCAL_RATIO = Threshold(
    "h2d_remote_local_ratio",
    0.8,
    "ratio",
    "gearshifft#82: pinned H2D 12.2 GB/s local vs 3.8 GB/s remote on a P100 box; torchtitan#3519: D2H 330 vs "
    "115 GB/s on GB200 (reference/numa.md section 5). Below 0.8 the remote penalty is material.",
    "remote/local host-to-device bandwidth ratio below which NUMA placement matters for this GPU",
)
REMOTE_LATENCY_RATIO = Threshold(
    "small_copy_remote_local_latency_ratio",
    1.44,
    "ratio",
    "reference/numa.md section 5: host memory itself is 1.44x slower from the remote node on a 2-socket "
    "Xeon (MLC idle latency 93 ns local vs 134 ns remote, E5-2630 v3); a small copy that slows down more "
    "than the memory hop itself is paying a real remote penalty. Conservative on purpose: the same "
    "section warns a checker not to over-claim (identical H2D from either node on EPYC 9554 + MI210).",
    "remote/local small pinned copy latency ratio above which the remote node's latency is a penalty",
)
SMALL_COPY_LATENCY_US_AMD = Threshold(
    "small_copy_latency_us_amd_epyc",
    1.9,
    "µs",
    "clusterdoctor default from issue #2 (AMD EPYC hosts); reference/numa.md gives no small-copy latency "
    "for this platform, so it is applied only to the remote node's latency and only together with the "
    "remote/local ratio",
    "small pinned copy latency with the buffer on a remote node above which it is material, on AMD EPYC",
)
SMALL_COPY_LATENCY_US_SPR = Threshold(
    "small_copy_latency_us_intel_spr",
    2.6,
    "µs",
    "clusterdoctor default from issue #2 (Intel Sapphire Rapids hosts: family 6 model 0x8F); "
    "reference/numa.md gives no small-copy latency for this platform, so it is applied only to the "
    "remote node's latency and only together with the remote/local ratio",
    "small pinned copy latency with the buffer on a remote node above which it is material, on Sapphire Rapids",
)
# Absolute remote-latency limits exist only for the platforms above; any other CPU (or one the
# source does not name) gets the ratio test alone, and the finding says so.
REMOTE_LATENCY_LIMITS = {
    "amd-epyc": SMALL_COPY_LATENCY_US_AMD,
    "intel-sapphire-rapids": SMALL_COPY_LATENCY_US_SPR,
}
H2D_ASYMMETRY = Threshold(
    "h2d_asymmetry",
    0.7,
    "ratio",
    "NVIDIA/nvbandwidth#6: host->GPU0 14.2 GB/s vs ~57 GB/s for GPUs 1-3 of the same kind (reference/numa.md section 5)",
    "a GPU whose best local H2D bandwidth is below this fraction of its same-model peers' median is flagged",
)


def _procs(obs: Observations) -> list[dict[str, Any]]:
    return [p for p in obs.get("processes") or [] if not p.get("error")]


def _flag(p: dict[str, Any], name: str) -> bool:
    """Whether the placement audit raised flag ``name`` (flags are ``{name: {raised, checked, reason}}``)."""
    v = (p.get("flags") or {}).get(name)
    return bool(v.get("raised")) if isinstance(v, dict) else bool(v)


def _subject(p: dict[str, Any]) -> str:
    """Under Kubernetes the pod names the finding (``namespace/pod/container, pid N``); else the pid."""
    pod = p.get("pod") or {}
    if pod.get("label"):
        return f"{pod['label']} (pid {p.get('pid')}, {p.get('comm', '?')})"
    return f"pid {p.get('pid')} ({p.get('comm', '?')})"


def _verify_for(p: dict[str, Any]) -> list[str]:
    pid = p.get("pid")
    out = [
        f"grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/{pid}/status",
        f"numastat -p {pid}",
        f"clusterdoctor numa audit --pid {pid}",
    ]
    pod = p.get("pod") or {}
    if pod.get("namespace") and pod.get("pod"):
        c = f" -c {pod['container']}" if pod.get("container") else ""
        out.append(
            f"kubectl exec -n {pod['namespace']} {pod['pod']}{c} -- grep Cpus_allowed_list /proc/self/status"
        )
    return out


def _cpus_evidence(p: dict[str, Any]) -> Evidence:
    return Evidence(
        "CPUs allowed", format_cpulist(p.get("cpus_allowed") or []), source=f"/proc/{p.get('pid')}/status"
    )


def _mem_evidence(p: dict[str, Any]) -> Evidence:
    mem = p.get("memory_bytes_by_node") or {}
    desc = ", ".join(
        f"node {k}: {int(v) / (1 << 20):.0f} MiB" for k, v in sorted(mem.items(), key=lambda kv: str(kv[0]))
    )
    return Evidence(
        "resident memory by node (numa_maps)", desc or "none", source=f"/proc/{p.get('pid')}/numa_maps"
    )


@rule(
    id="NUMA001",
    name="cpu-memory-mismatch",
    layer="numa",
    title="CPUs and memory on different NUMA nodes",
    requires=("processes", "multi_numa"),
    thresholds=(MIN_MEMORY_FOR_VERDICT,),
)
def cpu_memory_mismatch(obs: Observations) -> Iterator[Finding]:
    """The node a process runs on differs from the node holding most of its memory.

    **Symptom**: higher memory latency and lower bandwidth for the process; slower data loading and
    host-side preprocessing; numastat -p shows most pages on another node.
    **Why**: memory was first touched before the process was bound (or by a thread on another node), or
    the scheduler migrated it after allocation; every access then crosses the socket interconnect
    (93 vs 134 ns, 49 vs 25 GB/s on a 2-socket Xeon — reference/numa.md section 5).
    **Fix**: start the process bound: `clusterdoctor numa exec --local-rank N -- CMD` (sets CPUs and a
    preferred memory node before the first allocation); or migrate pages with `migratepages PID FROM TO`.
    **Verify**: `numastat -p PID` and `clusterdoctor numa audit --pid PID`
    """
    for p in _procs(obs):
        total = p.get("memory_total_bytes") or 0
        cpu_nodes = set(p.get("cpu_nodes") or [])
        major = p.get("majority_memory_node")
        if total < MIN_MEMORY_FOR_VERDICT.value or major is None or not cpu_nodes or len(cpu_nodes) > 1:
            continue
        if major not in cpu_nodes:
            yield cpu_memory_mismatch.finding(
                f"{_subject(p)} runs on node {sorted(cpu_nodes)[0]} but most of its memory is on node {major}.",
                evidence=[
                    _cpus_evidence(p),
                    _mem_evidence(p),
                ],
                subject=_subject(p),
                verify=_verify_for(p),
            )


@rule(
    id="NUMA002",
    name="cpu-gpu-mismatch",
    layer="numa",
    title="Process CPUs not on its GPU's NUMA node",
    requires=("processes", "gpu_processes", "multi_numa"),
    severity=Severity.WARNING,
)
def cpu_gpu_mismatch(obs: Observations) -> Iterator[Finding]:
    """A process that drives a GPU runs on CPUs of another NUMA node than the GPU's.

    **Symptom**: lower host-to-device copy bandwidth and higher launch latency for that rank; the rank
    is the straggler in collectives; NCCL logs "Setting affinity ... empty, ignoring".
    **Why**: pinned-memory DMA and kernel launches cross the socket interconnect; copies can lose 3x
    bandwidth (H2D 12.2 vs 3.8 GB/s on a P100 box, D2H 330 vs 115 GB/s on GB200), and NCCL's proxy
    threads inherit the wrong mask.
    **Fix**: bind each rank to its GPU's node: `clusterdoctor numa plan --gpus 0-7` then
    `clusterdoctor numa exec --local-rank $LOCAL_RANK -- python train.py` (or torchrun --numa-binding node).
    **Verify**: `clusterdoctor numa check --match python` (exit 0) and `nvidia-smi topo -m` (NUMA Affinity).
    """
    for p in _procs(obs):
        gpu_nodes = {n for n in p.get("gpu_nodes") or [] if n is not None}
        cpu_nodes = set(p.get("cpu_nodes") or [])
        if not gpu_nodes or not cpu_nodes:
            continue
        if not cpu_nodes & gpu_nodes:
            sev = Severity.CRITICAL
        elif not cpu_nodes <= gpu_nodes and p.get("bound"):
            sev = Severity.WARNING
        else:
            continue
        yield cpu_gpu_mismatch.finding(
            f"{_subject(p)} uses {', '.join(p.get('gpus') or [])} on node(s) {sorted(gpu_nodes)} but may run on "
            f"CPUs of node(s) {sorted(cpu_nodes)}.",
            evidence=[
                _cpus_evidence(p),
                Evidence("GPU NUMA node(s)", sorted(gpu_nodes), source="topology"),
            ],
            severity=sev,
            subject=_subject(p),
            verify=_verify_for(p),
        )


@rule(
    id="NUMA003",
    name="remote-memory-share",
    layer="numa",
    title="Large share of memory on remote NUMA nodes",
    requires=("processes", "multi_numa"),
    thresholds=(REMOTE_MEMORY_STRONG, MIN_MEMORY_FOR_VERDICT),
    severity=Severity.WARNING,
)
def remote_memory_share(obs: Observations) -> Iterator[Finding]:
    """More than 30% of a process's resident memory is on nodes other than its CPUs' node.

    **Symptom**: memory-bound host work (decoding, augmentation, optimizer on CPU, pinned staging) is
    slow; numastat -p shows pages spread over nodes.
    **Why**: remote accesses cost ~45% more latency and about half the bandwidth on 2-socket servers
    (reference/numa.md section 5); THP under a bind policy can still land remote.
    **Fix**: start bound with a preferred memory node (`clusterdoctor numa exec`), or move pages with
    `migratepages PID ALL NODE`; for intentional spreading use an interleave policy explicitly.
    **Verify**: `numastat -p PID`
    """
    for p in _procs(obs):
        share = p.get("remote_memory_share")
        total = p.get("memory_total_bytes") or 0
        if share is None or total < MIN_MEMORY_FOR_VERDICT.value:
            continue
        if share > REMOTE_MEMORY_STRONG.value:
            yield remote_memory_share.finding(
                f"{_subject(p)} has {share * 100:.0f}% of its {total / (1 << 20):.0f} MiB on remote nodes.",
                evidence=[
                    Evidence("remote memory share", round(share, 3), REMOTE_MEMORY_STRONG.value),
                    _mem_evidence(p),
                ],
                subject=_subject(p),
                verify=_verify_for(p),
                severity=Severity.CRITICAL if share > 0.6 else Severity.WARNING,
            )


@rule(
    id="NUMA004",
    name="process-unbound",
    layer="numa",
    title="GPU process not bound to one NUMA node",
    requires=("processes", "gpu_processes", "multi_numa"),
    severity=Severity.WARNING,
)
def process_unbound(obs: Observations) -> Iterator[Finding]:
    """A process that uses a GPU or NIC may run on CPUs of several NUMA nodes.

    **Symptom**: step time varies run to run; the kernel scheduler moves threads across sockets; memory
    ends up wherever the first touch happened.
    **Why**: without a CPU binding the process's threads (and NCCL's proxy threads, and DataLoader
    workers, which inherit the mask) wander; nothing keeps them near the GPU's PCIe root complex.
    **Fix**: `clusterdoctor numa exec --local-rank $LOCAL_RANK -- CMD` (or torchrun --numa-binding node;
    Kubernetes: static CPU manager with the Topology Manager policy single-numa-node).
    **Verify**: `clusterdoctor numa check` (exit 2 means a checked process is not bound)
    """
    for p in _procs(obs):
        if not (p.get("gpus") or p.get("nics")):
            continue
        if len(p.get("cpu_nodes") or []) > 1 or _flag(p, "unbound_on_multinode"):
            yield process_unbound.finding(
                f"{_subject(p)} uses {', '.join((p.get('gpus') or []) + (p.get('nics') or []))} and may run on "
                f"CPUs of nodes {p.get('cpu_nodes')}.",
                evidence=[_cpus_evidence(p)],
                subject=_subject(p),
                verify=_verify_for(p),
            )


@rule(
    id="NUMA005",
    name="thread-off-gpu-node",
    layer="numa",
    title="Threads bound away from the GPU's node",
    requires=("processes", "gpu_processes", "multi_numa"),
    severity=Severity.WARNING,
)
def thread_off_gpu_node(obs: Observations) -> Iterator[Finding]:
    """Some threads of a GPU process (data loader, NCCL proxy, pin-memory) are bound to another node.

    **Symptom**: the process looks bound correctly, yet input or communication threads are slow;
    per-thread Cpus_allowed_list differs from the main thread's.
    **Why**: a library re-pinned its threads (OpenMP, a DataLoader worker_init_fn, NCCL with
    NCCL_IGNORE_CPU_AFFINITY) to CPUs that are not local to the GPU.
    **Fix**: pin workers with `clusterdoctor.training.numa_worker_init_fn`, unset conflicting
    OMP_PLACES/GOMP_CPU_AFFINITY, and let NCCL inherit the rank's mask.
    **Verify**: `grep Cpus_allowed_list /proc/PID/task/*/status`
    """
    for p in _procs(obs):
        gpu_nodes = {n for n in p.get("gpu_nodes") or [] if n is not None}
        if not gpu_nodes:
            continue
        bad = [
            t for t in p.get("threads") or [] if t.get("cpu_nodes") and not set(t["cpu_nodes"]) & gpu_nodes
        ]
        if bad:
            names = ", ".join(f"{t.get('tid')}:{t.get('name')}" for t in bad[:8])
            yield thread_off_gpu_node.finding(
                f"{_subject(p)}: {len(bad)} thread(s) bound only to nodes without its GPU ({names}).",
                evidence=[
                    Evidence(
                        "threads off the GPU's node", len(bad), 0, "threads", f"/proc/{p.get('pid')}/task"
                    )
                ],
                subject=_subject(p),
                verify=[f"grep Cpus_allowed_list /proc/{p.get('pid')}/task/*/status"],
            )


@rule(
    id="NUMA006",
    name="io-process-remote-from-device",
    layer="numa",
    title="I/O process bound away from its device's PCIe home node",
    requires=("processes", "multi_numa"),
    severity=Severity.WARNING,
)
def io_process_remote(obs: Observations) -> Iterator[Finding]:
    """A process that does device I/O (GPU or NIC) is bound to CPUs away from the device's home node.

    **Symptom**: lower DMA throughput and higher interrupt/completion latency for the device; RDMA
    completions processed on a remote socket.
    **Why**: the device's DMA and its doorbells/completions go through the root complex of its home
    node; a process bound elsewhere pays the socket interconnect on every transfer.
    **Fix**: rebind to the device's node (`clusterdoctor numa plan`), or choose the device local to
    where the process must run (NCCL_IB_HCA, CUDA_VISIBLE_DEVICES).
    **Verify**: `clusterdoctor numa check --pid PID` (exit 3 means bound to non-local CPUs or memory)
    """
    for p in _procs(obs):
        if _flag(p, "io_remote"):
            devs = ", ".join((p.get("gpus") or []) + (p.get("nics") or []))
            yield io_process_remote.finding(
                f"{_subject(p)} is bound to node(s) {p.get('cpu_nodes')} away from its device(s) {devs}.",
                evidence=[
                    _cpus_evidence(p),
                    Evidence(
                        "device node(s)",
                        sorted({*(p.get("gpu_nodes") or []), *(p.get("nic_nodes") or [])} - {None}),
                    ),
                ],
                subject=_subject(p),
                verify=_verify_for(p),
            )


def _probe_cpu(obs: Observations, probe: dict[str, Any]) -> CpuId | None:
    """The measured machine's CPU: the probe's own record, else its model name, else the topology's."""
    cpu = CpuId.from_dict(probe.get("cpu"))
    if cpu is None and probe.get("cpu_model"):
        name = str(probe["cpu_model"])
        cpu = CpuId(vendor_from_model_name(name), name, source="probe cpu_model")
    if cpu is None or cpu.vendor is None:
        topo = obs.get("topology")
        if topo is not None and getattr(topo, "cpu", None) is not None:
            cpu = topo.cpu
    return cpu


def _per_node_latency(g: dict[str, Any]) -> tuple[float | None, float | None, str | None]:
    """(local latency, worst remote latency, that remote node) from a probe GPU entry."""
    per = g.get("per_node") or {}
    home = g.get("numa_node")
    if home is None:
        return None, None, None
    local = (per.get(str(home)) or {}).get("small_copy_latency_us", g.get("local_latency_us"))
    remote = [
        (v.get("small_copy_latency_us"), k)
        for k, v in per.items()
        if k not in (str(home), "None") and isinstance(v, dict) and v.get("small_copy_latency_us") is not None
    ]
    if not remote:
        return local, None, None
    lat, node = max(remote)
    return local, lat, node


@rule(
    id="NUMA007",
    name="host-device-copy-remote-penalty",
    layer="numa",
    title="Host-device copies much slower from a remote NUMA node",
    requires=("probe",),
    thresholds=(
        H2D_REMOTE_LOCAL_RATIO,
        REMOTE_LATENCY_RATIO,
        SMALL_COPY_LATENCY_US_AMD,
        SMALL_COPY_LATENCY_US_SPR,
        H2D_ASYMMETRY,
    ),
    severity=Severity.WARNING,
)
def copy_remote_penalty(obs: Observations) -> Iterator[Finding]:
    """Measured pinned host-to-device bandwidth drops, or small-copy latency rises, when the host
    buffer sits on a remote NUMA node; or one GPU is much slower than its same-model peers.

    **Symptom**: data loading and checkpoint restore are slower on some ranks; a GPU's H2D bandwidth is
    below that of its same-model peers.
    **Why**: the DMA crosses the socket interconnect when the pinned buffer sits on another node
    (12.2 vs 3.8 GB/s H2D on a P100 box); an asymmetric GPU points to a degraded link or slot. The
    latency test compares the REMOTE node's small-copy latency with the local one (a slow copy from
    the local node is not a NUMA penalty) and, where the CPU is known (AMD EPYC, Intel Sapphire
    Rapids), with that platform's limit; for any other or unnamed CPU only the ratio is used.
    **Fix**: bind the rank and its pinned buffers to the GPU's node (`clusterdoctor numa exec`), set
    CUDA_VISIBLE_DEVICES so each rank gets its local GPU, and check the slow GPU's link (`nvidia-smi -q -d PCIE`).
    **Verify**: `clusterdoctor numa probe --json`
    """
    probe = obs.get("probe") or {}
    gpus = probe.get("gpus") or []
    cpu = _probe_cpu(obs, probe)
    platform = cpu.platform() if cpu is not None else None
    limit = REMOTE_LATENCY_LIMITS.get(platform or "")
    cpu_text = cpu.describe() if cpu is not None else "not stated by the probe or a topology"
    best_by_model: dict[str, list[float]] = {}
    for g in gpus:
        local = g.get("local_h2d_gbps")
        if local:
            best_by_model.setdefault(g.get("model", "?"), []).append(local)
    for g in gpus:
        ev: list[Evidence] = []
        notes: list[str] = []
        reasons: set[str] = set()
        ratio = g.get("remote_local_ratio")
        if ratio is not None and ratio < H2D_REMOTE_LOCAL_RATIO.value:
            ev.append(Evidence("remote/local H2D bandwidth", round(ratio, 3), H2D_REMOTE_LOCAL_RATIO.value))
            notes.append(f"H2D from a remote node is {ratio:.2f}x the local bandwidth")
            reasons.add("bandwidth")
        local_lat, remote_lat, remote_node = _per_node_latency(g)
        if local_lat and remote_lat is not None:
            lat_ratio = remote_lat / local_lat
            if lat_ratio > REMOTE_LATENCY_RATIO.value and (limit is None or remote_lat > limit.value):
                ev.append(
                    Evidence(
                        f"small-copy latency, host buffer on remote node {remote_node}",
                        round(remote_lat, 2),
                        limit.value if limit is not None else None,
                        "µs",
                    )
                )
                ev.append(
                    Evidence(
                        "small-copy latency, host buffer on the GPU's node", round(local_lat, 2), unit="µs"
                    )
                )
                ev.append(
                    Evidence(
                        "remote/local small-copy latency", round(lat_ratio, 2), REMOTE_LATENCY_RATIO.value
                    )
                )
                ev.append(
                    Evidence(
                        "CPU (selects the latency limit)",
                        cpu_text
                        if limit is not None
                        else f"{cpu_text}: no latency limit known for it, ratio test only",
                        source=cpu.source if cpu is not None else None,
                    )
                )
                notes.append(
                    f"a small copy from node {remote_node} takes {remote_lat:.2f} µs, {lat_ratio:.2f}x the local "
                    f"{local_lat:.2f} µs"
                )
                reasons.add("latency" if limit is not None else "latency-ratio-only")
        peers = sorted(best_by_model.get(g.get("model", "?"), []))
        if len(peers) >= 2 and g.get("local_h2d_gbps"):
            med = peers[len(peers) // 2]
            if g["local_h2d_gbps"] < H2D_ASYMMETRY.value * med:
                ev.append(
                    Evidence(
                        "H2D vs same-model median", round(g["local_h2d_gbps"] / med, 3), H2D_ASYMMETRY.value
                    )
                )
                notes.append(
                    f"its local H2D is {g['local_h2d_gbps'] / med:.2f}x its same-model peers' median"
                )
                reasons.add("asymmetry")
        if ev:
            yield copy_remote_penalty.finding(
                f"{g.get('name')}: {'; '.join(notes)}.",
                evidence=ev,
                subject=str(g.get("name")),
                # the latency ratio alone, on a CPU without a known limit, is worth knowing, not a warning
                severity=Severity.INFO if reasons == {"latency-ratio-only"} else Severity.WARNING,
            )
