"""Shared parts of the GPU health rules: thresholds, the derived kinds (which facts some GPU
states), the helpers that name a GPU and its cost.

Split from rules/gpu.py (which lists the per-GPU rules); references: reference/gpu-health.md.
"""

from __future__ import annotations

from typing import Any

from clusterdoctor.analyze.gpu_health import GpuFleet, gpu_fleet
from clusterdoctor.model import Action, Evidence, Finding, Threshold
from clusterdoctor.rules.registry import Observations, register_derived, register_input
from clusterdoctor.topology.gpu import GpuState

LAYER = "gpu"

# -- thresholds -------------------------------------------------------------------------------------

BUSY_UTIL = Threshold(
    "gpu_busy_util",
    50,
    "%",
    "clusterdoctor default: NVML utilization.gpu is the share of the sample period in which a kernel ran "
    "(nvmlDeviceGetUtilizationRates); below half the GPU is mostly idle and clock/link power management "
    "legitimately lowers clocks and PCIe speed (reference/gpu-health.md, PCIe)",
    "utilisation at or above which a GPU counts as busy",
)
SM_CLOCK_MIN_RATIO = Threshold(
    "sm_clock_min_ratio_busy",
    0.8,
    "of max SM clock",
    "clusterdoctor default: a busy, unthrottled GPU boosts to within a few percent of its max SM clock "
    "(the H100/H200/L40S captures under load in fixtures/gpu run at 100 % of it); below 80 % the rank computes "
    "at least 20 % slower than its peers",
    "SM clock / max SM clock below which a busy GPU is slow",
)
XID_APP_REPEAT = Threshold(
    "xid_app_repeat",
    3,
    "processes",
    "NVIDIA Xid catalog: application-class Xids (13, 31, 43) are the program's fault unless they recur across "
    "jobs, when NVIDIA advises DCGM diagnostics; clusterdoctor counts distinct processes",
    "distinct processes hitting an application-class Xid on one GPU before it points at the GPU",
)
RETIRED_PAGES_MAX = Threshold(
    "retired_pages_max",
    60,
    "pages",
    "DCGM dcgm_gpu_hardware_limits.h DCGM_LIMIT_MAX_RETIRED_PAGES = 60 (63 in newer DCGM, aligned with the field "
    "diagnostic): at or above it DCGM health fails the GPU (RMA)",
    "retired pages (single + double bit) at which the GPU is due for RMA",
)
RETIRED_PAGES_SOFT = Threshold(
    "retired_pages_soft",
    15,
    "pages",
    "DCGM dcgm_gpu_hardware_limits.h DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT = 15 (DCGM health warns)",
    "retired pages at which the GPU is watched",
)
SBE_RATE_MAX = Threshold(
    "ecc_correctable_rate_max",
    10,
    "errors/min",
    "DCGM dcgm_gpu_hardware_limits.h DCGM_LIMIT_MAX_SBE_RATE = 10 (NVIDIA marks it a placeholder; clusterdoctor "
    "applies it per minute); Xid 92 is the driver's own 'high single-bit rate' signal",
    "correctable ECC errors per minute above which the memory is degrading",
)
PCIE_REPLAY_RATE_MAX = Threshold(
    "pcie_replay_rate_max",
    8,
    "replays/min",
    "DCGM dcgm_gpu_hardware_limits.h DCGM_LIMIT_MAX_PCIREPLAY_RATE = 8 per minute ('the maximum recommended by RM'); "
    "DCGM health warns above it",
    "PCIe replays per minute above which the link is bad",
)
NVLINK_CRC_RATE_MAX = Threshold(
    "nvlink_crc_rate_max",
    100,
    "errors/s",
    "DCGM dcgm_gpu_hardware_limits.h DCGM_LIMIT_MAX_NVLINK_CRC_ERROR = 100 per second ('RM: CRC errors only "
    "matter at 100+ per second'); replay/recovery errors: DCGM_LIMIT_MAX_NVLINK_ERROR = 1 (any)",
    "NVLink CRC errors per second that matter",
)

# NVLinks per GPU by design (NVIDIA datasheets: A100 SXM 12 x NVLink3; A800 SXM 8; H100/H200 SXM 18 x
# NVLink4; H800 SXM 8; B200 18 x NVLink5). Only SXM/HGX parts are listed: PCIe cards' links depend on bridges.
NVLINKS_BY_MODEL: tuple[tuple[str, int], ...] = (
    ("P100-SXM", 4),
    ("V100-SXM", 6),
    ("A100-SXM", 12),
    ("A800-SXM", 8),
    ("H100 80GB HBM3", 18),
    ("H100 SXM", 18),
    ("H800", 8),
    ("H200", 18),
    ("H20", 18),
    ("B200", 18),
    ("GH200", 18),
)
NVLINK_EXPECTED = Threshold(
    "nvlinks_by_model",
    "P100-SXM2 4, V100-SXM2/3 6, A100-SXM 12, A800-SXM 8, H100/H200/H20/B200 SXM 18, H800 8",
    "links",
    "NVIDIA P100/V100/A100/H100/H200/H800/B200 datasheets (NVLink count per SXM module); PCIe cards have none by design "
    "unless bridged, so they are not judged by count",
    "NVLinks a GPU of that model has",
)

register_input(
    "gpu_health",
    "no GPU health source (nvidia-smi, nvidia-smi -q/-L, dcgm-exporter metrics, kernel log, lspci, nvidia-smi "
    "nvlink, dcgmi, device plugin or fabric manager log, live NVML)",
)


# -- derived kinds: which facts some GPU states (else the skip reason names what is missing) ---------


def _fleet(obs: Observations) -> GpuFleet:
    return gpu_fleet(obs)


def _derive_health(obs: Observations) -> tuple[Any, str | None]:
    f = _fleet(obs)
    return (f if f else None), None


def _coverage(fact: str, what: str, attr_check: Any) -> Any:
    def fn(obs: Observations) -> tuple[Any, str | None]:
        f = _fleet(obs)
        if not f:
            return None, None
        if any(attr_check(g) for g in f.gpus):
            return True, None
        srcs = sorted({s for lst in f.sources.values() for s in lst})
        return (
            None,
            f"no GPU source states {what} ({'; '.join(srcs[:4])}{' …' if len(srcs) > 4 else ''} do not export it)",
        )

    return fn


register_derived(
    "gpu_health",
    _derive_health,
    "no GPU health source (nvidia-smi -q, dcgm-exporter, kernel log, lspci, nvlink, dcgmi, NVML)",
)
register_derived(
    "gpu_ecc",
    _coverage(
        "ecc",
        "ECC error counters (DCGM_FI_DEV_ECC_*, nvidia-smi ECC Errors)",
        lambda g: g.ecc_volatile_uncorrectable is not None or g.ecc_aggregate_uncorrectable is not None,
    ),
    "no GPU source states ECC error counters",
)
register_derived(
    "gpu_remap",
    _coverage(
        "remap",
        "row-remapping state (Remapped Rows, DCGM_FI_DEV_ROW_REMAP_*)",
        lambda g: g.remap_pending is not None or g.remap_failure is not None,
    ),
    "no GPU source states row-remapping state",
)
register_derived(
    "gpu_retired",
    _coverage(
        "retired_pages",
        "retired-page counts (Retired Pages, DCGM_FI_DEV_RETIRED_*)",
        lambda g: g.retired_sbe is not None or g.retired_dbe is not None or g.retired_pending is not None,
    ),
    "no GPU source states retired-page counts",
)
register_derived(
    "gpu_clock_reasons",
    _coverage(
        "clock_reasons",
        "clock event (throttle) reasons (Clocks Event Reasons, DCGM_FI_DEV_CLOCK_THROTTLE_REASONS)",
        lambda g: g.clock_reasons is not None,
    ),
    "no GPU source states clock event (throttle) reasons",
)
register_derived(
    "gpu_clocks_under_load",
    _coverage(
        "clocks",
        "SM clock, max SM clock and utilisation together",
        lambda g: g.sm_clock_mhz is not None and g.sm_max_mhz is not None and g.util_pct is not None,
    ),
    "no GPU source states SM clock, max SM clock and utilisation",
)
register_derived(
    "gpu_nvlink",
    _coverage(
        "nvlink",
        "NVLink state (nvidia-smi nvlink -s, NVML)",
        lambda g: g.nvlink_support is not None or bool(g.nvlinks),
    ),
    "no NVLink state (nvidia-smi nvlink -s / --status)",
)
register_derived(
    "gpu_nvlink_errors",
    _coverage(
        "nvlink_errors",
        "NVLink error counters (nvidia-smi nvlink -e, DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL)",
        lambda g: (
            any(n.crc_errors is not None or n.replay_errors is not None for n in g.nvlinks)
            or any(r.name.startswith("nvlink_") for r in g.readings)
        ),
    ),
    "no NVLink error counters (nvidia-smi nvlink -e)",
)
register_derived(
    "gpu_pcie",
    _coverage("pcie", "the PCIe link (nvidia-smi -q, lspci -vv, sysfs, DCGM)", lambda g: g.pcie is not None),
    "no PCIe link state (nvidia-smi -q, lspci -vv, sysfs current/max_link_*)",
)


def _events(obs: Observations) -> tuple[Any, str | None]:
    """Driver events on a GPU, or on a node without a GPU named (an ``RmInitAdapter failed!`` line
    carries only a minor number; an SXid names a switch): either is a kernel log the rules can judge."""
    f = _fleet(obs)
    if f and any(f.node_events.values()):
        return True, None
    return _coverage(
        "events",
        "driver events (kernel log Xid/SXid, DCGM_FI_DEV_XID_ERRORS)",
        lambda g: bool(g.events) or g.xid_last is not None,
    )(obs)


register_derived(
    "gpu_events",
    _events,
    "no kernel log or Xid counter (dmesg, journalctl -k, DCGM_FI_DEV_XID_ERRORS)",
)


# -- helpers ---------------------------------------------------------------------------------------


def node_name(node: str | None) -> str:
    return node if node else "the node the files describe"


def _users(g: GpuState) -> str:
    """Who runs on it, for the cost sentence."""
    bits = []
    if g.ranks:
        bits.append("rank " + ", ".join(g.ranks))
    if g.pod:
        bits.append(f"pod {g.namespace + '/' if g.namespace else ''}{g.pod}")
    if g.processes and not g.ranks:
        bits.append("pid " + ", ".join(str(p) for p, _ in g.processes[:3]))
    return "; ".join(bits)


def _cost(g: GpuState, what: str) -> str:
    """The cost sentence: what the fault does, and who waits for it."""
    what = what[:1].upper() + what[1:]
    users = _users(g)
    if users:
        return f"{what} — {users} runs on it, so every collective of its job waits for it."
    return f"{what} — any rank placed on it drags every collective of its job."


def _ident(g: GpuState) -> Evidence:
    return Evidence(f"GPU on {node_name(g.node)}", g.identity(), source=", ".join(g.sources[:3]))


def _extra_ident(g: GpuState) -> list[Evidence]:
    ev = [_ident(g)]
    if g.numa_node is not None:
        ev.append(Evidence("NUMA node", g.numa_node, source=g.source_of("numa_node")))
    if g.nearest_nic:
        ev.append(Evidence("nearest NIC", f"{g.nearest_nic} ({g.nearest_nic_path or 'path unknown'})"))
    if g.ranks:
        ev.append(Evidence("ranks on this GPU", ", ".join(g.ranks)))
    if g.pod:
        ev.append(
            Evidence(
                "pod",
                f"{g.namespace + '/' if g.namespace else ''}{g.pod}"
                + (f" container {g.container}" if g.container else ""),
                source=g.source_of("pod"),
            )
        )
    return ev


def _sel(g: GpuState) -> str:
    return f"-i {g.bus_id}" if g.bus_id else (f"-i {g.index}" if g.index is not None else "")


def _fmt_t(t: float | None) -> str:
    if t is None:
        return "time unknown"
    import datetime as _dt

    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + "Z"


def _rate_per_min(g: GpuState, name: str) -> tuple[float, float, float] | None:
    """(rate per minute, increase, seconds) of counter readings ``name`` with two or more timed points."""
    pts = sorted((r.time, r.value) for r in g.readings if r.name == name and r.time is not None)
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return None
    inc = 0.0
    for (_, a), (_, b) in zip(pts, pts[1:]):
        inc += b - a if b >= a else b  # a reset restarts from zero
    secs = pts[-1][0] - pts[0][0]
    return inc / secs * 60.0, inc, secs


def _acting(action: Action, f: Finding) -> Finding:
    return f.acting(action)


def _latest(g: GpuState, name: str) -> float | None:
    vals = [r.value for r in g.readings if r.name == name]
    return vals[-1] if vals else None
