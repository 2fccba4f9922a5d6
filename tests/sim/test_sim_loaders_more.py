"""Other real loaders (PAI 2020, spot-GPU, Tiresias, Sia/Pollux, Gavel, Helios/Philly) on the fixture
files, expectations read from the files; fuzzed with random bytes and mutations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.sim import fleets, workloads
from tests.conftest import shared_fixture

S = "sched"


def test_pai_machine_spec():
    c = fleets.load_pai_machine_spec(
        shared_fixture(f"{S}/alibaba_gpu_v2020/pai_machine_spec.csv"),
        shared_fixture(f"{S}/alibaba_gpu_v2020/pai_machine_spec.header"),
    )
    # `wc -l` = 1897 rows (no header); gpu_type counts by `cut -d, -f2 | sort | uniq -c`: 83 CPU, 798 P100
    assert len(c.nodes) == 1897
    assert sum(1 for n in c.nodes if n.gpus == 0) >= 83
    assert sum(1 for n in c.nodes if n.model == "P100") == 798
    first = c.nodes[0]  # 7399a758eb02bae1a3621236,CPU,96,512,0
    assert (first.cpu_milli, first.memory_mib, first.gpus) == (96_000, 512 * 1024, 0)


def test_spot_node_list_fleet_shape():
    c = fleets.load_spot_nodes(shared_fixture(f"{S}/alibaba_spot_gpu_v2026/node_info_df.csv"))
    assert len(c.nodes) == 4278 and c.total_gpus == 10412
    g = c.gpus_by_model()
    assert g["A100-SXM4-80GB"] == 3456 and g["H800"] == 1752
    assert c.nodes[0].model == "GPU-series-1" and c.nodes[0].gpus == 4  # GPU-series-1,4,192,0


def test_tiresias_spec_and_jobs():
    c = fleets.load_tiresias_spec(shared_fixture(f"{S}/tiresias/cluster_spec.csv"))
    assert len(c.nodes) == 16 and c.total_gpus == 64  # 1 switch x 16 nodes x 4 GPUs
    j = workloads.load_tiresias_jobs(shared_fixture(f"{S}/tiresias/60_job.csv"))
    assert len(j.pods) == 60 and j.app[:2] == ["vgg19", "vgg11"] and j.duration[:2] == [164.0, 147.0]
    assert j.pods.num_gpu[1] == 8 and j.pods.creation[1] == 30.0  # 1,8,30,133,vgg11,147,23


def test_sia_and_pollux_workloads():
    w = workloads.load_sia_workload(shared_fixture(f"{S}/sia/workloads_saturn/workload-1.csv"))
    assert (
        len(w.pods) == 160
        and w.app[0] == "cifar10"
        and w.pods.num_gpu[0] == 12
        and w.pods.creation[0] == 401.0
    )
    p = workloads.load_sia_workload(shared_fixture(f"{S}/pollux/workload-6.csv"))
    assert len(p.pods) == 160 and p.pods.names[0] == "cifar10-0" and p.pods.creation[1] == 154.0


def test_gavel_throughputs_and_sia_profiles():
    g = workloads.load_gavel_throughputs(shared_fixture(f"{S}/gavel/simulation_throughputs.json"))
    assert g["ResNet-18 (batch size 16)"]["k80"] == pytest.approx(4.795294551566172)
    assert len(g) == 26 and {"k80", "p100", "v100"} <= set(g["ResNet-18 (batch size 16)"])
    prof = workloads.load_sia_profile(
        shared_fixture(f"{S}/sia/throughput_profiles/bert__placements-dgx-ext.csv")
    )
    assert prof["1"] > 0 and prof["11"] > prof["1"]  # two GPUs beat one


def test_helios_day_night_swing_and_philly_flatness():
    s = workloads.load_helios_summary(shared_fixture(f"{S}/helios/helios_cluster_summary.csv"))
    assert s["Venus"]["gpu_num"] == 1022 and s["Saturn"]["gpu_num"] == 2080
    vc = workloads.load_utilisation_by_hour(shared_fixture(f"{S}/helios/Earth_vchbv_cluster_sequence_vc.csv"))
    assert vc[23] == pytest.approx(0.52, abs=0.01) and vc[7] == pytest.approx(0.28, abs=0.01)  # sched.md
    ph = workloads.load_utilisation_by_hour(shared_fixture(f"{S}/helios/philly_node_sequence.csv"))
    assert 0.72 <= min(ph.values()) and max(ph.values()) <= 0.76


PARSERS = [
    fleets.parse_spot_nodes,
    fleets.parse_tiresias_spec,
    workloads.parse_sia_workload,
    workloads.parse_tiresias_jobs,
    workloads.parse_gavel_throughputs,
    workloads.parse_sia_profile,
    workloads.parse_helios_summary,
    workloads.parse_utilisation_by_hour,
    fleets.parse_pai_machine_spec,
]


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data):
    for p in PARSERS:
        try:
            p(data)
        except InputError:
            pass


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 400), st.binary(min_size=1, max_size=6))
def test_fuzz_mutated_real_files(pos, junk):
    for rel, parse in (
        (f"{S}/tiresias/60_job.csv", workloads.parse_tiresias_jobs),
        (f"{S}/sia/workloads_saturn/workload-1.csv", workloads.parse_sia_workload),
        (f"{S}/alibaba_spot_gpu_v2026/node_info_df.csv", fleets.parse_spot_nodes),
    ):
        head = shared_fixture(rel).read_bytes()[:500]
        try:
            parse(head[:pos] + junk + head[pos + 3 :])
        except InputError:
            pass
