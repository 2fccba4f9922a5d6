"""nvidia-smi nvlink, lspci -vv, dcgmi and dcgm-exporter on the real samples of fixtures/gpu."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.dcgm_exporter import parse_dcgm_exporter
from clusterdoctor.observe.gpu.dcgmi import parse_dcgmi, sniff_dcgmi
from clusterdoctor.observe.gpu.lspci import parse_lspci, sniff_lspci
from clusterdoctor.observe.gpu.nvlink import parse_nvlink, sniff_nvlink
from clusterdoctor.observe.gpu.sysfs_link import parse_link_speed, read_sysfs_gpu_links
from tests.conftest import shared_fixture


def _p(parse, sniff, rel):
    p = shared_fixture(rel)
    data = p.read_bytes()
    assert sniff(data)
    return parse(data, p.name)


def test_nvlink_status_a100_twelve_links_at_25():
    r = _p(
        parse_nvlink, sniff_nvlink, "gpu/nvidia-smi-nvlink-s_a100-sxm4-80gb-x8_12-links-25gbps-healthy.txt"
    )
    assert [g.index for g in r.gpus] == list(range(8))
    assert all(
        len(g.nvlinks) == 12 and all(n.active and n.speed_gbs == 25 for n in g.nvlinks) for g in r.gpus
    )
    assert (
        r.gpus[0].uuid == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
        and r.gpus[0].model == "NVIDIA A100-SXM4-80GB"
    )


def test_nvlink_h100_vm_tab_indented_eighteen_links():
    (g,) = _p(parse_nvlink, sniff_nvlink, "gpu/nvidia-smi-nvlink-s_h100-80gb-vm_18-links-healthy.txt").gpus
    assert len(g.nvlinks) == 18 and {n.speed_gbs for n in g.nvlinks} == {26.562}


def test_nvlink_h800_elided_eight_links_gpus_0_1_7():
    r = _p(parse_nvlink, sniff_nvlink, "gpu/nvidia-smi-nvlink-status_h800-x8_8-links_elided.txt")
    assert [g.index for g in r.gpus] == [0, 1, 7] and r.attrs.get("elided")
    assert all(len(g.nvlinks) == 8 for g in r.gpus)
    assert r.gpus[0].uuid == "GPU-34bf77d1-c686-6821-79a8-32d326c5039c"


def test_nvlink_error_counters_zero_with_elision():
    r = _p(parse_nvlink, sniff_nvlink, "gpu/nvidia-smi-nvlink-e_h100_error-counters-zero_elided.txt")
    (g,) = r.gpus
    assert [n.link for n in g.nvlinks] == [0, 1, 17]
    assert all(n.replay_errors == 0 and n.recovery_errors == 0 and n.crc_errors == 0 for n in g.nvlinks)
    assert r.attrs.get("elided") and "nvlink_errors" in r.facts


def test_nvlink_inactive_versus_not_supported_forms():
    # the two messages nvidia-smi prints (wording as quoted in gpud and NVIDIA forum threads)
    inactive = "GPU 0: Quadro RTX 5000 (UUID: GPU-1)\n\t NVML: Unable to retrieve NVLink information as all links are inActive\n"
    wrapped = "GPU 0: Quadro RTX 5000 (UUID: GPU-1)\n   NVML: Unable to retrieve Nvlink information as all\n         links are inActive\n"
    none = "GPU 0: NVIDIA RTX A4000 (UUID: GPU-2)\nDevice does not have or support Nvlink\n"
    down = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-3)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
    assert parse_nvlink(inactive, "a").gpus[0].nvlink_support == "inactive"
    assert parse_nvlink(wrapped, "b").gpus[0].nvlink_support == "inactive"
    assert parse_nvlink(none, "c").gpus[0].nvlink_support == "none"
    g = parse_nvlink(down, "d").gpus[0]
    assert [(n.link, n.active) for n in g.nvlinks] == [(0, True), (1, False)]


def test_lspci_hgx_gpu_ok_with_lane_errors_and_downgraded_switch_ports():
    r = _p(
        parse_lspci, sniff_lspci, "gpu/lspci-vvv_hgx-h100_pex890xx-ports-downgraded_gpu-cx7-ok_excerpt.txt"
    )
    (g,) = r.gpus
    assert g.bus_id == "0000:19:00.0" and g.driver_in_use == "nvidia"
    assert (
        g.pcie.speed_current_gts == 32 == g.pcie.speed_max_gts
        and g.pcie.width_current == 16 == g.pcie.width_max
    )
    assert g.pcie.lane_errors == tuple(range(16)) and g.pcie.corr_err is True
    ports = {d["bdf"]: d for d in r.attrs["other_devices"]}
    assert (
        ports["0000:17:00.0"]["link"]["speed_current_gts"] == 16
        and ports["0000:17:00.0"]["link"]["downgraded_speed"]
    )
    assert (
        ports["0000:17:03.0"]["link"]["downgraded_speed"]
        and ports["0000:17:03.0"]["link"]["width_current"] == 16
    )
    assert (
        ports["0000:1a:00.0"]["link"]["speed_current_gts"] == 32
        and ports["0000:1a:00.0"]["driver"] == "mlx5_core"
    )


def test_lspci_rtx6000_idle_at_2_5_gts_width_not_annotated():
    (g,) = _p(parse_lspci, sniff_lspci, "gpu/lspci-vvv_rtx6000ada_genoa_2.5gts-idle-downgraded.txt").gpus
    assert g.pcie.speed_current_gts == 2.5 and g.pcie.speed_max_gts == 16
    assert g.pcie.width_current == 16 == g.pcie.width_max and g.pcie.downgraded_width is None
    assert g.pcie.lane_errors == () and g.driver_in_use == "nvidia" and g.numa_node == 0


def test_lspci_rk3588_tab_indented_x4_downgraded_nouveau():
    (g,) = _p(parse_lspci, sniff_lspci, "gpu/lspci-vvvv_rtx3090_rk3588_8gts-x4-downgraded.txt").gpus
    assert g.bus_id == "0000:01:00.0"
    assert (g.pcie.speed_current_gts, g.pcie.width_current, g.pcie.speed_max_gts, g.pcie.width_max) == (
        8,
        4,
        16,
        16,
    )
    assert g.pcie.downgraded_speed and g.pcie.downgraded_width and g.pcie.corr_err
    assert g.driver_in_use == "nouveau"


def test_lspci_connectx7_is_not_a_gpu():
    r = _p(parse_lspci, sniff_lspci, "gpu/lspci-vvv_connectx7_genoa_32gts-x16-ok.txt")
    assert r.gpus == [] and r.attrs["other_devices"][0]["driver"] == "mlx5_core"


def test_dcgmi_diag_r2_pcie_fail_all_and_wrapped_bus_id():
    r = _p(
        parse_dcgmi,
        sniff_dcgmi,
        "gpu/dcgmi-diag-r2_rtx3090-x8_dcgm3.3.0_pcie-fail-cuda-driver-combination.txt",
    )
    assert (
        r.attrs["metadata"]["DCGM Version"] == "3.3.0"
        and r.attrs["metadata"]["Driver Version Detected"] == "530.30.02"
    )
    res = {x["test"]: x for x in r.attrs["diag_results"]}
    assert (
        res["PCIe"]["result"] == "Fail"
        and res["PCIe"]["who"] == "All"
        and res["PCIe"]["section"] == "Integration"
    )
    assert res["GPU Memory"]["result"] == "Skip" and res["GPU Memory"]["section"] == "Hardware"
    deployment = [x for x in r.attrs["diag_results"] if x["section"] == "Deployment"]
    assert len(deployment) == 9 and all(x["result"] == "Pass" for x in deployment)
    msg = res["PCIe"]["messages"][0]
    assert "cudaDeviceGetByPCIBusId" in msg and "00000000:1B:00.0" in msg  # rejoined across the wrap
    assert len(r.gpus) == 8 and r.gpus[0].bus_id == "0000:1b:00.0"


def test_dcgmi_fragment_error_names_gpu_3():
    r = _p(parse_dcgmi, sniff_dcgmi, "gpu/dcgmi-diag_fragment_deployment-error-row-remappings-pending.txt")
    (g,) = r.gpus
    assert g.index == 3
    assert "uncorrectable memory errors and row remappings are pending" in g.events[0].message


def test_dcgmi_discovery_eight_h800_and_no_nvswitch():
    r = _p(parse_dcgmi, sniff_dcgmi, "gpu/dcgmi-discovery-l_h800-x8_no-nvswitch.txt")
    assert [g.index for g in r.gpus] == list(range(8)) and all(g.model == "NVIDIA H800" for g in r.gpus)
    assert r.gpus[0].bus_id == "0000:18:00.0" and r.gpus[0].uuid == "GPU-34bf77d1-c686-6821-79a8-32d326c5039c"
    assert r.attrs["nvswitches"] == 0


def test_dcgmi_health_tree_rows():
    # the tree layout DCGM's own unit test (dcgmi/tests/HealthTests.cpp) checks for; no real sample exists
    text = """+---------------------------+------------------------------------------------------------+
| Health Monitor Report                                                                  |
+===========================+============================================================+
| Overall Health            | Failure                                                    |
| GPU                       |                                                            |
| -> 1                      | Failure                                                    |
|    -> Errors              |                                                            |
|       -> PCIe system      | Warning                                                    |
|                           | Detected more than 8 PCIe replays per minute for GPU 1 :  |
|                           | 13                                                         |
|       -> Memory system    | Failure                                                    |
|                           | A volatile double-bit ECC error has occurred for GPU 1.    |
+---------------------------+------------------------------------------------------------+
"""
    r = parse_dcgmi(text, "h")
    (g,) = r.gpus
    assert g.index == 1 and r.attrs["overall_health"] == "Failure"
    msgs = {e.attrs["system"]: e.message for e in g.events}
    assert "8 PCIe replays per minute for GPU 1 : 13" in msgs["PCIe system"]
    assert msgs["Memory system"].startswith("dcgmi health Memory system: Failure")


def test_dcgm_exporter_dumps():
    (l40s,) = parse_dcgm_exporter(
        shared_fixture("gpu/dcgm-exporter_l40s_upcloud_595.58.03_prof-fields-healthy.prom").read_bytes(),
        "l40s",
    )
    (g,) = l40s.gpus
    assert l40s.node == "gpu1-wl8sg" and g.bus_id == "0000:00:07.0"
    assert g.sm_clock_mhz == 210 and g.temp_c == 32 and g.power_w == 35.686 and g.pcie.replays == 0
    assert g.remap_uncorrectable == 0 and g.remap_failure is False
    # no XID/ECC/throttle field in this set: unknown, not zero
    assert g.xid_last is None and g.ecc_volatile_uncorrectable is None and g.clock_reasons is None
    assert not {"xid", "ecc", "clock_reasons"} & l40s.facts
    (l4,) = parse_dcgm_exporter(
        shared_fixture("gpu/dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom").read_bytes(),
        "l4",
    )
    (g4,) = l4.gpus
    assert (l4.node, g4.index, g4.bus_id, g4.driver_version) == (
        "i-030791dc5a37cd257",
        0,
        "0000:31:00.0",
        "580.105.08",
    )
    assert g4.temp_c == 31 and g4.power_w == 16.365 and g4.ecc_volatile_uncorrectable is None
    (ada,) = parse_dcgm_exporter(
        shared_fixture("gpu/dcgm-exporter_rtx4000ada_lke_580.95.05_pod-labels.prom").read_bytes(), "ada"
    )
    (ga,) = ada.gpus
    assert (ga.pod, ga.namespace, ga.container) == ("cuda-75454ffb9f-8ljq7", "default", "cuda")
    assert ga.xid_last == 0 and ga.sm_clock_mhz == 2310 and ga.temp_c == 48 and ga.power_w == 40.979


def test_dcgm_exporter_refuses_non_dcgm_metrics():
    with pytest.raises(InputError, match="DCGM_FI"):
        parse_dcgm_exporter("up 1\n", "up.prom")


def test_sysfs_links(tmp_path):
    assert parse_link_speed("16.0 GT/s PCIe") == 16.0 and parse_link_speed("2.5 GT/s") == 2.5
    assert parse_link_speed("Unknown") is None
    d = tmp_path / "sys/bus/pci/devices/0000:19:00.0"
    d.mkdir(parents=True)
    for name, val in (
        ("vendor", "0x10de"),
        ("class", "0x030200"),
        ("current_link_speed", "16.0 GT/s PCIe"),
        ("max_link_speed", "32.0 GT/s PCIe"),
        ("current_link_width", "8"),
        ("max_link_width", "16"),
    ):
        (d / name).write_text(val + "\n")
    nic = tmp_path / "sys/bus/pci/devices/0000:1a:00.0"
    nic.mkdir(parents=True)
    (nic / "vendor").write_text("0x15b3\n")
    (g,) = read_sysfs_gpu_links(tmp_path)
    assert g.bus_id == "0000:19:00.0" and g.pcie.speed_current_gts == 16 and g.pcie.width_current == 8
    assert g.driver_in_use is None  # a saved tree that does not record the driver link: unknown


# `dcgmi health -c -j` as pasted in github.com/NVIDIA/DCGM (tests/data/incidents/gpu-052, paste-2)
HEALTH_JSON = """\
Health monitor systems set successfully.
{
        "body" :
        {
                "Overall Health" :
                {
                        "value" : "Healthy"
                }
        },
        "header" :
        [
                "Health Monitor Report"
        ]
}
"""


def test_dcgmi_health_json_overall_verdict():
    from clusterdoctor.observe.gpu.dcgmi import parse_dcgmi, sniff_dcgmi

    assert sniff_dcgmi(HEALTH_JSON.encode())
    rep = parse_dcgmi(HEALTH_JSON, "h.json")
    assert rep.attrs["dcgm_overall_health"] == "Healthy" and not rep.gpus
    bad = parse_dcgmi(HEALTH_JSON.replace('"Healthy"', '"Failure"'), "h.json")
    (g,) = bad.gpus
    assert [(e.kind, e.attrs["health"]) for e in g.events] == [("health", "Failure")]
