"""Real day/night load (Helios sequences) as jobs, idle share by hour, tidal's placement-derived
NVLink/PCIe loads, restart cost from the storage tiers, and bad trace input (issue 24)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.sim.cluster import Cluster, GpuNode, with_synthetic_topology
from clusterdoctor.sim.engine import _Sim, run_fgd_protocol
from clusterdoctor.sim.load_trace import jobs_from_sequence, load_cluster_sequence, parse_cluster_sequence
from clusterdoctor.sim.metrics import idle_share_by_hour
from clusterdoctor.sim.policies import get_policy
from clusterdoctor.sim.storage import restart_cost_s
from clusterdoctor.sim.traces import PodTrace, parse_openb_pods
from tests.conftest import shared_fixture

HDR = "time,running_gpu_num,pending_gpu_num,total_gpu_num\n"


def _seq(rows):
    return HDR + "".join(f"2020-05-01 {h:02d}:{m:02d}:00,{r},{p},16\n" for h, m, r, p in rows)


def test_jobs_follow_the_demand_curve():
    seq = parse_cluster_sequence(
        _seq([(0, 0, 4, 0), (0, 1, 4, 2), (0, 2, 10, 0), (0, 3, 2, 0), (0, 4, 2, 0)])
    )
    jobs = jobs_from_sequence(seq)
    # demand 4 -> 6 -> 10 -> 2: arrivals of 4, 2, 4 GPUs; the fall of 8 ends the last 4, the 2 and 2 of the first
    t = np.arange(0, 300, 60.0)
    alive = [sum(k for a, d, k in zip(jobs.arrivals, jobs.durations, jobs.pods.num_gpu, strict=True)
                 if a <= x < a + d) for x in t]  # fmt: skip
    assert alive == [4, 6, 10, 2, 2]
    assert max(jobs.pods.num_gpu) <= 8 and jobs.notes


def test_bad_sequence_input_names_file_and_row():
    with pytest.raises(InputError) as e:
        parse_cluster_sequence("time,running_gpu_num\n2020-05-01 00:00:00,1\n", "seq.csv")
    assert "seq.csv" in str(e.value) and "pending_gpu_num" in str(e.value)
    with pytest.raises(InputError) as e:
        parse_cluster_sequence(_seq([(0, 1, 1, 0), (0, 0, 1, 0)]), "seq.csv")
    assert ":3" in str(e.value) and "not after" in str(e.value)
    with pytest.raises(InputError) as e:
        parse_cluster_sequence(HDR + "2020-05-01 00:00:00,-3,0,16\n", "seq.csv")
    assert ":2" in str(e.value)
    with pytest.raises(InputError):
        parse_cluster_sequence(HDR + "yesterday,1,0,16\n", "seq.csv")


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=400))
def test_sequence_parser_raises_only_input_error(data):
    try:
        parse_cluster_sequence(HDR.encode() + data, "f.csv")
    except InputError:
        pass


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=60))
def test_rebuilt_jobs_match_any_demand_curve(demand):
    text = HDR + "".join(f"2020-05-01 {i // 60:02d}:{i % 60:02d}:00,{d},0,64\n" for i, d in enumerate(demand))
    jobs = jobs_from_sequence(parse_cluster_sequence(text))
    for i, d in enumerate(demand):
        x = i * 60.0
        alive = sum(k for a, du, k in zip(jobs.arrivals, jobs.durations, jobs.pods.num_gpu, strict=True)
                    if a <= x < a + du)  # fmt: skip
        assert alive == d


def test_idle_share_by_hour():
    h = idle_share_by_hour(
        np.array([0.0, 1800.0, 7200.0]), np.array([0.0, 2000.0, 1000.0]), 2, t_end=3 * 3600
    )
    assert h == {0: 50.0, 1: 0.0, 2: 50.0}
    assert idle_share_by_hour(np.array([0.0]), np.array([0.0]), 1, t_end=3600, t0_hour=23) == {23: 100.0}


def test_tidal_loads_come_from_placement():
    c = with_synthetic_topology(Cluster([GpuNode("a", 64_000, 64_000, 8, "A100-SXM4")]))
    pods = PodTrace(["p0", "p1"], [1000, 1000], [0, 0], [1, 4], [1000, 1000], ["", ""], [1, 1])
    pol = get_policy("tidal")
    sim = _Sim(c, pods, pol, np.random.default_rng(0))
    nv0, pc0, _ = pol.node_terms(np.array([0]))
    sim.place(0, int(sim.pod_spec[0]))  # a 1-GPU pod talks to nobody: no NVLink load
    nv1, _, _ = pol.node_terms(np.array([0]))
    assert nv0[0] == nv1[0] == 0.0
    gpus = sim.place(0, int(sim.pod_spec[1]))  # a 4-GPU pod loads NVLink
    nv2, _, _ = pol.node_terms(np.array([0]))
    assert nv2[0] == pytest.approx(4 / 8)
    sim.remove(0, int(sim.pod_spec[1]), gpus)
    assert pol.node_terms(np.array([0]))[0][0] == 0.0


def test_restart_cost_grows_with_checkpoint_size():
    assert 300 < restart_cost_s(1) < restart_cost_s(8)
    assert restart_cost_s(8, tiered=False) > restart_cost_s(8)


def test_negative_durations_are_counted_and_dropped():
    text = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time\n"
            "p0,1000,10,1,1000,,LS,Running,100,50\np1,1000,10,1,1000,,LS,Running,100,200\n")  # fmt: skip
    pods = parse_openb_pods(text, "pods.csv")
    assert np.isnan(pods.deletion[0]) and pods.deletion[1] == 200
    assert pods.warnings and "pods.csv" in pods.warnings[0] and "rows 2" in pods.warnings[0]


def test_unknown_gpu_models_are_counted():
    c = Cluster([GpuNode("a", 64_000, 64_000, 2, "T4")])
    pods = PodTrace(["p0", "p1"], [1000, 1000], [0, 0], [1, 1], [1000, 1000], ["H100", ""], [1, 1])
    res = run_fgd_protocol(c, pods, "fgd", 1, tune=0)
    assert res.pods_failed == 1
    assert any("1 pods ask only for GPU models no node has (H100)" in n for n in res.notes)


def test_helios_fixture_has_a_day_night_swing():
    seq = load_cluster_sequence(shared_fixture("sched/helios/Earth_vchbv_cluster_sequence_vc.csv"))
    hours = ((seq.t / 3600) % 24).astype(int)
    by_h = [seq.running[hours == h].mean() for h in range(24)]
    assert max(by_h) > 1.5 * min(by_h)
