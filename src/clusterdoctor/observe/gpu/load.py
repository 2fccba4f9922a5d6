"""Detect and load GPU health files for ``clusterdoctor diagnose`` / ``gpu health`` (by content).

:func:`sniff_gpu` says whether a file is one of the GPU sources; :func:`load_gpu_observations` parses it
into ``{"gpu_reports": [GpuReport], "warnings": [...]}``. dcgm-exporter dumps are metrics expositions
and are loaded by the generic metrics loader; :mod:`clusterdoctor.analyze.gpu_health` reads their
``DCGM_FI_*`` series from the metrics window. A kernel log that is also a control-plane log (a full
syslog) is loaded both ways, so neither side loses its events.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.topology.gpu import GpuReport

__all__ = ["SOURCES", "classify_gpu", "load_gpu_observations", "parse_gpu_bytes", "sniff_gpu"]


def _sources() -> list[tuple[str, Callable[[bytes], bool], Callable[[bytes, str], Any]]]:
    from clusterdoctor.observe.gpu import (
        dcgmi,
        kernel_log,
        lspci,
        nvidia_smi_q,
        nvidia_smi_xml,
        nvlink,
        query_gpu_csv,
    )

    return [
        ("nvidia-smi -q -x", nvidia_smi_xml.sniff_nvidia_smi_xml, nvidia_smi_xml.parse_nvidia_smi_xml),
        ("nvidia-smi -q", nvidia_smi_q.sniff_nvidia_smi_q, nvidia_smi_q.parse_nvidia_smi_q),
        ("nvidia-smi --query-gpu", query_gpu_csv.sniff_query_gpu_csv, query_gpu_csv.parse_query_gpu_csv),
        ("nvidia-smi nvlink", nvlink.sniff_nvlink, nvlink.parse_nvlink),
        ("dcgmi", dcgmi.sniff_dcgmi, dcgmi.parse_dcgmi),
        ("lspci -vv", lspci.sniff_lspci, lspci.parse_lspci),
        ("kernel log", kernel_log.sniff_kernel_log, kernel_log.parse_kernel_log),
    ]


SOURCES = (
    "nvidia-smi -q -x",
    "nvidia-smi -q",
    "nvidia-smi --query-gpu",
    "nvidia-smi nvlink",
    "dcgmi",
    "lspci -vv",
    "kernel log",
)


def classify_gpu(head: bytes) -> str | None:
    """Which GPU source ``head`` (a file's first 64 KiB) is, or None."""
    for name, sniff, _ in _sources():
        try:
            if sniff(head):
                return name
        except Exception:  # a sniffer never decides a file is broken
            continue
    return None


def sniff_gpu(head: bytes, name: str = "") -> bool:
    """Loader hook for ``observe.detect``."""
    return classify_gpu(head) is not None


def parse_gpu_bytes(data: bytes, path: str) -> GpuReport:
    """Parse ``data`` as the GPU source its content shows. InputError when it is none of them."""
    kind = classify_gpu(data[: 64 << 10])
    for name, _, parse in _sources():
        if name == kind:
            return parse(data, path)
    raise InputError(
        "not a GPU health source (nvidia-smi -q/-x/--query-gpu, nvidia-smi nvlink, dcgmi, lspci -vv, kernel log)",
        path,
    )


def load_gpu_observations(path: str | Path) -> dict[str, Any]:
    """Loader hook for ``observe.detect``: ``{"gpu_reports": [...], "warnings": [...]}``."""
    from clusterdoctor.observe.limits import read_input

    p = Path(path)
    data = read_input(p)
    report = parse_gpu_bytes(data, str(p))
    out: dict[str, Any] = {"gpu_reports": [report], "warnings": list(report.warnings)}
    if report.kind == "kernel log":
        from clusterdoctor.observe.event_sources import load_event_observations, sniff_events

        if sniff_events(data[: 64 << 10], p.name):
            try:
                for k, v in load_event_observations(p).items():
                    if k == "warnings":
                        out["warnings"].extend(v)
                    else:
                        out[k] = v
            except InputError as e:
                out["warnings"].append(f"{p}: read as a GPU kernel log only ({e.reason})")
    return out
