"""nvidia-smi -q text, -q -x XML and --query-gpu CSV on the real captures in fixtures/gpu.

Expectations come from fixtures/gpu/SOURCES.md (its per-file notes) and from reading the files."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.nvidia_smi_q import parse_nvidia_smi_q, sniff_nvidia_smi_q
from clusterdoctor.observe.gpu.nvidia_smi_xml import parse_nvidia_smi_xml, sniff_nvidia_smi_xml
from clusterdoctor.observe.gpu.query_gpu_csv import parse_query_gpu_csv, sniff_query_gpu_csv
from tests.conftest import shared_fixture

A10 = "gpu/nvidia-smi-q_a10_535.129.03_remapped-rows-uncorrectable4-pending.txt"
H100_VM = "gpu/nvidia-smi-q_h100-80gb-vm_590.48.01_under-load_pcie-replays-9.txt"
H100_X8 = "gpu/nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt"
H800 = "gpu/nvidia-smi-q_h800_525.105.17_healthy.txt"
RTX4090 = "gpu/nvidia-smi-q_rtx4090-x8_535.154.05_sw-power-cap-2-gpus_pcie-gen1-idle.txt"
TITAN = "gpu/nvidia-smi-q_titan-v_560.35.03_pcie-gen1-of-3-idle.txt"
CSV_H100 = "gpu/nvidia-smi-query-gpu-csv_h100-80gb_590.48.01_under-load.csv"
CSV_H200 = "gpu/nvidia-smi-query-gpu-csv_h200_590.48.01_under-load.csv"
CSV_L40S = "gpu/nvidia-smi-query-gpu-csv_l40s_595.80_idle-section-util100.csv"


def _q(rel):
    p = shared_fixture(rel)
    data = p.read_bytes()
    assert sniff_nvidia_smi_q(data[:65536])
    return parse_nvidia_smi_q(data, p.name)


def test_a10_remapped_rows_pending_is_the_only_memory_signal():
    r = _q(A10)
    (g,) = r.gpus
    assert g.bus_id == "0000:07:00.0" and g.model == "NVIDIA A10" and g.index == 0
    assert g.remap_correctable == 0 and g.remap_uncorrectable == 4
    assert g.remap_pending is True and g.remap_failure is False
    assert g.ecc_volatile_uncorrectable == 0 and g.ecc_aggregate_uncorrectable == 0
    assert g.pcie.gen_current == 4 and g.pcie.gen_max == 4 and g.pcie.width_current == 16
    assert g.pcie.replays == 0
    assert g.active_reasons() == ["gpu_idle"]
    assert g.pstate == "P8" and g.temp_c == 33 and g.power_w == 43.89 and g.power_limit_w == 150


def test_h100_vm_590_wide_layout_and_9_replays():
    r = _q(H100_VM)
    (g,) = r.gpus
    assert g.bus_id == "0000:00:09.0"
    assert g.pcie.replays == 9 and g.pcie.gen_current == 5 and g.pcie.gen_max == 5 and g.pcie.width_max == 16
    assert g.pstate == "P0" and g.temp_c == 59 and g.power_w == 629.45 and g.power_limit_w == 700
    assert not [x for x in g.active_reasons() if x != "gpu_idle"]
    assert g.remap_uncorrectable == 0 and g.remap_pending is False
    assert g.util_pct == 100
    assert [p for p, _ in g.processes] == [11327, 11328, 11345]


def test_h100_x8_one_gpu_throttled_and_replays_per_gpu():
    r = _q(H100_X8)
    assert [g.bus_id for g in r.gpus] == [
        f"0000:{b}:00.0" for b in ("53", "64", "75", "86", "97", "a8", "b9", "ca")
    ]
    assert [g.index for g in r.gpus] == list(range(8))
    assert [g.pcie.replays for g in r.gpus] == [120, 111, 58, 60, 63, 93, 69, 78]
    bad = r.gpus[2]
    assert set(bad.active_reasons()) == {"sw_power_cap", "hw_power_brake_slowdown", "sw_thermal_slowdown"}
    assert bad.temp_c == 39 and bad.power_w == 118.01
    for g in r.gpus[:2] + r.gpus[3:]:
        assert g.active_reasons() == ["gpu_idle"]
    assert all(g.remap_pending is False and g.remap_uncorrectable == 0 for g in r.gpus)
    assert all(g.pcie.gen_current == 5 and g.pcie.width_current == 16 for g in r.gpus)


def test_h800_single_block_of_eight_has_no_index_and_old_throttle_naming():
    r = _q(H800)
    (g,) = r.gpus
    assert g.bus_id == "0000:18:00.0" and g.index is None  # -i 0 of 8 attached: index not in the file
    assert any("1 of 8" in w for w in r.warnings)
    assert g.active_reasons() == ["gpu_idle"]  # "Clocks Throttle Reasons" naming
    assert g.pcie.gen_current == 5 and g.pcie.replays == 0 and g.temp_c == 35 and g.power_w == 74.71
    assert g.fabric_state == "Completed" and g.fabric_status == "Success"


def test_rtx4090_two_busy_power_capped_six_idle_at_gen1():
    r = _q(RTX4090)
    buses = [g.bus_id[5:7] for g in r.gpus]
    assert buses == ["01", "23", "41", "61", "81", "a1", "c1", "e1"]
    capped = [g for g in r.gpus if "sw_power_cap" in g.active_reasons()]
    assert [g.bus_id for g in capped] == ["0000:23:00.0", "0000:81:00.0"]
    assert [g.temp_c for g in capped] == [72, 76]
    assert all(g.pcie.gen_current == 4 for g in capped)
    idle = [g for g in r.gpus if g not in capped]
    assert all(
        g.pcie.gen_current == 1 and g.pcie.gen_max == 4 and g.active_reasons() == ["gpu_idle"] for g in idle
    )
    assert all(g.pcie.width_current == 16 == g.pcie.width_max for g in r.gpus)
    assert all(g.ecc_mode == "Disabled" and not g.pcie.replays for g in r.gpus)


def test_titan_v_volta_layout_and_remapped_rows_na():
    (g,) = _q(TITAN).gpus
    assert g.bus_id == "0000:01:00.0" and g.pcie.gen_current == 1 and g.pcie.gen_max == 3
    assert g.temp_c == 44 and g.active_reasons() == ["gpu_idle"]
    # Remapped Rows : N/A and N/A ECC counters: unknown, not zero
    assert g.remap_pending is None and g.remap_uncorrectable is None
    assert g.ecc_volatile_uncorrectable is None and g.retired_sbe is None


def test_no_devices_and_garbage():
    r = parse_nvidia_smi_q("No devices were found\n", "x")
    assert r.gpus == [] and r.attrs["no_devices"]
    with pytest.raises(InputError):
        parse_nvidia_smi_q("hello\nworld\n", "x")


def test_tab_indented_and_markdown_quoted_copies_read_the_same():
    p = shared_fixture(A10)
    text = p.read_text()
    tabbed = "\n".join(
        "\t" * ((len(ln) - len(ln.lstrip(" "))) // 4) + ln.lstrip(" ") for ln in text.splitlines()
    )
    quoted = "```\n" + "\n".join("> " + ln for ln in text.splitlines()) + "\n```\n"
    for variant in (tabbed, quoted, text.rstrip("\n")):
        (g,) = parse_nvidia_smi_q(variant, "v").gpus
        assert g.remap_uncorrectable == 4 and g.remap_pending is True and g.pcie.gen_current == 4


def _csv(rel):
    p = shared_fixture(rel)
    data = p.read_bytes()
    assert sniff_query_gpu_csv(data)
    return parse_query_gpu_csv(data, p.name)


def test_query_gpu_csv_h100_under_load():
    (g,) = _csv(CSV_H100).gpus
    assert g.clock_reasons is not None and not any(g.clock_reasons.values())  # 0x0
    assert g.pcie.gen_current == 5 and g.pcie.gen_max == 5 and g.pcie.gen_host_max is None  # [N/A]
    assert g.pcie.width_current == 16 == g.pcie.width_max
    assert g.temp_c == 59 and g.mem_temp_c == 54 and g.power_w == 631.95 and g.power_limit_w == 700
    assert g.sm_clock_mhz == 1980 == g.sm_max_mhz and g.util_pct == 100 and g.remap_pending is False


def test_query_gpu_csv_columns_read_by_name_not_position():
    (h200,) = _csv(CSV_H200).gpus
    assert (
        h200.pcie.gen_current == 5 and h200.temp_c == 52 and h200.mem_temp_c == 40 and h200.power_w == 627.40
    )
    (l40s,) = _csv(CSV_L40S).gpus  # 202 columns, other positions
    assert l40s.pcie.gen_current == 4 and l40s.pcie.width_current == 16
    assert l40s.temp_c == 63 and l40s.mem_temp_c is None  # "N/A" without brackets
    assert (
        l40s.power_w == 144.97 and l40s.power_limit_w == 350 and l40s.sm_clock_mhz == 2520 == l40s.sm_max_mhz
    )
    assert l40s.util_pct == 100 and l40s.pstate == "P0" and not any(l40s.clock_reasons.values())


def test_query_gpu_csv_without_header_is_refused_with_the_reason():
    p = shared_fixture(CSV_H100)
    row = p.read_text().splitlines()[1]
    with pytest.raises(InputError, match="header"):
        parse_query_gpu_csv(row + "\n", "noheader.csv")


def test_query_gpu_csv_several_rows_of_one_gpu_become_readings():
    text = (
        "timestamp, index, pci.bus_id, utilization.gpu [%], ecc.errors.corrected.volatile.total\n"
        "2026/07/14 08:12:53.353, 0, 00000000:00:09.0, 100 %, 5\n"
        "2026/07/14 08:13:53.353, 0, 00000000:00:09.0, 100 %, 905\n"
    )  # a `-l 60` loop (constructed: two rows in the layout of the real captures)
    (g,) = parse_query_gpu_csv(text, "loop.csv").gpus
    vals = [(r.time, r.value) for r in g.readings if r.name == "ecc_volatile_correctable"]
    assert len(vals) == 2 and vals[1][0] - vals[0][0] == pytest.approx(60.0) and vals[1][1] == 905


# nvidia-smi -q -x: no real XML capture is in fixtures/gpu (SOURCES.md "Known gaps"); this document is
# CONSTRUCTED from the element names of NVIDIA's nvsmi_device_v12.dtd to exercise the parser, not a capture.
XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log><timestamp>Mon Jul 15 13:41:56 2024</timestamp><driver_version>555.42.06</driver_version>
<attached_gpus>1</attached_gpus><gpu id="00000000:01:00.0"><product_name>NVIDIA L4</product_name>
<uuid>GPU-c5533cd4-5a60-059e-348d-b6d7466932e4</uuid><pci><pci_bus_id>00000000:01:00.0</pci_bus_id>
<pci_gpu_link_info><pcie_gen><max_link_gen>4</max_link_gen><current_link_gen>1</current_link_gen></pcie_gen>
<link_widths><max_link_width>16x</max_link_width><current_link_width>8x</current_link_width></link_widths>
</pci_gpu_link_info><replay_counter>3</replay_counter></pci><performance_state>P0</performance_state>
<clocks_event_reasons><clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
<clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown></clocks_event_reasons>
<utilization><gpu_util>97 %</gpu_util></utilization><ecc_errors><volatile><dram_uncorrectable>2</dram_uncorrectable>
<sram_uncorrectable>N/A</sram_uncorrectable></volatile></ecc_errors><remapped_rows>N/A</remapped_rows>
<processes><process_info><pid>4242</pid><process_name>python</process_name></process_info></processes>
</gpu></nvidia_smi_log>"""


def test_xml_parser_reads_the_dtd_elements():
    assert sniff_nvidia_smi_xml(XML.encode())
    (g,) = parse_nvidia_smi_xml(XML, "x.xml").gpus
    assert g.index == 0 and g.bus_id == "0000:01:00.0" and g.model == "NVIDIA L4"
    assert (
        g.pcie.gen_current == 1 and g.pcie.gen_max == 4 and g.pcie.width_current == 8 and g.pcie.replays == 3
    )
    assert g.active_reasons() == ["hw_slowdown"] and g.util_pct == 97
    assert g.ecc_volatile_uncorrectable == 2 and g.remap_pending is None
    assert g.processes == [(4242, "python")]


def test_xml_entity_tricks_and_other_roots_are_refused():
    with pytest.raises(InputError):
        parse_nvidia_smi_xml('<!DOCTYPE x [<!ENTITY a "b">]><nvidia_smi_log>&a;</nvidia_smi_log>', "e.xml")
    with pytest.raises(InputError, match="not <nvidia_smi_log>"):
        parse_nvidia_smi_xml("<topology/>", "t.xml")
