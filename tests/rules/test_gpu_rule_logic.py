"""GPU rule logic on CONSTRUCTED GPU states (not captures): the cases the real fixtures do not show —
busy downtrained links, node-wide throttling, NVLinks down, SXid joined to a GPU, topology join.

Each state starts from a real capture where one exists and changes only what the case needs."""

from __future__ import annotations

from clusterdoctor import diagnosis
from clusterdoctor.model import Severity
from clusterdoctor.rules.registry import load_all, run_rules
from clusterdoctor.topology.gpu import GpuEvent, GpuReport, GpuState, NvLinkState, PcieLink
from clusterdoctor.topology.model import Device, Topology
from tests.conftest import shared_fixture

GPU_RULES = [r for r in load_all() if r.layer == "gpu"]


def _run(*reports, topology=None):
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    if topology is not None:
        diagnosis.add_topology(obs, topology)
    diagnosis.merge_into(obs, {"gpu_reports": list(reports)})
    return run_rules(obs, GPU_RULES)[0], obs


def _gpu(i, **kw):
    g = GpuState(index=i, bus_id=f"0000:{0x53 + 0x11 * i:02x}:00.0", model="NVIDIA H100 80GB HBM3", **kw)
    g.sources.append("constructed")
    return g


def test_busy_gpu_at_gen1_is_a_finding_idle_is_not():
    busy = _gpu(
        0, util_pct=98.0, pcie=PcieLink(gen_current=1, gen_max=5, width_current=16, width_max=16, source="c")
    )
    idle = _gpu(
        1, util_pct=0.0, pcie=PcieLink(gen_current=1, gen_max=5, width_current=16, width_max=16, source="c")
    )
    rep = GpuReport("nvidia-smi -q", "constructed", gpus=[busy, idle], facts={"pcie"})
    f, _ = _run(rep)
    (x,) = [y for y in f if y.rule == "GPU013"]
    assert x.subject == busy.label() and "2.5 of 32 GT/s while 98% busy" in x.summary
    assert x.severity == Severity.CRITICAL  # 1/12.8 of the bandwidth


def test_same_throttle_reason_on_every_gpu_points_at_the_node():
    gpus = [
        _gpu(
            i,
            util_pct=95.0,
            clock_reasons={"hw_power_brake_slowdown": True},
            sm_clock_mhz=900.0,
            sm_max_mhz=1980.0,
        )
        for i in range(4)
    ]
    f, _ = _run(GpuReport("nvidia-smi -q", "constructed", node="n1", gpus=gpus, facts={"clock_reasons"}))
    thr = [y for y in f if y.rule == "GPU009"]
    assert len(thr) == 1 and thr[0].subject == "n1" and "the cause is the node" in thr[0].summary
    assert thr[0].severity == Severity.CRITICAL
    assert not [y for y in f if y.rule == "GPU010"]  # the low clock is explained by the reason


def test_low_sm_clock_under_load_without_reason():
    g = _gpu(0, util_pct=100.0, clock_reasons={"gpu_idle": False}, sm_clock_mhz=1200.0, sm_max_mhz=1980.0)
    f, _ = _run(GpuReport("x", "constructed", gpus=[g]))
    (x,) = [y for y in f if y.rule == "GPU010"]
    assert "61%" in x.summary


def test_nvlink_down_inactive_and_missing_but_not_by_design():
    down = _gpu(
        0,
        nvlink_support="links",
        nvlinks=[NvLinkState(i, active=i != 3, speed_gbs=26.562) for i in range(18)],
    )
    few = _gpu(
        1, nvlink_support="links", nvlinks=[NvLinkState(i, active=True, speed_gbs=26.562) for i in range(12)]
    )
    none = GpuState(index=2, bus_id="0000:99:00.0", model="NVIDIA L4", nvlink_support="none")
    inactive = _gpu(3, nvlink_support="inactive")
    f, _ = _run(GpuReport("nvidia-smi nvlink", "constructed", gpus=[down, few, none, inactive]))
    got = {y.subject: y.summary for y in f if y.rule == "GPU011"}
    assert "1 link(s) inactive (link 3)" in got[down.label()]
    assert "only 12 of its 18" in got[few.label()]
    assert "all NVLinks are inactive" in got[inactive.label()]
    assert none.label() not in got


def test_sxid_joined_to_the_gpu_with_xid74():
    g74 = _gpu(5)
    g74.events.append(
        GpuEvent("xid", "NVLink: fatal error detected on link 8", code=74, time=100.0, source="k", line=2)
    )
    rep = GpuReport("kernel log", "k", gpus=[g74, _gpu(6)], facts={"kernel_log"})
    rep.events.append(
        GpuEvent(
            "sxid",
            "Fatal, Link 46 ...",
            code=24007,
            time=99.0,
            source="k",
            line=1,
            attrs={"nvswitch": "nvidia-nvswitch2"},
        )
    )
    f, _ = _run(rep)
    (sx,) = [y for y in f if y.rule == "GPU003"]
    assert sx.subject == g74.label() and "nvidia-nvswitch2" in sx.summary


def test_topology_join_gives_numa_node_and_nearest_nic():
    p = shared_fixture(
        "gpu/nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt"
    )
    from clusterdoctor.observe.gpu.nvidia_smi_q import parse_nvidia_smi_q

    rep = parse_nvidia_smi_q(p.read_bytes(), p.name)
    topo = Topology(
        source="constructed",
        source_kind="test",
        gpus=[Device("GPU2", "gpu", pci="0000:75:00.0", numa_node=1, index=2)],
        nics=[Device("mlx5_3", "nic", pci="0000:76:00.0", numa_node=1, attrs={"rdma": True})],
        hostname="hgx-7",
    )
    f, obs = _run(rep, topology=topo)
    from clusterdoctor.analyze.gpu_health import gpu_fleet

    g = gpu_fleet(obs).find("hgx-7", "0000:75:00.0")
    assert g is not None and g.numa_node == 1 and g.nearest_nic == "mlx5_3"
    thr = next(y for y in f if y.rule == "GPU009")
    assert thr.subject == "GPU2 0000:75:00.0 on hgx-7"
    assert any(e.description == "nearest NIC" and e.value.startswith("mlx5_3") for e in thr.evidence)


def test_application_xid_recurring_across_processes_names_the_board():
    from clusterdoctor.observe.gpu.kernel_log import parse_kernel_log

    lines = "".join(
        f"NVRM: Xid (PCI:0000:db:00): 31, pid={pid}, Ch 00000008, intr 00000000. MMU Fault\n"
        for pid in (13641, 14323, 33275)
    )
    (f,) = [x for x in _run(parse_kernel_log(lines, "k"))[0] if x.rule == "GPU001"]
    assert f.severity == Severity.WARNING and "gpu.hw-faulty" in f.causes
    once = lines.replace("14323", "13641").replace("33275", "13641")
    (f,) = [x for x in _run(parse_kernel_log(once, "k"))[0] if x.rule == "GPU001"]
    assert "gpu.hw-faulty" not in f.causes


def test_v100_sxm2_inactive_links_judged_in_an_elided_listing():
    # nvidia-smi nvlink -s as pasted (tests/data/incidents/gpu-017): other GPUs elided with '....';
    # the links shown <inactive> are evidence, whatever was cut
    from clusterdoctor.observe.gpu.nvlink import parse_nvlink

    text = "nvidia-smi nvlink -s\n....\nGPU 3: Tesla V100-SXM2-32GB (UUID: ...)\n" + "".join(
        f"         Link {i}: {'<inactive>' if i in (3, 5) else '25.781 GB/s'}\n" for i in range(6)
    )
    f, _ = _run(parse_nvlink(text, "nvlink.txt"))
    (x,) = [y for y in f if y.rule == "GPU011"]
    assert "2 link(s) inactive (link 3, 5)" in x.summary
    healthy = text.replace("<inactive>", "25.781 GB/s")
    f, _ = _run(parse_nvlink(healthy, "nvlink.txt"))
    assert not [y for y in f if y.rule == "GPU011"]


# nvidia-smi as pasted in github.com/NVIDIA/DCGM (tests/data/incidents/gpu-052): noheader rows under
# the command that names their columns, a user's pointer after one value
RECOVERY = """\
# GPU=1 stuck in EBUSY state because some GSP issue
nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv,noheader
0, None
1, Reset   <= GPU is unusable, reset required
2, None
"""


def test_noheader_query_with_its_command_line_and_the_recovery_action():
    from clusterdoctor.observe.gpu.query_gpu_csv import parse_query_gpu_csv, sniff_query_gpu_csv

    assert sniff_query_gpu_csv(RECOVERY.encode())
    rep = parse_query_gpu_csv(RECOVERY, "q.txt")
    assert [(g.index, [e.message for e in g.events]) for g in rep.gpus] == [(0, []), (1, ["Reset"]), (2, [])]
    f, _ = _run(rep)
    (x,) = [y for y in f if y.rule == "GPU021"]
    assert x.subject.startswith("GPU1") and "gpu.reset-required" in x.causes
    f, _ = _run(
        parse_query_gpu_csv(RECOVERY.replace("Reset   <= GPU is unusable, reset required", "None"), "q")
    )
    assert not [y for y in f if y.rule == "GPU021"]
