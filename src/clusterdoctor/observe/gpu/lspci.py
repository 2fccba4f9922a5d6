"""``lspci -vv`` (or ``-vvv``/``-vvvv``) -> the PCIe link of each NVIDIA GPU, and of other devices.

A device block starts at column 0 with its address (``19:00.0`` or, with ``-D``, ``0000:01:00.0``)
and class; its capability lines are indented with tabs or (in pasted copies) spaces. Read per device:

- ``LnkCap: Port #0, Speed 32GT/s, Width x16`` — what the device supports;
- ``LnkSta: Speed 16GT/s (downgraded), Width x16 (ok)`` — what the link trained to, with pciutils'
  ``(ok)``/``(downgraded)`` annotations when present (older pciutils print none);
- ``DevSta: CorrErr+ …`` — a correctable error was latched;
- ``LaneErrStat: LaneErr at lane: 0 1 …`` (or ``LaneErrStat: 0``) — lanes with latched errors;
- ``Kernel driver in use: nvidia`` — the bound driver (absent line: no driver bound);
- ``NUMA node: 0``.

GPUs are NVIDIA (vendor 10de) devices of a display class (VGA / 3D / Display controller).

Plain ``lspci`` (and ``lspci | grep -i nvidia``), one device a line, is read too (:func:`parse_lspci_list`):
the GPUs and their revision. ``(rev ff)`` is what a configuration read returns from a device that no
longer answers (all ones: PCI Local Bus spec; the kernel's PCI error-recovery notes): that GPU has
dropped off the bus, and gets an ``unreachable`` event.
"""

from __future__ import annotations

import re
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import decode, norm_bus_id, unquote_lines
from clusterdoctor.topology.gpu import GpuEvent, GpuReport, GpuState, PcieLink

__all__ = ["parse_lspci", "parse_lspci_list", "sniff_lspci", "sniff_lspci_list"]

KIND = "lspci -vv"
_DEV = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (?P<cls>[^:]+): (?P<desc>.*)$"
)
_SPEED = re.compile(r"Speed (?P<v>[\d.]+)GT/s(?:\s*\((?P<s>ok|downgraded)\))?", re.I)
_WIDTH = re.compile(r"Width x(?P<v>\d+)(?:\s*\((?P<s>ok|downgraded)\))?", re.I)
_GPU_CLASSES = ("vga compatible controller", "3d controller", "display controller")


def sniff_lspci(head: bytes) -> bool:
    text = head[:65536].decode("utf-8", errors="replace")
    lines = [ln for ln in unquote_lines(text) if ln.strip()]
    return (
        bool(lines)
        and bool(_DEV.match(lines[0].strip("\ufeff")))
        and ("LnkSta" in text or "Capabilities:" in text or "Kernel driver in use" in text)
    )


def _kv(line: str) -> tuple[str, str] | None:
    s = line.strip()
    k, sep, v = s.partition(":")
    if not sep or not k or len(k) > 30:
        return None
    return k.strip(), v.strip()


def parse_lspci(data: bytes | str, path: str | None = None) -> GpuReport:
    """Parse ``lspci -vv`` text. InputError when it holds no device block."""
    src = path or "<lspci -vv>"
    report = GpuReport(KIND, src)
    devices: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for lineno, raw in enumerate(unquote_lines(decode(data, path)), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line[:1] not in (" ", "\t"):
            m = _DEV.match(line.strip("\ufeff"))
            if m:
                cur = {
                    "bdf": norm_bus_id(m.group("bdf")),
                    "class": m.group("cls").strip(),
                    "desc": m.group("desc").strip(),
                    "line": lineno,
                    "driver": "",
                    "driver_line_seen": False,
                }
                devices.append(cur)
            continue
        if cur is None:
            continue
        kv = _kv(line)
        if kv is None:
            continue
        k, v = kv
        if k == "LnkCap":
            sp, wd = _SPEED.search(v), _WIDTH.search(v)
            cur["cap_speed"] = float(sp.group("v")) if sp else None
            cur["cap_width"] = int(wd.group("v")) if wd else None
        elif k == "LnkSta":
            sp, wd = _SPEED.search(v), _WIDTH.search(v)
            cur["sta_speed"] = float(sp.group("v")) if sp else None
            cur["sta_speed_note"] = (sp.group("s") or "").lower() if sp else ""
            cur["sta_width"] = int(wd.group("v")) if wd else None
            cur["sta_width_note"] = (wd.group("s") or "").lower() if wd else ""
            if "Speed unknown" in v:
                cur["sta_speed"] = None
                cur["link_down"] = True
        elif k == "DevSta":
            cur["corr_err"] = "CorrErr+" in v
            cur["fatal_err"] = "FatalErr+" in v
            cur["nonfatal_err"] = "NonFatalErr+" in v
        elif k == "LaneErrStat":
            lanes = re.findall(r"\d+", v.split("lane:", 1)[1]) if "lane:" in v else []
            cur["lane_errors"] = tuple(int(x) for x in lanes)
        elif k == "Kernel driver in use":
            cur["driver"] = v
            cur["driver_line_seen"] = True
        elif k == "Kernel modules":
            cur["modules"] = v
        elif k == "NUMA node":
            cur["numa_node"] = int(v) if v.isdigit() else None
    if not devices:
        raise InputError("no PCI device block (e.g. '19:00.0 3D controller: …'): not lspci -vv output", path)
    for d in devices:
        is_gpu = d["class"].lower() in _GPU_CLASSES and "nvidia" in d["desc"].lower()
        link = PcieLink(
            speed_current_gts=d.get("sta_speed"),
            speed_max_gts=d.get("cap_speed"),
            width_current=d.get("sta_width"),
            width_max=d.get("cap_width"),
            lane_errors=d.get("lane_errors"),
            corr_err=d.get("corr_err"),
            downgraded_speed=True
            if d.get("sta_speed_note") == "downgraded"
            else (False if d.get("sta_speed_note") == "ok" else None),
            downgraded_width=True
            if d.get("sta_width_note") == "downgraded"
            else (False if d.get("sta_width_note") == "ok" else None),
            source=f"{src}:{d['line']}",
        )
        if is_gpu:
            g = GpuState(bus_id=d["bdf"])
            g.model = d["desc"]
            g.pcie = link
            # a device block cut before its driver line says nothing about the driver
            complete = "modules" in d or d["driver_line_seen"] or d is not devices[-1]
            g.driver_in_use = d["driver"] if complete else None
            if d.get("numa_node") is not None:
                g.numa_node = d["numa_node"]
            g.sources.append(src)
            g.field_sources.update({"driver_in_use": f"{src}:{d['line']}", "pcie": link.source})
            report.gpus.append(g)
        else:
            devices_out = report.attrs.setdefault("other_devices", [])
            devices_out.append(
                {
                    "bdf": d["bdf"],
                    "class": d["class"],
                    "desc": d["desc"],
                    "link": link.as_dict(),
                    "driver": d["driver"],
                }
            )
    from clusterdoctor.observe.node.pcie_acs import parse_acs

    acs = parse_acs("\n".join(unquote_lines(decode(data, path))), src)
    if acs:  # the ACS Control of bridges and switch ports (rules/comm_p2p.py judges them)
        report.attrs["acs"] = acs
    report.facts.update({"pcie", "driver"})
    return report


KIND_LIST = "lspci"
_REV = re.compile(r"\(rev (?P<rev>[0-9a-fA-F]{2})\)\s*$")


def sniff_lspci_list(head: bytes) -> bool:
    """Whether ``head`` is plain ``lspci`` output (one device a line; most lines device lines)."""
    text = head[:65536].decode("utf-8", errors="replace")
    lines = [ln.strip("\ufeff") for ln in unquote_lines(text) if ln.strip()][:200]
    if not lines or not _DEV.match(lines[0]):
        return False
    devs = sum(1 for ln in lines if _DEV.match(ln))
    return devs >= max(1, int(0.8 * len(lines))) and "nvidia" in text.lower()


def parse_lspci_list(data: bytes | str, path: str | None = None) -> GpuReport:
    """The NVIDIA GPUs of a plain ``lspci`` listing. InputError when it lists no device line at all."""
    src = path or "<lspci>"
    report = GpuReport(KIND_LIST, src)
    seen = skipped = 0
    for lineno, raw in enumerate(unquote_lines(decode(data, path)), 1):
        line = raw.strip().strip("\ufeff")
        if not line:
            continue
        m = _DEV.match(line)
        if m is None:
            skipped += 1
            continue
        seen += 1
        cls, desc = m.group("cls").strip(), m.group("desc").strip()
        if cls.lower() not in _GPU_CLASSES or "nvidia" not in desc.lower():
            continue
        g = GpuState(bus_id=norm_bus_id(m.group("bdf")))
        rev = _REV.search(desc)
        g.model = _REV.sub("", desc).strip() or None
        if rev and rev.group("rev").lower() == "ff":
            g.events.append(
                GpuEvent(
                    "unreachable",
                    f"lspci: {line[:160]} — revision ff: its configuration space reads all ones, the GPU "
                    "does not answer on PCIe",
                    source=src,
                    line=lineno,
                )
            )
        g.sources.append(src)
        report.gpus.append(g)
    if not seen:
        raise InputError("no PCI device line (e.g. '19:00.0 3D controller: …'): not lspci output", path)
    if skipped:
        report.warnings.append(f"{src}: {skipped} line(s) that are not lspci device lines were skipped")
    report.facts.add("pci_presence")
    return report
