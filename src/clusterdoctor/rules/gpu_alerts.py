"""Alerts over dcgm-exporter's series for the GPU rules (issue 14).

Split from rules/gpu.py (which lists the per-GPU rules); references: reference/gpu-health.md.
"""

from __future__ import annotations

from clusterdoctor.rules.alerts import Alert, Example
from clusterdoctor.rules.gpu_common import (
    NVLINK_CRC_RATE_MAX,
    PCIE_REPLAY_RATE_MAX,
    RETIRED_PAGES_MAX,
    SBE_RATE_MAX,
    XID_APP_REPEAT,
)

# -- alerts over dcgm-exporter's series (issue 14): the rules' thresholds on the fields the exporter's
# default counters export; every other GPU rule alerts on the agent's clusterdoctor_finding series --------
_DBY = "Hostname, gpu, UUID, namespace, pod, container"
_DL = {
    "Hostname": "gpu-node-7",
    "gpu": "3",
    "UUID": "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c",
    "namespace": "train",
    "pod": "llm-0",
    "container": "trainer",
}
_D = ",".join(f'{k}="{v}"' for k, v in _DL.items()) + ',modelName="NVIDIA H100 80GB HBM3",device="nvidia3"'
_WHO = "{{ $labels.Hostname }} GPU {{ $labels.gpu }} ({{ $labels.UUID }})"
_POD = (
    " Workload: {{ $labels.namespace }}/{{ $labels.pod }}/{{ $labels.container }} (empty without "
    "dcgm-exporter's Kubernetes mapping; the agent's finding names it from the pod-resources API)."
)


def _dcgm(expr: str, sev: str, for_: str, summary: str, why: str, fires: tuple, healthy: tuple) -> Alert:
    return Alert(
        expr=expr,
        severity=sev,
        for_=for_,
        source="dcgm-exporter",
        summary=f"{_WHO}: {summary}",
        description=why + _POD,
        fires=Example(tuple((f"{m}{{{_D}}}", v) for m, v in fires), _DL),
        healthy=Example(tuple((f"{m}{{{_D}}}", v) for m, v in healthy)),
    )


GPU001_ALERTS = (
    _dcgm(
        f"max by ({_DBY}) (DCGM_FI_DEV_XID_ERRORS) > 0 != 13 != 31 != 43",
        "critical",
        "1m",
        "the driver reported a hardware-class Xid",
        "DCGM_FI_DEV_XID_ERRORS is the last Xid the GPU reported; application-class Xids (13, 31, 43) are left "
        f"to the rule, which counts them across processes ({XID_APP_REPEAT.source}). `clusterdoctor rules GPU001` "
        "has the Xid catalogue.",
        (("DCGM_FI_DEV_XID_ERRORS", "0x5 79x25"),),
        (("DCGM_FI_DEV_XID_ERRORS", "0x5 13x25"),),  # an application fault: the program's, not the GPU's
    ),
)
GPU004_ALERTS = (
    _dcgm(
        f"max by ({_DBY}) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[15m])) > 0",
        "critical",
        "1m",
        "uncorrectable (double-bit) ECC errors",
        "The volatile double-bit ECC counter grew: data on this GPU was corrupted and the job using it must restart.",
        (("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0x10 2x20"),),
        (("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0x30"),),
    ),
)
GPU005_ALERTS = (
    _dcgm(
        f"max by ({_DBY}) (DCGM_FI_DEV_ROW_REMAP_PENDING) > 0",
        "warning",
        "5m",
        "row remapping pending: reset the GPU",
        "A row remap is pending; it takes effect at the next GPU reset. Drain the node and reset the GPU.",
        (("DCGM_FI_DEV_ROW_REMAP_PENDING", "1x30"),),
        (("DCGM_FI_DEV_ROW_REMAP_PENDING", "0x30"),),
    ),
)
GPU006_ALERTS = (
    _dcgm(
        f"max by ({_DBY}) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
        "critical",
        "1m",
        "row remapping failed: the GPU needs RMA",
        "The GPU has no spare rows left for an uncorrectable error: it cannot be repaired in the field.",
        (("DCGM_FI_DEV_ROW_REMAP_FAILURE", "1x30"),),
        (("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0x30"), ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "2x30")),
    ),
)
GPU007_ALERTS = (
    _dcgm(
        f"max by ({_DBY}) (DCGM_FI_DEV_RETIRED_SBE + DCGM_FI_DEV_RETIRED_DBE) >= {RETIRED_PAGES_MAX.value:g}",
        "warning",
        "5m",
        f"{RETIRED_PAGES_MAX.value:g} or more retired pages",
        f"{RETIRED_PAGES_MAX.meaning} ({RETIRED_PAGES_MAX.source}).",
        (("DCGM_FI_DEV_RETIRED_SBE", "40x30"), ("DCGM_FI_DEV_RETIRED_DBE", "21x30")),
        (("DCGM_FI_DEV_RETIRED_SBE", "3x30"), ("DCGM_FI_DEV_RETIRED_DBE", "0x30")),
    ),
)
GPU008_ALERTS = (
    _dcgm(
        f"max by ({_DBY}) (rate(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[10m])) * 60 > {SBE_RATE_MAX.value:g}",
        "warning",
        "10m",
        f"correctable ECC errors above {SBE_RATE_MAX.value:g} a minute",
        f"{SBE_RATE_MAX.meaning} ({SBE_RATE_MAX.source}).",
        (("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "0+50x30"),),
        (("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "0+1x30"),),
    ),
)
GPU012_ALERTS = (
    _dcgm(
        f"max by ({_DBY}) (rate(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[5m])) > {NVLINK_CRC_RATE_MAX.value:g}",
        "warning",
        "10m",
        f"NVLink CRC errors above {NVLINK_CRC_RATE_MAX.value:g}/s",
        f"{NVLINK_CRC_RATE_MAX.meaning} ({NVLINK_CRC_RATE_MAX.source}).",
        (("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "0+30000x30"),),
        (("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "0+60x30"),),
    ),
)
GPU014_ALERTS = (
    _dcgm(
        f"max by ({_DBY}) (rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[10m])) * 60 > {PCIE_REPLAY_RATE_MAX.value:g}",
        "warning",
        "10m",
        f"PCIe replays above {PCIE_REPLAY_RATE_MAX.value:g} a minute",
        f"{PCIE_REPLAY_RATE_MAX.meaning} ({PCIE_REPLAY_RATE_MAX.source}): the link retransmits and loses bandwidth.",
        (("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "0+40x30"),),
        (("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "9x30"),),
    ),
)
