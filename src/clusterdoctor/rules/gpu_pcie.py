"""GPU rules on the PCIe link and the driver: degraded link, replays, lane errors, no driver loaded.

Split from rules/gpu.py (which lists the per-GPU rules); references: reference/gpu-health.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Evidence, Finding, Severity
from clusterdoctor.rules.gpu_alerts import GPU014_ALERTS
from clusterdoctor.rules.gpu_common import (
    BUSY_UTIL,
    PCIE_REPLAY_RATE_MAX,
    _cost,
    _extra_ident,
    _fleet,
    _rate_per_min,
    _sel,
)
from clusterdoctor.rules.registry import Observations, rule

LAYER = "gpu"

# -- PCIe ----------------------------------------------------------------------------------------------


@rule(
    id="GPU013",
    name="gpu-pcie-link-degraded",
    layer=LAYER,
    title="GPU PCIe link below its capability",
    requires=("gpu_health", "gpu_pcie"),
    thresholds=(BUSY_UTIL,),
    severity=Severity.WARNING,
    causes=("gpu.pcie-degraded",),
)
def pcie_degraded(obs: Observations) -> Iterator[Finding]:
    """The link runs narrower than its capability, or slower while the GPU is busy.

    **Symptom**: host-to-device copies, data loading and GPUDirect RDMA through this GPU are slow; NCCL
    over PCIe/NET is slow for its rank.
    **Why**: an idle GPU drops its link to 2.5 GT/s to save power — not a fault. A busy GPU at a lower
    speed, or a link narrower than both ends support, means a bad slot, riser or retimer, a link that
    retrained down after errors, or a platform that only offers that much.
    **Fix**: reseat the GPU/riser, check the slot's bifurcation and generation settings in the BIOS,
    update the retimer/BIOS firmware; move the card to a full-width slot.
    **Verify**: `nvidia-smi -q -d PCIE` under load (Current vs Max generation and width) and
    `lspci -vv -s <bus id>` (LnkSta vs LnkCap).
    """
    for g in _fleet(obs).gpus:
        p = g.pcie
        if p is None:
            continue
        narrow = p.width_below_capability()
        slow = p.speed_below_capability()
        busy = g.busy(float(BUSY_UTIL.value))
        problems = []
        if narrow:
            problems.append(f"width x{p.width_current} of x{p.width_max}")
        if slow and busy:
            problems.append(f"speed {p.current_gts():g} of {p.max_gts():g} GT/s while {g.util_pct:.0f}% busy")
        if not problems:
            continue
        if slow and busy is None:
            problems.append(
                f"speed {p.current_gts():g} of {p.max_gts():g} GT/s (load unknown: may be idle power saving)"
            )
        cur_bw = (p.current_gts() or 0) * (p.width_current or 0)
        max_bw = (p.max_gts() or 0) * (p.width_max or 0)
        share = cur_bw / max_bw if max_bw else None
        yield pcie_degraded.finding(
            f"{g.label()}: PCIe link "
            + "; ".join(problems)
            + ". "
            + _cost(
                g,
                f"its host link carries {share:.0%} of the bandwidth it should"
                if share
                else "its host link is slower than it should be",
            ),
            evidence=[
                *_extra_ident(g),
                Evidence("link now", f"{p.current_gts()} GT/s x{p.width_current}", source=p.source),
                Evidence("link capability", f"{p.max_gts()} GT/s x{p.width_max}", source=p.source),
                Evidence("utilisation", g.util_pct, BUSY_UTIL.value, "%", g.source_of("util_pct")),
                *([Evidence("driver in use", g.driver_in_use)] if g.driver_in_use else []),
            ],
            severity=Severity.CRITICAL if share is not None and share <= 0.25 else Severity.WARNING,
            subject=g.label(),
            confidence=0.85 if narrow or busy else 0.6,
            verify=[f"nvidia-smi -q {_sel(g)} -d PCIE", f"lspci -vv -s {g.bus_id or '<bus id>'}"],
        )


@rule(
    id="GPU014",
    name="gpu-pcie-replays",
    layer=LAYER,
    title="PCIe replays on a GPU link",
    requires=("gpu_health", "gpu_pcie"),
    thresholds=(PCIE_REPLAY_RATE_MAX,),
    severity=Severity.WARNING,
    alerts=GPU014_ALERTS,
    causes=("gpu.pcie-degraded",),
)
def pcie_replays(obs: Observations) -> Iterator[Finding]:
    """PCIe replay counter rising faster than DCGM's limit (two reads), or non-zero since reset (one read).

    **Symptom**: uneven host-to-device bandwidth; DCGM health "PCIe replay" warnings; AER correctable errors.
    **Why**: the link retransmits packets that arrived corrupted (signal integrity: slot, riser, retimer,
    cable). A few replays since boot are common; a rate above 8 per minute is a bad link.
    **Fix**: read again under load; if the rate is high, reseat the GPU/riser, update retimer firmware,
    move the card; RMA if it follows the card.
    **Verify**: `nvidia-smi -q -d PCIE` twice, a minute apart (Replays Since Reset), and `dcgmi health -c`.
    """
    for g in _fleet(obs).gpus:
        r = _rate_per_min(g, "pcie_replays")
        if r is not None:
            rate, inc, secs = r
            if rate <= float(PCIE_REPLAY_RATE_MAX.value):
                continue
            yield pcie_replays.finding(
                f"{g.label()}: {inc:.0f} PCIe replays in {secs:.0f} s ({rate:.1f}/min). "
                + _cost(g, "its host link retransmits"),
                evidence=[
                    *_extra_ident(g),
                    Evidence("PCIe replay rate", round(rate, 2), PCIE_REPLAY_RATE_MAX.value, "1/min"),
                ],
                severity=Severity.CRITICAL
                if rate > 10 * float(PCIE_REPLAY_RATE_MAX.value)
                else Severity.WARNING,
                subject=g.label(),
                confidence=0.85,
            )
            continue
        n = g.pcie.replays if g.pcie is not None else None
        if n:
            yield pcie_replays.finding(
                f"{g.label()}: {n} PCIe replays since the last reset (one read: read again under load to see whether they still rise).",
                evidence=[
                    *_extra_ident(g),
                    Evidence("Replays Since Reset", n, source=g.pcie.source if g.pcie else None),
                ],
                severity=Severity.INFO,
                subject=g.label(),
                confidence=0.5,
            )


@rule(
    id="GPU015",
    name="gpu-pcie-lane-errors",
    layer=LAYER,
    title="PCIe lane errors latched on a GPU link",
    requires=("gpu_health", "gpu_pcie"),
    severity=Severity.WARNING,
    causes=("gpu.pcie-degraded",),
)
def lane_errors(obs: Observations) -> Iterator[Finding]:
    """``LaneErrStat: LaneErr at lane: …`` on a GPU (lspci), i.e. lanes with latched receiver errors.

    **Symptom**: PCIe replays, AER correctable errors, a link that trains below its width after resets.
    **Why**: the lanes named saw errors at the physical layer (equalisation, a marginal slot or retimer).
    All 16 lanes at once often follows a link retrain; a few lanes point at a connector.
    **Fix**: clear the status (``setpci -s <bdf> ECAP_SECPCI+8.l=0xffff``) and read again after load; if
    lanes latch again, reseat the card/riser and update retimer firmware.
    **Verify**: `lspci -vv -s <bus id> | grep -E 'LaneErr|DevSta|LnkSta'` after a load run.
    """
    for g in _fleet(obs).gpus:
        lanes = g.pcie.lane_errors if g.pcie is not None else None
        if not lanes:
            continue
        yield lane_errors.finding(
            f"{g.label()}: lane errors latched on {len(lanes)} lane(s) ({' '.join(map(str, lanes))})"
            + ("; a correctable error is latched too (DevSta CorrErr+)" if g.pcie and g.pcie.corr_err else "")
            + ". "
            + _cost(g, "its link may be retransmitting"),
            evidence=[
                *_extra_ident(g),
                Evidence("lanes with errors", len(lanes), 0, source=g.pcie.source if g.pcie else None),
            ],
            subject=g.label(),
            confidence=0.7,
            verify=[f"lspci -vv -s {g.bus_id or '<bus id>'}", f"nvidia-smi -q {_sel(g)} -d PCIE"],
        )


@rule(
    id="GPU016",
    name="gpu-no-driver",
    layer=LAYER,
    title="NVIDIA GPU without the nvidia driver bound",
    requires=("gpu_health", "gpu_pcie"),
    severity=Severity.WARNING,
    causes=("gpu.driver-not-loaded",),
)
def no_driver(obs: Observations) -> Iterator[Finding]:
    """lspci shows an NVIDIA GPU with no kernel driver in use, or with ``nouveau``.

    **Symptom**: the GPU is missing from ``nvidia-smi``; CUDA sees fewer devices than the node has.
    **Why**: the nvidia module is not loaded, failed to probe the device, or nouveau claimed it first.
    (``vfio-pci`` is the intended driver on a passthrough host and is not reported.)
    **Fix**: blacklist nouveau, (re)install and load the nvidia driver, then read dmesg for probe errors.
    **Verify**: `lspci -k -d 10de:` (Kernel driver in use: nvidia) and `nvidia-smi -L`.
    """
    for g in _fleet(obs).gpus:
        d = g.driver_in_use
        if d is None or d in ("nvidia", "vfio-pci", "pci-stub"):
            continue
        what = "no kernel driver bound" if d == "" else f"bound to {d}, not nvidia"
        yield no_driver.finding(
            f"{g.label()}: {what} — CUDA cannot use it. " + _cost(g, "the node offers one GPU fewer"),
            evidence=[
                *_extra_ident(g),
                Evidence("kernel driver in use", d or "none", "nvidia", source=g.source_of("driver_in_use")),
            ],
            subject=g.label(),
            confidence=0.85,
        )
