"""Heterogeneity-aware placement on Sia's measured speeds, the power model and the storage-tier model."""

from __future__ import annotations

import pytest

from clusterdoctor.sim.hetero import mixed_cluster, run_sia, sia_speeds
from clusterdoctor.sim.power import CATALOG, power_model
from clusterdoctor.sim.storage import COLD, HOT_WINDOW_S, TierModel, stall_per_checkpoint
from clusterdoctor.sim.workloads import load_sia_workload
from tests.conftest import shared_fixture


def test_sia_speeds_are_real_and_a100_is_fastest_for_bert():
    sp = sia_speeds(shared_fixture("sched/sia/throughput_profiles/bert__placements-dgx-ext.csv").parent)
    assert set(sp["bert"]) == {"A100-SXM4", "T4", "RTX2080Ti"}
    assert max(sp["bert"], key=sp["bert"].get) == "A100-SXM4"


def test_hetero_placement_beats_first_fit_at_moderate_load():
    prof = shared_fixture("sched/sia/throughput_profiles/bert__placements-dgx-ext.csv").parent
    sp = sia_speeds(prof)
    wl = shared_fixture("sched/sia/workloads_saturn/workload-1.csv")
    het = run_sia(load_sia_workload(wl), sp, "hetero", work_s=300)
    ff = run_sia(load_sia_workload(wl), sp, "first-fit", work_s=300)
    assert het.finished == ff.finished == 160
    assert het.as_dict()["jct_s"]["p50"] < ff.as_dict()["jct_s"]["p50"]
    assert mixed_cluster().total_gpus == 16 + 16 + 24


def test_power_defaults_carry_sources():
    a, h = CATALOG["A100-SXM4"], CATALOG["H100-SXM5"]
    assert (a.fp16_tflops_per_w, h.fp16_tflops_per_w) == (1.82, 2.96)
    assert a.dvfs_mhz[1] == 1410 and h.peak_w == 700
    assert all(e.source for e in CATALOG.values())
    assert power_model("A100-SXM4-80GB").peak_w == 400 and power_model("G2").model == "G2"
    assert a.watts(0) == a.idle_w and a.watts(1) == a.peak_w and a.watts(2) == a.peak_w


def test_tiering_cuts_checkpoint_stall():
    direct = stall_per_checkpoint(40.0, 600.0, tiered=False)
    tiered = stall_per_checkpoint(40.0, 600.0, tiered=True)
    assert direct == pytest.approx(40.0 / COLD.compression_ratio / COLD.write_gbps)
    assert tiered < direct / 3
    # saves faster than the background can drain: the backlog shows up as stall
    assert stall_per_checkpoint(40.0, 1.0, tiered=True) > tiered


def test_tier_lifecycle_hot_warm_cold():
    m = TierModel()
    m.save("a", 10.0, 0.0)
    assert m.entries["a"].tier == "hbm-snapshot"
    m.age(HOT_WINDOW_S + 1)
    assert m.entries["a"].tier == "pmem"
    for i in range(60):  # fill warm past capacity: the least accessed goes cold
        m.save(f"b{i}", 10.0, HOT_WINDOW_S * (2 + i))
    m.load("b59", HOT_WINDOW_S * 80)
    assert m.entries["a"].tier == "nvme-zstd"
    assert m.load("a", HOT_WINDOW_S * 81) == pytest.approx(10.0 / COLD.compression_ratio / COLD.read_gbps)
