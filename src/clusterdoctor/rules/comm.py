"""Communication rules: NCCL transport and placement, bandwidth vs baselines, exposed time, hangs, ncu.

Inputs (lists, one item per file): ``nccl_log``, ``nccl_tests``, ``kineto``, ``flight_recorder``,
``ncu``; ``comm`` lists the files read; ``topology`` (optional) joins GPU/NIC paths and NUMA nodes;
``comm_link_class`` (optional, from ``clusterdoctor comm analyze --link``) states the link class the
user expects nccl-tests to run over.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("nccl_log", "no NCCL debug log (run with NCCL_DEBUG=INFO and pass the log)")
register_input("nccl_tests", "no nccl-tests output (all_reduce_perf and friends)")
register_input("kineto", "no PyTorch profiler (Kineto) trace")
register_input("flight_recorder", "no PyTorch Flight Recorder dump or torchfrtrace report")
register_input("ncu", "no Nsight Compute CSV (ncu --csv) of NCCL kernels")

# -- baselines: all_reduce busbw at >= 1 GiB (or >= 256 MiB for the network runs), GB/s ----------------
# Each value is read from the named file in ../shared/fixtures/comm (provenance in its SOURCES.md).
BASELINES: dict[str, Threshold] = {
    "nvswitch_h100": Threshold(
        "busbw_nvswitch_h100",
        369.9,
        "GB/s",
        "fixtures/comm/nccl_tests_dgxh100_4gpu_nvswitch.txt (eugenesiow/LLM-Insights): DGX H100, 4 GPUs, "
        "'# Avg bus bandwidth : 369.941'",
        "all_reduce busbw over NVSwitch, H100",
    ),
    "nvswitch_a100": Threshold(
        "busbw_nvswitch_a100",
        222.1,
        "GB/s",
        "fixtures/comm/nccl_tests_dgxa100_4gpu_nvswitch.txt (eugenesiow/LLM-Insights): DGX A100, 4 GPUs, "
        "'# Avg bus bandwidth : 222.066'",
        "all_reduce busbw over NVSwitch, A100",
    ),
    "nvlink": Threshold(
        "busbw_nvlink_pair",
        47.45,
        "GB/s",
        "fixtures/comm/nccl_tests_a40_2gpu_nvlink.txt (eugenesiow/LLM-Insights): 2x A40 over NV4, "
        "'# Avg bus bandwidth : 47.4509'",
        "all_reduce busbw over a direct NVLink pair (A40, NV4)",
    ),
    "pcie": Threshold(
        "busbw_pcie_p2p_off_same_socket",
        3.86,
        "GB/s",
        "fixtures/comm/nccl_tests_a40_2gpu_p2pdisabled_node.txt (eugenesiow/LLM-Insights): 2x A40 on one CPU "
        "root (NODE), NCCL_P2P_DISABLE=1, '# Avg bus bandwidth : 3.85845'",
        "all_reduce busbw through host memory within one socket",
    ),
    "pcie_sys": Threshold(
        "busbw_pcie_across_sockets",
        1.40,
        "GB/s",
        "reference/comm.md section 3 (eugenesiow/LLM-Insights README, SYS path with P2P off); not a fixture file",
        "all_reduce busbw through host memory across sockets",
    ),
    "efa": Threshold(
        "busbw_efa_1gpu_per_node",
        2.83,
        "GB/s",
        "fixtures/comm/nccl_tests_2node_efa.log (aws-samples/aws-do-eks): 2 nodes x 1 T4, EFA, busbw 2.83 at "
        ">= 256 MiB",
        "all_reduce busbw between two single-GPU nodes over EFA",
    ),
    "socket": Threshold(
        "busbw_socket_1gpu_per_node",
        2.0,
        "GB/s",
        "fixtures/comm/nccl_tests_2node_socket_no_efa.log (aws-samples/aws-do-eks): 2 nodes x 1 T4, EFA "
        "disabled, busbw ~2.0 at >= 128 MiB",
        "all_reduce busbw between two single-GPU nodes over TCP sockets",
    ),
}
LINK_CLASSES = ("nvswitch", "nvlink", "pcie", "pcie_sys", "efa", "ib", "socket")
FAR_BELOW = Threshold(
    "busbw_far_below_fraction",
    0.5,
    "ratio",
    "clusterdoctor default: half the published baseline is far outside run-to-run noise (the fixtures' "
    "own rows vary by < 10%, e.g. 47.38-47.49 GB/s on the A40 NVLink run)",
    "measured busbw below this fraction of the link class's baseline is a finding",
)
ROW_OUTLIER = Threshold(
    "nccl_tests_row_outlier",
    0.2,
    "ratio",
    "clusterdoctor default; fixtures/comm/nccl_tests_dgxa100_4gpu_nvswitch.txt shows one in-place row at "
    "164.13 GB/s vs 232.81 GB/s out-of-place (-29%)",
    "relative busbw drop of one bandwidth-bound row against the median of the run",
)
EXPOSED_COMM_MAX = Threshold(
    "exposed_comm_max_pct",
    10.0,
    "% of traced GPU time",
    "arXiv 2507.03114: running communication without overlap is 10.2% slower on average than overlapped "
    "(reference/comm.md section 5)",
    "exposed communication above this share of the traced time",
)
INIT_OUTLIER = Threshold(
    "init_timing_outlier_factor",
    2.0,
    "x median",
    "clusterdoctor default; NVIDIA/nccl#1412 shows 1.08 s for a healthy 16-rank init, #1646 60 s+ on DGX B200 "
    "(reference/comm.md section 4)",
    "a rank's Init timings total above this multiple of the median (and at least 1 s above it)",
)
STRAGGLER_SHARE = Threshold(
    "straggler_last_share",
    0.5,
    "share of collectives",
    "clusterdoctor default after HTA's straggler metric (last to start the big NCCL kernel, hta/analyzers/"
    "straggler.py)",
    "a rank that starts last in at least this share of matched collectives",
)
STRAGGLER_MIN_LATE = Threshold(
    "straggler_min_late_us",
    100.0,
    "µs",
    "clusterdoctor default (well above kernel launch jitter)",
    "mean lateness",
)
NCU_L2_PCT = Threshold(
    "ncu_l2_busy_pct",
    90.0,
    "%",
    "issue 4 / reference/comm.md: L2 above 90% on NCCL kernels points at ring-buffer copy contention",
    "L2 throughput of an NCCL kernel",
)
NCU_L2_MIN_MS = Threshold(
    "ncu_l2_busy_min_ms", 3.0, "ms", "issue 4 (sustained for at least 3 ms)", "time above it"
)
NCU_DRAM_MIN = Threshold(
    "ncu_dram_min_gbs",
    400.0,
    "GB/s",
    "issue 4: DRAM throughput below 400 GB/s with memory-throttle stalls indicates PCIe/NVLink congestion",
    "DRAM throughput of an NCCL kernel",
)
NCU_THROTTLE_SHARE = Threshold(
    "ncu_memory_throttle_share",
    0.2,
    "share of stall samples",
    "clusterdoctor default: memory throttle is a leading stall reason at a fifth of all stalls",
    "memory-throttle stalls among the kernel's stall reasons",
)


def _one_per_instance(items: Any) -> Iterator[Finding]:
    """Findings keyed by the instance they are about, in order; the same instance seen again (the same
    log in a console capture and a ``--tee`` file, a dump taken twice) adds its evidence to the first."""
    merged: dict[Any, Finding] = {}
    for key, f in items:
        first = merged.get(key)
        if first is None:
            merged[key] = f
            continue
        seen = {(e.description, e.source) for e in first.evidence}
        first.evidence.extend(e for e in f.evidence if (e.description, e.source) not in seen)
        first.confidence = max(first.confidence, f.confidence)
    yield from merged.values()


def _hosts_label(hosts: Any) -> str | None:
    hs = sorted(h for h in hosts if h)
    if not hs:
        return None
    return (
        ("host " if len(hs) == 1 else "hosts ")
        + ", ".join(hs[:4])
        + (f" and {len(hs) - 4} more" if len(hs) > 4 else "")
    )


def _logs(obs: Observations) -> list[Any]:
    return list(obs.get("nccl_log") or [])


def comm_analysis(obs: Observations) -> Any:
    """The cross-source analysis of the comm inputs, computed once per Observations."""
    cached = obs.get("_comm_analysis")
    if cached is not None:
        return cached
    from clusterdoctor.analyze.comm import analyze_comm

    a = analyze_comm(obs.get("kineto") or [], _logs(obs), obs.get("flight_recorder") or [])
    obs.put("_comm_analysis", a)
    return a


# -- transport -------------------------------------------------------------------------------------


@rule(
    id="COMM001",
    name="nccl-socket-transport",
    layer="comm",
    title="NCCL uses TCP sockets between nodes",
    requires=("nccl_log",),
    severity=Severity.CRITICAL,
)
def socket_transport(obs: Observations) -> Iterator[Finding]:
    """NCCL selected the Socket network (``Using network Socket`` / ``via NET/Socket``).

    **Symptom**: inter-node all-reduce busbw of a few GB/s and ~100 µs small-message latency; training
    steps dominated by NCCL kernels.
    **Why**: when the IB/EFA plugin finds no device (``NET/IB : No device found``), the plugin is missing,
    or ``NCCL_IB_DISABLE=1``/``NCCL_NET=Socket`` is set, NCCL falls back to TCP through the kernel
    (NVIDIA/nccl#226, #952). The aws-do-eks runs show 2.0 GB/s over sockets vs 2.83 GB/s over EFA on
    the same nodes.
    **Fix**: install and load the fabric plugin (aws-ofi-nccl for EFA, the IB verbs libraries and
    ``/dev/infiniband`` in the container), request the RDMA devices in the pod spec, unset
    ``NCCL_IB_DISABLE``/``NCCL_NET``, and check ``NCCL_IB_HCA``.
    **Verify**: `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 1G -e 1G` (expect
    "Using network IB" or "AWS Libfabric", and "via NET/IB" per channel) and `ibv_devinfo -v`.
    """
    yield from _one_per_instance(_socket_findings(obs))


def _socket_findings(obs: Observations) -> Iterator[tuple[Any, Finding]]:
    for log in _logs(obs):
        socket_procs = log.networks.get("Socket")
        socket_chans = [t for t in log.transports if t.kind == "NET" and (t.net or "").lower() == "socket"]
        if not socket_procs and not socket_chans:
            continue
        nnodes = log.nnodes
        hosts = {p.host for p in (socket_procs or set()) if p is not None} | {
            t.proc.host for t in socket_chans if t.proc is not None
        }
        subject = _hosts_label(hosts) or log.path
        ev = [
            Evidence(
                "NCCL network", "Socket", "IB, EFA (AWS Libfabric) or another RDMA plugin", source=log.path
            )
        ]
        if socket_chans:
            ev.append(
                Evidence(
                    f"channels via NET/Socket (e.g. {socket_chans[0].via})",
                    len(socket_chans),
                    source=log.path,
                )
            )
        if log.no_device:
            ev.append(Evidence("plugin found no device", log.no_device[0], source=log.path))
        if log.env.get("NCCL_IB_DISABLE") == "1" or log.env.get("NCCL_NET", "").lower() == "socket":
            ev.append(
                Evidence(
                    "set by environment",
                    {k: v for k, v in log.env.items() if k in ("NCCL_IB_DISABLE", "NCCL_NET")},
                )
            )
        multi = (nnodes is not None and nnodes > 1) or bool(socket_chans)
        if nnodes is not None:
            ev.append(Evidence("nodes in the job", nnodes, source=log.path))
        key = (frozenset(hosts) or log.path, multi)
        if multi:
            yield (
                key,
                socket_transport.finding(
                    f"NCCL moves inter-node traffic over TCP sockets ({subject}); expect a fraction of the "
                    "fabric's bandwidth and higher latency.",
                    evidence=ev,
                    confidence=0.9,
                    subject=subject,
                ),
            )
        else:
            yield (
                key,
                socket_transport.finding(
                    f"NCCL selected the Socket network ({subject}); the log does not show how many nodes the "
                    "job spans — on a multi-node job all inter-node traffic goes over TCP.",
                    evidence=ev,
                    severity=Severity.WARNING,
                    confidence=0.6,
                    subject=subject,
                ),
            )


def _gpu_for(topo: Any, log: Any, proc: Any, dev_hint: int | None = None) -> Any:
    """The topology GPU a log process uses: by PCI bus id of its comm, else by CUDA device index."""
    for (_cid, p), c in log.comms.items():
        if p != proc:
            continue
        if c.bus_id:
            pci = nccl_busid_to_pci(c.bus_id)
            for g in topo.gpus:
                if g.pci and pci and g.pci.lower().endswith(pci[-7:]):
                    return g
        if c.cuda_dev is not None:
            g = topo.gpu_by_index(c.cuda_dev)
            if g is not None:
                return g
    if dev_hint is not None:
        return topo.gpu_by_index(dev_hint)
    return None


def nccl_busid_to_pci(bus_id: str) -> str | None:
    """NCCL's packed bus id (``f5000``, ``1b000``) as a PCI address (``0000:f5:00.0``)."""
    b = bus_id.strip().lower()
    if not b or any(c not in "0123456789abcdef" for c in b):
        return None
    s = b.zfill(9)
    return f"{s[:-5][-4:].zfill(4)}:{s[-5:-3]}:{s[-3:-1]}.{s[-1]}"


def _host_matches(topo: Any, log: Any, proc: Any) -> bool:
    if proc is None:
        return len(log.hosts) <= 1
    if topo.hostname:
        return proc.host.split(".")[0] == topo.hostname.split(".")[0]
    return len(log.hosts) <= 1


@rule(
    id="COMM002",
    name="nccl-gdr-unused",
    layer="comm",
    title="GPUDirect RDMA not used although the GPU-to-NIC path allows it",
    requires=("nccl_log", "topology"),
    severity=Severity.WARNING,
)
def gdr_unused(obs: Observations) -> Iterator[Finding]:
    """Network channels run without ``/GDRDMA`` while the GPU shares a PCIe switch (PIX/PXB) with its NIC.

    **Symptom**: inter-node busbw well below the NIC line rate; host memory bandwidth and CPU use rise
    during all-reduce; channel lines read ``via NET/IB/0`` with no ``/GDRDMA``.
    **Why**: NCCL uses GPUDirect RDMA when the path is PXB or closer (``ncclTopoCheckGdr``), unless the
    ``nvidia-peermem``/``nv_peer_mem`` module is not loaded, ``NCCL_NET_GDR_LEVEL`` forbids it, or the
    container lacks the device. Then every message is staged through host memory.
    **Fix**: load ``nvidia-peermem`` (or use DMA-BUF with a recent driver and NCCL), check
    ``NCCL_NET_GDR_LEVEL``/``NCCL_NET_GDR_READ``, and expose the RDMA devices to the container.
    **Verify**: `lsmod | grep -E 'nvidia_peermem|nv_peer_mem'` and
    `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 1G -e 1G` (channels end in "/GDRDMA").
    """
    from clusterdoctor.topology.model import path_rank

    topo = obs.get("topology")
    for log in _logs(obs):
        no_gdr = [t for t in log.net_transports() if not t.gdr and (t.net or "").lower() != "socket"]
        seen: set[Any] = set()
        for t in no_gdr:
            if t.proc in seen or not _host_matches(topo, log, t.proc):
                continue
            seen.add(t.proc)
            gpu = _gpu_for(topo, log, t.proc)
            if gpu is None:
                continue
            rdma = [n for n in topo.nics if n.is_rdma]
            best = topo.best_nic_for(gpu, rdma) if rdma else None
            if best is None:
                continue
            nic, kind = best
            if kind is None or path_rank(kind) > path_rank("PXB"):
                continue
            yield gdr_unused.finding(
                f"{gpu.name} reaches {nic.name} through {kind}, so GPUDirect RDMA is possible, but NCCL's "
                f"network channels ({t.via}) do not use it.",
                evidence=[
                    Evidence("channel transport", t.via, "…/GDRDMA", source=f"{log.path}:{t.line}"),
                    Evidence(f"path {gpu.name} -> {nic.name}", kind, "PXB or closer", source=topo.source),
                ],
                subject=gpu.name,
                confidence=0.8,
            )


@rule(
    id="COMM003",
    name="nccl-affinity-off-node",
    layer="comm",
    title="NCCL thread affinity empty or off the GPU's NUMA node",
    requires=("nccl_log",),
    severity=Severity.WARNING,
)
def affinity(obs: Observations) -> Iterator[Finding]:
    """NCCL's ``Setting affinity for GPU g to <mask>`` is empty or lies on another NUMA node than the GPU.

    **Symptom**: lower and noisier busbw, proxy threads competing with data-loader workers, remote
    memory traffic during collectives.
    **Why**: NCCL binds its proxy/network threads to the CPUs near the GPU intersected with the process
    affinity. A process pinned to the wrong socket (by a launcher, a cgroup cpuset or
    ``CUDA_VISIBLE_DEVICES`` remapping) leaves the mask empty or remote, so NIC and GPU traffic crosses
    the socket interconnect.
    **Fix**: bind each rank to its GPU's NUMA node (``clusterdoctor numa plan`` / ``torchrun --numa-binding``,
    ``numactl --cpunodebind``), or set ``NCCL_IGNORE_CPU_AFFINITY=1`` only after fixing the launcher.
    **Verify**: `nvidia-smi topo -m` (CPU Affinity column) and
    `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT all_reduce_perf -b 1G -e 1G` (look for "Setting affinity for GPU").
    """
    yield from _one_per_instance(_affinity_findings(obs))


def _affinity_findings(obs: Observations) -> Iterator[tuple[Any, Finding]]:
    topo = obs.get("topology")
    for log in _logs(obs):
        for a in log.affinities:
            host = a.proc.host if a.proc else None
            if not a.cpus:
                yield (
                    (host, a.gpu, a.mask),
                    affinity.finding(
                        f"NCCL set an empty CPU affinity for GPU {a.gpu} ({host or 'unknown host'}).",
                        evidence=[
                            Evidence(
                                "affinity mask",
                                a.mask or "(empty)",
                                "CPUs of the GPU's NUMA node",
                                source=f"{log.path}:{a.line}",
                            )
                        ],
                        subject=f"GPU {a.gpu} on {host}" if host else f"GPU {a.gpu} ({log.path})",
                    ),
                )
                continue
            if topo is None or not _host_matches(topo, log, a.proc):
                continue
            gpu = _gpu_for(topo, log, a.proc, a.gpu)
            if gpu is None or gpu.numa_node is None:
                continue
            node = topo.node(gpu.numa_node)
            if node is None or not node.cpus:
                continue
            inside = set(a.cpus) & set(node.cpus)
            if inside:
                continue
            nodes = sorted(topo.nodes_of_cpus(a.cpus))
            yield (
                (host, gpu.name, a.mask),
                affinity.finding(
                    f"NCCL threads for {gpu.name} run on NUMA node(s) {nodes}, but the GPU sits on node {gpu.numa_node}.",
                    evidence=[
                        Evidence("NCCL affinity mask", a.mask, source=f"{log.path}:{a.line}"),
                        Evidence("nodes of those CPUs", nodes, gpu.numa_node),
                        Evidence(f"{gpu.name} NUMA node", gpu.numa_node, source=topo.source),
                    ],
                    subject=f"{gpu.name} on {host}" if host else gpu.name,
                    confidence=0.85,
                ),
            )


# -- bandwidth -------------------------------------------------------------------------------------


MATCH_FACTOR = Threshold(
    "link_class_match_factor",
    2.0,
    "x",
    "clusterdoctor default: the intra-node reference classes of fixtures/comm are at least 2.8x apart "
    "(NVSwitch A100 222 / NVLink 47.5 = 4.7; NVLink 47.5 / host memory 3.86 = 12; 3.86 / 1.40 = 2.8), so "
    "within a factor of 2 a measurement matches one of them; EFA 2.83 and sockets 2.0 are closer and are "
    "reported as ambiguous when the measurement cannot tell them apart",
    "a busbw matches a link class when it is within this factor of the class's reference",
)


class LinkAssessment(NamedTuple):
    """What an nccl-tests run's busbw says about its link: where it ran, which class it matches, which
    class it should have used and why."""

    path: str
    busbw: float | None
    scope: str  # "intra-node", "inter-node" or "unknown"
    scope_why: str
    match: Any  # analyze.busbw.LinkMatch
    expected: str | None
    expected_why: str
    baseline: Threshold | None  # the expected class's reference, when there is one

    def as_dict(self) -> dict[str, Any]:
        from clusterdoctor.analyze.busbw import CLASS_NAMES, DEGRADED

        m = self.match
        return {
            "scope": self.scope,
            "scope_why": self.scope_why,
            "matches": m.cls,
            "matches_name": CLASS_NAMES.get(m.cls or "", None),
            "ambiguous_with": m.ambiguous_with,
            "degraded": m.cls in DEGRADED,
            "expected": self.expected,
            "expected_why": self.expected_why,
            "expected_baseline_gbs": float(self.baseline.value) if self.baseline is not None else None,
        }


def _class_ranges(scope: str) -> dict[str, tuple[float, float]]:
    from clusterdoctor.analyze.busbw import INTER_NODE, INTRA_NODE

    refs = {
        "nvswitch": (float(BASELINES["nvswitch_a100"].value), float(BASELINES["nvswitch_h100"].value)),
        "nvlink": (float(BASELINES["nvlink"].value),) * 2,
        "pcie": (float(BASELINES["pcie"].value),) * 2,
        "pcie_sys": (float(BASELINES["pcie_sys"].value),) * 2,
        "efa": (float(BASELINES["efa"].value),) * 2,
        "socket": (float(BASELINES["socket"].value),) * 2,
    }
    classes = {"inter-node": INTER_NODE, "intra-node": INTRA_NODE}.get(scope, INTRA_NODE + INTER_NODE)
    return {c: refs[c] for c in classes if c in refs}


def _baseline(link: str, models: Any) -> Threshold | None:
    if link == "nvswitch":
        text = " ".join(models).upper()
        h100 = any(x in text for x in ("H100", "H200", "H800", "B100", "B200", "B300", "GB200", "GB300"))
        return BASELINES["nvswitch_h100"] if h100 else BASELINES["nvswitch_a100"]
    return BASELINES.get(link)


def nccl_tests_link(obs: Observations, run: Any) -> LinkAssessment:
    """Where an nccl-tests run ran (one node or several), the link class its busbw matches and the one
    it was expected to use: stated with ``--link``, named by the NCCL log in the same file, or inferred
    from the GPU model on a single node."""
    from clusterdoctor.analyze.busbw import expected_link_for_gpu, match_link_class

    cache = obs.get("_nccl_tests_link")
    if cache is None:
        cache = {}
        obs.put("_nccl_tests_link", cache)
    if id(run) in cache:
        return cache[id(run)]
    peak = run.peak_busbw()
    log = next((lg for lg in _logs(obs) if lg.path == run.path), None)
    nets: set[str] = set()
    if log is not None:
        nets = {(t.net or "").lower() for t in log.net_transports()} | {n.lower() for n in log.networks}
    if len(run.hosts) > 1:
        scope, scope_why = "inter-node", f"the rank lines name {len(run.hosts)} hosts"
    elif log is not None and (log.net_transports() or (log.nnodes or 0) > 1):
        scope, scope_why = "inter-node", "the NCCL log shows network transports"
    elif len(run.hosts) == 1:
        scope, scope_why = "intra-node", f"the rank lines name one host ({next(iter(run.hosts))})"
    elif nets:
        scope, scope_why = "unknown", "the output names no host; NCCL initialised a network, so any class"
    else:
        scope, scope_why = "intra-node", "the output names no host and no network: one node assumed"
    expected, why = None, "unknown (pass --link to compare)"
    stated = obs.get("comm_link_class")
    if isinstance(stated, str) and stated:
        expected, why = stated, "stated with --link"
    elif scope != "intra-node" and nets:
        if any("libfabric" in n or "ofi" in n for n in nets):
            expected, why = "efa", "NCCL log: AWS Libfabric network"
        elif nets == {"socket"}:
            expected, why = "socket", "NCCL log: Socket network"
        elif "ib" in nets or any(n.startswith("ib") for n in nets):
            expected, why = "ib", "NCCL log: IB network"
    elif scope == "intra-node" and len(run.gpu_models) == 1:
        guess = expected_link_for_gpu(next(iter(run.gpu_models)))
        if guess is not None:
            expected, why = guess
    match = match_link_class(peak or 0.0, _class_ranges(scope), float(MATCH_FACTOR.value))
    base = None
    if expected is not None and not (expected == "pcie" and why != "stated with --link"):
        base = _baseline(expected, run.gpu_models)  # a PCIe card's P2P path has no reference here
    a = LinkAssessment(run.path, peak, scope, scope_why, match, expected, why, base)
    cache[id(run)] = a
    return a


def _run_subject(run: Any) -> str:
    if run.hosts:
        hosts = sorted(run.hosts)
        return (
            ("host " if len(hosts) == 1 else "hosts ")
            + ", ".join(hosts[:4])
            + (" …" if len(hosts) > 4 else "")
        )
    return run.path


@rule(
    id="COMM004",
    name="busbw-below-link-baseline",
    layer="comm",
    title="nccl-tests bus bandwidth below its link class, or on a degraded path",
    requires=("nccl_tests",),
    thresholds=(FAR_BELOW, MATCH_FACTOR, *BASELINES.values()),
    severity=Severity.CRITICAL,
)
def busbw_below_baseline(obs: Observations) -> Iterator[Finding]:
    """Measured all-reduce busbw (bandwidth-bound sizes) is below half the baseline of the expected link,
    or, with no expectation, matches a degraded class (host memory instead of P2P, TCP sockets).

    **Symptom**: all_reduce_perf plateaus at a few GB/s on GPUs that should talk over NVLink/NVSwitch, or
    well below the fabric's rate between nodes.
    **Why**: NCCL took a slower path: ``NCCL_P2P_DISABLE=1`` or a P2P-less PCIe topology sends traffic
    through host memory (DGX A100 5.2 GB/s instead of 222 GB/s; A40 3.9 instead of 47.4), GPUs on
    different sockets, or a socket fallback between nodes. The expected class comes from ``--link``, the
    NCCL log's network, or the GPU model the output names (SXM/HBM parts: NVSwitch; PCIe cards: PCIe).
    **Fix**: remove ``NCCL_P2P_DISABLE``/``NCCL_SHM_DISABLE`` overrides, check that NVLink/NVSwitch and the
    fabric manager are up (``nvidia-smi nvlink -s``, ``nvidia-smi -q | grep -i fabric``), keep a job's GPUs
    on one NVSwitch domain, enable PCIe P2P (ACS off, IOMMU passthrough) on PCIe cards, and fix the
    network plugin for inter-node runs.
    **Verify**: `all_reduce_perf -b 1G -e 8G -f 2 -g <ngpus>` and compare the busbw column with the
    baseline named in the evidence; `nvidia-smi topo -m` shows the path between the GPUs.
    """
    yield from _one_per_instance(_busbw_findings(obs))


def _busbw_findings(obs: Observations) -> Iterator[tuple[Any, Finding]]:
    from clusterdoctor.analyze.busbw import CLASS_NAMES, DEGRADED

    for run in obs.get("nccl_tests") or []:
        if run.collective not in (None, "all_reduce"):
            continue
        a = nccl_tests_link(obs, run)
        key = (_run_subject(run) if run.hosts else None, round(a.busbw or 0.0, 2), a.match.cls, a.expected)
        peak = a.busbw
        if peak is None:
            continue
        m = a.match
        matched = (
            f"it matches the '{m.cls}' class ({CLASS_NAMES[m.cls]}"
            + (f", or '{m.ambiguous_with}'" if m.ambiguous_with else "")
            + ")"
            if m.cls
            else "it matches no reference class within a factor of 2"
        )
        ev = [
            Evidence(
                "median busbw of bandwidth-bound rows",
                round(peak, 2),
                float(a.baseline.value) if a.baseline is not None else None,
                "GB/s",
                run.path,
            ),
            Evidence("matched link class", m.cls or "none", source=f"{a.scope}: {a.scope_why}"),
            Evidence("expected link class", a.expected or "unknown", source=a.expected_why),
        ]
        if run.gpu_models:
            ev.append(Evidence("GPU model", ", ".join(sorted(run.gpu_models)), source=run.path))
        ev.append(
            Evidence("printed Avg bus bandwidth (all sizes)", run.avg_busbw_gbs, unit="GB/s", source=run.path)
        )
        if a.baseline is not None:
            ratio = peak / float(a.baseline.value)
            if ratio >= float(FAR_BELOW.value):
                continue
            ev.append(Evidence("baseline source", a.baseline.source))
            yield (
                key,
                busbw_below_baseline.finding(
                    f"all_reduce busbw {peak:.2f} GB/s is {ratio * 100:.1f}% of the {a.expected} baseline "
                    f"({float(a.baseline.value):.1f} GB/s, {a.expected_why}); {matched} — traffic is not using "
                    "the expected link.",
                    evidence=ev,
                    severity=Severity.CRITICAL if ratio < 0.2 else Severity.WARNING,
                    confidence=0.9 if a.expected_why.startswith("stated") else 0.75,
                    subject=_run_subject(run),
                ),
            )
        elif m.cls in DEGRADED and a.expected != m.cls:
            ref = BASELINES[m.cls]
            ev.append(Evidence(f"'{m.cls}' reference", float(ref.value), unit="GB/s", source=ref.source))
            yield (
                key,
                busbw_below_baseline.finding(
                    f"all_reduce busbw {peak:.2f} GB/s: {matched}, a degraded path — {DEGRADED[m.cls]}"
                    + (f"; the expected class is {a.expected} ({a.expected_why})" if a.expected else "")
                    + ". Pass --link to compare with the link these GPUs should use.",
                    evidence=ev,
                    severity=Severity.WARNING,
                    confidence=0.5 if m.ambiguous_with else 0.65,
                    subject=_run_subject(run),
                ),
            )


@rule(
    id="COMM005",
    name="nccl-tests-unstable-row",
    layer="comm",
    title="nccl-tests result with an outlier row or wrong results",
    requires=("nccl_tests",),
    thresholds=(ROW_OUTLIER,),
    severity=Severity.WARNING,
)
def nccl_tests_outlier(obs: Observations) -> Iterator[Finding]:
    """A bandwidth-bound row drops far below the run's median, or ``#wrong`` is non-zero.

    **Symptom**: one size (often in-place) much slower than its neighbours; or data validation errors.
    **Why**: a transient slowdown (another job on the GPUs, thermal/power capping, an NVLink or NIC
    retraining) during that row, or — for #wrong — corrupted data from a faulty link or GPU.
    **Fix**: rerun with more iterations (``-n 100``) on an idle node; check ``nvidia-smi -q -d
    PERFORMANCE,ECC`` and link error counters; drain the node if #wrong persists.
    **Verify**: `all_reduce_perf -b 1G -e 8G -f 2 -n 100 -c 1` twice; the row should match its neighbours.
    """
    for run in obs.get("nccl_tests") or []:
        rows = run.large_rows()
        vals = sorted(v for r in rows for v in (r.out_of_place.busbw_gbs, r.in_place.busbw_gbs) if v)
        if len(vals) >= 3:
            med = vals[len(vals) // 2]
            for r in rows:
                for label, m in (("out-of-place", r.out_of_place), ("in-place", r.in_place)):
                    if m.busbw_gbs and m.busbw_gbs < (1 - float(ROW_OUTLIER.value)) * med:
                        yield nccl_tests_outlier.finding(
                            f"{label} row at {r.size_bytes} B ran at {m.busbw_gbs} GB/s, "
                            f"{(1 - m.busbw_gbs / med) * 100:.0f}% below the run's median {med:.2f} GB/s.",
                            evidence=[
                                Evidence(
                                    f"{label} busbw, size {r.size_bytes}",
                                    m.busbw_gbs,
                                    med,
                                    "GB/s",
                                    f"{run.path}:{r.line}",
                                )
                            ],
                            subject=f"{run.path}:{r.line}",
                            confidence=0.7,
                        )
        wrong = [(r, m) for r in run.rows for m in (r.out_of_place, r.in_place) if m.wrong]
        if wrong:
            r, m = wrong[0]
            yield nccl_tests_outlier.finding(
                f"nccl-tests reported {len(wrong)} result(s) with wrong data (first at {r.size_bytes} B).",
                evidence=[Evidence("#wrong", m.wrong, 0, source=f"{run.path}:{r.line}")],
                severity=Severity.CRITICAL,
                confidence=0.95,
                subject=run.path,
            )


# -- traces ----------------------------------------------------------------------------------------


@rule(
    id="COMM006",
    name="exposed-communication",
    layer="comm",
    title="Communication not hidden behind compute",
    requires=("kineto",),
    thresholds=(EXPOSED_COMM_MAX,),
    severity=Severity.WARNING,
)
def exposed_comm(obs: Observations) -> Iterator[Finding]:
    """A rank spends more than 10% of its traced time in communication that no compute overlaps.

    **Symptom**: step time grows with the number of GPUs; the trace shows NCCL kernels alone on the
    GPU between compute phases; low comm/compute overlap.
    **Why**: gradient buckets are reduced after backward finishes (no overlap), buckets are too big or
    too small, a synchronisation (``.item()``, ``cuda.synchronize``) waits for the collective, or the
    collective itself is slow (low busbw, socket transport, a straggler peer).
    **Fix**: overlap: DDP ``bucket_cap_mb`` tuning and ``gradient_as_bucket_view``, FSDP prefetch
    (``forward_prefetch``/``backward_prefetch``), avoid host syncs in the step; then make the collective
    faster (see the bandwidth and transport findings).
    **Verify**: capture a new trace with torch.profiler (schedule wait=1, warmup=1, active=3) and run
    `clusterdoctor comm analyze TRACE_DIR`; exposed communication should drop.
    """
    a = comm_analysis(obs)
    cause = _straggler(obs)
    for rb in a.ranks:
        if rb.span_us <= 0 or rb.comm_us <= 0:
            continue
        pct = rb.exposed_comm_pct
        if pct <= float(EXPOSED_COMM_MAX.value):
            continue
        sev = Severity.CRITICAL if pct > 3 * float(EXPOSED_COMM_MAX.value) else Severity.WARNING
        who = _trace_subject(rb.rank, rb.source, rb.compared)
        partial = ""
        if rb.truncated:
            sev = min(sev, Severity.WARNING)
            partial = f" From a partial input: the trace is truncated ({rb.events_read} events read)."
        f = exposed_comm.finding(
            f"{who}: {pct:.1f}% of the traced {rb.device.upper()} time is communication that no compute "
            f"hides ({rb.exposed_comm_us / 1000:.1f} ms of {rb.span_us / 1000:.1f} ms; overlap "
            f"{rb.comm_comp_overlap_pct:.1f}% of communication).{partial}",
            evidence=[
                Evidence(
                    "exposed communication", round(pct, 2), float(EXPOSED_COMM_MAX.value), "%", rb.source
                ),
                Evidence("communication time (union)", round(rb.comm_us, 1), unit="µs", source=rb.source),
                Evidence(
                    "comm/compute overlap", round(rb.comm_comp_overlap_pct, 2), unit="%", source=rb.source
                ),
                Evidence("idle", round(rb.pct(rb.idle_us), 2), unit="%", source=rb.source),
                *(
                    [Evidence("partial input: events read before the cut", rb.events_read, source=rb.source)]
                    if rb.truncated
                    else []
                ),
            ],
            severity=sev,
            subject=who,
            confidence=0.6 if rb.truncated else 0.85,
        )
        yield _symptom_of(cause, f)


def _straggler(obs: Observations) -> Any:
    """The fail-slow straggler (or slow collective) of the same traces, when the detector found one."""
    from clusterdoctor.rules.failslow_input import straggler_explains

    return straggler_explains(obs)


def _symptom_of(cause: Any, f: Finding) -> Finding:
    """A finding that the fail-slow cause explains (the others waited for the straggler) is its symptom:
    folded into that finding's evidence (registry.fold_symptoms), not a cause of its own."""
    if cause is not None:
        f.role = "symptom"
    return f


def _trace_subject(rank: int | None, path: str, compared: bool = True) -> str:
    """A trace's subject: its rank; the file too when the rank is unknown or claimed twice."""
    if rank is None:
        return path
    return f"rank {rank}" if compared else f"rank {rank} ({path})"


@rule(
    id="COMM007",
    name="straggler-rank",
    layer="comm",
    title="One rank arrives last at most collectives",
    requires=("kineto",),
    thresholds=(STRAGGLER_SHARE, STRAGGLER_MIN_LATE),
    severity=Severity.WARNING,
)
def straggler(obs: Observations) -> Iterator[Finding]:
    """Across ranks' traces, one rank starts most matched collectives last, so the others wait for it.

    **Symptom**: NCCL kernels on the other ranks take much longer than the same collective's shortest
    duration (the true communication time); step time follows the slowest rank.
    **Why**: more work or slower compute on that rank (data skew, a throttled or shared GPU, a CPU-bound
    data loader, a noisy neighbour), not the network: the collective cannot start until the last rank
    arrives.
    **Fix**: look at that rank's GPU (clocks, temperature, other processes), its data loader and NUMA
    placement; balance the data; replace the node if the GPU is throttled.
    **Verify**: `nvidia-smi -q -d PERFORMANCE,CLOCK` on its node, then re-trace and run
    `clusterdoctor comm analyze TRACE_DIR`.
    """
    a = comm_analysis(obs)
    cause = _straggler(obs)
    for s in a.stragglers[:1]:
        if s.matched < 3 or s.late_count / s.matched < float(STRAGGLER_SHARE.value):
            continue
        if s.mean_late_us < float(STRAGGLER_MIN_LATE.value):
            continue
        f = straggler.finding(
            f"rank {s.rank} started last in {s.late_count} of {s.matched} matched collectives, "
            f"{s.mean_late_us / 1000:.2f} ms after the first rank on average."
            + (" From a partial input: a trace of this job is truncated." if s.partial else ""),
            evidence=[
                Evidence("last to start", s.late_count, f">= {STRAGGLER_SHARE.value} of {s.matched}"),
                Evidence("mean lateness", round(s.mean_late_us, 1), float(STRAGGLER_MIN_LATE.value), "µs"),
                Evidence(
                    "caveat", "traces from different hosts need synchronised clocks for this comparison"
                ),
                *([Evidence("job", s.job)] if s.job else []),
            ],
            subject=f"rank {s.rank}",
            confidence=0.5 if s.partial else 0.7,
        )
        yield _symptom_of(cause, f)


# -- control plane and hangs -----------------------------------------------------------------------


@rule(
    id="COMM008",
    name="nccl-init-outlier",
    layer="comm",
    title="One rank's NCCL init is much slower than the others'",
    requires=("nccl_log",),
    thresholds=(INIT_OUTLIER,),
    severity=Severity.WARNING,
)
def init_outlier(obs: Observations) -> Iterator[Finding]:
    """A rank's ``Init timings`` total is more than twice the median of all ranks (and ≥ 1 s above it).

    **Symptom**: jobs take long to start or time out in ``ncclCommInitRank``; one rank's init dominates.
    **Why**: the slow phase names the cause: ``bootstrap`` (TCPStore/network reachability, DNS, a slow
    host), ``topo`` (topology detection, sysfs/NVML slow), ``connections`` (transport setup, IB
    devices), ``alloc`` (memory registration).
    **Fix**: check that rank's host (network interface ``NCCL_SOCKET_IFNAME``, DNS, NVML health); for
    bootstrap at scale reduce TCPStore load; for topo, set ``NCCL_TOPO_FILE``.
    **Verify**: `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT all_reduce_perf -b 8 -e 8` on the slow rank's node and
    compare the "Init timings" lines across ranks.
    """
    a = comm_analysis(obs)
    yield from _one_per_instance(((o.rank, o.total_s), _init_finding(o)) for o in a.init_outliers)


def _init_finding(o: Any) -> Finding:
    slowest = max(o.parts.items(), key=lambda kv: kv[1])[0] if o.parts else None
    return init_outlier.finding(
        f"rank {o.rank}: NCCL init took {o.total_s:.2f} s vs a median of {o.median_s:.2f} s"
        + (f"; the slowest phase is {slowest} ({o.parts[slowest]:.2f} s)." if slowest else "."),
        evidence=[
            Evidence(
                "Init timings total",
                o.total_s,
                round(float(INIT_OUTLIER.value) * o.median_s, 3),
                "s",
                f"{o.source}:{o.line}",
            )
        ],
        subject=f"rank {o.rank}",
    )


def _hang_subject(h: Any) -> str:
    """What a hang finding is about: the culprit ranks, else the reporting ranks, else the file."""
    from clusterdoctor.analyze.comm.hangs import ranks_label

    if h.culprit_ranks:
        return ranks_label(h.culprit_ranks)
    if h.reporters:
        return ranks_label(h.reporters)
    return h.source


def _sorted_locations(locs: Any) -> list[str]:
    def key(loc: str) -> tuple[str, int]:
        path, _, line = loc.rpartition(":")
        return (path, int(line)) if line.isdigit() else (loc, 0)

    return sorted(dict.fromkeys(locs), key=key)


def _line_ranges(locs: list[str], most: int = 6) -> str:
    """``a.log:1, a.log:2, a.log:3, b.log:7`` → ``a.log:1-3, b.log:7`` (at most ``most`` files named)."""
    by_file: dict[str, list[int]] = {}
    plain: list[str] = []
    for loc in locs:
        path, _, line = loc.rpartition(":")
        if path and line.isdigit():
            by_file.setdefault(path, []).append(int(line))
        else:
            plain.append(loc)
    parts = []
    for path, lines in by_file.items():
        runs: list[list[int]] = []
        for n in sorted(set(lines)):
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        parts.append(f"{path}:" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs))
    parts += plain
    return ", ".join(parts[:most]) + (f" and {len(parts) - most} more files" if len(parts) > most else "")


def _hang_evidence(h: Any) -> list[Evidence]:
    """The collective and the lines it rests on (one entry: how many lines, the first locations),
    then its numbers, culprits last."""
    where = _sorted_locations(h.locations) or [f"{h.source}:{h.line}" if h.line else h.source]
    ev = [
        Evidence("collective", h.op),
        Evidence("log lines it rests on", len(where), source=_line_ranges(where)),
    ]
    ev.append(Evidence("group / sequence", f"{h.group or '?'} / {h.seq if h.seq is not None else '?'}"))
    if h.numel_in is not None:
        ev.append(Evidence("NumelIn / NumelOut", f"{h.numel_in} / {h.numel_out}"))
    if h.timeout_ms is not None:
        ev.append(Evidence("timeout", h.timeout_ms, unit="ms"))
    if h.ran_ms is not None:
        ev.append(Evidence("ran for", h.ran_ms, unit="ms"))
    if h.last_completed is not None:
        ev.append(Evidence("last enqueued / last completed work", f"{h.last_enqueued} / {h.last_completed}"))
    if h.group_size is not None:
        ev.append(Evidence("ranks in the group", h.group_size))
    if h.reporters:
        ev.append(Evidence("ranks reporting it", list(h.reporters)))
    if h.missing:
        ev.append(Evidence("ranks of the group not reporting it", list(h.missing)))
    if h.culprit_ranks:
        ev.append(Evidence("culprit ranks", list(h.culprit_ranks)))
    return ev


_GLOO_VERIFY = [
    "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: gloo then checks each collective with a monitored barrier "
    "and names the rank that did not arrive (`Ranks 1 failed to pass monitoredBarrier`)",
    "`py-spy dump --pid PID` on the suspected rank while the job hangs",
]


@rule(
    id="COMM009",
    name="collective-hang-or-mismatch",
    layer="comm",
    title="Collective hang or mismatch, with the culprit rank",
    requires=("comm",),
    severity=Severity.CRITICAL,
)
def hang(obs: Observations) -> Iterator[Finding]:
    """A collective that not every rank joined, ranks behind on a communicator, or ranks calling different collectives.

    **Symptom**: the job stops making progress, then ``Watchdog caught collective operation timeout``
    after ``Timeout(ms)`` (default 10–30 min) on every rank, or gloo's ``Timed out waiting …ms for recv
    operation``; or wrong results/crashes after a mismatch.
    **Why**: a collective completes only when all ranks of its group call it with the same type, size
    and dtype. A rank that crashed, took another code path (an extra ``all_reduce`` on rank 0 only),
    or is stuck in data loading never arrives; the others wait until the watchdog fires. The ranks
    that report the timeout are the victims; the culprit is the rank missing from the collective
    (torchrun's "Root Cause (first observed failure)" names the first victim, not the culprit).
    **Fix**: look at the culprit rank's log and stack (Flight Recorder ``frames``, ``py-spy dump``) for
    the divergent code path or error; make collectives unconditional across ranks.
    **Verify**: rerun with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=true, and after
    the next hang run `torchfrtrace --prefix nccl_trace_rank_ /tmp/`.
    """
    a = comm_analysis(obs)
    first = {h.group for h in a.hangs if h.first_collective or h.kind == "rendezvous"}
    explained = {h.group for h in a.hangs if h.kind != "pending"}
    for h in a.hangs:
        if h.first_collective or h.kind == "rendezvous":
            continue  # COMM012: the job never communicated
        if h.kind == "pending" and (h.group in explained or h.group in first):
            continue  # the unfinished work is the stuck collective another finding already names
        sev = Severity.CRITICAL if h.kind in ("not_joined", "lagging", "timeout") else Severity.WARNING
        if h.kind == "mismatch" and h.culprit_ranks:
            sev = Severity.CRITICAL
        subject = _hang_subject(h)
        label = {
            "not_joined": "never joined",
            "lagging": "is behind",
            "mismatch": "called a different collective" if h.culprit_ranks else "disagree on the collective",
            "timeout": "timed out" if not h.culprit_ranks else "never arrived",
            "pending": "left work unfinished",
            "peer_lost": "lost a peer",
        }.get(h.kind, h.kind)
        gloo = (h.op or "").startswith("gloo")
        partial = ""
        if h.partial:
            sev = min(sev, Severity.WARNING)
            partial = ". From a partial input: a trace of this job is truncated."
        yield hang.finding(
            (h.detail if h.detail.startswith(subject) else f"{subject} {label}: {h.detail}") + partial,
            evidence=_hang_evidence(h),
            severity=sev,
            confidence=0.9 if h.culprit_ranks else 0.6,
            subject=subject,
            verify=_GLOO_VERIFY if gloo and not h.culprit_ranks else None,
        )


@rule(
    id="COMM012",
    name="first-collective-never-completed",
    layer="comm",
    title="The job never communicated: the first collective (or the rendezvous) never completed",
    requires=("comm",),
    severity=Severity.CRITICAL,
)
def first_collective(obs: Observations) -> Iterator[Finding]:
    """The watchdog fired on a process group's first collective (``last completed work: -1`` or
    SeqNum 1), or the process group never formed (TCPStore/rendezvous timeout).

    **Symptom**: the job hangs right after start-up (model loaded, DDP/FSDP being wrapped, the first
    barrier) and dies after the full collective timeout (10–30 min) with
    ``WorkNCCL(SeqNum=1, …)`` and ``last completed work: -1``, or with ``wait timeout after …ms, keys: …``
    / ``clients joined`` while creating the process group.
    **Why**: no collective ever completed, so this is not a slow step: either a rank never arrived (not
    started, crashed, stuck before its first collective, cannot reach the store), or every rank arrived
    and the transport never moved data — rendezvous, topology or network: NCCL picked a broken path
    (P2P/CUMEM across PCIe roots, an IB port or fabric that drops RDMA, the wrong socket interface), or
    the store address (MASTER_ADDR/MASTER_PORT) is unreachable from some hosts.
    **Fix**: if ranks are missing, look at their hosts and logs first. If every rank reported the timeout,
    debug the transport: rerun with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,P2P`` and check that every
    rank printed ``Init COMPLETE`` and which ``via …`` paths it chose; test the path with nccl-tests on the
    same hosts; try ``NCCL_P2P_DISABLE=1`` (intra-node) or ``NCCL_IB_DISABLE=1`` (inter-node) to confirm
    which layer is broken, then fix it (ACS/IOMMU for P2P, the IB port, ``NCCL_SOCKET_IFNAME``). Enable the
    Flight Recorder (``TORCH_NCCL_TRACE_BUFFER_SIZE=2000``, ``TORCH_NCCL_DUMP_ON_TIMEOUT=1``) so the next
    hang names the ranks, and lower the timeout while debugging.
    **Verify**: `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,P2P TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 torchrun ...`
    then `torchfrtrace --prefix nccl_trace_rank_ /tmp/`, and `all_reduce_perf -b 8 -e 128M -f 2 -g 1` across
    the same hosts (every rank must reach "Init COMPLETE").
    """
    a = comm_analysis(obs)
    for h in a.hangs:
        if not (h.first_collective or h.kind == "rendezvous"):
            continue
        subject = _hang_subject(h)
        if h.kind == "rendezvous":
            what = "the process group never formed"
        elif h.last_completed is not None and h.last_completed < 0:
            what = "the very first collective never completed (last completed work: -1)"
        else:
            what = "the first collective of the group (SeqNum 1) never completed"
        if h.culprit_ranks:
            cause = f"{ranks_label_of(h.culprit_ranks)} never arrived"
        elif h.missing:
            cause = f"{ranks_label_of(h.missing)} did not report it: check that they started and reached it"
        elif h.group_size and len(h.reporters) == h.group_size:
            cause = "every rank arrived, so the transport did not move data: rendezvous, topology or network"
        else:
            cause = "rendezvous, topology, network or a rank that never arrived — not a slow step"
        yield first_collective.finding(
            f"{subject}: {what}; {cause}. {h.detail}.",
            evidence=_hang_evidence(h),
            confidence=0.9 if (h.culprit_ranks or h.last_completed is not None) else 0.75,
            subject=subject,
        )


def ranks_label_of(ranks: Any) -> str:
    from clusterdoctor.analyze.comm.hangs import ranks_label

    return ranks_label(ranks)


# -- ncu -------------------------------------------------------------------------------------------


@rule(
    id="COMM010",
    name="ncu-nccl-l2-contention",
    layer="comm",
    title="NCCL kernels saturate L2 (ring-buffer copy contention)",
    requires=("ncu",),
    thresholds=(NCU_L2_PCT, NCU_L2_MIN_MS),
    severity=Severity.WARNING,
)
def ncu_l2(obs: Observations) -> Iterator[Finding]:
    """NCCL kernels run with L2 throughput above 90% of peak for 3 ms or more.

    **Symptom**: NCCL kernels slower when overlapped with compute; compute kernels slow down too.
    **Why**: NCCL's channels copy through L2-resident FIFO buffers; with many channels or concurrent
    memory-heavy compute the copies contend in L2 (arXiv 2507.03114 measures 18.9% average compute
    slowdown under overlap).
    **Fix**: lower ``NCCL_NCHANNELS_PER_NET_PEER``/``NCCL_MAX_NCHANNELS`` or ``NCCL_BUFFSIZE``, schedule
    communication against less memory-bound compute, or use NVLS/SHARP offload where available.
    **Verify**: `ncu --csv --kernel-name regex:nccl --section MemoryWorkloadAnalysis ...` after the change.
    """
    for rep in obs.get("ncu") or []:
        hot = [k for k in rep.nccl_kernels() if (k.l2_pct or 0) > float(NCU_L2_PCT.value) and k.duration_ms]
        total = sum(k.duration_ms for k in hot)  # type: ignore[misc]
        if hot and total >= float(NCU_L2_MIN_MS.value):
            k = max(hot, key=lambda k: k.l2_pct or 0)
            yield ncu_l2.finding(
                f"{len(hot)} NCCL kernel launch(es) ran {total:.2f} ms with L2 above {NCU_L2_PCT.value}% "
                f"(peak {k.l2_pct:.1f}% in {k.name[:80]}).",
                evidence=[
                    Evidence("L2 throughput", k.l2_pct, float(NCU_L2_PCT.value), "%", rep.path),
                    Evidence("time above it", round(total, 3), float(NCU_L2_MIN_MS.value), "ms", rep.path),
                ],
                subject=rep.path,
                confidence=0.7,
            )


@rule(
    id="COMM011",
    name="ncu-nccl-dram-throttle",
    layer="comm",
    title="NCCL kernels starved: low DRAM throughput with memory-throttle stalls",
    requires=("ncu",),
    thresholds=(NCU_DRAM_MIN, NCU_THROTTLE_SHARE),
    severity=Severity.WARNING,
)
def ncu_dram(obs: Observations) -> Iterator[Finding]:
    """NCCL kernels move less than 400 GB/s of DRAM traffic while warps stall on memory throttle.

    **Symptom**: NCCL kernels long but not bandwidth-bound on HBM; busbw below baseline.
    **Why**: the kernel waits on the interconnect (PCIe or NVLink congestion, a degraded link), so its
    memory requests back up (memory-throttle stalls) while HBM is mostly idle.
    **Fix**: check link health and width (``nvidia-smi nvlink -s``, ``lspci -vv`` LnkSta), other traffic
    on the same PCIe switch (NIC, NVMe), and NCCL's chosen path (``NCCL_DEBUG_SUBSYS=GRAPH``).
    **Verify**: `nvidia-smi nvlink -e` (error counters) and rerun `all_reduce_perf -b 1G -e 8G -f 2`.
    """
    for rep in obs.get("ncu") or []:
        for k in rep.nccl_kernels():
            gbs = k.dram_gbs
            share = k.stall_share("memory_throttle")
            if gbs is None or share is None:
                continue
            if gbs < float(NCU_DRAM_MIN.value) and share >= float(NCU_THROTTLE_SHARE.value):
                yield ncu_dram.finding(
                    f"{k.name[:80]} (launch {k.id}): DRAM {gbs:.0f} GB/s with {share * 100:.0f}% of stalls on "
                    "memory throttle.",
                    evidence=[
                        Evidence(
                            "DRAM throughput", round(gbs, 1), float(NCU_DRAM_MIN.value), "GB/s", rep.path
                        ),
                        Evidence(
                            "memory-throttle stall share",
                            round(share, 3),
                            float(NCU_THROTTLE_SHARE.value),
                            source=rep.path,
                        ),
                    ],
                    subject=f"{rep.path} launch {k.id}",
                    confidence=0.6,
                )


def comm_rules() -> list[Any]:
    """The rules of this module, in id order (without importing the rest of the catalog)."""
    from clusterdoctor.rules.registry import Rule

    return sorted((v for v in globals().values() if isinstance(v, Rule)), key=lambda r: r.id)


def run_comm_rules(obs: Observations) -> tuple[list[Finding], list[Any]]:
    """Run only the communication rules: (findings ranked by score, skipped rules with reasons)."""
    from clusterdoctor.rules.registry import run_rules

    findings, skipped, _ran = run_rules(obs, comm_rules())
    return findings, skipped
