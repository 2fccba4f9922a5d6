"""GPU rules on every file of fixtures/gpu: the faults (and the absence of faults) SOURCES.md describes.

Each file goes through content detection (``clusterdoctor diagnose FILE``'s path) and the GPU rules."""

from __future__ import annotations

import re

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.model import Severity
from clusterdoctor.rules.registry import load_all, run_rules
from tests.conftest import shared_fixture

GPU_RULES = [r for r in load_all() if r.layer == "gpu"]
X8 = "nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt"


def run(*rels):
    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    refs = diagnosis.load_sources(obs, [shared_fixture(f"gpu/{r}") for r in rels])
    findings, skipped, ran = run_rules(obs, GPU_RULES)
    return findings, {s.rule: s.reason for s in skipped}, ran, obs, refs


def by_rule(findings, rule):
    return [f for f in findings if f.rule == rule]


def test_a10_remap_pending_needs_reset_and_nothing_else():
    f, skipped, _, _, refs = run("nvidia-smi-q_a10_535.129.03_remapped-rows-uncorrectable4-pending.txt")
    assert refs[0].kind == "GPU health"
    (pend,) = by_rule(f, "GPU005")
    assert pend.subject == "GPU0 0000:07:00.0" and "reset" in pend.summary and "4 rows" in pend.summary
    assert not by_rule(f, "GPU004") and not by_rule(f, "GPU006")  # ECC 0, no remap failure
    assert {x.rule for x in f} == {"GPU005"}
    assert "GPU001" in skipped and "kernel log" in skipped["GPU001"]


def test_h100_x8_throttle_on_one_gpu_is_that_gpu_and_replays_are_info():
    f, *_ = run("nvidia-smi-q_h100-sxm-x8_535.183.01_sw-thermal-power-brake-on-one-gpu_pcie-replays.txt")
    (thr,) = by_rule(f, "GPU009")
    assert thr.subject == "GPU2 0000:75:00.0" and thr.severity == Severity.CRITICAL
    assert "HW power brake" in thr.summary and "SW thermal" in thr.summary and "SW power cap" in thr.summary
    assert any("UUID GPU-973565ff-45cf-12ea-4e91-33386720f7bb" in str(e.value) for e in thr.evidence)
    reps = by_rule(f, "GPU014")
    assert len(reps) == 8 and all(x.severity == Severity.INFO for x in reps)
    assert sorted(int(x.summary.split(": ")[1].split()[0]) for x in reps) == sorted(
        [120, 111, 58, 60, 63, 93, 69, 78]
    )
    assert not by_rule(f, "GPU013") and not by_rule(f, "GPU005")


def test_rtx4090_power_cap_on_the_two_busy_gpus_idle_gen1_is_not_a_finding():
    f, *_ = run("nvidia-smi-q_rtx4090-x8_535.154.05_sw-power-cap-2-gpus_pcie-gen1-idle.txt")
    caps = by_rule(f, "GPU009")
    assert sorted(x.subject for x in caps) == ["GPU1 0000:23:00.0", "GPU4 0000:81:00.0"]
    assert all(x.severity == Severity.WARNING and "SW power cap" in x.summary for x in caps)
    assert not by_rule(f, "GPU013")  # six idle GPUs at gen 1 of 4: power saving
    assert {x.rule for x in f} == {"GPU009"}


@pytest.mark.parametrize(
    "name",
    [
        "nvidia-smi-q_h800_525.105.17_healthy.txt",
        "nvidia-smi-q_titan-v_560.35.03_pcie-gen1-of-3-idle.txt",
        "nvidia-smi-query-gpu-csv_h100-80gb_590.48.01_under-load.csv",
        "nvidia-smi-query-gpu-csv_h200_590.48.01_under-load.csv",
        "nvidia-smi-query-gpu-csv_l40s_595.80_idle-section-util100.csv",
        "nvidia-smi-nvlink-s_a100-sxm4-80gb-x8_12-links-25gbps-healthy.txt",
        "nvidia-smi-nvlink-s_h100-80gb-vm_18-links-healthy.txt",
        "nvidia-smi-nvlink-status_h800-x8_8-links_elided.txt",
        "nvidia-smi-nvlink-e_h100_error-counters-zero_elided.txt",
        "lspci-vvv_connectx7_genoa_32gts-x16-ok.txt",
        "lspci-vvv_rtx6000ada_genoa_2.5gts-idle-downgraded.txt",
        "dcgmi-discovery-l_h800-x8_no-nvswitch.txt",
        "dcgm-exporter_l40s_upcloud_595.58.03_prof-fields-healthy.prom",
        "dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom",
        "dcgm-exporter_rtx4000ada_lke_580.95.05_pod-labels.prom",
    ],
)
def test_healthy_samples_give_no_finding(name):
    f, *_ = run(name)
    assert f == [], [x.summary for x in f]


def test_h100_vm_under_load_only_the_replays_since_reset():
    f, *_ = run("nvidia-smi-q_h100-80gb-vm_590.48.01_under-load_pcie-replays-9.txt")
    (r,) = f
    assert r.rule == "GPU014" and r.severity == Severity.INFO and "9 PCIe replays" in r.summary


def test_dcgm_exporter_without_ecc_xid_throttle_fields_says_not_exported():
    f, skipped, ran, *_ = run("dcgm-exporter_l4_kops-aws_580.105.08_remap-fields-healthy.prom")
    assert f == []
    for rule in ("GPU004", "GPU009", "GPU001"):
        assert "no GPU source states" in skipped[rule] and "do not export it" in skipped[rule], skipped[rule]
    assert "GPU005" in ran and "GPU006" in ran  # remap fields are exported: checked, clean


def xid_counts(finding) -> dict[int, str]:
    """Xid code -> the severity the finding gives it, from its per-code evidence."""
    out = {}
    for e in finding.evidence:
        m = re.fullmatch(r"Xid (\d+) events \((\w+)\)", e.description)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def test_dmesg_dbe_row_remap_contained():
    """One GPU, three Xid codes: one finding for the GPU (one cause: its Xids), worst code first."""
    f, *_ = run("dmesg-xid_ampere-hopper_xid48-dbe_xid63-row-remap_xid94-contained_peermem.log")
    (x,) = by_rule(f, "GPU001")
    assert set(xid_counts(x)) == {48, 63, 94}
    assert x.severity == Severity.CRITICAL and x.subject == "GPU 0000:19:00.0"
    assert x.summary.startswith("GPU 0000:19:00.0: Xid 48 ")  # the worst code leads
    assert "Xid 94" in x.summary and "×9" in x.summary.split("Xid 94")[1]
    assert "reset" in x.fix and "restart the application" in x.fix and "RESTART" not in x.fix


def test_xid79_is_one_critical_finding_not_two():
    f, *_ = run("dmesg-xid_h100-sxm5_525.125.06_xid79-fallen-off-bus-crash-dump.log")
    assert [x.rule for x in f] == ["GPU001"]
    assert f[0].severity == Severity.CRITICAL and "fallen off the bus" in f[0].summary.lower()
    assert "GPU-f1906b9b-557a-e961-045c-9fe4be3ce012" in f[0].evidence[0].value


def test_xid119_gsp_timeouts_counted():
    f, *_ = run("dmesg-xid_hgx-dell-xe9680_xid119-gsp-rpc-timeout.log")
    (x,) = by_rule(f, "GPU001")
    assert "Xid 119" in x.summary and "×5" in x.summary and x.severity == Severity.CRITICAL


def test_xid13_application_exceptions_then_43():
    f, *_ = run("dmesg-xid_unknown-gpu_xid13-sm-exceptions_xid43.log")
    (x,) = by_rule(f, "GPU001")
    assert xid_counts(x) == {13: "warning", 43: "info"}
    assert x.severity == Severity.WARNING and "Xid 13" in x.summary and "×16" in x.summary


def test_rk3568_gpu_lost_at_probe():
    f, *_ = run("dmesg_rtx3090_rk3568_535.129.03_bar-invalid_fallen-off-bus.log")
    (lost,) = by_rule(f, "GPU002")
    assert (
        lost.subject == "GPU 0002:21:00.0"
        and "fell off the bus" in lost.summary
        and "invalid BAR ×4" in lost.summary
    )
    assert not by_rule(f, "GPU001")


def test_lspci_lane_errors_on_the_hgx_gpu_but_link_at_capability():
    f, *_ = run("lspci-vvv_hgx-h100_pex890xx-ports-downgraded_gpu-cx7-ok_excerpt.txt")
    assert [x.rule for x in f] == ["GPU015"]
    assert "16 lane(s)" in f[0].summary and f[0].subject == "GPU 0000:19:00.0"


def test_lspci_rk3588_x4_link_and_nouveau():
    f, *_ = run("lspci-vvvv_rtx3090_rk3588_8gts-x4-downgraded.txt")
    (link,) = by_rule(f, "GPU013")
    assert "width x4 of x16" in link.summary
    (drv,) = by_rule(f, "GPU016")
    assert "nouveau" in drv.summary


def test_dcgmi_diag_failures():
    f, *_ = run("dcgmi-diag-r2_rtx3090-x8_dcgm3.3.0_pcie-fail-cuda-driver-combination.txt")
    fails = by_rule(f, "GPU017")
    assert len(fails) == 8 and all("'PCIe' Fail on every GPU" in x.summary for x in fails)
    f2, *_ = run("dcgmi-diag_fragment_deployment-error-row-remappings-pending.txt")
    (one,) = by_rule(f2, "GPU017")
    assert one.subject.startswith("GPU3") and "row remappings are pending" in one.evidence[-1].value


def test_files_of_one_node_join_into_one_gpu():
    # dcgmi discovery and nvidia-smi nvlink --status come from the same H800 host (SOURCES.md)
    f, _, _, obs, _ = run(
        "dcgmi-discovery-l_h800-x8_no-nvswitch.txt", "nvidia-smi-nvlink-status_h800-x8_8-links_elided.txt"
    )
    from clusterdoctor.analyze.gpu_health import gpu_fleet

    fleet = gpu_fleet(obs)
    assert len(fleet.gpus) == 8
    g0 = fleet.gpus[0]
    assert g0.bus_id == "0000:18:00.0" and len(g0.nvlinks) == 8 and g0.model == "NVIDIA H800"
    assert f == []


def test_files_of_different_machines_with_the_same_bus_id_stay_apart():
    _, _, _, obs, _ = run(
        "nvidia-smi-q_rtx4090-x8_535.154.05_sw-power-cap-2-gpus_pcie-gen1-idle.txt",
        "lspci-vvvv_rtx3090_rk3588_8gts-x4-downgraded.txt",
    )
    from clusterdoctor.analyze.gpu_health import gpu_fleet

    fleet = gpu_fleet(obs)
    at01 = [g for g in fleet.gpus if g.bus_id == "0000:01:00.0"]
    assert len(at01) == 2 and len({g.node for g in at01}) == 2


def test_sick_gpu_of_the_straggler_rank_is_the_cause_in_the_chain():
    """Real straggler (tests/data/comm/gloo_2rank: rank 0 enters 7 of 9 collectives last) + the real
    8x H100 nvidia-smi -q (GPU 0000:75:00.0 under HW power brake, pid 1002127) + a placement record
    CONSTRUCTED here that says pid 1002127 is rank 0 (what the placement audit reads from RANK)."""
    from clusterdoctor.observe.comm.sources import load_comm_observations
    from tests.conftest import TEST_DATA

    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    diagnosis.merge_into(obs, load_comm_observations([TEST_DATA / "comm" / "gloo_2rank"]))
    diagnosis.load_sources(obs, [shared_fixture(f"gpu/{X8}")])
    diagnosis.add_processes(obs, [{"pid": 1002127, "comm": "python", "rank": "0", "gpus": []}])
    findings, _, ran = run_rules(obs, GPU_RULES)
    assert "GPU019" in ran
    (chain,) = by_rule(findings, "GPU019")
    assert chain.subject == "rank 0" and chain.severity == Severity.CRITICAL
    assert "its GPU is sick" in chain.summary and "GPU2 0000:75:00.0" in chain.summary
    assert "rank 0 (its GPU) starts 7 of 9 collectives last" in chain.summary
    # without the rank -> GPU mapping only the node ties them (one node described), with lower confidence
    obs2 = diagnosis.new_observations(clock=lambda: 1.7e9)
    diagnosis.merge_into(obs2, load_comm_observations([TEST_DATA / "comm" / "gloo_2rank"]))
    diagnosis.load_sources(obs2, [shared_fixture(f"gpu/{X8}")])
    (node_chain,) = by_rule(run_rules(obs2, GPU_RULES)[0], "GPU019")
    assert "its node is sick" in node_chain.summary and node_chain.confidence < chain.confidence


def test_healthy_gpus_do_not_explain_a_straggler():
    from clusterdoctor.observe.comm.sources import load_comm_observations
    from tests.conftest import TEST_DATA

    obs = diagnosis.new_observations(clock=lambda: 1.7e9)
    diagnosis.merge_into(obs, load_comm_observations([TEST_DATA / "comm" / "gloo_2rank"]))
    diagnosis.load_sources(obs, [shared_fixture("gpu/nvidia-smi-q_h800_525.105.17_healthy.txt")])
    findings, _, ran = run_rules(obs, GPU_RULES)
    assert "GPU019" in ran and not by_rule(findings, "GPU019")
