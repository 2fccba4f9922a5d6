"""Content detection of the event-side sources (what `diagnose FILE` loads), on every real fixture."""

from __future__ import annotations

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.event_sources import load_event_observations, sniff_events
from tests.conftest import TEST_DATA, shared_fixture


@pytest.mark.parametrize(
    "rel,kinds",
    [
        ("ctrl/etcd_zap_json_heartbeat_slow_disk_pr9761.log", {"events"}),
        ("ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log", {"events"}),
        ("ctrl/kubelet_pod_startup_latency_tracker_aks_eks.log", {"events", "pod_starts"}),
        ("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt", {"events"}),
        ("ctrl/mlx5_bond_0_show_counters_hw_counters.txt", {"rdma"}),
        ("ctrl/rdma_statistic_show_mlx5_4links.txt", {"rdma"}),
        ("ctrl/rdma_iproute2_res_qp_and_stat_p_samples.txt", {"rdma", "rdma_qps"}),
        ("ctrl/app/flink/flink_rest_checkpoints_1.15_9failed_k8s_operator.json", {"flink_checkpoints"}),
        ("ctrl/app/flink/flink_history_archive_failed_job_streampark.json", {"flink_checkpoints"}),
        ("ctrl/app/kafka/kafka_consumer_groups_describe_members_apache_kafka_docs.txt", {"kafka_lag"}),
        ("ctrl/app/kafka/kafka_exporter_v1.3.1_metrics_scrape.prom", {"kafka_lag"}),
        ("ctrl/app/pods/pods_kubelet_podlist_k8s1.35_minikube.json", {"pod_starts"}),
        ("ctrl/nic/dpdk/dpdk_xstats_ice_json_dpdk_informer.json", {"rdma"}),
        ("ctrl/nic/ethtool/ethtool_S_i40e_25g_sr.txt", {"rdma"}),
        ("ctrl/nic/ethtool/mlnx_perf_mlx5_cx7_rates_holoscan.txt", {"rdma_rates"}),
    ],
)
def test_fixture_kinds(rel, kinds):
    p = shared_fixture(rel)
    assert sniff_events(p.read_bytes()[:65536], p.name)
    out = load_event_observations(p)
    assert kinds <= set(out), set(out)


def test_captured_logs_and_not_metrics():
    assert sniff_events((TEST_DATA / "etcd_stall" / "zap" / "etcd-m0.log").read_bytes()[:65536])
    for rel in ("ctrl/etcd_v3.6.6_minikube_metrics.prom", "ctrl/kubelet_pod_start_sli_aks_before.prom"):
        assert not sniff_events(shared_fixture(rel).read_bytes()[:65536], rel)


def test_unknown_is_input_error(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("nothing to see\n")
    assert not sniff_events(p.read_bytes())
    with pytest.raises(InputError):
        load_event_observations(p)
