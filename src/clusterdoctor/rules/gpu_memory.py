"""GPU rules on memory errors: uncorrectable ECC, row remapping, retired pages, rising correctable errors.

Split from rules/gpu.py (which lists the per-GPU rules); references: reference/gpu-health.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Evidence, Finding, Severity
from clusterdoctor.rules.gpu_alerts import (
    GPU004_ALERTS,
    GPU005_ALERTS,
    GPU006_ALERTS,
    GPU007_ALERTS,
    GPU008_ALERTS,
)
from clusterdoctor.rules.gpu_common import (
    RETIRED_PAGES_MAX,
    RETIRED_PAGES_SOFT,
    SBE_RATE_MAX,
    _cost,
    _extra_ident,
    _fleet,
    _rate_per_min,
)
from clusterdoctor.rules.registry import Observations, rule

LAYER = "gpu"

# -- memory ------------------------------------------------------------------------------------------


@rule(
    id="GPU004",
    name="gpu-ecc-uncorrectable",
    layer=LAYER,
    title="Uncorrectable ECC errors on a GPU",
    requires=("gpu_health", "gpu_ecc"),
    severity=Severity.CRITICAL,
    alerts=GPU004_ALERTS,
    causes=("gpu.ecc-uncorrectable",),
)
def ecc_uncorrectable(obs: Observations) -> Iterator[Finding]:
    """Volatile (since the last reset) or aggregate (lifetime) uncorrectable ECC errors are non-zero.

    **Symptom**: jobs on one GPU crash with CUDA "uncorrectable ECC error encountered"; Xid 48/94/95.
    **Why**: a memory cell returned data the ECC could not correct; on A100+ the row is remapped at the
    next reset, on older GPUs the page is retired. Volatile counts mean it happened since the last reset.
    **Fix**: drain the GPU and reset it (applies remaps/retirements); if errors return after the reset, or
    the remap failed, RMA the board.
    **Verify**: `nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT` and `dcgmi diag -r 3`.
    """
    for g in _fleet(obs).gpus:
        vol, agg = g.ecc_volatile_uncorrectable, g.ecc_aggregate_uncorrectable
        if not vol and not agg:
            continue
        sev = Severity.CRITICAL if vol else Severity.WARNING
        yield ecc_uncorrectable.finding(
            f"{g.label()}: {vol or 0} uncorrectable ECC error(s) since the last reset, {agg if agg is not None else 'unknown'} over its life. "
            + _cost(
                g, "programs on it can be killed at any time" if vol else "it has a history of memory faults"
            ),
            evidence=[
                *_extra_ident(g),
                Evidence(
                    "volatile uncorrectable ECC", vol, 0, source=g.source_of("ecc_volatile_uncorrectable")
                ),
                Evidence(
                    "aggregate uncorrectable ECC", agg, 0, source=g.source_of("ecc_aggregate_uncorrectable")
                ),
            ],
            severity=sev,
            subject=g.label(),
            confidence=0.9,
        )


@rule(
    id="GPU005",
    name="gpu-row-remap-pending",
    layer=LAYER,
    title="Row remapping pending: the GPU needs a reset",
    requires=("gpu_health", "gpu_remap"),
    severity=Severity.WARNING,
    alerts=GPU005_ALERTS,
    causes=("gpu.row-remap",),
)
def remap_pending(obs: Observations) -> Iterator[Finding]:
    """``Remapped Rows: Pending: Yes`` (or DCGM_FI_DEV_ROW_REMAP_PENDING): a remap waits for a GPU reset.

    **Symptom**: ``nvidia-smi -q`` shows remapped rows pending; ``dcgmi diag`` fails Deployment with "row
    remappings are pending"; Xid 63 in the kernel log.
    **Why**: an ECC error marked a memory row for remapping (A100+). Until the GPU is reset the spare row
    is not used; error containment keeps running work correct, but the row stays faulty.
    **Fix**: drain the GPU's jobs and reset it (``nvidia-smi -r -i <id>``) or reboot the node.
    **Verify**: `nvidia-smi -q -d ROW_REMAPPER` (Pending: No after the reset) and `dcgmi diag -r 1`.
    """
    for g in _fleet(obs).gpus:
        if not (g.remap_pending or g.reset_required):
            continue
        if g.remap_pending:
            what = (
                f"row remapping pending ({g.remap_uncorrectable if g.remap_uncorrectable is not None else '?'} rows for "
                f"uncorrectable, {g.remap_correctable if g.remap_correctable is not None else '?'} for correctable errors) — reset the GPU to apply. "
                + _cost(g, "until then a faulty row stays in use")
            )
            causes = ["gpu.row-remap"] + (["gpu.reset-required"] if g.reset_required else [])
        else:
            what = "the driver reports that the GPU requires a reset (GPU Reset Status). " + _cost(
                g, "no new work starts on it until it is reset"
            )
            causes = ["gpu.reset-required"]
        yield remap_pending.finding(
            f"{g.label()}: {what}",
            causes=causes,
            evidence=[
                *_extra_ident(g),
                Evidence(
                    "remapped rows pending", g.remap_pending, False, source=g.source_of("remap_pending")
                ),
                Evidence(
                    "rows remapped for uncorrectable errors",
                    g.remap_uncorrectable,
                    source=g.source_of("remap_uncorrectable"),
                ),
                *(
                    [Evidence("reset required", True, source=g.source_of("reset_required"))]
                    if g.reset_required
                    else []
                ),
            ],
            subject=g.label(),
            confidence=0.9,
        )


@rule(
    id="GPU006",
    name="gpu-row-remap-failure",
    layer=LAYER,
    title="Row remapping failed: the GPU needs RMA",
    requires=("gpu_health", "gpu_remap"),
    severity=Severity.CRITICAL,
    alerts=GPU006_ALERTS,
    causes=("gpu.row-remap",),
)
def remap_failure(obs: Observations) -> Iterator[Finding]:
    """``Remapping Failure Occurred: Yes`` (DCGM_FI_DEV_ROW_REMAP_FAILURE): a bank ran out of spare rows.

    **Symptom**: repeated Xid 64/48 on one GPU; ``nvidia-smi -q`` shows a remapping failure.
    **Why**: NVIDIA's memory error management: when a row cannot be remapped (no spare left in its bank)
    the GPU can no longer isolate its memory faults; NVIDIA's policy is RMA.
    **Fix**: drain the node, take the GPU out of service and open an RMA with the failure state and
    ``nvidia-bug-report.sh``.
    **Verify**: `nvidia-smi -q -d ROW_REMAPPER` and `dcgmi diag -r 3`.
    """
    for g in _fleet(obs).gpus:
        if not g.remap_failure:
            continue
        yield remap_failure.finding(
            f"{g.label()}: row remapping failed — NVIDIA's policy is RMA. "
            + _cost(g, "its memory faults can no longer be isolated"),
            evidence=[
                *_extra_ident(g),
                Evidence("remapping failure occurred", True, False, source=g.source_of("remap_failure")),
            ],
            subject=g.label(),
            confidence=0.95,
        )


@rule(
    id="GPU007",
    name="gpu-retired-pages",
    layer=LAYER,
    title="Too many retired pages, or retirement pending",
    requires=("gpu_health", "gpu_retired"),
    thresholds=(RETIRED_PAGES_MAX, RETIRED_PAGES_SOFT),
    severity=Severity.WARNING,
    alerts=GPU007_ALERTS,
    causes=("gpu.row-remap", "gpu.ecc-uncorrectable"),
)
def retired_pages(obs: Observations) -> Iterator[Finding]:
    """Pre-Ampere page retirement: retired pages at DCGM's limits, or a retirement pending a reboot.

    **Symptom**: ECC errors on a V100-class GPU; ``Retired Pages`` counts grow; ``Pending Page Blacklist: Yes``.
    **Why**: dynamic page retirement takes pages with repeated single-bit or any double-bit errors out of
    use at the next driver reload; DCGM fails a GPU at 60 retired pages (RMA) and warns at 15.
    **Fix**: pending: drain and reboot (or reload the driver) to retire the pages; at the limit: RMA.
    **Verify**: `nvidia-smi -q -d PAGE_RETIREMENT` and `dcgmi diag -r 3`.
    """
    for g in _fleet(obs).gpus:
        total = (g.retired_sbe or 0) + (g.retired_dbe or 0)
        if total >= float(RETIRED_PAGES_MAX.value):
            sev, what = Severity.CRITICAL, f"{total} retired pages, at DCGM's RMA limit"
        elif total >= float(RETIRED_PAGES_SOFT.value):
            sev, what = Severity.WARNING, f"{total} retired pages, above DCGM's warning level"
        elif g.retired_pending:
            sev, what = Severity.WARNING, "a page retirement is pending (reboot/reset to apply)"
        else:
            continue
        yield retired_pages.finding(
            f"{g.label()}: {what}. " + _cost(g, "its memory is degrading"),
            evidence=[
                *_extra_ident(g),
                Evidence(
                    "retired pages (SBE + DBE)",
                    total,
                    RETIRED_PAGES_MAX.value,
                    "pages",
                    g.source_of("retired_sbe"),
                ),
                Evidence("retirement pending", g.retired_pending, source=g.source_of("retired_pending")),
            ],
            severity=sev,
            subject=g.label(),
            confidence=0.85,
        )


@rule(
    id="GPU008",
    name="gpu-correctable-ecc-rising",
    layer=LAYER,
    title="Correctable ECC errors rising fast",
    requires=("gpu_health", "gpu_ecc"),
    thresholds=(SBE_RATE_MAX,),
    severity=Severity.WARNING,
    alerts=GPU008_ALERTS,
    causes=("gpu.hw-faulty",),
)
def correctable_rising(obs: Observations) -> Iterator[Finding]:
    """Correctable (single-bit) ECC errors grow faster than DCGM's limit between two reads.

    **Symptom**: ``ecc.errors.corrected.volatile`` / ``DCGM_FI_DEV_ECC_SBE_VOL_TOTAL`` climbs; Xid 92 may follow.
    **Why**: correctable errors cost nothing alone, but a fast-rising count is memory degrading: the next
    step is uncorrectable errors, remaps and crashes.
    **Fix**: schedule the GPU for ``dcgmi diag -r 3`` at the next drain; RMA if the rate persists.
    **Verify**: `nvidia-smi --query-gpu=index,ecc.errors.corrected.volatile.total --format=csv -l 60` and `dcgmi diag -r 3`.
    """
    for g in _fleet(obs).gpus:
        r = _rate_per_min(g, "ecc_volatile_correctable") or _rate_per_min(g, "ecc_aggregate_correctable")
        if r is None or r[0] <= float(SBE_RATE_MAX.value):
            continue
        rate, inc, secs = r
        yield correctable_rising.finding(
            f"{g.label()}: correctable ECC errors rose by {inc:.0f} in {secs:.0f} s ({rate:.1f}/min). "
            + _cost(g, "its memory is degrading"),
            evidence=[
                *_extra_ident(g),
                Evidence("correctable ECC rate", round(rate, 2), SBE_RATE_MAX.value, "1/min"),
            ],
            subject=g.label(),
            confidence=0.8,
        )
