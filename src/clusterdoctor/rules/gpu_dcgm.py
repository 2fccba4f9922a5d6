"""GPU rules on DCGM results: dcgmi diag failures and health-watch incidents.

Split from rules/gpu.py (which lists the per-GPU rules); references: reference/gpu-health.md.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from clusterdoctor.model import Evidence, Finding, Severity
from clusterdoctor.rules.gpu_common import _cost, _extra_ident, _fleet, node_name
from clusterdoctor.rules.gpu_nvlink import expected_nvlinks
from clusterdoctor.rules.registry import Observations, rule
from clusterdoctor.topology.gpu import GpuEvent

LAYER = "gpu"

# -- DCGM results --------------------------------------------------------------------------------------


@rule(
    id="GPU017",
    name="gpu-dcgm-diag-failure",
    layer=LAYER,
    title="dcgmi diag test failed on a GPU",
    requires=("gpu_health",),
    severity=Severity.CRITICAL,
    causes=("gpu.hw-faulty",),
)
def dcgm_diag(obs: Observations) -> Iterator[Finding]:
    """``dcgmi diag -r 1/2/3`` reported Fail (or Warn) for a test, per test and GPU.

    **Symptom**: a node's acceptance or health check fails; the diag table shows ``Fail - GPU: n`` or ``Fail - All``.
    **Why**: DCGM's active tests exercise the GPU (memory, PCIe bandwidth, stress, power). A failure names
    the subsystem; ``Fail - All`` across GPUs points at the software stack (driver/CUDA mismatch,
    permissions) or the node rather than one GPU. A pass is not proof of health: DCGM has passed with
    NVLinks down (NVIDIA/DCGM#198).
    **Fix**: read the test's warning text: software (driver/CUDA mismatch, persistence mode) — fix the
    stack and rerun; hardware (memory, PCIe, power) — drain and reset, RMA if it fails again.
    **Verify**: `dcgmi diag -r 2` (or `-r 3` for memory/stress), then `nvidia-smi -q -d ECC,PCIE,PERFORMANCE`.
    """
    f = _fleet(obs)
    for g in f.gpus:
        by_test: dict[str, list[GpuEvent]] = defaultdict(list)
        for e in g.events:
            if e.kind == "diag":
                by_test[str(e.attrs.get("test"))].append(e)
        for test, evs in sorted(by_test.items()):
            e = evs[0]
            applies = str(e.attrs.get("applies_to") or "")
            yield dcgm_diag.finding(
                f"{g.label()}: dcgmi diag {e.attrs.get('section') or ''} test {test!r} {e.attrs.get('result', 'Fail')}"
                + (
                    " on every GPU (points at the node's software stack or platform)"
                    if applies.lower().startswith("all")
                    else ""
                )
                + ". "
                + _cost(g, "DCGM does not vouch for this GPU"),
                evidence=[
                    *_extra_ident(g),
                    Evidence("dcgmi diag", e.message[:300], source=f"{e.source}:{e.line}"),
                ],
                severity=Severity.CRITICAL if e.attrs.get("result") == "Fail" else Severity.WARNING,
                subject=g.label(),
                confidence=0.8,
            )
    for node, evs in f.node_events.items():
        for e in (x for x in evs if x.kind == "diag"):
            yield dcgm_diag.finding(
                f"{node_name(node)}: {e.message[:200]}",
                evidence=[Evidence("dcgmi diag", e.message[:300], source=f"{e.source}:{e.line}")],
                subject=node_name(node),
                confidence=0.7,
            )


@rule(
    id="GPU018",
    name="gpu-dcgm-health-incident",
    layer=LAYER,
    title="dcgmi health reported a warning or failure",
    requires=("gpu_health",),
    severity=Severity.WARNING,
    causes=("gpu.hw-faulty",),
)
def dcgm_health(obs: Observations) -> Iterator[Finding]:
    """``dcgmi health -c`` lists an incident (Warning/Failure) for a GPU's subsystem (PCIe, memory, NVLink …).

    **Symptom**: DCGM background health watches report a non-healthy system for a GPU.
    **Why**: DCGM compared the retained samples with its limits (PCIe replay rate, ECC, retired pages,
    NVLink errors, thermal/power violations) and found an incident.
    **Fix**: act on the subsystem named (see the PCIe, memory, NVLink and clock findings); for a Failure
    drain the GPU and run ``dcgmi diag -r 3``.
    **Verify**: `dcgmi health -c` and `dcgmi diag -r 2`.
    """
    for g in _fleet(obs).gpus:
        for e in (x for x in g.events if x.kind == "health"):
            sev = (
                Severity.CRITICAL
                if str(e.attrs.get("health", "")).lower().startswith("fail")
                else Severity.WARNING
            )
            if _links_down_only(e) and expected_nvlinks(g.model) is None:
                # DCGM's NVLink watch flags every link of a GPU that has none connected (a PCIe card
                # without a bridge: NVIDIA/NVSentinel#1481): by design unless the model says it has links
                yield dcgm_health.finding(
                    f"{g.label()}: {e.message[:200]}. Not judged: DCGM reports the NVLinks of a GPU that has "
                    "none connected (a PCIe card without a bridge) as down; the model here is "
                    + (f"{g.model}" if g.model else "not known")
                    + ", so check `nvidia-smi nvlink -s` and the product before acting.",
                    evidence=[
                        *_extra_ident(g),
                        Evidence("dcgmi health", e.message[:300], source=f"{e.source}:{e.line}"),
                        Evidence("NVLinks expected for the model", "unknown" if not g.model else "none"),
                    ],
                    severity=Severity.INFO,
                    subject=g.label(),
                    confidence=0.4,
                )
                continue
            yield dcgm_health.finding(
                f"{g.label()}: {e.message[:240]}. " + _cost(g, "DCGM flags this GPU"),
                evidence=[
                    *_extra_ident(g),
                    Evidence("dcgmi health", e.message[:300], source=f"{e.source}:{e.line}"),
                ],
                severity=sev,
                subject=g.label(),
                confidence=0.8,
            )


# "GPU 0's NvLink link 3 is currently down": DCGM_FR_NVLINK_DOWN's message
_LINK_DOWN = re.compile(r"NvLink link \d{1,2} is currently down")


def _links_down_only(e: GpuEvent) -> bool:
    """Whether a dcgmi health event is an NVLink watch that says only that links are down."""
    if not str(e.attrs.get("system", "")).upper().startswith("NVLINK"):
        return False
    text = str(e.attrs.get("detail", ""))
    return bool(_LINK_DOWN.search(text)) and "error" not in text.lower() and "crc" not in text.lower()
