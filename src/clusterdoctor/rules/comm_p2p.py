"""GPU peer-to-peer copies that are slower with peer access enabled than through host memory.

Read from the CUDA samples' ``p2pBandwidthLatencyTest`` (:mod:`clusterdoctor.observe.comm.p2p_test`):
for each pair of GPUs it copies with peer access disabled (staged through host memory) and enabled
(direct over PCIe or NVLink). A direct copy is never slower than one staged through the host on a
working path; when it is, the peer traffic is being redirected (PCIe ACS on a switch or root port sends
it up to the root complex and the IOMMU) or the path is broken, and NCCL's P2P transport, which uses the
same path, hangs or crawls (NVIDIA's NCCL troubleshooting guide, "PCI Access Control Services (ACS)").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("p2p_test", "no p2pBandwidthLatencyTest output nor `nvidia-smi topo -p2p rw`")

P2P_SLOWER = Threshold(
    "p2p_enabled_vs_disabled_ratio",
    0.5,
    "x the host-staged bandwidth",
    "a direct peer copy is at least as fast as one staged through host memory on a working path (NCCL "
    "troubleshooting guide, ACS section; CUDA samples p2pBandwidthLatencyTest); below half of it the peer "
    "path is redirected or broken",
    "unidirectional P2P=Enabled bandwidth of a GPU pair below this share of its P2P=Disabled bandwidth",
)
BROKEN = 0.1  # below a tenth of the staged copy: the peer path is unusable (critical)
MIN_STAGED_GBS = 1.0  # a staged copy slower than this says nothing about the peer path


@rule(
    id="COMM017",
    name="p2p-slower-than-host-staged",
    layer="comm",
    title="GPU peer copies are slower with P2P enabled than through host memory (ACS / IOMMU)",
    requires=("p2p_test",),
    severity=Severity.CRITICAL,
    causes=("nccl.p2p-unsupported",),
    thresholds=(P2P_SLOWER,),
)
def p2p_slower_than_host(obs: Observations) -> Iterator[Finding]:
    """Pairs of GPUs whose direct (P2P=Enabled) copy bandwidth is far below their host-staged bandwidth.

    **Symptom**: NCCL all-reduce between GPUs of one node hangs or crawls unless ``NCCL_P2P_DISABLE=1``;
    ``p2pBandwidthLatencyTest`` shows the P2P=Enabled matrix below the P2P=Disabled one for those pairs.
    **Why**: with PCIe Access Control Services enabled on a switch or root port (or the IOMMU translating
    peer DMA), peer writes are redirected through the root complex, slowly or not at all; the test's
    direct copy then loses to the copy through host memory.
    **Fix**: disable ACS on the PCIe switches / root ports (BIOS, or ``setpci`` on each bridge's ACS
    control), boot with the IOMMU off or in pass-through (``intel_iommu=off`` / ``iommu=pt``), or run with
    ``NCCL_P2P_DISABLE=1`` until then.
    **Verify**: `sudo lspci -vvv | grep ACSCtl` (SrcValid- on every bridge), and `nvidia-smi topo -p2p w`; then run p2pBandwidthLatencyTest again.
    """
    for t in obs.get("p2p_test") or []:
        on, off = t.bandwidth("Enabled"), t.bandwidth("Disabled")
        slow: list[tuple[int, int, float, float]] = []
        for (a, b), staged in sorted(off.items()):
            direct = on.get((a, b))
            if a == b or direct is None or staged < MIN_STAGED_GBS or t.can_access.get((a, b)) is False:
                continue
            if direct < P2P_SLOWER.value * staged:
                slow.append((a, b, direct, staged))
        if not slow:
            continue
        worst = min(d / s for _, _, d, s in slow)
        pairs = sorted({tuple(sorted((a, b))) for a, b, _, _ in slow})
        label = ", ".join(f"{a}-{b}" for a, b in pairs[:8]) + (" …" if len(pairs) > 8 else "")
        f = p2p_slower_than_host.finding(
            f"{len(pairs)} GPU pair(s) copy slower with peer access enabled than through host memory "
            f"(GPU pairs {label}; worst {worst:.0%} of the staged bandwidth): the peer path is redirected "
            "(ACS / IOMMU) or broken.",
            evidence=[
                Evidence(
                    f"GPU {a} -> GPU {b} P2P=Enabled",
                    round(d, 2),
                    round(P2P_SLOWER.value * s, 2),
                    unit="GB/s",
                    source=t.path,
                )
                for a, b, d, s in slow[:6]
            ],
            severity=Severity.CRITICAL if worst < BROKEN else Severity.WARNING,
            subject="GPUs " + ", ".join(sorted({str(x) for p in pairs for x in p}, key=int)),
            confidence=0.8,
        )
        f.action = Action.CONFIGURE
        yield f


@rule(
    id="COMM025",
    name="gpu-pairs-without-peer-access",
    layer="comm",
    title="GPU pairs without peer-to-peer access (NCCL copies between them through host memory)",
    requires=("p2p_test",),
    severity=Severity.INFO,
    causes=("nccl.p2p-unsupported",),
)
def gpu_pairs_without_peer_access(obs: Observations) -> Iterator[Finding]:
    """GPU pairs that the driver or the CUDA sample says cannot access each other's memory.

    **Symptom**: ``nvidia-smi topo -p2p r`` (or ``w``) shows ``CNS``/``GNS``/``TNS``/``NS``/``DR`` instead
    of ``OK`` for a pair; p2pBandwidthLatencyTest prints ``Device=0 CANNOT Access Peer Device=1``.
    **Why**: by design on many systems (consumer GPUs, GPUs under different root complexes, some
    virtual machines), or disabled (a registry key, ACS/IOMMU); NCCL then moves data between those GPUs
    through host shared memory (SHM) instead of P2P, which is slower but correct. It is a fault only
    when something assumes peer access (a custom all-reduce kernel, NCCL_P2P_LEVEL forcing it).
    **Fix**: nothing when expected; for a program that needs peer access disable that feature (e.g.
    vLLM/SGLang custom all-reduce) or set NCCL_P2P_DISABLE=1 where a forced P2P path hangs.
    **Verify**: `nvidia-smi topo -p2p r` and `nvidia-smi topo -m`
    """
    for t in obs.get("p2p_test") or []:
        pairs = sorted({tuple(sorted(ab)) for ab, ok in t.can_access.items() if not ok})
        if not pairs:
            continue
        why = sorted({t.statuses[ab] for ab in t.statuses if t.statuses[ab] != "OK"})
        label = ", ".join(f"{a}-{b}" for a, b in pairs[:8]) + (" …" if len(pairs) > 8 else "")
        said = "; ".join(f"{c} = {t.meaning(c)}" for c in why)
        yield gpu_pairs_without_peer_access.finding(
            f"{len(pairs)} GPU pair(s) without peer access (GPU pairs {label}"
            + (f"; {said}" if said else "")
            + "): NCCL uses host memory between them; expected on consumer GPUs and across root complexes.",
            evidence=[
                Evidence(
                    f"GPU {a} -> GPU {b} peer access",
                    t.statuses.get((a, b), "CANNOT"),
                    "OK",
                    source=t.path,
                )
                for a, b in pairs[:6]
            ],
            severity=Severity.INFO,
            subject="GPUs " + ", ".join(sorted({str(x) for p in pairs for x in p}, key=int)),
            confidence=0.6,
        )


register_input("pcie_acs", "no PCIe ACS setting (`sudo lspci -vvv | grep ACSCtl`, or lspci -vvv)")


def _acs_ports(obs: Observations) -> list:
    ports = list(obs.get("pcie_acs") or [])
    for rep in obs.get("gpu_reports") or []:
        ports.extend(getattr(rep, "attrs", {}).get("acs") or [])
    return ports


def _lines_by_file(ports: list) -> str:
    """``2, 3, 4`` from one file; ``a.txt:2, b.txt:2, 3`` from several (line numbers repeat across files)."""
    by: dict[str, list[str]] = {}
    for p in ports:
        by.setdefault(str(p.source or ""), []).append(str(p.line))
    if len(by) == 1:
        return ", ".join(next(iter(by.values())))
    return ", ".join(f"{Path(src).name}:{', '.join(lines)}" for src, lines in by.items())


@rule(
    id="COMM022",
    name="pcie-acs-redirects-peer-traffic",
    layer="comm",
    title="PCIe ACS sends GPU peer-to-peer and GPUDirect RDMA traffic up to the root complex",
    requires=(),
    requires_any=("pcie_acs", "gpu_reports"),
    severity=Severity.WARNING,
    causes=("nccl.p2p-unsupported", "nccl.gdr-or-plugin"),
)
def pcie_acs_redirect(obs: Observations) -> Iterator[Finding]:
    """Bridges or switch ports whose ACS Control has redirection (or source validation) turned on.

    **Symptom**: NCCL between GPUs of one node hangs or crawls unless ``NCCL_P2P_DISABLE=1``;
    nccl-tests with GPUDirect RDMA crash or are slow; ``sudo lspci -vvv | grep ACSCtl`` shows
    ``SrcValid+`` / ``ReqRedir+`` / ``CmpltRedir+`` lines.
    **Why**: ACS (used for IOMMU isolation, on by default on many PCIe switches and AMD/Intel root ports)
    sends every peer request up to the root complex to be checked; GPU-to-GPU and NIC-to-GPU traffic then
    crosses the CPU, slowly or not at all (NCCL troubleshooting guide, "PCI Access Control Services").
    **Fix**: disable ACS in the BIOS, or at run time on each bridge with
    ``setpci -s <bdf> ECAP_ACS+6.w=0000`` (redone after every reboot), or boot with ``pci=noacs`` where the
    kernel has it; on a VM or with IOMMU isolation needed, keep ACS and set ``NCCL_P2P_DISABLE=1``.
    **Verify**: `sudo lspci -vvv | grep ACSCtl` (SrcValid- ReqRedir- CmpltRedir- on every line), then
    nccl-tests' all_reduce_perf on all GPUs of the node.
    """
    ports = _acs_ports(obs)
    on = [p for p in ports if p.enabled()]
    if not on:
        return
    named = [p.bdf for p in on if p.bdf]
    where = (
        f"bridges {', '.join(named[:6])}{' …' if len(named) > 6 else ''}"
        if len(named) == len(on)
        else f"{len(on)} of the {len(ports)} ACSCtl line(s)"
    )
    flags = list(dict.fromkeys(f for p in on for f in p.enabled()))
    f = pcie_acs_redirect.finding(
        f"ACS is on ({'+ '.join(flags)}+) at {where}: peer-to-peer traffic of GPUs and NICs behind "
        "them is redirected to the root complex, which hangs or slows NCCL's P2P and GPUDirect RDMA paths.",
        evidence=[
            Evidence(
                f"line {p.line}: {p.bdf + ' ' if p.bdf else ''}ACSCtl "
                + " ".join(f"{k}{'+' if v else '-'}" for k, v in p.flags.items()),
                source=p.source,
            )
            for p in on[:6]
        ]
        + ([Evidence(f"{len(on) - 6} more port(s) like these")] if len(on) > 6 else [])
        + (
            [Evidence(f"{len(ports) - len(on)} port(s) with ACS redirection off")]
            if len(ports) > len(on)
            else []
        ),
        # the bridges by address; a bare `grep ACSCtl` names none, so its lines stand for them
        subject=", ".join(named[:4]) if named else "ACSCtl line(s) " + _lines_by_file(on[:6]),
        confidence=0.7,
    )
    f.action = Action.CONFIGURE
    yield f


@rule(
    id="COMM023",
    name="nccl-tests-stalled-at-first-collective",
    layer="comm",
    title="nccl-tests on one node hung at its first collective (GPU peer-to-peer)",
    requires=("nccl_tests",),
    severity=Severity.WARNING,
    causes=("nccl.p2p-unsupported",),
)
def nccl_tests_stalled_one_node(obs: Observations) -> Iterator[Finding]:
    """nccl-tests (or NCCL 1.x's single-process tests) on the GPUs of one host printed its device list and
    column header and nothing after it.

    **Symptom**: ``all_reduce_perf -g 8`` (or ``all_reduce_test``) prints ``# Using devices`` and the
    ``size count type redop`` / ``bytes N type op`` header, then hangs with the GPUs at 100%.
    **Why**: the header is printed just before the first timed collective; on one host that collective
    runs over peer-to-peer (PCIe or NVLink) and shared memory. A hang there, with no NCCL WARN, is the
    classic sign of GPU peer traffic that never arrives: PCIe ACS or the IOMMU redirecting it to the root
    complex, a virtualised or consumer platform without working P2P (NCCL troubleshooting guide, "PCI
    Access Control Services (ACS)"; NVIDIA/nccl#85, #104, #199).
    **Fix**: check ``sudo lspci -vvv | grep ACSCtl`` and disable ACS on the bridges (BIOS or ``setpci``),
    turn the IOMMU off or to pass-through; confirm with ``NCCL_P2P_DISABLE=1``, which should let the test
    finish (slower).
    **Verify**: `NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO all_reduce_perf -b 8 -e 128M -f 2 -g 2` finishes
    (P2P is the broken path), then `sudo lspci -vvv | grep ACSCtl` shows which bridges redirect.
    """
    for run in obs.get("nccl_tests") or []:
        if not getattr(run, "stopped_after_header", False) or run.rows or run.independent_copies > 1:
            continue
        hosts = {r.host for r in run.ranks if r.host}
        devices = sorted({r.device for r in run.ranks})
        if len(hosts) > 1 or len(devices) < 2:
            continue  # across hosts the network is as likely; one GPU has no peer
        gpus = sorted({r.gpu for r in run.ranks if r.gpu})
        where = f" of {next(iter(hosts))}" if hosts else ""
        f = nccl_tests_stalled_one_node.finding(
            f"nccl-tests on {len(devices)} GPUs{where} ({', '.join(gpus[:2])}) printed its header and no "
            "result: the first collective between them never returned, the sign of GPU peer-to-peer traffic "
            "that does not arrive (PCIe ACS / IOMMU redirection, no working P2P on the platform).",
            evidence=[
                Evidence(f"line {run.header_line}: the column header is the last line", source=run.path),
                Evidence(
                    f"{len(run.ranks)} rank(s), GPUs " + ", ".join(str(d) for d in devices), source=run.path
                ),
                Evidence("the paste may also have been cut there: rerun with NCCL_P2P_DISABLE=1 to tell"),
            ],
            subject=f"GPUs {devices[0]}-{devices[-1]}{where}"
            if devices == list(range(devices[0], devices[-1] + 1))
            else "GPUs " + ", ".join(str(d) for d in devices) + where,
            confidence=0.5,
        )
        f.action = Action.CONFIGURE
        yield f


@rule(
    id="COMM024",
    name="nccl-tests-system-error-in-one-process",
    layer="comm",
    title="nccl-tests in one process stopped on an unhandled system error (/dev/shm or no IP interface)",
    requires=("nccl_tests",),
    severity=Severity.WARNING,
    causes=("nccl.shm-no-space", "nccl.socket-iface"),
)
def nccl_tests_system_error_one_process(obs: Observations) -> Iterator[Finding]:
    """nccl-tests with every rank in one process (``-g N``) failed with ``'unhandled system error'`` and
    no NCCL WARN line beside it that says which call failed.

    **Symptom**: ``all_reduce_perf -g 4`` prints its device list (one Pid for every rank) and then
    ``Test NCCL failure common.cu:NNN 'unhandled system error'``; often in a container.
    **Why**: ncclSystemError is a failed call to the system (NCCL troubleshooting guide, "Errors"). With one
    process and no network peer only two kinds remain: the shared-memory segments NCCL creates in /dev/shm
    "between processes and even between threads of a process", which a container limits to 64 MB
    (guide, "Shared memory", Docker; NVIDIA/nccl#473 fixed by ``--ipc=host``; nccl-tests#163: "usually due
    to your container not having enough shared memory space"), and the socket ncclGetUniqueId opens on an
    IP interface, which a container without a routable interface lacks (nccl-tests#14, fixed by
    ``--net=host``).
    **Fix**: run the container with ``--shm-size=1g --ulimit memlock=-1`` or ``--ipc=host`` (Kubernetes: an
    emptyDir of medium Memory at /dev/shm); if that is not it, give it a routable interface (``--net=host``)
    or set NCCL_SOCKET_IFNAME.
    **Verify**: `df -h /dev/shm` shows more than 64M, then `NCCL_DEBUG=WARN all_reduce_perf -b 8 -e 128M -f 2
    -g 4` finishes (or its WARN line names the failed call).
    """
    from clusterdoctor.rules.catalog import by_code

    hits = [m for m in obs.get("messages") or [] if getattr(m, "code", None)]
    codes = by_code()
    for run in obs.get("nccl_tests") or []:
        procs = {(r.host, r.pid) for r in run.ranks}
        if len(procs) != 1 or run.independent_copies > 1:
            continue  # several processes: the network is a suspect too
        mine = [h for h in hits if h.path == run.path]
        failed = [
            h
            for h in mine
            if h.code == "NCCL119" and (h.group("err") or "").startswith("unhandled system error")
        ]
        if not failed or any(h.code in codes and codes[h.code].role == "cause" for h in mine):
            continue  # no such failure, or a WARN line of the same output already names the call
        host = next(iter(procs))[0]
        f = nccl_tests_system_error_one_process.finding(
            f"nccl-tests with its {len(run.ranks)} rank(s) in one process{f' on {host}' if host else ''} "
            "stopped on an unhandled system error: with no network peer, the failed system call is NCCL's "
            "shared memory in /dev/shm (64 MB in a container by default) or the socket of its unique id "
            "(no routable IP interface in the container).",
            evidence=[
                Evidence(f"line {failed[0].line}: {failed[0].text.strip()[:160]}", source=run.path),
                Evidence(
                    f"{len(run.ranks)} rank(s), one process (Pid {next(iter(procs))[1]})", source=run.path
                ),
                Evidence("no NCCL WARN line names the call: rerun with NCCL_DEBUG=WARN to see it"),
            ],
            subject=f"host {host}" if host else run.path,
            confidence=0.5,
        )
        f.action = Action.CONFIGURE
        yield f
