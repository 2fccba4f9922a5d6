"""The driver's own request that a GPU be reset or its node rebooted before it is used again.

Inputs: GPU events of kind ``recovery_action`` (``nvidia-smi --query-gpu=gpu_recovery_action``: R550+
drivers report None, Reset, Reboot, Drain P2P or Drain and Reset) and ``reset_advised`` (the kernel log's
"GPU at PCI:... needs to be reset" after GSP RPC errors). DCGM's health watches do not see this state
(NVIDIA/DCGM: a GPU stuck with a pending recovery action reports Healthy), so it is judged here on its own.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterdoctor.model import Action, Evidence, Finding, Severity
from clusterdoctor.rules.gpu_common import _cost, _extra_ident, _fleet, _sel
from clusterdoctor.rules.registry import Observations, rule

# nvidia-smi gpu_recovery_action values (nvidia-smi(1), NVML nvmlDeviceGetGpuRecoveryAction) -> what it takes
RECOVERY: dict[str, tuple[Action, str]] = {
    "reset": (Action.RESET_DEVICE, "reset the GPU (nvidia-smi -r -i <id>) once its processes are stopped"),
    "reboot": (Action.REBOOT_NODE, "drain the node and reboot it"),
    "drain p2p": (
        Action.RESET_DEVICE,
        "stop new peer-to-peer work on it, let running work drain, then reset it",
    ),
    "drain and reset": (Action.RESET_DEVICE, "drain its work, then reset the GPU"),
}


@rule(
    id="GPU021",
    name="gpu-recovery-required",
    layer="gpu",
    title="The driver says a GPU must be reset (or its node rebooted) before it is usable",
    requires=("gpu_health", "gpu_events"),
    severity=Severity.CRITICAL,
    causes=("gpu.reset-required",),
)
def gpu_recovery_required(obs: Observations) -> Iterator[Finding]:
    """A GPU whose ``gpu_recovery_action`` is not None, or that the kernel log says needs a reset.

    **Symptom**: CUDA calls on one GPU fail or hang (EBUSY), `nvidia-smi --query-gpu=gpu_recovery_action`
    prints `Reset` or `Reboot` for it, while DCGM health still says Healthy.
    **Why**: after a fault the driver cannot clear itself (a GSP firmware timeout, Xid 119/120/154, an
    uncontained error) it marks the GPU with the recovery it needs; until then every new context fails.
    **Fix**: drain the GPU's jobs, then do what the action says: `nvidia-smi -r -i <id>` for Reset (stop
    nvidia-persistenced/DCGM holders first), a node reboot for Reboot.
    **Verify**: `nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv` shows None for every GPU.
    """
    for g in _fleet(obs).gpus:
        evs = [e for e in g.events if e.kind in ("recovery_action", "reset_advised")]
        if not evs:
            continue
        actions = [RECOVERY.get(e.message.strip().lower(), (Action.RESET_DEVICE, "")) for e in evs]
        strongest = max(a for a, _ in actions)
        what = next((t for a, t in actions if a == strongest and t), "reset the GPU")
        said = "; ".join(dict.fromkeys(
            f"recovery action {e.message}" if e.kind == "recovery_action" else e.message[:160] for e in evs
        ))  # fmt: skip
        f = gpu_recovery_required.finding(
            f"{g.label()}: the driver asks for recovery ({said}): {what}. "
            + _cost(g, "no new work runs on it until then"),
            evidence=[
                *_extra_ident(g),
                *[
                    Evidence(
                        e.kind.replace("_", " "),
                        e.message[:200],
                        source=f"{e.source}:{e.line}" if e.line else e.source,
                    )
                    for e in evs[:4]
                ],
            ],
            subject=g.label(),
            confidence=0.9,
            fix=what,
            verify=[f"nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv {_sel(g)}".strip()],
        )
        f.action = strongest
        yield f
