"""PCIe contention: a GPU's link, or a switch / host bridge that several GPUs share, running near full.

Inputs: PCIe throughput per GPU (``pcie_rates``, derived from dcgm-exporter's ``DCGM_FI_PROF_PCIE_TX/RX_BYTES``
in any metrics source: :mod:`clusterdoctor.analyze.pcie_traffic`), the GPUs' links (GPU health:
``nvidia-smi -q``, lspci, DCGM link fields; else the product's own interface from
:data:`PRODUCT_LINKS`), and, for shared paths, the topology (sysfs/hwloc PCI chains or ``nvidia-smi
topo -m`` path classes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterdoctor.analyze.pcie_traffic import GpuRate, gen_gbps, gpu_rates, shared_paths
from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import NotJudged, Observations, register_derived, rule

LINK_BUSY = Threshold(
    "pcie_link_busy",
    0.9,
    "fraction",
    "clusterdoctor default: DCGM's PCIe bytes include protocol headers, so they are compared with the raw "
    "link rate (PCI-SIG: GT/s x lanes x 128b/130b); above 90% of it the link has no headroom left",
    "share of a GPU's own PCIe link (per direction) in use",
)
SHARED_BUSY = Threshold(
    "pcie_shared_path_busy",
    0.8,
    "fraction",
    "clusterdoctor default: GPUs behind one switch share its uplink; above 80% of the raw rate of one "
    "x16 uplink their transfers queue behind each other (NVIDIA's topology guidance: GPUs sharing a PCIe "
    "switch contend for the uplink; `nvidia-smi topo -m` PIX/PXB)",
    "share of a shared switch or host-bridge uplink (per direction) in use",
)

# The PCIe interface of NVIDIA data-centre GPUs (NVIDIA product datasheets): (generation, lanes). Used
# only when no source states the GPU's link; the link's *maximum*, so a degraded link is judged
# against more than it has (GPU013 reports the degradation itself).
PRODUCT_LINKS: dict[str, tuple[int, int]] = {
    "T4": (3, 16),
    "V100": (3, 16),
    "A10": (4, 16),
    "A30": (4, 16),
    "A40": (4, 16),
    "A100": (4, 16),
    "A800": (4, 16),
    "L4": (4, 16),
    "L40": (4, 16),
    "L40S": (4, 16),
    "RTX 4000 ADA": (4, 16),
    "RTX 6000 ADA": (4, 16),
    "RTX A6000": (4, 16),
    "H100": (5, 16),
    "H800": (5, 16),
    "H200": (5, 16),
    "GH200": (5, 16),
}


def _pcie_rates(obs: Observations) -> tuple[Any, str | None]:
    rates = gpu_rates(obs.get("metrics"))
    if rates:
        return rates, None
    return None, (
        "no PCIe throughput per GPU (dcgm-exporter's DCGM_FI_PROF_PCIE_TX_BYTES / _RX_BYTES: the profiling "
        "fields, dcp-metrics-included.csv)"
    )


register_derived("pcie_rates", _pcie_rates, "no PCIe throughput per GPU (dcgm-exporter profiling fields)")


def _product_link(model: str | None) -> tuple[int, int] | None:
    if not model:
        return None
    m = model.upper().replace("NVIDIA", "").replace("TESLA", "").strip()
    for name in sorted(PRODUCT_LINKS, key=len, reverse=True):
        if name in m:
            return PRODUCT_LINKS[name]
    return None


def _capacity(r: GpuRate, obs: Observations, model: str | None) -> tuple[float | None, str]:
    """Raw per-direction GB/s of the GPU's link and where it was learnt."""
    try:
        from clusterdoctor.analyze.gpu_health import gpu_fleet

        g = gpu_fleet(obs).find(r.host or None, r.bus_id, r.index)
    except Exception:  # the fleet is an optional join: without it, fall back to the product table
        g = None
    link = getattr(g, "pcie", None) if g is not None else None
    if link is not None:
        gen = link.gen_current or link.gen_max
        width = link.width_current or link.width_max
        cap = gen_gbps(gen, width)
        if cap:
            return cap, f"Gen{gen} x{width} ({link.source or 'GPU health'})"
    pl = _product_link(model or (g.model if g is not None else None))
    if pl:
        return gen_gbps(*pl), f"Gen{pl[0]} x{pl[1]} (the product's interface, NVIDIA datasheet)"
    return None, "unknown"


def _model_of(obs: Observations, r: GpuRate) -> str | None:
    w = obs.get("metrics")
    for name in ("DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"):
        if w is not None and w.has(name):
            for labels, _, _ in w.latest(name):
                if labels.get("gpu") == (str(r.index) if r.index is not None else None):
                    return labels.get("modelName")
    return None


@rule(
    id="PCIE004",
    name="pcie-contention",
    layer="pcie",
    title="PCIe link or shared switch / host bridge near full (GPUs contend for it)",
    requires=("pcie_rates",),
    thresholds=(LINK_BUSY, SHARED_BUSY),
    causes=("gpu.pcie-contention",),
)
def pcie_contention(obs: Observations) -> Iterator[Finding | NotJudged]:
    """GPUs move so much over PCIe that a link, or a switch they share, is nearly full.

    **Symptom**: host-to-device copies, data loading or GPUDirect RDMA traffic slow down together on
    the GPUs behind one PCIe switch; ``DCGM_FI_PROF_PCIE_TX/RX_BYTES`` near the link's rate.
    **Why**: the GPUs (and NICs) under one switch share its single uplink; when several of them copy at
    once (pinned-memory loads, checkpoint offload, NCCL over PCIe without NVLink, GPUDirect to a NIC on
    another switch) each gets a share of it. The pair of a GPU and the NIC under the same switch keeps
    RDMA traffic off the uplink; traffic that crosses the host bridge does not.
    **Fix**: spread the busiest GPUs' host traffic over time (stagger data loading and checkpoints),
    keep each rank's NIC under its GPU's switch (NCCL_IB_HCA / the rank-to-NIC map), use NVLink for
    peer traffic where there is one, pin host buffers on the GPU's NUMA node; place jobs so that
    PCIe-heavy ranks do not share a switch.
    **Verify**: `nvidia-smi dmon -s t` (rxpci/txpci per GPU) and `nvidia-smi topo -m` (PIX/PXB: one switch)
    """
    rates: list[GpuRate] = obs.get("pcie_rates") or []
    by_index = {(r.host, r.index): r for r in rates}
    judged = 0
    for r in rates:
        cap, where = _capacity(r, obs, _model_of(obs, r))
        if not cap:
            continue
        judged += 1
        busy = max(r.tx or 0.0, r.rx or 0.0) / 1e9 / cap
        if busy < LINK_BUSY.value:
            continue
        direction = "TX" if (r.tx or 0) >= (r.rx or 0) else "RX"
        subject = f"{r.label()} on {r.host}" if r.host else r.label()
        f = pcie_contention.finding(
            f"{subject}: PCIe {direction} at {busy:.0%} of its {where} link ({cap:.1f} GB/s per direction).",
            evidence=_rate_evidence([r]) + [Evidence("link share in use", round(busy, 3), LINK_BUSY.value)],
            severity=Severity.WARNING,
            confidence=0.7,
            subject=subject,
        )
        f.action = Action.CONFIGURE
        yield f
    topo = obs.get("topology")
    hosts = {r.host for r in rates}
    for path in shared_paths(topo):
        if len(hosts) > 1 and getattr(topo, "hostname", None) not in hosts:
            continue  # one machine's topology cannot place another machine's GPUs
        host = next(iter(hosts)) if len(hosts) == 1 else topo.hostname
        members = [by_index.get((host, _index(n))) for n in path.gpus]
        members = [m for m in members if m is not None]
        if len(members) < 2:
            continue
        caps = [c for c, _ in (_capacity(m, obs, _model_of(obs, m)) for m in members) if c]
        if not caps:
            yield NotJudged(f"{path.kind} {path.name}: the members' PCIe link rate is unknown")
            continue
        judged += 1
        cap = max(caps)
        tx = sum(m.tx or 0.0 for m in members) / 1e9
        rx = sum(m.rx or 0.0 for m in members) / 1e9
        busy = max(tx, rx) / cap
        if busy < SHARED_BUSY.value:
            continue
        names = ", ".join(m.label() for m in members)
        subject = f"PCIe {path.kind} {path.name} ({names})"
        f = pcie_contention.finding(
            f"{names} share a PCIe {path.kind} ({path.name}) and together move {max(tx, rx):.1f} GB/s "
            f"({'TX' if tx >= rx else 'RX'}): {busy:.0%} of one {cap:.1f} GB/s uplink (assumed as wide as "
            "the widest member link).",
            evidence=[*_rate_evidence(members), Evidence("uplink share in use", round(busy, 3), SHARED_BUSY.value),
                      Evidence(f"shared {path.kind} (from the topology)", path.name, source=path.source)],
            severity=Severity.WARNING,
            confidence=0.75,
            subject=subject,
        )  # fmt: skip
        f.action = Action.CONFIGURE
        yield f
    if not judged:
        yield NotJudged(
            "PCIe throughput read, but no GPU's link rate is known (give nvidia-smi -q or lspci -vv)"
        )


def _index(name: str) -> int | None:
    digits = "".join(ch for ch in name if ch.isdigit())
    return int(digits) if digits else None


def _rate_evidence(rs: list[GpuRate]) -> list[Evidence]:
    out = []
    for r in rs:
        out.append(Evidence(f"{r.label()} PCIe TX", round((r.tx or 0) / 1e9, 3), unit="GB/s", time=r.time))
        out.append(Evidence(f"{r.label()} PCIe RX", round((r.rx or 0) / 1e9, 3), unit="GB/s", time=r.time))
    return out
