"""dcgm-exporter metrics -> one :class:`~clusterdoctor.topology.gpu.GpuReport` per node.

Input is any metrics window (:class:`~clusterdoctor.analyze.metric_window.MetricWindow`): a saved
``/metrics`` dump, two ``--scrape`` reads, or the series of Prometheus queries — the exposition
itself is read by :mod:`clusterdoctor.observe.control.prom_text`. Each ``DCGM_FI_*`` sample is
tied to its GPU by labels: ``Hostname`` (the node), ``UUID``, ``pci_bus_id``, ``gpu`` (index),
``modelName``, ``DCGM_FI_DRIVER_VERSION`` and, with the Kubernetes mapping, ``pod``/``namespace``/
``container`` (``exported_*`` once Prometheus relabelled them). Samples without HELP/TYPE are read
the same way.

Only what is exported is known: a field set without ``DCGM_FI_DEV_ECC_*`` leaves every ECC fact
``None`` and ``report.facts`` without ``"ecc"``, so rules say "not exported", not "healthy".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from clusterdoctor.observe.gpu.common import norm_bus_id
from clusterdoctor.observe.gpu.nvidia_smi_q import reason_bits
from clusterdoctor.topology.gpu import GpuReport, GpuState, PcieLink, Reading

__all__ = ["DCGM_FIELDS", "COUNTER_FIELDS", "gpus_from_window", "has_dcgm", "parse_dcgm_exporter"]

KIND = "dcgm-exporter"

# DCGM field -> (GpuState attribute, fact group). Field names: DCGM dcgm_fields.h / dcgm-exporter
# default-counters.csv and dcp-metrics-included.csv.
DCGM_FIELDS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("util_pct", "load"),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", "clocks"),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("sm_max_mhz", "clocks"),
    "DCGM_FI_DEV_APP_SM_CLOCK": ("app_sm_mhz", "clocks"),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", "thermal"),
    "DCGM_FI_DEV_MEMORY_TEMP": ("mem_temp_c", "thermal"),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", "power"),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", "power"),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", "power"),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF": ("power_default_limit_w", "power"),
    "DCGM_FI_DEV_XID_ERRORS": ("xid_last", "xid"),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_volatile_uncorrectable", "ecc"),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("ecc_aggregate_uncorrectable", "ecc"),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_volatile_correctable", "ecc"),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ("ecc_aggregate_correctable", "ecc"),
    "DCGM_FI_DEV_RETIRED_SBE": ("retired_sbe", "retired_pages"),
    "DCGM_FI_DEV_RETIRED_DBE": ("retired_dbe", "retired_pages"),
    "DCGM_FI_DEV_RETIRED_PENDING": ("retired_pending", "retired_pages"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("remap_correctable", "remap"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("remap_uncorrectable", "remap"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("remap_failure", "remap"),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("remap_pending", "remap"),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("clock_reasons", "clock_reasons"),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("clock_reasons", "clock_reasons"),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("pcie.replays", "pcie"),
    "DCGM_FI_DEV_PCIE_LINK_GEN": ("pcie.gen_current", "pcie"),
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": ("pcie.gen_max", "pcie"),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": ("pcie.width_current", "pcie"),
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": ("pcie.width_max", "pcie"),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("nvlink_crc_errors", "nvlink_errors"),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("nvlink_crc_data_errors", "nvlink_errors"),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("nvlink_replay_errors", "nvlink_errors"),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("nvlink_recovery_errors", "nvlink_errors"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_engine_active", "load"),
}
# cumulative counters: every timed point is kept as a Reading (rates need two)
COUNTER_FIELDS = {
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "pcie_replays",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ecc_volatile_correctable",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_volatile_uncorrectable",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "ecc_aggregate_correctable",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "nvlink_crc_errors",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "nvlink_crc_data_errors",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "nvlink_replay_errors",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "nvlink_recovery_errors",
}
_BOOL_ATTRS = {"remap_failure", "remap_pending", "retired_pending"}
_INT_ATTRS = {
    "xid_last",
    "ecc_volatile_uncorrectable",
    "ecc_aggregate_uncorrectable",
    "ecc_volatile_correctable",
    "ecc_aggregate_correctable",
    "retired_sbe",
    "retired_dbe",
    "remap_correctable",
    "remap_uncorrectable",
}


def has_dcgm(window: Any) -> bool:
    """Whether a metrics window holds any dcgm-exporter series."""
    names = window.names() if hasattr(window, "names") else set()
    return any(n.startswith("DCGM_FI_") for n in names)


def _label(labels: dict[str, str], *names: str) -> str | None:
    for n in names:
        v = labels.get(n)
        if v:
            return v
    return None


def _gpu_key(labels: dict[str, str]) -> tuple[str, str]:
    node = (
        _label(labels, "Hostname", "hostname", "exported_Hostname", "node", "kubernetes_node")
        or _label(labels, "instance")
        or ""
    )
    ident = _label(labels, "pci_bus_id") or _label(labels, "UUID", "uuid") or f"gpu {labels.get('gpu', '?')}"
    return node, ident


def gpus_from_window(window: Any, source: str | None = None) -> list[GpuReport]:
    """One GpuReport per node (``Hostname`` label) from the DCGM series of a metrics window."""
    src = source or getattr(window, "source", "") or KIND
    reports: dict[str, GpuReport] = {}
    gpus: dict[tuple[str, str], GpuState] = {}
    untimed = getattr(window, "start", None) is None
    for name, lst in getattr(window, "series", {}).items():
        spec = DCGM_FIELDS.get(name)
        if spec is None and not name.startswith("DCGM_FI_"):
            continue
        for s in lst:
            if not s.points:
                continue
            labels = s.labels
            node, ident = _gpu_key(labels)
            rep = reports.get(node)
            if rep is None:
                rep = reports[node] = GpuReport(KIND, src, node=node or None)
            rep.attrs.setdefault("fields", set()).add(name)
            g = gpus.get((node, ident))
            if g is None:
                g = gpus[(node, ident)] = GpuState(node=node or None)
                g.sources.append(src)
                rep.gpus.append(g)
                _identity(g, labels, src)
            elif (g.model is None and "modelName" in labels) or (
                g.pod is None and ("pod" in labels or "exported_pod" in labels)
            ):
                _identity(g, labels, src)
            if spec is None:
                continue
            attr, fact = spec
            rep.facts.add(fact)
            t, v = s.points[-1]
            if v != v:  # NaN: DCGM's blank value
                continue
            _apply(g, attr, v, src, labels)
            counter = COUNTER_FIELDS.get(name)
            if counter is not None:
                for pt, pv in s.points:
                    if pv == pv:
                        g.readings.append(Reading(counter, float(pv), None if untimed else pt, src))
    out = list(reports.values())
    for rep in out:
        rep.attrs["fields"] = sorted(rep.attrs.get("fields", ()))
        if untimed:
            rep.time = None
        else:
            rep.time = getattr(window, "end", None)
    return out


def _identity(g: GpuState, labels: dict[str, str], src: str) -> None:
    idx = labels.get("gpu")
    if idx is not None and idx.isdigit():
        g.set("index", int(idx), src)
    g.set("bus_id", norm_bus_id(labels.get("pci_bus_id")), src)
    g.set("uuid", _label(labels, "UUID", "uuid"), src)
    g.set("model", _label(labels, "modelName"), src)
    g.set("driver_version", _label(labels, "DCGM_FI_DRIVER_VERSION"), src)
    g.set("pod", _label(labels, "pod", "exported_pod"), src)
    g.set("namespace", _label(labels, "namespace", "exported_namespace"), src)
    g.set("container", _label(labels, "container", "exported_container"), src)


def _apply(g: GpuState, attr: str, v: float, src: str, labels: dict[str, str]) -> None:
    if attr.startswith("pcie."):
        if g.pcie is None:
            g.pcie = PcieLink(source=src)
        setattr(g.pcie, attr[5:], int(v))
        return
    if attr == "clock_reasons":
        g.set("clock_reasons", reason_bits(int(v)), src)
        return
    if attr == "gr_engine_active":
        if g.util_pct is None or g.field_sources.get("util_pct", "").endswith("(gr_engine_active)"):
            g.set("util_pct", round(v * 100.0, 3), src + " (gr_engine_active)")
        return
    if attr.startswith("nvlink_"):
        return  # counters only (readings)
    if attr in _BOOL_ATTRS:
        g.set(attr, v > 0, src)
    elif attr in _INT_ATTRS:
        g.set(attr, int(v), src)
        if attr == "xid_last" and v > 0:
            g.field_sources["xid_last_text"] = labels.get("err_msg", "")
    else:
        g.set(attr, float(v), src)


def parse_dcgm_exporter(data: bytes | str, path: str | None = None) -> list[GpuReport]:
    """A saved dcgm-exporter ``/metrics`` text -> reports (one per node). InputError when not metrics."""
    from clusterdoctor.analyze.metric_window import MetricWindow
    from clusterdoctor.errors import InputError
    from clusterdoctor.observe.control.prom_text import parse_prom_text
    from clusterdoctor.observe.gpu.common import decode

    text = decode(data, path)
    ms = parse_prom_text(text, path)
    w = MetricWindow.from_metricset(ms, source=path or "")
    if not has_dcgm(w):
        raise InputError("no DCGM_FI_* series: not a dcgm-exporter scrape", path)
    return gpus_from_window(w, path)


def fields_missing(report: GpuReport, wanted: Iterable[str]) -> list[str]:
    have = set(report.attrs.get("fields") or ())
    return [f for f in wanted if f not in have]
