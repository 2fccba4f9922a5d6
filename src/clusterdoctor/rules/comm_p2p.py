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

from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, register_input, rule

register_input("p2p_test", "no p2pBandwidthLatencyTest output")

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
