"""``nvidia-smi -q -x`` XML -> :class:`~clusterdoctor.topology.gpu.GpuReport`.

Element names follow NVIDIA's ``nvsmi_device_v*.dtd`` (the DOCTYPE the tool prints): ``<gpu id=bus>``
with ``<pci><pci_bus_id>``, ``<pci_gpu_link_info>``, ``<replay_counter>``; ``<clocks_event_reasons>``
(r535+) or ``<clocks_throttle_reasons>`` (older) with ``clocks_event_reason_*`` /
``clocks_throttle_reason_*`` children; ``<ecc_errors>`` in the Ampere (``dram_uncorrectable``…) or
Volta (``double_bit/total``) layout; ``<retired_pages>``; ``<remapped_rows>`` (or ``N/A``);
``<processes><process_info>``. Parsed with :func:`clusterdoctor.observe.safe_xml.parse_xml` (no
entity expansion). Unknown values (``N/A``, ``[Not Supported]``) are None.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import as_bool, as_float, as_int, decode, is_unknown, norm_bus_id
from clusterdoctor.observe.gpu.nvidia_smi_q import _parse_time
from clusterdoctor.observe.safe_xml import parse_xml, xml_head_root
from clusterdoctor.topology.gpu import CLOCK_REASONS, GpuReport, GpuState, PcieLink

__all__ = ["parse_nvidia_smi_xml", "sniff_nvidia_smi_xml"]

KIND = "nvidia-smi -q -x"


def sniff_nvidia_smi_xml(head: bytes) -> bool:
    """The whole document (root ``<nvidia_smi_log>``) or an excerpt of a GPU's sections (see xml_excerpt)."""
    from clusterdoctor.observe.gpu.xml_excerpt import is_excerpt

    return xml_head_root(head[:8192]) == "nvidia_smi_log" or is_excerpt(head)


def _t(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    x = el.find(path)
    if x is None or x.text is None:
        return None
    v = x.text.strip()
    return None if is_unknown(v) else v


def _first(el: ET.Element, *paths: str) -> str | None:
    for p in paths:
        v = _t(el, p)
        if v is not None:
            return v
    return None


def _sum(*vals: int | None) -> int | None:
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


def _gpu(el: ET.Element, src: str) -> GpuState:
    g = GpuState(bus_id=norm_bus_id(_first(el, "pci/pci_bus_id") or el.get("id")))

    def put(name: str, value: object) -> None:
        g.set(name, value, src)

    put("model", _t(el, "product_name"))
    put("uuid", _t(el, "uuid"))
    put("serial", _t(el, "serial"))
    put("vbios", _t(el, "vbios_version"))
    put("pstate", _t(el, "performance_state"))
    put("util_pct", as_float(_t(el, "utilization/gpu_util")))
    put("temp_c", as_float(_t(el, "temperature/gpu_temp")))
    put("mem_temp_c", as_float(_t(el, "temperature/memory_temp")))
    put(
        "power_w",
        as_float(
            _first(
                el,
                "gpu_power_readings/power_draw",
                "gpu_power_readings/average_power_draw",
                "gpu_power_readings/instant_power_draw",
                "power_readings/power_draw",
            )
        ),
    )
    put(
        "power_limit_w",
        as_float(
            _first(
                el,
                "gpu_power_readings/current_power_limit",
                "power_readings/enforced_power_limit",
                "power_readings/power_limit",
            )
        ),
    )
    put(
        "power_default_limit_w",
        as_float(_first(el, "gpu_power_readings/default_power_limit", "power_readings/default_power_limit")),
    )
    put("sm_clock_mhz", as_float(_t(el, "clocks/sm_clock")))
    put("sm_max_mhz", as_float(_t(el, "max_clocks/sm_clock")))
    put("app_sm_mhz", as_float(_t(el, "applications_clocks/graphics_clock")))
    reasons: dict[str, bool] = {}
    for sect, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        node = el.find(sect)
        if node is None:
            continue
        for child in node:
            tag = child.tag.removeprefix(prefix)
            if tag == "display_clocks_setting":
                tag = "display_clock_setting"
            if tag in CLOCK_REASONS:
                v = as_bool(child.text)
                if v is not None:
                    reasons.setdefault(tag, v)
    if reasons:
        put("clock_reasons", reasons)
    put("ecc_mode", _t(el, "ecc_mode/current_ecc"))
    for scope in ("volatile", "aggregate"):
        base = f"ecc_errors/{scope}/"
        put(
            f"ecc_{scope}_uncorrectable",
            _sum(
                as_int(_t(el, base + "dram_uncorrectable")),
                as_int(_t(el, base + "sram_uncorrectable")),
                as_int(_t(el, base + "sram_uncorrectable_parity")),
                as_int(_t(el, base + "sram_uncorrectable_secded")),
                as_int(_t(el, base + "double_bit/total")),
            ),
        )
        put(
            f"ecc_{scope}_correctable",
            _sum(
                as_int(_t(el, base + "dram_correctable")),
                as_int(_t(el, base + "sram_correctable")),
                as_int(_t(el, base + "single_bit/total")),
            ),
        )
    put("retired_sbe", as_int(_t(el, "retired_pages/multiple_single_bit_retirement/retired_count")))
    put("retired_dbe", as_int(_t(el, "retired_pages/double_bit_retirement/retired_count")))
    put(
        "retired_pending",
        as_bool(_first(el, "retired_pages/pending_retirement", "retired_pages/pending_blacklist")),
    )
    put("remap_correctable", as_int(_t(el, "remapped_rows/remapped_row_corr")))
    put("remap_uncorrectable", as_int(_t(el, "remapped_rows/remapped_row_unc")))
    put("remap_pending", as_bool(_t(el, "remapped_rows/remapped_row_pending")))
    put("remap_failure", as_bool(_t(el, "remapped_rows/remapped_row_failure")))
    put("fabric_state", _t(el, "fabric/state"))
    put("fabric_status", _t(el, "fabric/status"))
    put("reset_required", as_bool(_t(el, "gpu_reset_status/reset_required")))
    li = "pci/pci_gpu_link_info/"
    pcie = PcieLink(
        gen_current=as_int(_t(el, li + "pcie_gen/current_link_gen")),
        gen_max=as_int(_first(el, li + "pcie_gen/max_link_gen", li + "pcie_gen/max_device_link_gen")),
        gen_host_max=as_int(_t(el, li + "pcie_gen/max_host_link_gen")),
        width_current=as_int(_t(el, li + "link_widths/current_link_width")),
        width_max=as_int(_t(el, li + "link_widths/max_link_width")),
        replays=as_int(_t(el, "pci/replay_counter")),
        replay_rollovers=as_int(_t(el, "pci/replay_rollover_counter")),
        source=src,
    )
    if any(v is not None for k, v in pcie.__dict__.items() if k != "source"):
        g.pcie = pcie
    for p in el.findall("processes/process_info"):
        pid = as_int(_t(p, "pid"))
        if pid is not None:
            g.processes.append((pid, _t(p, "process_name") or ""))
    g.sources.append(src)
    return g


def _parse_excerpt(doc: str, facts: set[str], src: str, path: str | None) -> GpuReport:
    """A GPU's sections pasted without the document: one GPU of unknown identity, only those sections."""
    root = parse_xml(doc.encode("utf-8", "surrogatepass"), path)
    report = GpuReport(KIND, src)
    report.facts.update(facts)
    el = root.find("gpu")
    if el is not None:
        report.gpus.append(_gpu(el, src))
    report.warnings.append(f"{src}: an excerpt of nvidia-smi -q -x: only the sections shown are judged")
    return report


def parse_nvidia_smi_xml(data: bytes | str, path: str | None = None) -> GpuReport:
    """Parse ``nvidia-smi -q -x`` output. InputError when it is not that XML."""
    src = path or "<nvidia-smi -q -x>"
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    text = decode(data, path)  # refuses binary input with a clear message
    from clusterdoctor.observe.gpu.xml_excerpt import close_excerpt, excerpt_sections, is_excerpt

    if is_excerpt(data):
        return _parse_excerpt(close_excerpt(text), excerpt_sections(text), src, path)
    root = parse_xml(data, path)
    if root.tag != "nvidia_smi_log":
        raise InputError(f"XML root <{root.tag}> is not <nvidia_smi_log> (not nvidia-smi -q -x)", path)
    report = GpuReport(KIND, src)
    report.facts.update({"identity", "clocks", "ecc", "remap", "retired_pages", "pcie", "processes"})
    report.time = _parse_time(_t(root, "timestamp"))
    driver = _t(root, "driver_version")
    gpus = root.findall("gpu")
    attached = as_int(_t(root, "attached_gpus"))
    for i, el in enumerate(gpus):
        g = _gpu(el, src)
        g.set("driver_version", driver, src)
        if attached is not None and attached == len(gpus):
            g.set("index", i, src)
        report.gpus.append(g)
    if not gpus:
        report.warnings.append(f"{src}: no <gpu> element (no GPU visible to the driver)")
    return report
