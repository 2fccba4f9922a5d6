"""GPU tool output as users paste it: plain nvidia-smi tables, nvidia-smi -L, -q excerpts without their
GPU header, plain lspci, device plugin / validator / fabric manager logs, NVRM messages over several
lines, cut topo -m matrices. Real pastes (dev cases of the incident corpus, public threads named
beside them); hypothesis for what a parser must never do."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.kernel_log import parse_kernel_log
from clusterdoctor.observe.gpu.load import classify_gpu_all, parse_gpu_reports
from clusterdoctor.observe.gpu.lspci import parse_lspci_list, sniff_lspci_list
from clusterdoctor.observe.gpu.nvidia_smi_q import parse_nvidia_smi_q, sniff_nvidia_smi_q
from clusterdoctor.observe.gpu.nvidia_smi_table import (
    parse_nvidia_smi_list,
    parse_nvidia_smi_table,
    sniff_nvidia_smi_list,
    sniff_nvidia_smi_table,
)
from clusterdoctor.observe.gpu.service_logs import parse_service_log, sniff_service_log
from clusterdoctor.observe.node.nvidia_smi import parse_nvidia_smi_topo
from tests.conftest import TEST_DATA

CORPUS = TEST_DATA / "incidents"
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T4 = (CORPUS / "ok-gpu-009" / "paste.txt").read_text()  # Bottlerocket: apiclient JSON, then the table
TABLE = T4[T4.index("Mon Mar 31") :]

# nvidia-smi -L in a container and on its host (NVIDIA/nvidia-container-toolkit#1227)
LIST = """GPU 0: NVIDIA A10 (UUID: GPU-f15ae561-21b1-6003-c768-861fc285203b)
GPU 1: NVIDIA A10 (UUID: GPU-466be1f8-6148-1a27-a450-592604f3df54)
GPU 2: Tesla T4 (UUID: GPU-bf507abe-ec25-2053-5435-1c82511a3ae8)
GPU 3: Tesla T4 (UUID: GPU-a1329f2e-1e73-88f2-4d4b-1ce18debbc6d)
"""
# the device plugin starting on a node where it sees no GPU (NVIDIA/k8s-device-plugin#414)
PLUGIN = """2023/06/12 09:21:24 Loading NVML
2023/06/12 09:21:25 Starting FS watcher.
2023/06/12 09:21:25 Starting OS watcher.
2023/06/12 09:21:25 Retreiving plugins.
2023/06/12 09:21:25 No devices found. Waiting indefinitely.
"""
# a healthy fabric manager start in the journal (NVIDIA/nvtrust#128)
FM = """Jan 05 14:44:41 TENCENT64 systemd[1]: Starting nvidia-fabricmanager.service - NVIDIA fabric manager service...
Jan 05 14:44:41 TENCENT64 nvidia-fabricmanager-start.sh[1049]: Detected Pre-NVL5 system
Jan 05 14:45:26 TENCENT64 nv-fabricmanager[1120]: Connected to 1 node.
Jan 05 14:45:28 TENCENT64 nv-fabricmanager[1120]: Successfully configured all the available NVSwitches to route GPU NVLink traffic. NVLink Peer-to-Peer support will be enabled once the GPUs are successfully registered with the NVLink fabric.
Jan 05 14:45:28 TENCENT64 nvidia-fabricmanager-start.sh[1049]: Started "Nvidia Fabric Manager"
Jan 05 14:45:28 TENCENT64 systemd[1]: Started nvidia-fabricmanager.service - NVIDIA fabric manager service.
"""
# the GPU operator's CUDA validator (NVIDIA/gpu-operator#277)
VALIDATOR = """[Vector addition of 50000 elements]
Failed to allocate device vector A (error code forward compatibility was attempted on non supported HW)!
"""


def test_table_inside_a_longer_paste_reads_the_gpu_and_counts_the_rest():
    assert sniff_nvidia_smi_table(T4.encode())
    r = parse_nvidia_smi_table(T4, "paste")
    (g,) = r.gpus
    assert (g.index, g.model, g.bus_id) == (0, "Tesla T4", "0000:00:1e.0")
    assert (g.temp_c, g.pstate, g.power_w, g.power_limit_w, g.util_pct) == (21, "P8", 10, 70, 0)
    assert g.ecc_volatile_uncorrectable == 0 and not g.events
    assert r.attrs["driver_version"] == "535.230.02" and r.attrs["cuda_version"] == "12.2"
    assert any("outside the nvidia-smi table" in w for w in r.warnings)  # the apiclient JSON above it
    assert any("cut short" in w for w in r.warnings)  # the paste ends inside the GPU rows


# an r384 table with its process list, the prompt and a clock above it (fireice-uk/xmr-stak-nvidia#39;
# trailing blanks of the paste dropped)
OLD_TABLE = """> nvidia-smi
19:07:22
Tue Aug 29 19:07:22 2017
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 384.66                 Driver Version: 384.66                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  TITAN Xp            Off  | 00000000:41:00.0  On |                  N/A |
| 29%   47C    P5    28W / 250W |   2789MiB / 12174MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID  Type  Process name                               Usage      |
|=============================================================================|
|    0      1568    G   /usr/lib/xorg/Xorg                            1850MiB |
"""


def test_old_table_with_processes():
    r = parse_nvidia_smi_table(OLD_TABLE, "paste")
    (g,) = r.gpus
    assert (g.model, g.bus_id, g.temp_c, g.pstate, g.power_w, g.power_limit_w) == (
        "TITAN Xp", "0000:41:00.0", 47, "P5", 28, 250,
    )  # fmt: skip
    assert g.ecc_volatile_uncorrectable is None  # N/A: no ECC on this board
    assert g.processes == [(1568, "/usr/lib/xorg/Xorg")] and "cuda_version" not in r.attrs


def test_err_in_the_table_is_a_gpu_that_does_not_answer():
    broken = TABLE.replace(
        "| N/A   21C    P8              10W /  70W |", "| ERR!  ERR!   ERR!         ERR! / ERR! |"
    )
    broken = broken.replace("|                    0 |", "|                 ERR! |")
    (g,) = parse_nvidia_smi_table(broken, "paste").gpus
    (e,) = g.events
    assert e.kind == "smi_error" and "ERR!" in e.message and g.temp_c is None


def test_only_the_fan_unreadable_is_not_a_lost_gpu():
    fan = TABLE.replace("| N/A   21C", "| ERR!  21C")
    (g,) = parse_nvidia_smi_table(fan, "paste").gpus
    assert not g.events and g.temp_c == 21


def test_only_the_power_draw_unreadable_is_a_warning_not_a_lost_gpu():
    # github.com/Azure/azhpc-diagnostics (corpus ok-gpu-901): a V100 VM's row with "ERR! / 250W" while
    # temperature, P-state and memory read; the maintainers call it transient
    power = TABLE.replace("10W /  70W", "ERR! /  70W")
    r = parse_nvidia_smi_table(power, "paste")
    (g,) = r.gpus
    assert not g.events and g.temp_c == 21 and g.pstate == "P8" and g.power_w is None
    assert any("power draw ERR!" in w for w in r.warnings)
    both = TABLE.replace(
        "| N/A   21C    P8              10W /  70W |", "| N/A   ERR!   P8            ERR! /  70W |"
    )
    (g,) = parse_nvidia_smi_table(both, "paste").gpus
    assert [e.kind for e in g.events] == ["smi_error"]  # temperature too: the GPU does not answer


def test_a_gpu_row_pasted_without_the_header_is_read():
    lines = TABLE.splitlines()
    sep = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("|=="))
    fragment = "\n".join(["+" + "-" * 40 + "+", *lines[sep + 1 :]]) + "\n"
    assert sniff_nvidia_smi_table(fragment.encode())
    r = parse_nvidia_smi_table(fragment, "paste")
    assert [g.model for g in r.gpus] == ["Tesla T4"] and "driver_version" not in r.attrs
    assert any("without its header" in w for w in r.warnings)


def test_borders_and_a_row_that_is_no_gpu_row_are_not_nvidia_smi():
    text = "+----------------+\n| name | value | unit |\n+----------------+\n"
    assert not sniff_nvidia_smi_table(text.encode())
    with pytest.raises(InputError):
        parse_nvidia_smi_table(text, "paste")


def test_volatile_uncorrectable_count_is_read():
    ecc = TABLE.replace("|                    0 |", "|                    3 |")
    (g,) = parse_nvidia_smi_table(ecc, "paste").gpus
    assert g.ecc_volatile_uncorrectable == 3


def test_table_header_only_gives_the_driver_and_a_warning():
    header = "\n".join(TABLE.splitlines()[:8]) + "\n"
    r = parse_nvidia_smi_table(header, "paste")
    assert not r.gpus and r.attrs["driver_version"] == "535.230.02"
    assert any("without any GPU row" in w for w in r.warnings)


def test_nvidia_smi_list():
    assert sniff_nvidia_smi_list(LIST.encode()) and not sniff_nvidia_smi_table(LIST.encode())
    r = parse_nvidia_smi_list(LIST, "L")
    assert [(g.index, g.model) for g in r.gpus] == [
        (0, "NVIDIA A10"),
        (1, "NVIDIA A10"),
        (2, "Tesla T4"),
        (3, "Tesla T4"),
    ]
    assert r.gpus[2].uuid == "GPU-bf507abe-ec25-2053-5435-1c82511a3ae8"


def test_q_excerpt_without_gpu_header():
    text = (CORPUS / "gpu-011" / "paste.txt").read_text()
    assert sniff_nvidia_smi_q(text.encode())
    r = parse_nvidia_smi_q(text, "q")
    (g,) = r.gpus
    assert (g.remap_correctable, g.remap_uncorrectable, g.remap_pending) == (0, 4, True)
    assert g.bus_id is None and g.index is None and r.attrs["excerpt"]
    assert any("without the GPU header" in w for w in r.warnings)


def test_q_grep_excerpt_over_several_gpus_is_one_gpu_per_section():
    one = (CORPUS / "gpu-011" / "paste.txt").read_text()
    other = one.replace(
        "Uncorrectable Error               : 4", "Uncorrectable Error               : 0"
    ).replace("Pending                           : Yes", "Pending                           : No")
    r = parse_nvidia_smi_q(one + other, "q")
    assert [(g.index, g.remap_pending) for g in r.gpus] == [(0, True), (1, False)]


def test_q_excerpt_of_an_idle_gpu_throttle_reasons():
    text = (CORPUS / "ok-gpu-001" / "paste.txt").read_text()
    text = text.split("\n", 1)[1]  # without the command line (paste.clean removes it before the parsers)
    (g,) = parse_nvidia_smi_q(text, "q").gpus
    assert g.active_reasons() == ["gpu_idle"]


def test_plain_lspci_rev_ff_is_a_gpu_that_does_not_answer():
    text = (CORPUS / "gpu-031" / "paste-3.txt").read_text()
    assert sniff_lspci_list(text.encode())
    r = parse_lspci_list(text, "lspci")
    assert [g.bus_id for g in r.gpus] == ["0000:1a:00.0", "0000:1c:00.0", "0000:1d:00.0"]
    lost = [g for g in r.gpus if g.events]
    assert [g.bus_id for g in lost] == ["0000:1c:00.0"] and lost[0].events[0].kind == "unreachable"


def test_service_logs_are_read():
    for text, kind in ((PLUGIN, "device plugin"), (FM, "fabric manager"), (VALIDATOR, "validator")):
        assert sniff_service_log(text.encode()), kind
        r = parse_service_log(text, "log")
        assert kind in r.kind and not r.gpus
    assert parse_service_log(FM, "log").attrs.get("fabric_configured") is True


def test_device_plugin_xid_becomes_an_xid_event_of_that_gpu():
    """The health checker's line as its format string prints it (internal/rm/health.go)."""
    line = (
        "I1129 12:01:07.551230       1 health.go:169] XidCriticalError: Xid=79 on "
        "Device=GPU-979426f2-893a-7cbb-c4cf-81472f89a462; marking device as unhealthy.\n"
    )
    (g,) = parse_service_log(PLUGIN + line, "log").gpus
    assert g.uuid == "GPU-979426f2-893a-7cbb-c4cf-81472f89a462"
    assert [(e.kind, e.code) for e in g.events] == [("xid", 79)]


def test_rminitadapter_without_the_gpu_address():
    """Bumblebee-Project/Bumblebee#722: older drivers print no address."""
    text = (
        "[87669.726564] NVRM: RmInitAdapter failed! (0x26:0xffff:1375)\n"
        "[87669.726572] NVRM: rm_init_adapter failed for device bearing minor number 0\n"
        "[87669.726589] NVRM: nvidia_frontend_open: minor 0, module->open() failed, error -5\n"
    )
    r = parse_kernel_log(text, "dmesg")
    assert [e.kind for e in r.events] == ["probe_failed", "probe_failed"] and not r.gpus


def test_messages_over_several_nvrm_lines_are_joined():
    """The driver's multi-line templates (osapi.c RmInitAdapter / nv.c), each line prefixed by dmesg -T."""
    text = (
        "[Mon Apr  8 17:04:05 2024] NVRM: The NVIDIA GPU 0000:3b:00.0\n"
        "[Mon Apr  8 17:04:05 2024] NVRM: (PCI ID: 10de:20b5) installed in this system has\n"
        "[Mon Apr  8 17:04:05 2024] NVRM: fallen off the bus and is not responding to commands.\n"
        "[Mon Apr  8 17:04:07 2024] NVRM: The NVIDIA GPU 0000:5e:00.0 (PCI ID: 10de:2b85)\n"
        "[Mon Apr  8 17:04:07 2024] NVRM: installed in this system is not supported by the\n"
        "[Mon Apr  8 17:04:07 2024] NVRM: NVIDIA 535.54.03 driver release.\n"
        "[Mon Apr  8 17:04:08 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    )
    r = parse_kernel_log(text, "dmesg")
    kinds = {g.bus_id: [e.kind for e in g.events] for g in r.gpus}
    assert kinds == {"0000:3b:00.0": ["fell_off_bus", "xid"], "0000:5e:00.0": ["unsupported"]}


def test_a_paste_of_two_tools_gives_two_reports():
    """gpu-032's dmesg (AER then Xid 79) pasted under the nvidia-smi table."""
    dmesg = (CORPUS / "gpu-032" / "paste.txt").read_text()
    reports = parse_gpu_reports((TABLE + "\n" + dmesg).encode(), "paste")
    assert [r.kind for r in reports] == ["nvidia-smi", "kernel log"]


def test_topo_matrix_cut_after_the_gpu_rows_is_read():
    text = (CORPUS / "ok-gpu-003" / "paste.txt").read_text()
    topo = parse_nvidia_smi_topo(text, "topo")
    assert len(topo.gpus) == 8 and len(topo.nics) == 10
    assert all(g.numa_node in (0, 1) for g in topo.gpus)
    assert any("cut short" in w for w in topo.warnings)


@FUZZ
@given(before=st.lists(st.text(max_size=60), max_size=5), after=st.lists(st.text(max_size=60), max_size=5))
def test_table_rows_read_the_same_whatever_surrounds_them(before, after):
    before = [b.replace("|", "") for b in before]
    after = [a.replace("|", "").replace("+", "") for a in after]
    body = "\n".join([*before, TABLE.rstrip("\n"), "+-----------------------------------------+", "", *after])
    (g,) = parse_nvidia_smi_table(body, "paste").gpus
    assert (g.index, g.bus_id, g.temp_c) == (0, "0000:00:1e.0", 21)


@FUZZ
@given(data=st.binary(max_size=2048))
def test_new_parsers_only_raise_input_error(data):
    for parse in (
        parse_nvidia_smi_table,
        parse_nvidia_smi_list,
        parse_lspci_list,
        parse_service_log,
        parse_nvidia_smi_q,
        parse_kernel_log,
    ):
        try:
            parse(data, "fuzz")
        except InputError:
            pass
    classify_gpu_all(data)


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(T4)))
def test_truncated_pastes_only_raise_input_error(cut):
    for text in (T4[:cut], LIST[: cut % (len(LIST) + 1)], PLUGIN[: cut % (len(PLUGIN) + 1)]):
        try:
            parse_gpu_reports(text.encode(), "cut")
        except InputError:
            pass


# a real paste (https://github.com/NVIDIA/open-gpu-kernel-modules/issues/731, incident ok-gpu-010): the
# command line on top, a header of properties with no index/uuid/bus id column, `-l 1` samples
QUERY_NO_ID = """\
$ nvidia-smi --query-gpu="pstate,pcie.link.gen.gpucurrent,pcie.link.gen.gpumax" --format=csv -l 1
pstate, pcie.link.gen.gpucurrent, pcie.link.gen.gpumax
P8, 1, 4
P5, 2, 4
"""


def test_query_gpu_csv_without_an_identity_column_is_read() -> None:
    from clusterdoctor.observe.gpu.query_gpu_csv import parse_query_gpu_csv, sniff_query_gpu_csv

    assert sniff_query_gpu_csv(QUERY_NO_ID.encode())
    rep = parse_query_gpu_csv(QUERY_NO_ID)
    assert [g.pstate for g in rep.gpus] == ["P8", "P5"]


def test_other_csv_is_not_a_query_gpu_header() -> None:
    from clusterdoctor.observe.gpu.query_gpu_csv import sniff_query_gpu_csv

    assert not sniff_query_gpu_csv(b"name, size, owner\nfoo, 1, me\n")
    assert not sniff_query_gpu_csv(b"host, memory.used\nfoo, 1\n")


# `systemctl status nvidia-fabricmanager` (real paste,
# https://github.com/bottlerocket-os/bottlerocket/pull/3873, incident ok-gpu-011)
FM_STATUS = """\
nvidia-fabricmanager.service - NVIDIA fabric manager service
     Active: active (running) since Thu 2024-05-16 23:22:02 UTC; 7s ago
     CGroup: /system.slice/nvidia-fabricmanager.service
             └─128549 /usr/libexec/nvidia/tesla/bin/nv-fabricmanager -c /etc/nvidia/fabricmanager.cfg
"""


def test_systemctl_status_of_the_fabric_manager_is_read() -> None:
    assert sniff_service_log(FM_STATUS.encode())
    assert parse_service_log(FM_STATUS).kind


# an excerpt of `nvidia-smi -q -x` cut mid-section (real paste, incident ok-gpu-014's first lines)
XML_EXCERPT = """\
                <ecc_mode>
                        <current_ecc>Enabled</current_ecc>
                        <pending_ecc>Enabled</pending_ecc>
                </ecc_mode>
                <ecc_errors>
                        <volatile>
                                <single_bit>
                                        <device_memory>0</device_memory>
                                        <register_file>0</register_file>
"""


def test_an_xml_excerpt_of_a_gpu_is_read_as_its_sections_only() -> None:
    from clusterdoctor.observe.gpu.nvidia_smi_xml import parse_nvidia_smi_xml, sniff_nvidia_smi_xml

    assert sniff_nvidia_smi_xml(XML_EXCERPT.encode())
    rep = parse_nvidia_smi_xml(XML_EXCERPT + "                                        <l1_ca")
    assert len(rep.gpus) == 1
    assert "ecc" in rep.facts and "processes" not in rep.facts and "pcie" not in rep.facts
    assert any("excerpt" in w for w in rep.warnings)


def test_other_xml_is_not_an_excerpt() -> None:
    from clusterdoctor.observe.gpu.nvidia_smi_xml import sniff_nvidia_smi_xml

    assert not sniff_nvidia_smi_xml(b"<project><name>x</name></project>")
    assert not sniff_nvidia_smi_xml(b"</ecc_mode>")
