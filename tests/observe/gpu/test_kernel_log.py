"""Kernel logs with NVRM Xid / fallen-off-the-bus messages (fixtures/gpu, facts from SOURCES.md)."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.kernel_log import parse_kernel_log, sniff_kernel_log
from tests.conftest import shared_fixture

ISO = "gpu/dmesg-xid_ampere-hopper_xid48-dbe_xid63-row-remap_xid94-contained_peermem.log"
XID79 = "gpu/dmesg-xid_h100-sxm5_525.125.06_xid79-fallen-off-bus-crash-dump.log"
XID119 = "gpu/dmesg-xid_hgx-dell-xe9680_xid119-gsp-rpc-timeout.log"
XID13 = "gpu/dmesg-xid_unknown-gpu_xid13-sm-exceptions_xid43.log"
RK3568 = "gpu/dmesg_rtx3090_rk3568_535.129.03_bar-invalid_fallen-off-bus.log"


def _log(rel):
    p = shared_fixture(rel)
    data = p.read_bytes()
    assert sniff_kernel_log(data)
    return parse_kernel_log(data, p.name)


def _xids(g):
    return [(e.code, e.line) for e in g.events if e.kind == "xid"]


def test_iso_dbe_then_row_remap_then_contained_ecc():
    r = _log(ISO)
    (g,) = r.gpus
    assert g.bus_id == "0000:19:00.0"
    assert _xids(g) == [(48, 11), (63, 12)] + [(94, n) for n in range(13, 22)]
    e48 = g.events[0]
    assert "double bit error (DBE)" in e48.message and "physAddr 0x12bac1c3e0" in e48.message
    assert e48.time is not None  # 2024-11-15T12:02:03,470068+00:00
    import datetime as dt

    assert (
        dt.datetime.fromtimestamp(e48.time, dt.timezone.utc)
        .isoformat()
        .startswith("2024-11-15T12:02:03.470068")
    )
    contained = [e for e in g.events if e.code == 94]
    assert {e.pid for e in contained[1:]} == {1248209} and {e.process for e in contained[1:]} == {
        "python3.10"
    }
    assert contained[0].pid is None  # pid='<unknown>'


def test_xid79_fallen_off_bus_with_multiline_crash_dump():
    r = _log(XID79)
    (g,) = r.gpus
    assert g.bus_id == "0000:5d:00.0" and g.uuid == "GPU-f1906b9b-557a-e961-045c-9fe4be3ce012"
    assert _xids(g) == [(79, 3)]
    assert [e.kind for e in g.events] == ["xid", "fell_off_bus"]
    assert all(e.time is None for e in g.events)  # [ 4254.197816]: seconds since boot, no wall time


def test_xid119_dmesg_T_gsp_timeouts_and_reset_advice():
    r = _log(XID119)
    (g,) = r.gpus
    assert g.bus_id == "0000:9b:00.0" and g.uuid.startswith("GPU-509665ad")
    assert [line for _, line in _xids(g)] == [3, 38, 40, 42, 43]
    assert [e.process for e in g.events if e.kind == "xid"] == [
        "nvidia-smi",
        "nvidia-smi",
        "nvidia-smi",
        "cache_mgr_main",
        "gpud",
    ]
    assert "GSP_RM_ALLOC" in g.events[0].message
    assert any(e.kind == "reset_advised" and e.line == 41 for e in g.events)
    assert g.events[0].attrs.get("zone")  # dmesg -T prints local time without a zone


def test_xid13_sixteen_exceptions_then_xid43():
    (g,) = _log(XID13).gpus
    codes = [c for c, _ in _xids(g)]
    assert codes == [13] * 16 + [43]
    assert g.events[-1].pid == 2924364 and g.events[-1].process == "pt_main_thread"


def test_rk3568_bar_invalid_and_multiline_fallen_off_bus_without_xid():
    r = _log(RK3568)
    (g,) = r.gpus
    assert g.bus_id == "0002:21:00.0"
    kinds = [e.kind for e in g.events]
    assert kinds.count("bar_invalid") == 4 and "fell_off_bus" in kinds and "probe_failed" in kinds
    assert not any(e.kind == "xid" for e in g.events)
    fell = next(e for e in g.events if e.kind == "fell_off_bus")
    assert fell.line == 20 and "10de:2204" in fell.message  # three lines joined
    assert any("None of the NVIDIA devices were initialized" in e.message for e in r.events)


def test_syslog_journal_and_markdown_forms():
    p = shared_fixture(XID79)
    lines = [ln.split("] ", 1)[1] for ln in p.read_text().splitlines() if ln.startswith("[")]
    syslog = "\n".join(f"Nov 18 10:51:02 gpu-node-7 kernel: {ln}" for ln in lines)
    (g,) = parse_kernel_log(syslog, "syslog").gpus
    assert g.node == "gpu-node-7" and _xids(g)[0][0] == 79
    iso = "\n".join(f"2024-11-15T12:02:03+0000 gpu-node-7 kernel: {ln}" for ln in lines)
    (g2,) = parse_kernel_log(iso, "journal").gpus
    assert g2.events[0].time is not None and g2.node == "gpu-node-7"
    md = "> " + "\n> ".join(p.read_text().splitlines())
    (g3,) = parse_kernel_log(md, "md").gpus
    assert _xids(g3) == [(79, 3)]


def test_sxid_is_a_node_event_with_its_switch_link():
    # the NVSwitch driver's SXid line form (open-gpu-kernel-modules nvswitch; no real sample in fixtures/gpu)
    text = "[ 100.1] nvidia-nvswitch3: SXid (PCI:0000:0b:00.0): 12028, Non-fatal, Link 46 MC TS crumbstore MCTO (First)\n"
    r = parse_kernel_log(text, "sx")
    (e,) = r.events
    assert (
        e.kind == "sxid"
        and e.code == 12028
        and e.attrs["switch_link"] == 46
        and e.attrs["nvswitch"] == "nvidia-nvswitch3"
    )


def test_a_log_without_nvidia_messages_is_refused():
    with pytest.raises(InputError, match="NVRM"):
        parse_kernel_log("[ 1.0] usb 1-1: new device\n", "k")


def test_old_driver_xid_names_the_pid_without_name():
    # dmesg -T of a driver that prints `pid=N, Ch …` without `name=` (tests/data/incidents/gpu-019)
    text = (
        "[Fri Jan 29 23:42:34 2021] NVRM: Xid (PCI:0000:db:00): 31, pid=13641, Ch 00000008, intr 00000000."
        " MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000."
        " Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n"
        "[Sat Jan 30 00:05:20 2021] NVRM: Xid (PCI:0000:db:00): 31, pid=14323, Ch 00000008, intr 00000000.\n"
    )
    (g,) = parse_kernel_log(text, "k").gpus
    assert [(e.code, e.pid, e.process) for e in g.events] == [(31, 13641, None), (31, 14323, None)]
    assert g.events[0].message.startswith("Ch 00000008")
    # the current form keeps its name
    (g,) = parse_kernel_log(
        "NVRM: Xid (PCI:0000:19:00): 13, pid=1234, name=python3, Graphics Exception\n", "k"
    ).gpus
    assert (g.events[0].pid, g.events[0].process) == (1234, "python3")


def test_xid_with_an_elided_bus_id_is_one_unnamed_gpu():
    # the poster elided the PCI ids (tests/data/incidents/gpu-030)
    text = (
        "kernel: NVRM: GPU1 kbifCacheVFInfo_GB100: Unable to read NV_PF0_INITIAL_AND_TOTAL_VFS\n"
        "kernel: NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)\n"
        "kernel: NVRM: Xid (PCI:...): 137, RLW_RXPIPE interrupt hit on link 11 on GPU0: PRIV Error\n"
    )
    (g,) = parse_kernel_log(text, "k").gpus
    assert g.bus_id is None and [e.code for e in g.events] == [145, 137]
    assert "not named" in g.label()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # microsoft/pai#4344 (incident gpu-407): the poster's selection cut the "[   " of the first stamp
        (
            "38.773115] NVRM: RmInitAdapter failed! (0x26:0xffff:1127)",
            "RmInitAdapter failed! (0x26:0xffff:1127)",
        ),
        # not a cut stamp: too few decimals, the number is part of the message (synthetic)
        (
            "1.5] NVRM: RmInitAdapter failed! (0x26:0xffff:1127)",
            "1.5] NVRM: RmInitAdapter failed! (0x26:0xffff:1127)",
        ),
    ],
)
def test_cut_uptime_stamp(line, message):
    rep = parse_kernel_log(line + "\n", "p")
    assert rep.events[0].message == message


# Real lines of NVIDIA/gpu-operator#1146 and #649 with the start of their prefix cut off as a mouse
# selection cuts it (the cut forms are synthetic; the messages are the threads')
_LINE_1146 = "kernel: [  885.242168] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)"


@pytest.mark.parametrize(
    ("line", "host", "time_text"),
    [
        ("Dec  2 11:49:53 worker4 " + _LINE_1146, "worker4", "Dec  2 11:49:53"),  # the real, whole line
        ("c  2 11:49:53 worker4 " + _LINE_1146, "worker4", "uptime 885.242168 s"),
        (" 2 11:49:53 worker4 " + _LINE_1146, "worker4", "uptime 885.242168 s"),
        (_LINE_1146, None, "uptime 885.242168 s"),
        ("kernel: NVRM: GPU 0000:04:01.0: RmInitAdapter failed! (0x11:0x45:2525)", None, None),
        ("] NVRM: GPU 0000:04:01.0: RmInitAdapter failed! (0x11:0x45:2525)", None, None),
    ],
)
def test_cut_syslog_prefix_is_not_part_of_the_message(line, host, time_text):
    rep = parse_kernel_log(line + "\n", "p")
    (g,) = rep.gpus
    (e,) = g.events
    assert e.kind == "probe_failed"
    assert e.message.startswith("GPU 0000:0")
    assert e.time_text == time_text
    assert rep.node == host
