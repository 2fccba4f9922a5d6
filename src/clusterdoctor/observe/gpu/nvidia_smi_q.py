"""``nvidia-smi -q`` text -> :class:`~clusterdoctor.topology.gpu.GpuReport`.

The output is an indented tree of ``Key : Value`` lines under one ``GPU <bus id>`` block per GPU.
Layouts differ by driver: values start at column 45 (r525-r535) or 58 (r590); r535 renamed
``Clocks Throttle Reasons`` to ``Clocks Event Reasons``; Ampere+ ECC counters are ``SRAM``/``DRAM``
lines, Volta's are ``Single Bit``/``Double Bit`` sub-blocks; ``Remapped Rows : N/A`` replaces the
block on GPUs without row remapping. So the parser reads the tree by indentation and splits each
line on the first `` : `` (a key padded with blanks, then a colon), never on a fixed column; tabs and
spaces both indent; publishers' ``[...]``/``...`` elision lines are skipped.

Index: nvidia-smi prints GPUs in index order, so when the file holds as many blocks as
``Attached GPUs`` the n-th block is GPU n; for ``-q -i N`` (one block of several) it is unknown.

Excerpts: what users paste is often one section without its ``GPU <bus id>`` header (``nvidia-smi -q
-d ROW_REMAPPER``, ``nvidia-smi -q | grep -A8 'Clocks Throttle'``). A text whose first line is a
section title nvidia-smi prints (:data:`SECTIONS`) followed by indented ``Key : Value`` lines is read as
the sections of a GPU that the excerpt does not name; the same section title again starts the next GPU
(``grep -A`` over every GPU, in index order: with several, the n-th is GPU n).
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import (
    as_bool,
    as_float,
    as_int,
    decode,
    is_unknown,
    norm_bus_id,
    unquote_lines,
)
from clusterdoctor.topology.gpu import CLOCK_REASONS, GpuEvent, GpuReport, GpuState, PcieLink

__all__ = ["parse_nvidia_smi_q", "sniff_nvidia_smi_q"]

KIND = "nvidia-smi -q"
_GPU_RE = re.compile(r"^GPU\s+(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_ELIDED = {"[...]", "...", "…", "[…]"}

# nvidia-smi's reason lines (both namings) -> CLOCK_REASONS names
_REASON_KEYS = {
    "idle": "gpu_idle",
    "gpu idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clock_setting",
}


# Section titles of a GPU block (nvidia-smi -q, r470-r590), for excerpts without the GPU header.
SECTIONS = frozenset(
    s.lower()
    for s in (
        "MIG Mode", "Driver Model", "Inforom Version", "GPU Operation Mode", "GPU C2C Mode",
        "GPU Virtualization Mode", "GPU Reset Status", "PCI", "GPU Link Info", "Clocks Throttle Reasons",
        "Clocks Event Reasons", "Clocks Event Reasons Counters", "Sparse Operation Mode", "FB Memory Usage",
        "BAR1 Memory Usage", "Conf Compute Protected Memory Usage", "Utilization", "Encoder Stats",
        "FBC Stats", "ECC Mode", "ECC Errors", "Retired Pages", "Remapped Rows", "Temperature",
        "Supported GPU Target Temp", "GPU Power Readings", "GPU Memory Power Readings",
        "Module Power Readings", "Power Readings", "Power Smoothing", "Clocks", "Applications Clocks",
        "Default Applications Clocks", "Deferred Clocks", "Max Clocks", "Max Customer Boost Clocks",
        "Clock Policy", "Voltage", "Fabric", "Processes", "Capabilities",
    )
)  # fmt: skip
_KV = re.compile(r"^[ \t]+\S[^:\n]{0,60}?[ \t]:(?: |$)")


def _excerpt_start(lines: list[str]) -> bool:
    """Whether ``lines`` open with a section of a GPU block (its title, then indented ``Key : Value``)."""
    body = [ln.rstrip() for ln in lines if ln.strip() and ln.strip() not in _ELIDED]
    if len(body) < 2 or body[0].strip().rstrip(":").strip().lower() not in SECTIONS:
        return False
    first = _indent(body[0], body[0].strip())
    kv = [ln for ln in body[1:12] if _KV.match(ln) and _indent(ln, ln.strip()) > first]
    return len(kv) >= min(2, len(body) - 1)


def sniff_nvidia_smi_q(head: bytes) -> bool:
    """Whether ``head`` (a file's first KB) is ``nvidia-smi -q`` text, or an excerpt of its sections."""
    text = head[:16384].decode("utf-8", errors="replace")
    if "NVSMI LOG" in text and ("Driver Version" in text or "Attached GPUs" in text):
        return True
    if bool(re.search(r"^\W{0,4}GPU [0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:", text, re.M)) and (
        "Product Name" in text
    ):
        return True
    return _excerpt_start(unquote_lines(text)[:40])


def _indent(line: str, body: str) -> int:
    ws = line[: len(line) - len(line.lstrip(" \t"))]
    return len(ws) + 3 * ws.count("\t")


def _parse_time(text: str | None) -> float | None:
    """``Wed Sep 25 10:40:24 2024`` (the machine's local time; its zone is not printed: read as UTC)."""
    if not text:
        return None
    try:
        t = _dt.datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
    return t.replace(tzinfo=_dt.timezone.utc).timestamp()


class _Block:
    """One GPU block as flat ``path -> value`` (first occurrence kept) plus its process list."""

    def __init__(self, bus: str, line: int) -> None:
        self.bus = bus
        self.line = line
        self.values: dict[str, str] = {}
        self.processes: list[tuple[int, str]] = []
        self._pid: int | None = None

    def add(self, path: str, value: str) -> None:
        if path.startswith("Processes/"):
            key = path.rsplit("/", 1)[-1]
            if key == "Process ID":
                self._pid = as_int(value)
            elif key == "Name" and self._pid is not None:
                self.processes.append((self._pid, value.strip()))
                self._pid = None
            return
        self.values.setdefault(path, value)

    def get(self, *paths: str) -> str | None:
        for p in paths:
            v = self.values.get(p)
            if v is not None:
                return v
        return None


def _sum(*vals: int | None) -> int | None:
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


def _gpu_from_block(b: _Block, src: str) -> GpuState:
    g = GpuState(bus_id=norm_bus_id(b.get("PCI/Bus Id") or b.bus))
    s = src

    def put(name: str, value: Any) -> None:
        g.set(name, value, s)

    put("model", b.get("Product Name"))
    uuid = b.get("GPU UUID")
    put("uuid", None if is_unknown(uuid) else uuid.strip())  # type: ignore[union-attr]
    ser = b.get("Serial Number")
    put("serial", None if is_unknown(ser) else ser.strip())  # type: ignore[union-attr]
    vb = b.get("VBIOS Version")
    put("vbios", None if is_unknown(vb) else vb.strip())  # type: ignore[union-attr]
    ps = b.get("Performance State")
    put("pstate", None if is_unknown(ps) else ps.strip())  # type: ignore[union-attr]
    put("util_pct", as_float(b.get("Utilization/Gpu", "Utilization/GPU")))
    put("temp_c", as_float(b.get("Temperature/GPU Current Temp")))
    put("mem_temp_c", as_float(b.get("Temperature/Memory Current Temp")))
    put(
        "power_w",
        as_float(
            b.get(
                "GPU Power Readings/Power Draw",
                "GPU Power Readings/Average Power Draw",
                "GPU Power Readings/Instantaneous Power Draw",
                "Power Readings/Power Draw",
            )
        ),
    )
    put(
        "power_limit_w",
        as_float(
            b.get(
                "GPU Power Readings/Current Power Limit",
                "Power Readings/Enforced Power Limit",
                "Power Readings/Power Limit",
            )
        ),
    )
    put(
        "power_default_limit_w",
        as_float(b.get("GPU Power Readings/Default Power Limit", "Power Readings/Default Power Limit")),
    )
    put("sm_clock_mhz", as_float(b.get("Clocks/SM")))
    put("sm_max_mhz", as_float(b.get("Max Clocks/SM")))
    put("app_sm_mhz", as_float(b.get("Applications Clocks/Graphics")))
    # clock event reasons (r535+: "Clocks Event Reasons"; older: "Clocks Throttle Reasons")
    reasons: dict[str, bool] = {}
    for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
        for k, v in b.values.items():
            if not k.startswith(section + "/"):
                continue
            name = _REASON_KEYS.get(k.rsplit("/", 1)[-1].strip().lower())
            val = as_bool(v)
            if name is not None and val is not None:
                reasons.setdefault(name, val)
    if reasons:
        put("clock_reasons", reasons)
    em = b.get("ECC Mode/Current", "Ecc Mode/Current")
    put("ecc_mode", None if is_unknown(em) else em.strip())  # type: ignore[union-attr]
    for scope in ("Volatile", "Aggregate"):
        base = f"ECC Errors/{scope}/"
        unc = _sum(
            as_int(b.get(base + "DRAM Uncorrectable")),
            as_int(b.get(base + "SRAM Uncorrectable")),
            as_int(b.get(base + "SRAM Uncorrectable Parity")),
            as_int(b.get(base + "SRAM Uncorrectable SEC-DED")),
            as_int(b.get(base + "Double Bit/Total")),
        )
        corr = _sum(
            as_int(b.get(base + "DRAM Correctable")),
            as_int(b.get(base + "SRAM Correctable")),
            as_int(b.get(base + "Single Bit/Total")),
        )
        put(f"ecc_{scope.lower()}_uncorrectable", unc)
        put(f"ecc_{scope.lower()}_correctable", corr)
    put("retired_sbe", as_int(b.get("Retired Pages/Single Bit ECC")))
    put("retired_dbe", as_int(b.get("Retired Pages/Double Bit ECC")))
    put("retired_pending", as_bool(b.get("Retired Pages/Pending Page Blacklist", "Retired Pages/Pending")))
    put("remap_correctable", as_int(b.get("Remapped Rows/Correctable Error")))
    put("remap_uncorrectable", as_int(b.get("Remapped Rows/Uncorrectable Error")))
    put("remap_pending", as_bool(b.get("Remapped Rows/Pending")))
    put("remap_failure", as_bool(b.get("Remapped Rows/Remapping Failure Occurred")))
    fs = b.get("Fabric/State")
    put("fabric_state", None if is_unknown(fs) else fs.strip())  # type: ignore[union-attr]
    fst = b.get("Fabric/Status")
    put("fabric_status", None if is_unknown(fst) else fst.strip())  # type: ignore[union-attr]
    put("reset_required", as_bool(b.get("GPU Reset Status/Reset Required")))
    link_base = "PCI/GPU Link Info/"
    pcie = PcieLink(
        gen_current=as_int(b.get(link_base + "PCIe Generation/Current")),
        gen_max=as_int(b.get(link_base + "PCIe Generation/Max", link_base + "PCIe Generation/Device Max")),
        gen_host_max=as_int(b.get(link_base + "PCIe Generation/Host Max")),
        width_current=as_int(b.get(link_base + "Link Width/Current")),
        width_max=as_int(b.get(link_base + "Link Width/Max")),
        replays=as_int(b.get("PCI/Replays Since Reset", "PCI/Replays since reset")),
        replay_rollovers=as_int(b.get("PCI/Replay Number Rollovers")),
        source=s,
    )
    if any(v is not None for k, v in pcie.__dict__.items() if k != "source"):
        g.pcie = pcie
    # nvidia-smi prints "[GPU requires reset]" / "[GPU is lost]" for every field it cannot read from such
    # a GPU (NVML_ERROR_RESET_REQUIRED / NVML_ERROR_GPU_IS_LOST): the state itself, not an unknown value
    states = {v.strip().strip("[]").lower() for v in b.values.values()} & {
        "gpu requires reset",
        "gpu is lost",
    }
    if "gpu requires reset" in states:
        put("reset_required", True)
    if "gpu is lost" in states:
        g.events.append(
            GpuEvent("unreachable", "nvidia-smi -q: [GPU is lost]", source=s, line=b.line or None)
        )
    g.processes = list(b.processes)
    g.sources.append(s)
    return g


def parse_nvidia_smi_q(data: bytes | str, path: str | None = None) -> GpuReport:
    """Parse ``nvidia-smi -q`` output (all GPUs, or ``-i N``; any driver layout).

    Raises InputError when the text holds no GPU block and no "No devices were found" line.
    """
    src = path or "<nvidia-smi -q>"
    text = decode(data, path)
    lines = unquote_lines(text)
    report = GpuReport(KIND, src)
    report.facts.update({"identity", "clocks", "ecc", "remap", "retired_pages", "pcie", "processes"})
    top: dict[str, str] = {}
    blocks: list[_Block] = []
    cur: _Block | None = None
    stack: list[tuple[int, str]] = []  # (indent, key) of the open parents
    no_devices = False
    paths: list[str] = []  # the open parents' paths, parallel to stack
    excerpt = _excerpt_start(lines[:40]) and not any(_GPU_RE.match(ln.strip()) for ln in lines)
    section_indent: int | None = None
    if excerpt:
        cur = _Block("", 0)
        blocks.append(cur)
    for raw in lines:
        line = raw.rstrip()
        body = line.strip()
        if not body or body in _ELIDED or body[0] in "=#":
            continue
        ind = _indent(line, body)
        if body.startswith("GPU ") and ind <= 2:
            m = _GPU_RE.match(body)
            if m:
                cur = _Block(m.group("bus"), 0)
                blocks.append(cur)
                stack = []
                paths = []
                continue
        if "No devices were found" in body:
            no_devices = True
            continue
        sep = body.find(" :")
        if sep < 0 and "\t:" in body:
            sep = body.find("\t:")
        if sep > 0:
            key = body[:sep].rstrip()
            val: str | None = body[sep + 2 :].strip()
        else:
            key, val = body.rstrip(":").strip(), None
        if cur is None:
            if val is not None:
                top.setdefault(key, val)
            continue
        if excerpt and val is None and key.lower() in SECTIONS:
            if section_indent is None:
                section_indent = ind
            if ind <= section_indent and any(p == key or p.startswith(key + "/") for p in cur.values):
                cur = _Block("", 0)  # the same section again: the next GPU
                blocks.append(cur)
                stack, paths = [], []
        while stack and stack[-1][0] >= ind:
            stack.pop()
            paths.pop()
        path = f"{paths[-1]}/{key}" if paths else key
        if val is not None:
            cur.add(path, val)
        stack.append((ind, key))
        paths.append(path)
    if not blocks:
        if no_devices:
            report.warnings.append(f"{src}: nvidia-smi found no devices (driver loaded, no GPU visible)")
            report.attrs["no_devices"] = True
            return report
        raise InputError(
            "no 'GPU <bus id>' block: not nvidia-smi -q output (or cut before the first GPU)", path
        )
    report.time = _parse_time(top.get("Timestamp"))
    driver = top.get("Driver Version")
    attached = as_int(top.get("Attached GPUs"))
    for i, b in enumerate(blocks):
        g = _gpu_from_block(b, src)
        if driver and not is_unknown(driver):
            g.set("driver_version", driver, src)
        if attached is not None and attached == len(blocks):
            g.set("index", i, src)
        elif excerpt and len(blocks) > 1:
            g.set("index", i, src)  # the same section of every GPU, in nvidia-smi's (index) order
        report.gpus.append(g)
    if excerpt:
        names = sorted({p.split("/", 1)[0] for b in blocks for p in b.values})
        report.attrs["excerpt"] = True
        report.warnings.append(
            f"{src}: an excerpt of nvidia-smi -q ({', '.join(names[:6]) or 'sections'}) without the GPU "
            "header: "
            + ("the GPU is not named" if len(blocks) == 1 else f"{len(blocks)} GPUs, taken in index order")
        )
        return report
    if attached is not None and attached != len(blocks):
        report.warnings.append(
            f"{src}: {len(blocks)} of {attached} attached GPUs shown (nvidia-smi -q -i?); indices unknown"
        )
    if blocks and not blocks[-1].values.get("Processes") and len(blocks[-1].values) < 20:
        report.warnings.append(f"{src}: the last GPU block looks cut short (truncated file?)")
    return report


def reason_bits(mask: int) -> dict[str, bool]:
    """Clock event reason bitmask (NVML / ``clocks_event_reasons.active`` / DCGM) -> names."""
    return {name: bool(mask & bit) for name, bit in CLOCK_REASONS.items()}
