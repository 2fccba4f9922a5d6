"""GPU rules on NVLink and the fabric: links down, link error counters, fabric manager not ready.

Split from rules/gpu.py (which lists the per-GPU rules); references: reference/gpu-health.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.analyze.gpu_health import UNNAMED
from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.gpu_alerts import GPU012_ALERTS
from clusterdoctor.rules.gpu_common import (
    NVLINK_CRC_RATE_MAX,
    NVLINK_EXPECTED,
    NVLINKS_BY_MODEL,
    _acting,
    _cost,
    _extra_ident,
    _fleet,
    _latest,
    _rate_per_min,
    _sel,
)
from clusterdoctor.rules.registry import Observations, rule

LAYER = "gpu"

# -- NVLink ------------------------------------------------------------------------------------------


def _cut_sources(obs: Observations) -> set[str]:
    """Inputs the user cut lines out of (a paste with '...' elisions): a count from them is a lower bound."""
    return {p.path for p in obs.get("pastes") or [] if getattr(p, "gaps", ())}


def expected_nvlinks(model: str | None) -> int | None:
    if not model:
        return None
    m = model.upper()
    if "PCIE" in m or " NVL" in m:
        return None
    for key, n in NVLINKS_BY_MODEL:
        if key.upper() in m:
            return n
    return None


@rule(
    id="GPU011",
    name="gpu-nvlink-down",
    layer=LAYER,
    title="NVLinks inactive or missing on a GPU that has them",
    requires=("gpu_health", "gpu_nvlink"),
    thresholds=(NVLINK_EXPECTED,),
    severity=Severity.CRITICAL,
    causes=("gpu.nvlink-fault",),
)
def nvlink_down(obs: Observations) -> Iterator[Finding]:
    """Some NVLinks of a GPU are ``<inactive>``, all are ("all links are inActive"), or fewer than its model has.

    **Symptom**: intra-node all-reduce bandwidth far below the NVLink rate; NCCL falls back to PCIe/SHM
    for some GPU pairs (``via P2P/direct pointer`` missing); DCGM diag may still pass (NVIDIA/DCGM#198).
    **Why**: a link failed training (bad NVLink/NVSwitch port, a missing bridge, fabric manager not
    running on NVSwitch systems). A GPU with no NVLink by design ("Device does not have or support
    Nvlink") is not a finding.
    **Fix**: on HGX start/restart ``nvidia-fabricmanager`` and reset the GPUs; if links stay down, drain
    and service the baseboard; on bridged PCIe cards reseat the bridge.
    **Verify**: `nvidia-smi nvlink -s` (every link at full speed), `nvidia-smi -q | grep -A2 Fabric` and `nvidia-smi topo -m`.
    """
    f = _fleet(obs)
    cut = _cut_sources(obs)
    for g in f.gpus:
        if g.nvlink_support == "none":
            continue
        exp = expected_nvlinks(g.model)
        down = [n.link for n in g.nvlinks if n.active is False]
        up = [n for n in g.nvlinks if n.active]
        elided = any(r.source in g.sources and r.attrs.get("elided") for r in f.reports) or bool(
            cut & set(g.sources)
        )
        # a bridged PCIe/NVL card uses as many links as its bridge connects (an H100 NVL pair 12 of 18),
        # by design: its inactive links are judged only against peers of its model that have more up
        peers_up = max(
            (
                sum(1 for n in p.nvlinks if n.active)
                for p in f.gpus_of(g.node or UNNAMED)
                if p is not g and p.model == g.model
            ),
            default=0,
        )
        problem = None
        if g.nvlink_support == "inactive" or (g.nvlinks and not up and exp is None):
            if exp is None and peers_up == 0:
                continue  # a card without a bridge (or a lone one): its links have nothing to connect to
            problem = "all NVLinks are inactive"
        elif down and exp is None:
            if peers_up <= len(up):
                continue  # as many links up as its bridged peers: the bridge's design, not a fault
            problem = f"{len(up)} NVLinks up where its bridged peers have {peers_up}"
        elif down:
            problem = f"{len(down)} link(s) inactive (link {', '.join(map(str, down[:8]))})"
        elif exp is not None and up and len(up) < exp and not elided:
            problem = f"only {len(up)} of its {exp} NVLinks reported up"
        speeds = sorted({n.speed_gbs for n in up if n.speed_gbs})
        if problem is None and len(speeds) > 1:
            problem = f"links at unequal speeds ({', '.join(f'{s:g}' for s in speeds)} GB/s)"
        if problem is None:
            continue
        # every link of every NVSwitch-attached GPU of the node down: the fabric (manager), not one link
        node_gpus = [p for p in f.gpus_of(g.node or UNNAMED) if expected_nvlinks(p.model) is not None]
        fabric_down = (
            exp is not None
            and len(node_gpus) > 1
            and all(
                p.nvlink_support == "inactive" or (p.nvlinks and not any(n.active for n in p.nvlinks))
                for p in node_gpus
            )
        )
        causes = ["gpu.fabric-manager", "gpu.nvlink-fault"] if fabric_down else ["gpu.nvlink-fault"]
        if fabric_down:
            problem += " (so are all NVLinks of every GPU on this node: the NVSwitch fabric is not up — fabric manager)"
        yield nvlink_down.finding(
            f"{g.label()}: {problem}. " + _cost(g, "GPU-to-GPU traffic falls back to slower paths"),
            causes=causes,
            evidence=[
                *_extra_ident(g),
                Evidence(
                    "NVLinks up",
                    len(up),
                    exp,
                    "links",
                    g.nvlinks[0].source if g.nvlinks else g.source_of("nvlink_support"),
                ),
                Evidence("NVLink state", g.nvlink_support),
            ],
            subject=g.label(),
            confidence=0.85,
            verify=[
                f"nvidia-smi nvlink -s {_sel(g)}",
                "nvidia-smi topo -m",
                "systemctl status nvidia-fabricmanager",
            ],
        )


@rule(
    id="GPU012",
    name="gpu-nvlink-errors",
    layer=LAYER,
    title="NVLink error counters non-zero or rising",
    requires=("gpu_health", "gpu_nvlink_errors"),
    thresholds=(NVLINK_CRC_RATE_MAX,),
    severity=Severity.WARNING,
    alerts=GPU012_ALERTS,
    causes=("gpu.nvlink-fault",),
)
def nvlink_errors(obs: Observations) -> Iterator[Finding]:
    """NVLink replay, recovery or CRC error counters are non-zero (one read) or rising (two reads).

    **Symptom**: NVLink bandwidth below the link rate; occasional stalls in intra-node collectives.
    **Why**: a marginal link retransmits (replay) or retrains (recovery); CRC errors beyond ~100/s cost
    bandwidth. Counters accumulate since the driver loaded, so one read tells history, two reads tell now.
    **Fix**: reset the GPU's counters (``nvidia-smi nvlink -r``) and read again under load; if they rise,
    drain the node and service the link/baseboard.
    **Verify**: `nvidia-smi nvlink -e` twice, a minute apart, under load.
    """
    for g in _fleet(obs).gpus:
        tot = {"replay": 0, "recovery": 0, "crc": 0}
        for n in g.nvlinks:
            tot["replay"] += n.replay_errors or 0
            tot["recovery"] += n.recovery_errors or 0
            tot["crc"] += n.crc_errors or 0
        rates = {}
        for name, key in (
            ("nvlink_replay_errors", "replay"),
            ("nvlink_recovery_errors", "recovery"),
            ("nvlink_crc_errors", "crc"),
        ):
            r = _rate_per_min(g, name)
            if r is not None:
                rates[key] = r
            lv = _latest(g, name)
            if lv:
                tot[key] = max(tot[key], int(lv))
        rising = {k: v for k, v in rates.items() if v[1] > 0}
        if rising:
            crc_s = rising.get("crc", (0, 0, 1))[0] / 60.0
            sev = (
                Severity.CRITICAL
                if ("replay" in rising or "recovery" in rising or crc_s > float(NVLINK_CRC_RATE_MAX.value))
                else Severity.WARNING
            )
            yield nvlink_errors.finding(
                f"{g.label()}: NVLink errors rising: "
                + ", ".join(f"{k} +{v[1]:.0f} in {v[2]:.0f} s" for k, v in rising.items())
                + ". "
                + _cost(g, "its links retransmit"),
                evidence=[
                    *_extra_ident(g),
                    *[
                        Evidence(f"NVLink {k} errors per minute", round(v[0], 2), source=g.sources[0])
                        for k, v in rising.items()
                    ],
                ],
                severity=sev,
                subject=g.label(),
                confidence=0.85,
            )
        elif any(tot.values()):
            yield nvlink_errors.finding(
                f"{g.label()}: NVLink error counters since the driver loaded: "
                + ", ".join(f"{k} {v}" for k, v in tot.items() if v)
                + " (one read: read again under load to see if they still rise).",
                evidence=[
                    *_extra_ident(g),
                    *[Evidence(f"NVLink {k} errors (total)", v, 0) for k, v in tot.items() if v],
                ],
                severity=Severity.INFO,
                subject=g.label(),
                confidence=0.5,
            )


# fabric states nvidia-smi -q prints (Fabric / State) while the GPU is not (yet) part of the NVLink
# fabric; "N/A" is a GPU without NVSwitches (nvml.h NVML_GPU_FABRIC_STATE_*: NOT_SUPPORTED, NOT_STARTED,
# IN_PROGRESS, COMPLETED)
FABRIC_NOT_READY = ("not started", "in progress")


@rule(
    id="GPU020",
    name="gpu-fabric-not-ready",
    layer=LAYER,
    title="GPU not registered with the NVSwitch fabric (fabric manager)",
    requires=("gpu_health",),
    severity=Severity.CRITICAL,
    causes=("gpu.fabric-manager",),
)
def fabric_not_ready(obs: Observations) -> Iterator[Finding]:
    """``nvidia-smi -q`` shows ``Fabric / State: Not Started`` or ``In Progress`` (or a Status that is not
    Success) on an NVSwitch system.

    **Symptom**: CUDA fails to initialise with error 802 "system not yet initialized"; NCCL cannot use
    NVLink; ``nvidia-smi`` itself works.
    **Why**: on NVSwitch baseboards (HGX/DGX A100, H100, H200, B200) a GPU joins the NVLink fabric only
    when the fabric manager has configured the switches and registered it; until then the driver keeps
    CUDA from starting. The fabric manager is not running, failed, is of another version than the driver,
    or (Blackwell) lacks its NVLink subnet manager.
    **Fix**: start nvidia-fabricmanager (its version must equal the driver's), read its log for errors,
    then reset the GPUs or reboot; the state must read Completed / Success.
    **Verify**: `nvidia-smi -q | grep -A3 Fabric` and `systemctl status nvidia-fabricmanager`.
    """
    for g in _fleet(obs).gpus:
        state = (g.fabric_state or "").strip().lower()
        status = (g.fabric_status or "").strip().lower()
        bad_status = status not in ("", "success", "n/a", "not supported")
        if state not in FABRIC_NOT_READY and not (state == "completed" and bad_status):
            continue
        yield _acting(
            Action.RESTART_SERVICE,
            fabric_not_ready.finding(
                f"{g.label()}: NVLink fabric state {g.fabric_state!r}"
                + (f", status {g.fabric_status!r}" if g.fabric_status else "")
                + " — the fabric manager has not registered this GPU, so CUDA does not start on it. "
                + _cost(g, "no CUDA work runs on it"),
                evidence=[
                    *_extra_ident(g),
                    Evidence("fabric state", g.fabric_state, "Completed", source=g.source_of("fabric_state")),
                    Evidence(
                        "fabric status", g.fabric_status, "Success", source=g.source_of("fabric_status")
                    ),
                ],
                subject=g.label(),
                confidence=0.9,
            ),
        )
