"""Detect and load GPU health files for ``clusterdoctor diagnose`` / ``gpu health`` (by content).

:func:`sniff_gpu` says whether a file is one of the GPU sources; :func:`load_gpu_observations` parses it
into ``{"gpu_reports": [GpuReport], "warnings": [...]}``. dcgm-exporter dumps are metrics expositions
and are loaded by the generic metrics loader; :mod:`clusterdoctor.analyze.gpu_health` reads their
``DCGM_FI_*`` series from the metrics window. A kernel log that is also a control-plane log (a full
syslog) is loaded both ways, so neither side loses its events.

A paste often holds the output of several tools (``nvidia-smi`` and then ``dmesg | grep NVRM``): every
GPU source whose sniffer accepts the file is parsed, and each gives its report; the file is refused
only when none of them can read it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.topology.gpu import GpuReport

__all__ = [
    "SOURCES",
    "classify_gpu",
    "classify_gpu_all",
    "load_gpu_observations",
    "parse_gpu_bytes",
    "parse_gpu_reports",
    "sniff_gpu",
]


def _sources() -> list[tuple[str, Callable[[bytes], bool], Callable[[bytes, str], Any]]]:
    from clusterdoctor.observe.gpu import (
        dcgmi,
        dmon,
        kernel_log,
        lspci,
        nvidia_smi_q,
        nvidia_smi_table,
        nvidia_smi_xml,
        nvlink,
        query_gpu_csv,
        service_logs,
    )

    return [
        ("nvidia-smi -q -x", nvidia_smi_xml.sniff_nvidia_smi_xml, nvidia_smi_xml.parse_nvidia_smi_xml),
        ("nvidia-smi -q", nvidia_smi_q.sniff_nvidia_smi_q, nvidia_smi_q.parse_nvidia_smi_q),
        ("nvidia-smi --query-gpu", query_gpu_csv.sniff_query_gpu_csv, query_gpu_csv.parse_query_gpu_csv),
        ("nvidia-smi", nvidia_smi_table.sniff_nvidia_smi_table, nvidia_smi_table.parse_nvidia_smi_table),
        ("nvidia-smi nvlink", nvlink.sniff_nvlink, nvlink.parse_nvlink),
        ("nvidia-smi -L", nvidia_smi_table.sniff_nvidia_smi_list, nvidia_smi_table.parse_nvidia_smi_list),
        ("nvidia-smi dmon", dmon.sniff_dmon, dmon.parse_dmon),
        ("dcgmi", dcgmi.sniff_dcgmi, dcgmi.parse_dcgmi),
        ("lspci -vv", lspci.sniff_lspci, lspci.parse_lspci),
        ("lspci", lspci.sniff_lspci_list, lspci.parse_lspci_list),
        ("GPU service log", service_logs.sniff_service_log, service_logs.parse_service_log),
        ("kernel log", kernel_log.sniff_kernel_log, kernel_log.parse_kernel_log),
    ]


SOURCES = (
    "nvidia-smi -q -x",
    "nvidia-smi -q",
    "nvidia-smi --query-gpu",
    "nvidia-smi",
    "nvidia-smi nvlink",
    "nvidia-smi -L",
    "nvidia-smi dmon",
    "dcgmi",
    "lspci -vv",
    "lspci",
    "GPU service log",
    "kernel log",
)

# Formats that are the whole file: when one of them reads it, no other is tried (an nvidia-smi -q XML
# dump is not also a kernel log because a value mentions NVRM)
_WHOLE_FILE = ("nvidia-smi -q -x", "nvidia-smi --query-gpu", "dcgmi", "lspci -vv")


def classify_gpu_all(head: bytes) -> list[str]:
    """Every GPU source ``head`` (a file's first 64 KiB) looks like, in :data:`SOURCES` order."""
    out = []
    for name, sniff, _ in _sources():
        try:
            if sniff(head):
                out.append(name)
        except Exception:  # a sniffer never decides a file is broken
            continue
    return out


def classify_gpu(head: bytes) -> str | None:
    """Which GPU source ``head`` (a file's first 64 KiB) is first, or None."""
    kinds = classify_gpu_all(head)
    return kinds[0] if kinds else None


def sniff_gpu(head: bytes, name: str = "") -> bool:
    """Loader hook for ``observe.detect``."""
    return classify_gpu(head) is not None


def parse_gpu_reports(data: bytes, path: str) -> list[GpuReport]:
    """Every GPU source in ``data`` parsed (see the module docstring). InputError when none reads it."""
    kinds = classify_gpu_all(data[: 64 << 10])
    parsers = {name: parse for name, _, parse in _sources()}
    reports: list[GpuReport] = []
    first_error: InputError | None = None
    for kind in kinds:
        try:
            reports.append(parsers[kind](data, path))
        except InputError as e:
            first_error = first_error or e
            continue
        if kind in _WHOLE_FILE:
            break
    if reports:
        return reports
    if first_error is not None:
        raise first_error
    raise InputError(
        "not a GPU health source (nvidia-smi, nvidia-smi -q/-x/-L/--query-gpu/dmon, nvidia-smi nvlink, "
        "dcgmi, "
        "lspci, device plugin / GPU operator / fabric manager log, kernel log)",
        path,
    )


def parse_gpu_bytes(data: bytes, path: str) -> GpuReport:
    """Parse ``data`` as the (first) GPU source its content shows. InputError when it is none of them."""
    return parse_gpu_reports(data, path)[0]


def load_gpu_observations(path: str | Path) -> dict[str, Any]:
    """Loader hook for ``observe.detect``: ``{"gpu_reports": [...], "warnings": [...]}``."""
    from clusterdoctor.observe.limits import read_input

    p = Path(path)
    data = read_input(p)
    reports = parse_gpu_reports(data, str(p))
    out: dict[str, Any] = {"gpu_reports": reports, "warnings": [w for r in reports for w in r.warnings]}
    if len(reports) > 1:
        out["described_as"] = " + ".join(dict.fromkeys(r.kind for r in reports))
    if any(r.kind == "kernel log" for r in reports):
        from clusterdoctor.observe.event_sources import load_event_observations, sniff_events

        if sniff_events(data[: 64 << 10], p.name):
            try:
                for k, v in load_event_observations(p).items():
                    if k == "warnings":
                        out["warnings"].extend(v)
                    elif k == "described_as":
                        out.setdefault(k, v)
                    else:
                        out[k] = v
            except InputError as e:
                out["warnings"].append(f"{p}: read as a GPU kernel log only ({e.reason})")
    return out
