"""GPU health rules: Xid/SXid events, memory errors, clock throttling, NVLink, PCIe, DCGM results.

Input: the joined fleet (:func:`clusterdoctor.analyze.gpu_health.gpu_fleet`) of everything GPU the
diagnosis was given — ``nvidia-smi -q``/``-x``/``--query-gpu``, kernel logs, ``nvidia-smi nvlink``,
``lspci -vv``, sysfs links, ``dcgmi``, live NVML and dcgm-exporter series. Each rule reads only the
facts it needs; a GPU whose sources do not state them is not judged (the health grid shows it as
unknown), and a rule for which no GPU states them is skipped with the reason (derived kinds below).

Every finding names the GPU (index, bus id, UUID when known), its node, the rank or pod that uses
it when known, what it costs and how to verify. References: reference/gpu-health.md.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

from clusterdoctor.analyze.gpu_health import GPU_CHECKS, UNNAMED, GpuFleet, gpu_fleet
from clusterdoctor.model import Action, Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.alerts import Alert, Example
from clusterdoctor.rules.registry import Observations, register_derived, register_input, rule
from clusterdoctor.rules.xid_catalog import XID_SOURCE, recovery_action, xid_info
from clusterdoctor.topology.gpu import GpuEvent, GpuState

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
    "A100-SXM 12, A800-SXM 8, H100/H200/H20/B200 SXM 18, H800 8",
    "links",
    "NVIDIA A100/H100/H200/H800/B200 datasheets (NVLink count per SXM module); PCIe cards have none by design "
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
register_derived(
    "gpu_events",
    _coverage(
        "events",
        "driver events (kernel log Xid/SXid, DCGM_FI_DEV_XID_ERRORS)",
        lambda g: bool(g.events) or g.xid_last is not None,
    ),
    "no kernel log or Xid counter (dmesg, journalctl -k, DCGM_FI_DEV_XID_ERRORS)",
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
    """``f`` with what its fix takes (the ranking's tie-break)."""
    f.action = action
    return f


def _latest(g: GpuState, name: str) -> float | None:
    vals = [r.value for r in g.readings if r.name == name]
    return vals[-1] if vals else None


# -- Xid / SXid / lost GPUs -------------------------------------------------------------------------


@rule(
    id="GPU001",
    name="gpu-xid",
    layer=LAYER,
    title="NVIDIA driver reported an Xid error on a GPU",
    requires=("gpu_health", "gpu_events"),
    thresholds=(XID_APP_REPEAT,),
    severity=Severity.CRITICAL,
    alerts=GPU001_ALERTS,
)
def gpu_xid(obs: Observations) -> Iterator[Finding]:
    """One finding per GPU with Xid errors: for each code, what it means, how often, and what NVIDIA
    says to do; the finding takes the severity of its worst code.

    **Symptom**: a job crashed or hung, or one rank slowed down; the kernel log holds ``NVRM: Xid`` lines
    (or dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS`` is non-zero).
    **Why**: the driver logs an Xid for every GPU fault it sees: application faults (13, 31, 43), memory
    errors (48, 63, 64, 92, 94, 95), interconnect faults (74, 79), firmware faults (119, 120). The code says
    whether the program, the GPU or the node must be acted on.
    **Fix**: follow the catalog action per code: restart the application (13/31/43 when isolated), reset
    the GPU (48, 95, 119), reboot the node and check PCIe seating and power (79), RMA after a failed
    remap (64) or repeated hardware Xids.
    **Verify**: `dmesg -T | grep -E 'NVRM: Xid|SXid'`, `nvidia-smi -q -d ECC,ROW_REMAPPER,PERFORMANCE`
    and `dcgmi diag -r 2`.
    """
    f = _fleet(obs)
    for g in f.gpus:
        by_code: dict[int, list[GpuEvent]] = defaultdict(list)
        for e in g.events:
            if e.kind == "xid" and e.code is not None:
                by_code[e.code].append(e)
        if g.xid_last and g.xid_last not in by_code:
            by_code[g.xid_last] = [
                GpuEvent(
                    "xid",
                    g.field_sources.get("xid_last_text") or "last Xid reported by DCGM",
                    code=g.xid_last,
                    source=g.source_of("xid_last"),
                )
            ]
        if not by_code:
            continue
        parts: list[tuple[Severity, Action, int, str]] = []  # (severity, action, code, sentence)
        evidence: list[Evidence] = list(_extra_ident(g))
        actions: list[tuple[int, str]] = []  # (code, action) in code order
        classes: dict[int, tuple[str, ...]] = {}
        hardware = False
        located = True
        for code, evs in sorted(by_code.items()):
            info = xid_info(code)
            act = info.act
            if code == 154:  # the message names the recovery action the driver now asks for
                named = [a for a in (recovery_action(e.message) for e in evs) if a is not None]
                act = max(named) if named else act
            classes[code] = info.causes
            hardware = hardware or info.hardware
            located = located and evs[0].line is not None
            procs = sorted({e.process or str(e.pid) for e in evs if e.process or e.pid})
            sev = info.severity
            if not info.hardware and len(procs) >= int(XID_APP_REPEAT.value):
                sev = Severity.WARNING
                note = f" It recurred for {len(procs)} processes: suspect the GPU, run dcgmi diag -r 2."
            else:
                note = ""
            times = [e.time for e in evs if e.time is not None]
            when = (
                f"{_fmt_t(min(times))} .. {_fmt_t(max(times))}"
                if times
                else (evs[0].time_text or "time not in the log")
            )
            parts.append(
                (
                    sev,
                    act,
                    code,
                    f"Xid {code} ({info.name}) ×{len(evs)} — {info.meaning}. Action: {info.action}.{note}",
                )
            )
            actions.append((code, info.action))
            evidence += [
                Evidence(
                    f"Xid {code} events ({str(sev)})",
                    len(evs),
                    source=evs[0].source + (f":{evs[0].line}" if evs[0].line else ""),
                ),
                Evidence(f"Xid {code} when", when),
                Evidence(f"Xid {code} first message", evs[0].message[:200]),
                *([Evidence(f"Xid {code} processes", ", ".join(procs[:8]))] if procs else []),
                Evidence(f"Xid {code} catalog action", info.action, source=XID_SOURCE),
            ]
        # the worst code leads (on equal severity, the one that needs the strongest action: an Xid 94
        # before an Xid 31); then the others in code order
        parts.sort(key=lambda x: (-int(x[0]), -int(x[1]), x[2]))
        worst, strongest = parts[0][0], max(p[1] for p in parts)
        # the causes it names: those of every code at the worst severity, the leading code's first
        causes: list[str] = []
        for p in parts:
            if p[0] == worst:
                causes += [c for c in classes.get(p[2], ()) if c not in causes]
        cost = "the GPU is unreliable until acted on" if hardware else "the job on it lost its work"
        f = gpu_xid.finding(
            f"{g.label()}: " + " ".join(p[3] for p in parts) + " " + _cost(g, cost),
            evidence=evidence,
            severity=worst,
            subject=g.label(),
            confidence=0.9 if located else 0.7,
            fix=actions[0][1] if len(actions) == 1 else " ".join(f"Xid {c}: {a}." for c, a in actions),
            verify=[
                f"nvidia-smi -q {_sel(g)} -d ECC,ROW_REMAPPER,PERFORMANCE".replace("  ", " "),
                "dmesg -T | grep -E 'NVRM: Xid'",
                "dcgmi diag -r 2",
            ],
            causes=causes,
        )
        f.action = strongest
        yield f


# GPU events that say the driver cannot use a GPU: what they are in words, the cause classes they name
LOST_KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "fell_off_bus": ("fell off the bus", ("gpu.fallen-off-bus",)),
    "unreachable": ("does not answer on PCIe", ("gpu.fallen-off-bus",)),
    "smi_error": ("nvidia-smi cannot read it (ERR!)", ("gpu.fallen-off-bus", "gpu.hw-faulty")),
    "probe_failed": ("probe failed", ("gpu.init-failed",)),
    "bar_invalid": ("invalid BAR", ("gpu.init-failed",)),
    "unsupported": ("not supported by the installed driver", ("gpu.init-failed",)),
}


@rule(
    id="GPU002",
    name="gpu-lost",
    layer=LAYER,
    title="GPU fell off the bus or failed to initialise",
    requires=("gpu_health", "gpu_events"),
    severity=Severity.CRITICAL,
    causes=("gpu.fallen-off-bus", "gpu.init-failed"),
)
def gpu_lost(obs: Observations) -> Iterator[Finding]:
    """The driver lost the GPU ("fallen off the bus") or could not bring it up (probe failed, BARs invalid).

    **Symptom**: ``nvidia-smi`` shows fewer GPUs, reports "GPU is lost" or "No devices were found";
    jobs fail at CUDA initialisation on that node.
    **Why**: the GPU stopped answering on PCIe (power, riser, seating, a failing board) or the platform
    did not give it working BARs/link at boot (firmware, above-4G decoding, an unsupported host).
    **Fix**: drain the node; for a lost GPU reseat it and check power cables, risers and the slot, then
    reboot; for BAR/probe failures enable above-4G decoding/resizable BAR and check the platform supports
    the card; RMA if it recurs.
    **Verify**: `nvidia-smi -L`, `lspci -vv -d 10de:` (LnkSta, driver in use) and `dmesg -T | grep NVRM`.
    """
    f = _fleet(obs)
    for g in f.gpus:
        has79 = any(e.kind == "xid" and e.code == 79 for e in g.events)
        lost = [e for e in g.events if e.kind in LOST_KINDS]
        if not lost or (has79 and all(e.kind == "fell_off_bus" for e in lost)):
            continue  # Xid 79 is GPU001's finding
        kinds = Counter(e.kind for e in lost)
        desc = ", ".join(f"{LOST_KINDS[k][0]} ×{n}" for k, n in kinds.items())
        causes = [c for k in kinds for c in LOST_KINDS[k][1]]
        yield _acting(
            Action.REBOOT_NODE,
            gpu_lost.finding(
                f"{g.label()}: {desc} — the driver cannot use this GPU. " + _cost(g, "no work runs on it"),
                evidence=[
                    *_extra_ident(g),
                    *[
                        Evidence(
                            e.kind, e.message[:200], source=f"{e.source}:{e.line}" if e.line else e.source
                        )
                        for e in lost[:4]
                    ],
                ],
                subject=g.label(),
                confidence=0.9,
                causes=list(dict.fromkeys(causes)),
            ),
        )
    for node, evs in f.node_events.items():
        fails = [e for e in evs if e.kind in ("probe_failed", "fell_off_bus")]
        if fails and not any(g for g in f.gpus_of(node) if any(x.kind in LOST_KINDS for x in g.events)):
            yield _acting(
                Action.REBOOT_NODE,
                gpu_lost.finding(
                    f"{node_name(node)}: {fails[0].message[:160]}",
                    evidence=[
                        Evidence(e.kind, e.message[:200], source=f"{e.source}:{e.line}") for e in fails[:4]
                    ],
                    subject=node_name(node),
                    confidence=0.8,
                    causes=list(dict.fromkeys(c for e in fails for c in LOST_KINDS[e.kind][1])),
                ),
            )


@rule(
    id="GPU003",
    name="nvswitch-sxid",
    layer=LAYER,
    title="NVSwitch reported an SXid error",
    requires=("gpu_health",),
    severity=Severity.CRITICAL,
    causes=("gpu.nvlink-fault",),
)
def nvswitch_sxid(obs: Observations) -> Iterator[Finding]:
    """An NVSwitch (``nvidia-nvswitch``) logged an SXid; joined to the GPUs of the node that show NVLink trouble.

    **Symptom**: NCCL all-reduce inside an HGX node slows or hangs; ``SXid`` lines in the kernel log;
    DCGM may still pass (NVIDIA/DCGM#198).
    **Why**: an NVSwitch port or its link to a GPU failed (CRC, training, fatal port errors); the GPU on
    the other end of that port loses bandwidth or its links (Xid 74, inactive links).
    **Fix**: drain the node; reset the GPUs/NVSwitches (or reboot) and restart the fabric manager; if the
    same port fails again, service the baseboard.
    **Verify**: `dmesg -T | grep SXid`, `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e` on every GPU,
    `systemctl status nvidia-fabricmanager`.
    """
    f = _fleet(obs)
    for node, evs in f.node_events.items():
        sx = [e for e in evs if e.kind == "sxid"]
        if not sx:
            continue
        suspects = [
            g
            for g in f.gpus_of(node)
            if any(e.kind == "xid" and e.code == 74 for e in g.events)
            or any(n.active is False for n in g.nvlinks)
            or g.nvlink_support == "inactive"
        ]
        codes = Counter(e.code for e in sx)
        if suspects:
            joined = "; GPUs with NVLink trouble on this node: " + ", ".join(g.label() for g in suspects)
        else:
            joined = "; no GPU source on this node shows which GPU lost links (add nvidia-smi nvlink -s and the Xid log)"
        yield nvswitch_sxid.finding(
            f"{node_name(node)}: {len(sx)} SXid event(s) from "
            + ", ".join(sorted({str(e.attrs.get("nvswitch")) for e in sx}))
            + f" (codes {', '.join(str(c) for c in sorted(codes))}){joined}. NVLink traffic through that switch "
            "slows or stops, so intra-node collectives wait.",
            evidence=[
                *[
                    Evidence(f"SXid {e.code}", e.message[:200], source=f"{e.source}:{e.line}", time=e.time)
                    for e in sx[:4]
                ],
                *[_ident(g) for g in suspects],
            ],
            subject=suspects[0].label() if len(suspects) == 1 else node_name(node),
            confidence=0.8 if suspects else 0.6,
        )


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


# -- clocks ------------------------------------------------------------------------------------------

HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SW_REASONS = ("sw_thermal_slowdown", "sw_power_cap")
REASON_TEXT = {
    "hw_slowdown": "HW slowdown (external signal: power supply, board, or thermal)",
    "hw_thermal_slowdown": "HW thermal slowdown (the GPU is too hot)",
    "hw_power_brake_slowdown": "HW power brake (the power supply or baseboard asserted the brake)",
    "sw_thermal_slowdown": "SW thermal slowdown (the driver lowers clocks to stay under a temperature limit)",
    "sw_power_cap": "SW power cap (the GPU hit its power limit)",
}


def _judged_reasons(g: GpuState) -> list[str]:
    """Active reasons that count: hardware ones always; software ones while busy."""
    active = set(g.active_reasons())
    out = [r for r in HW_REASONS if r in active]
    busy = g.busy(float(BUSY_UTIL.value))
    if busy or out:
        out += [r for r in SW_REASONS if r in active]
    return out


@rule(
    id="GPU009",
    name="gpu-clock-event-reason",
    layer=LAYER,
    title="GPU clocks held down by a throttle (clock event) reason",
    requires=("gpu_health", "gpu_clock_reasons"),
    thresholds=(BUSY_UTIL,),
    severity=Severity.WARNING,
    causes=("gpu.thermal-power",),
)
def clock_reason(obs: Observations) -> Iterator[Finding]:
    """An active HW slowdown / HW thermal / HW power brake (any time) or SW thermal / SW power cap (while busy).

    **Symptom**: one rank's step time is longer; its GPU runs below its max SM clock at full utilisation;
    every collective waits for it.
    **Why**: the GPU lowers its clocks when told to: a hardware signal (power supply, baseboard, over
    temperature) or the driver's power/thermal control. The same reason on every GPU of a node points at
    the node (PSU, cooling, a power cap set for the node); on one GPU at that GPU (its cooling, its power
    stage, a lowered power limit).
    **Fix**: HW power brake / HW slowdown: check the node's PSUs and BMC event log, reseat; thermal: check
    fans, airflow, inlet temperature; SW power cap: check ``nvidia-smi -q -d POWER`` for a lowered limit.
    **Verify**: `nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE` under load and `dcgmi diag -r 2`.
    """
    f = _fleet(obs)
    for node in f.nodes():
        gpus = [g for g in f.gpus_of(node) if g.clock_reasons is not None]
        judged = {g.label(): _judged_reasons(g) for g in gpus}
        node_wide: set[str] = set()
        if len(gpus) >= 2:
            for r in (*HW_REASONS, *SW_REASONS):
                if all(r in judged[g.label()] for g in gpus):
                    node_wide.add(r)
        if node_wide:
            yield clock_reason.finding(
                f"{node_name(node)}: every GPU ({len(gpus)}) reports "
                + ", ".join(REASON_TEXT[r] for r in sorted(node_wide))
                + " — the cause is the node (power supply, cooling, node power cap), not one GPU. All its ranks run slow.",
                evidence=[
                    Evidence(
                        f"{g.label()} active reasons",
                        ", ".join(g.active_reasons()),
                        source=g.source_of("clock_reasons"),
                    )
                    for g in gpus[:8]
                ],
                severity=Severity.CRITICAL if node_wide & set(HW_REASONS) else Severity.WARNING,
                subject=node_name(node),
                confidence=0.85,
            )
        for g in gpus:
            mine = [r for r in judged[g.label()] if r not in node_wide]
            if not mine:
                continue
            hw = [r for r in mine if r in HW_REASONS]
            ratio = (g.sm_clock_mhz / g.sm_max_mhz) if g.sm_clock_mhz and g.sm_max_mhz else None
            cost = (
                f"it runs at {ratio:.0%} of its max SM clock ({g.sm_clock_mhz:.0f}/{g.sm_max_mhz:.0f} MHz)"
                if ratio is not None and ratio < 0.999
                else "its clocks are capped whenever work arrives"
            )
            busy = g.busy(float(BUSY_UTIL.value))
            yield clock_reason.finding(
                f"{g.label()}: "
                + ", ".join(REASON_TEXT[r] for r in mine)
                + (
                    f" while {g.util_pct:.0f}% busy"
                    if busy
                    else (" although idle (a hardware signal is asserted)" if hw else "")
                )
                + ". "
                + _cost(g, cost),
                evidence=[
                    *_extra_ident(g),
                    Evidence(
                        "active clock event reasons",
                        ", ".join(g.active_reasons()),
                        source=g.source_of("clock_reasons"),
                    ),
                    Evidence("utilisation", g.util_pct, BUSY_UTIL.value, "%", g.source_of("util_pct")),
                    *(
                        [
                            Evidence(
                                "SM clock / max",
                                f"{g.sm_clock_mhz:.0f}/{g.sm_max_mhz:.0f} MHz",
                                source=g.source_of("sm_clock_mhz"),
                            )
                        ]
                        if ratio is not None
                        else []
                    ),
                    *(
                        [Evidence("temperature", g.temp_c, unit="C", source=g.source_of("temp_c"))]
                        if g.temp_c is not None
                        else []
                    ),
                    *(
                        [
                            Evidence(
                                "power draw / limit",
                                f"{g.power_w:.0f}/{g.power_limit_w:.0f} W",
                                source=g.source_of("power_w"),
                            )
                        ]
                        if g.power_w is not None and g.power_limit_w
                        else []
                    ),
                ],
                severity=Severity.CRITICAL if hw else Severity.WARNING,
                subject=g.label(),
                confidence=0.85 if busy else 0.7,
                verify=[
                    f"nvidia-smi -q {_sel(g)} -d PERFORMANCE,POWER,TEMPERATURE",
                    "dcgmi diag -r 2",
                    "ipmitool sel elist",
                ],
            )


@rule(
    id="GPU010",
    name="gpu-sm-clock-low-under-load",
    layer=LAYER,
    title="SM clock far below its maximum under load",
    requires=("gpu_health", "gpu_clocks_under_load"),
    thresholds=(BUSY_UTIL, SM_CLOCK_MIN_RATIO),
    severity=Severity.WARNING,
    causes=("gpu.thermal-power",),
)
def sm_clock_low(obs: Observations) -> Iterator[Finding]:
    """A busy GPU runs its SM clock below 80 % of its maximum with no throttle reason that explains it.

    **Symptom**: the rank on this GPU is slower than its peers; nvidia-smi shows it at full utilisation but
    a low SM clock.
    **Why**: locked or lowered application clocks (``nvidia-smi -lgc``/``-ac``), a reduced power limit, or a
    throttle reason the source did not export.
    **Fix**: reset clocks (``nvidia-smi -rgc``, ``-rac``), restore the default power limit, then look at the
    throttle reasons (GPU009) under load.
    **Verify**: `nvidia-smi -q -d CLOCK,PERFORMANCE,POWER` under load.
    """
    for g in _fleet(obs).gpus:
        if not g.busy(float(BUSY_UTIL.value)) or not g.sm_clock_mhz or not g.sm_max_mhz:
            continue
        ratio = g.sm_clock_mhz / g.sm_max_mhz
        if ratio >= float(SM_CLOCK_MIN_RATIO.value):
            continue
        if _judged_reasons(g):
            continue  # GPU009 names the reason and this cost
        yield sm_clock_low.finding(
            f"{g.label()}: {g.util_pct:.0f}% busy at {g.sm_clock_mhz:.0f} MHz, {ratio:.0%} of its {g.sm_max_mhz:.0f} MHz maximum"
            + (
                "; no throttle reason active — check locked clocks and the power limit."
                if g.clock_reasons is not None
                else "; throttle reasons not exported."
            )
            + " "
            + _cost(g, f"it computes about {1 / max(ratio, 0.01):.1f}× slower than an unthrottled peer"),
            evidence=[
                *_extra_ident(g),
                Evidence(
                    "SM clock / max",
                    round(ratio, 3),
                    SM_CLOCK_MIN_RATIO.value,
                    source=g.source_of("sm_clock_mhz"),
                ),
                Evidence("utilisation", g.util_pct, BUSY_UTIL.value, "%", g.source_of("util_pct")),
                *([Evidence("application clock", g.app_sm_mhz, unit="MHz")] if g.app_sm_mhz else []),
            ],
            subject=g.label(),
            confidence=0.75,
        )


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


# -- joined to the communication and fail-slow layers ---------------------------------------------------

# the rules that judge one GPU (or one node's GPUs); GPU019 and the fail-slow rules join their findings
PER_GPU_RULES = (
    gpu_xid, gpu_lost, ecc_uncorrectable, remap_pending, remap_failure, retired_pages,
    correctable_rising, clock_reason, sm_clock_low, nvlink_down, nvlink_errors,
    pcie_degraded, pcie_replays, lane_errors, no_driver, dcgm_diag, dcgm_health, fabric_not_ready,
)  # fmt: skip
# What acting on each rule's finding takes, when the finding does not say (the ranking's tie-break:
# of two findings with the same score, the one that needs the GPU reset or the board replaced leads)
DEFAULT_ACTIONS: dict[str, Action] = {
    "GPU001": Action.RESET_DEVICE,
    "GPU002": Action.REBOOT_NODE,
    "GPU003": Action.RESET_DEVICE,
    "GPU004": Action.RESET_DEVICE,
    "GPU005": Action.RESET_DEVICE,
    "GPU006": Action.REPLACE_HARDWARE,
    "GPU007": Action.REBOOT_NODE,
    "GPU008": Action.OBSERVE,
    "GPU009": Action.REPLACE_HARDWARE,
    "GPU010": Action.CONFIGURE,
    "GPU011": Action.RESET_DEVICE,
    "GPU012": Action.OBSERVE,
    "GPU013": Action.REPLACE_HARDWARE,
    "GPU014": Action.OBSERVE,
    "GPU015": Action.OBSERVE,
    "GPU016": Action.CONFIGURE,
    "GPU017": Action.RESET_DEVICE,
    "GPU018": Action.OBSERVE,
    "GPU020": Action.RESTART_SERVICE,
}


def _default_action(r: Any) -> None:
    """Give the findings of rule ``r`` its :data:`DEFAULT_ACTIONS` entry unless they name their own."""
    import functools

    fn, action = r.fn, DEFAULT_ACTIONS[r.id]

    @functools.wraps(fn)
    def acting(obs: Observations) -> Iterator[Any]:
        for x in fn(obs):
            if isinstance(x, Finding) and x.action == Action.NONE:
                x.action = action
            yield x

    r.fn = acting


for _r in PER_GPU_RULES:
    _default_action(_r)

_CHECK_OF_RULE = {rid: cid for cid, _t, rules in GPU_CHECKS for rid in rules}
# which GPU faults can make a rank of each fail-slow class slow (a data-loader straggler: none)
CAUSE_CHECKS: dict[str, tuple[str, ...]] = {
    "compute": ("xid", "memory", "clocks", "nvlink", "pcie", "dcgm"),
    "communication": ("nvlink", "pcie"),
    "silent": ("xid", "memory", "dcgm"),
    "data": (),
    "job": (),
}


def judged_gpu_findings(obs: Observations) -> list[Finding]:
    """The per-GPU rules' findings at warning or above (computed once per Observations)."""
    cached = obs.get("_gpu_judged")
    if cached is not None:
        return cached
    judged: list[Finding] = []
    if obs.has("gpu_health"):
        for r in PER_GPU_RULES:
            if all(obs.has(k) for k in r.requires):
                judged.extend(x for x in r.fn(obs) if x.severity >= Severity.WARNING)
    obs.put("_gpu_judged", judged)
    return judged


def fault_phrase(f: Finding) -> str:
    """A GPU finding in a few words: the active throttle reasons for GPU009, else its title."""
    if f.rule == "GPU009":
        ev = next((e for e in f.evidence if e.description == "active clock event reasons"), None)
        names = [n.strip() for n in str(ev.value).split(",")] if ev is not None else []
        short = [REASON_TEXT[n].split(" (")[0] for n in names if n in REASON_TEXT]
        if short:
            return ", ".join(short) + " active"
    return f.title[:1].lower() + f.title[1:]


class RankGpuHealth:
    """What the GPU data says about one rank's GPU: the GPUs tied to it, the findings on them (or on
    its whole node), and one evidence line. Empty (``known`` False) when no GPU source covers it."""

    def __init__(self, obs: Observations, host: str | None, gpu: Any, job_hosts: set[str]) -> None:
        from clusterdoctor.analyze.gpu_health import coverage, gpus_of_rank

        self.host, self.gpu = host, gpu
        fleet = _fleet(obs)
        tie = gpus_of_rank(fleet, host, gpu, job_hosts)
        self.node, self.match, self.note = tie.node, tie.match, tie.note
        self.gpus = tie.gpus
        self.labels = [g.label() for g in tie.gpus]
        self.node_labels = [g.label() for g in tie.node_gpus] + (
            [node_name(tie.node or None)] if tie.node is not None else []
        )
        judged = judged_gpu_findings(obs)
        own = set(self.labels) | ({node_name(tie.node or None)} if tie.node is not None else set())
        scope = own if tie.match == "gpu" else set(self.node_labels)
        self.faults = sorted(
            (f for f in judged if f.subject in scope), key=lambda f: (-int(f.severity), -f.score, f.rule)
        )
        self.known = tie.match is not None
        where = f"GPU{gpu}" if tie.match == "gpu" else "its GPU"
        self.title = f"{where} on this host" if tie.match == "gpu" else "GPUs of this host"
        if not self.known:
            self.text = f"not checked: no GPU source for host {host or '?'}"
        elif self.faults:
            self.text = "; ".join(f"{fault_phrase(f)} ({f.rule}, {f.subject})" for f in self.faults[:4])
        elif tie.match == "gpu":
            cov = coverage(tie.gpus[0], fleet)
            ok = [c for c, v in cov.items() if v == "ok"]
            unk = [c for c, v in cov.items() if v == "unknown"]
            self.text = f"{self.labels[0]}: no fault in {', '.join(ok) or 'nothing stated'}" + (
                f"; not exported: {', '.join(unk)}" if unk else ""
            )
        else:
            self.text = (
                f"no GPU{gpu} in the GPU sources of {node_name(tie.node or None)}"
                if gpu_index_known(gpu)
                else f"its GPU is not known (probe label {gpu!r}); no GPU fault on {node_name(tie.node or None)}"
            )

    def causes(self, kind: str) -> list[Finding]:
        """The findings that can make a rank of fail-slow class ``kind`` slow."""
        checks = CAUSE_CHECKS.get(kind, ())
        return [f for f in self.faults if _CHECK_OF_RULE.get(f.rule) in checks]


def gpu_index_known(gpu: Any) -> bool:
    from clusterdoctor.analyze.gpu_health import gpu_index

    return gpu_index(gpu) is not None


def rank_gpu_health(obs: Observations, rank: int) -> RankGpuHealth | None:
    """:class:`RankGpuHealth` of ``rank`` of the fail-slow table (its host and GPU as the probe
    recorded them), or None without GPU data or without the rank's identity."""
    table = obs.get("watch")
    if table is None or not obs.has("gpu_health"):
        return None
    ident = table.identities.get(rank)
    if ident is None:
        return None
    cache = obs.get("_rank_gpu_health")
    if cache is None:
        cache = {}
        obs.put("_rank_gpu_health", cache)
    if rank not in cache:
        hosts = {i.host for i in table.identities.values() if i.host}
        cache[rank] = RankGpuHealth(obs, ident.host, ident.gpu, hosts)
    return cache[rank]


def failslow_symptom(ep: Any, table: Any) -> tuple[str, str, str]:
    """(fail-slow rule, what the rank does, what it costs the others) of a detector episode."""
    kind = ep.periodic_of if ep.kind == "periodic" else ep.kind
    rule_id = {"compute": "FS001", "communication": "FS002", "data": "FS003"}.get(kind, "FS001")
    if ep.kind == "periodic":
        rule_id = "FS005"
    late = ep.detail.get("lateness_s")
    if kind == "communication":
        what = f"its transfers are slow since step {ep.onset_step}"
        cost = f"every collective of the job is {ep.factor:.2f}x slower"
    else:
        what = f"finishes its own work late since step {ep.onset_step}" + (
            f", {late * 1000:.1f} ms a step" if late else ""
        )
        cost = f"every other rank waits for it; the job is {ep.factor:.2f}x slower"
    return rule_id, what, cost


@rule(
    id="GPU019",
    name="gpu-fault-on-straggler-rank",
    layer=LAYER,
    title="A sick GPU is why a rank straggles",
    requires=("gpu_health",),
    requires_any=("kineto", "watch"),
    severity=Severity.CRITICAL,
)
def straggler_gpu(obs: Observations) -> Iterator[Finding]:
    """The rank named as the straggler — by the trace analysis (COMM007) or by the fail-slow detector
    (FS001 compute, FS002 localised link, FS005 periodic, FS006 silent) — runs on a GPU, or node, with
    a GPU finding that can cause it.

    **Symptom**: one rank starts most collectives last (or its transfers are slow, or it stopped);
    every other rank waits for it; the job's step time follows that rank.
    **Why**: a throttled, erroring or degraded GPU computes its part of the step slower (a bad PCIe or
    NVLink link moves its data slower; an Xid stops it); the collective cannot complete until it
    arrives. The GPU finding is the cause, the straggler the symptom.
    **Fix**: act on the GPU finding named (drain/reset/RMA, fix cooling or power); meanwhile exclude that
    GPU or node from the job (e.g. ``CUDA_VISIBLE_DEVICES`` or a node taint) so the others stop waiting.
    **Verify**: `clusterdoctor comm analyze TRACE_DIR` or `clusterdoctor watch --from DIR --gpu FILES`
    after the fix (the straggler is gone) and `nvidia-smi -q -d PERFORMANCE,ECC,ROW_REMAPPER` on that node.
    """
    judged = judged_gpu_findings(obs)
    if obs.has("kineto"):
        yield from _comm_straggler_gpu(obs, judged)
    if obs.has("watch"):
        yield from _failslow_straggler_gpu(obs)


def _comm_straggler_gpu(obs: Observations, judged: list[Finding]) -> Iterator[Finding]:
    from clusterdoctor.analyze.correlate import gpu_cause_chain
    from clusterdoctor.rules.comm import STRAGGLER_MIN_LATE, STRAGGLER_SHARE, comm_analysis

    a = comm_analysis(obs)
    f = _fleet(obs)
    for s in a.stragglers[:1]:
        if s.matched < 3 or s.late_count / s.matched < float(STRAGGLER_SHARE.value):
            continue
        if s.mean_late_us < float(STRAGGLER_MIN_LATE.value):
            continue
        rank_gpus = [g for g in f.gpus if str(s.rank) in g.ranks]
        nodes = {g.node or UNNAMED for g in rank_gpus}
        if not nodes and len(f.nodes()) == 1:
            nodes = set(f.nodes())  # one node described: the rank's node
        node_gpus = [g for g in f.gpus if (g.node or UNNAMED) in nodes]
        labels = [g.label() for g in rank_gpus]
        node_labels = [g.label() for g in node_gpus] + [node_name(n or None) for n in nodes]
        chain = gpu_cause_chain(s, judged, labels, node_labels)
        if chain is None:
            continue
        worst = max(
            (x for x in judged if x.subject in {c[0] for c in chain.causes}), key=lambda x: x.severity
        )
        yield straggler_gpu.finding(
            f"rank {s.rank} is the straggler and "
            + ("its GPU" if chain.match == "gpu" else "its node")
            + f" is sick: {chain.describe()}.",
            evidence=[
                Evidence(
                    "straggler (COMM007)", f"rank {s.rank}: last in {s.late_count} of {s.matched} collectives"
                ),
                Evidence("mean lateness", round(s.mean_late_us, 1), float(STRAGGLER_MIN_LATE.value), "µs"),
                *[Evidence("cause", f"{rule} {title}", source=subj) for subj, title, rule, _ in chain.causes],
                Evidence("evidence chain", chain.describe()),
            ],
            severity=worst.severity,
            subject=f"rank {s.rank}",
            confidence=0.8 if chain.match == "gpu" else 0.6,
            causes=worst.causes,
        )


def failslow_gpu_chain(obs: Observations, rank: int, kind: str, symptom: str, cost: str) -> Any:
    """The GPU cause chain of a fail-slow straggler of class ``kind`` (None when no GPU finding on its
    GPU or node can cause that class), with the rank's :class:`RankGpuHealth`."""
    from clusterdoctor.analyze.correlate import rank_cause_chain

    h = rank_gpu_health(obs, rank)
    if h is None or not h.known:
        return None, h
    causes = h.causes(kind)
    labels = h.labels if h.match == "gpu" else []
    node_labels = [node_name(h.node or None)] if h.match == "gpu" else h.node_labels
    return rank_cause_chain(rank, symptom, cost, causes, labels, node_labels), h


def _failslow_straggler_gpu(obs: Observations) -> Iterator[Finding]:
    from clusterdoctor.rules.failslow import failslow_analysis

    res = failslow_analysis(obs)
    table = obs.get("watch")
    items: list[tuple[int, str, str, str, str, Any]] = []
    for ep in res.episodes:
        if ep.rank is None:
            continue
        kind = ep.periodic_of if ep.kind == "periodic" else ep.kind
        rule_id, what, cost = failslow_symptom(ep, table)
        items.append((ep.rank, kind or "", rule_id, what, cost, ep.confidence))
    for s in res.silent:
        items.append(
            (s.rank, "silent", "FS006", f"stopped reporting after step {s.last_step}", "the job waits", 0.9)
        )
    seen: set[int] = set()
    for rank, kind, rule_id, what, cost, conf in items:
        if rank in seen:
            continue
        chain, h = failslow_gpu_chain(obs, rank, kind, what, cost)
        if chain is None:
            continue
        seen.add(rank)
        worst = max(
            (x for x in h.faults if x.subject in {c[0] for c in chain.causes}), key=lambda x: x.severity
        )
        yield straggler_gpu.finding(
            f"rank {rank} is the straggler ({rule_id}) and "
            + ("its GPU" if chain.match == "gpu" else "a GPU of its node")
            + f" is sick: {chain.describe()}.",
            evidence=[
                Evidence(f"straggler ({rule_id})", f"rank {rank}: {what}"),
                *([Evidence("how the rank was tied to the GPU data", h.note)] if h.note else []),
                *[Evidence("cause", f"{rl} {title}", source=subj) for subj, title, rl, _ in chain.causes],
                Evidence("evidence chain", chain.describe()),
            ],
            severity=worst.severity,
            subject=f"rank {rank}",
            confidence=round(min(conf, 0.8 if chain.match == "gpu" else 0.6), 3),
            fix=worst.fix
            + " Meanwhile take that GPU or node out of the job so the other ranks stop waiting.",
            verify=[*worst.verify, "clusterdoctor watch --from <dir> --gpu <files> --once"],
            causes=worst.causes,
        )
