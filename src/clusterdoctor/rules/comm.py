"""Communication rules: NCCL transport and placement, exposed time and stragglers in traces, init, ncu. The
nccl-tests bandwidth rules are in :mod:`clusterdoctor.rules.comm_bandwidth`, the hang rules in
:mod:`clusterdoctor.rules.comm_hangs`, the helpers they share in :mod:`clusterdoctor.rules.comm_common`;
:func:`comm_rules` lists them all.

Inputs (lists, one item per file): ``nccl_log``, ``nccl_tests``, ``kineto``, ``flight_recorder``,
``ncu``; ``comm`` lists the files read; ``topology`` (optional) joins GPU/NIC paths and NUMA nodes;
``comm_link_class`` (optional, from ``clusterdoctor comm analyze --link``) states the link class the
user expects nccl-tests to run over.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules import comm_subject  # noqa: F401  (registers the nccl subject resolver)

# the bandwidth and hang rules live in their own modules; they are imported here too, so that comm_rules()
# (this module's globals) is every communication rule
from clusterdoctor.rules.comm_bandwidth import (  # noqa: F401  (re-exported: comm_rules() and callers)
    BASELINES,
    FAR_BELOW,
    LINK_CLASSES,
    MATCH_FACTOR,
    ROW_OUTLIER,
    LinkAssessment,
    busbw_below_baseline,
    nccl_tests_link,
    nccl_tests_outlier,
    nccl_tests_without_mpi,
)
from clusterdoctor.rules.comm_common import _hosts_label, _logs, _one_per_instance, comm_analysis
from clusterdoctor.rules.comm_hangs import first_collective, hang, tracebacks_in_different_collectives  # noqa: F401
from clusterdoctor.rules.comm_ifaces import (  # noqa: F401  (comm_rules())
    bootstrap_failed_over_ipoib,
    forced_ifname_fails_on_some_hosts,
    socket_ifname_matches_nothing,
)
from clusterdoctor.rules.comm_local_peers import local_peers_on_one_gpu  # noqa: F401  (comm_rules())
from clusterdoctor.rules.comm_p2p import p2p_slower_than_host  # noqa: F401  (comm_rules())
from clusterdoctor.rules.comm_versions import (  # noqa: F401  (comm_rules())
    nccl_version_differs,
    torch_cuda_newer_than_driver,
)
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("nccl_log", "no NCCL debug log (run with NCCL_DEBUG=INFO and pass the log)")
register_input("nccl_tests", "no nccl-tests output (all_reduce_perf and friends)")
register_input("kineto", "no PyTorch profiler (Kineto) trace")
register_input("flight_recorder", "no PyTorch Flight Recorder dump or torchfrtrace report")
register_input("ncu", "no Nsight Compute CSV (ncu --csv) of NCCL kernels")

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


# -- transport -------------------------------------------------------------------------------------


@rule(
    id="COMM001",
    name="nccl-socket-transport",
    layer="comm",
    title="NCCL uses TCP sockets between nodes",
    requires=("nccl_log",),
    severity=Severity.CRITICAL,
    causes=("nccl.gdr-or-plugin", "rdma.container-access"),
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
                    log.lines_of(socket_chans),
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
        configured = log.env.get("NCCL_IB_DISABLE") == "1" or log.env.get("NCCL_NET", "").lower() == "socket"
        if not configured and log.ib_transport_skipped:
            # the log covers the network init and NCCL never tried its IB transport: NCCL_IB_DISABLE=1
            # or NCCL_NET=Socket was set, though this NCCL did not print it
            configured = True
            ev.append(
                Evidence(
                    "IB transport tried",
                    "no (Bootstrap and NET/Socket lines with no NET/IB line between)",
                    source=log.path,
                )
            )
        if configured and not log.no_device:
            # the user chose sockets (NCCL_IB_DISABLE=1 / NCCL_NET=Socket) and nothing says RDMA was expected:
            # a setting to know about, not a fault
            yield (
                key,
                socket_transport.finding(
                    f"NCCL uses TCP sockets ({subject}) because the environment disables the RDMA transport; "
                    "if the nodes have IB/RoCE or EFA, unset NCCL_IB_DISABLE / NCCL_NET to use it.",
                    evidence=ev,
                    severity=Severity.INFO,
                    confidence=0.5,
                    subject=subject,
                ),
            )
            continue
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


# Interfaces that do not route between hosts: loopback, container bridges and their veth ends, link-local
# addresses. NCCL's default excludes "docker" and "lo" (NCCL env docs, NCCL_SOCKET_IFNAME); it uses them only
# when NCCL_SOCKET_IFNAME says so or nothing else is up.
_LOCAL_IF = re.compile(
    r"^(?:lo|docker\d*|virbr\d*|veth\w*|cni\d*|br-[0-9a-f]{4,}|cbr\d*|kube-bridge|flannel\.\d+)$"
)
_LOCAL_ADDR = re.compile(r"^(?:127\.|169\.254\.|fe80:|::1$)", re.I)
_SOCKET_IF = re.compile(r"\[\d{1,3}\](?P<if>[\w.\-]{1,64}):(?P<addr>[^<\s]{1,128})<")


@rule(
    id="COMM015",
    name="nccl-socket-on-local-interface",
    layer="comm",
    title="NCCL sends inter-node traffic over a loopback, container-bridge or link-local interface",
    requires=("nccl_log",),
    severity=Severity.CRITICAL,
    causes=("nccl.socket-iface",),
)
def socket_local_interface(obs: Observations) -> Iterator[Finding]:
    """``NET/Socket : Using`` lists an interface that does not route between hosts, in a multi-node job.

    **Symptom**: init hangs or fails with ``Connection refused`` / ``Network is unreachable`` / ``connect
    timed out`` between nodes; one node's address in the log is a docker0 (172.17.x) or link-local one.
    **Why**: NCCL opens its bootstrap and socket connections on the interfaces it selected. Loopback,
    docker/CNI bridges and veth pairs carry no traffic to another host; NCCL's default excludes ``docker``
    and ``lo`` (NCCL environment docs), so seeing them means ``NCCL_SOCKET_IFNAME`` selects them or nothing
    else was found, and a veth/link-local address leaks in when the selection is a broad prefix.
    **Fix**: set ``NCCL_SOCKET_IFNAME`` (and ``GLOO_SOCKET_IFNAME``) to the interface that routes between
    the nodes (``ip route get <peer IP>`` names it), e.g. ``NCCL_SOCKET_IFNAME=eth0`` or ``=^docker,lo,veth``.
    **Verify**: `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf -b 8 -e 8` on two nodes: the
    ``NET/Socket : Using`` line names only routable interfaces.
    """
    for log in _logs(obs):
        bad: dict[str, str] = {}
        for line in log.socket_ifs:
            for m in _SOCKET_IF.finditer(line):
                name, addr = m.group("if"), m.group("addr")
                if _LOCAL_IF.match(name) or _LOCAL_ADDR.match(addr):
                    bad.setdefault(name, addr)
        if not bad:
            continue
        sockets = [t for t in log.net_transports() if (t.net or "").lower() == "socket"]
        multi = (log.nnodes or 0) > 1 or len(log.hosts) > 1 or bool(sockets)
        if not multi:
            continue  # one node: loopback is all it needs
        names = ", ".join(f"{k} ({v})" for k, v in sorted(bad.items()))
        f = socket_local_interface.finding(
            f"NCCL's socket interfaces include {names}, which do not route to another host, in a job whose "
            "traffic crosses nodes.",
            evidence=[
                Evidence(
                    "NET/Socket : Using",
                    log.socket_ifs[0][:200],
                    "interfaces that route between the nodes",
                    log.path,
                ),
                Evidence("inter-node socket channels", log.lines_of(sockets), source=log.path),
            ],
            subject=_hosts_label(log.hosts) or log.path,
            confidence=0.9,
        )
        f.action = Action.CONFIGURE
        yield f


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
    causes=("nccl.gdr-or-plugin",),
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
    causes=("nccl.rank-behind",),
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
