"""RDMA rules on the real counter dumps, and on rates between two reads."""

from __future__ import annotations

import pytest

from clusterdoctor.model import Severity
from clusterdoctor.observe.network.rdma import RdmaPort, rates, read_sysfs_infiniband
from clusterdoctor.rules import rdma
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, Observations
from tests.conftest import shared_fixture
from tests.observe.network.test_rdma import untar_infiniband
from tests.rules.test_etcd_log_rules import obs_of

ALL = (
    rdma.rdma_receive_drops,
    rdma.rdma_congestion,
    rdma.rdma_retransmission,
    rdma.rdma_link_errors,
    rdma.rdma_completion_errors,
    rdma.rdma_counters_unreadable,
)


def ids(obs):
    return sorted((f.rule, f.subject) for r in ALL for f in r.fn(obs))


def test_sections():
    for r in ALL:
        assert set(REQUIRED_SECTIONS) <= set(r.sections())


def test_bond_congestion_retrans_cqe():
    obs = obs_of(shared_fixture("ctrl/mlx5_bond_0_show_counters_hw_counters.txt"))
    assert ids(obs) == [
        ("RDMA002", "mlx5_bond_0/1"),
        ("RDMA003", "mlx5_bond_0/1"),
        ("RDMA005", "mlx5_bond_0/1"),
    ]
    (cong,) = rdma.rdma_congestion.fn(obs)
    assert "np_ecn_marked_roce_packets=21278189006" in cong.summary
    assert "rp_cnp_handled" not in cong.summary  # 0: not a sender being throttled
    assert cong.confidence < 0.7  # totals only


def test_4links_out_of_buffer_on_mlx5_0_only():
    obs = obs_of(shared_fixture("ctrl/rdma_statistic_show_mlx5_4links.txt"))
    assert ids(obs) == [("RDMA001", "mlx5_0/1"), ("RDMA005", "mlx5_0/1")]
    (drops,) = rdma.rdma_receive_drops.fn(obs)
    assert "out_of_buffer=135" in drops.summary


def test_sysfs_fixture_discards_saturated_wait_and_no_pma(tmp_path):
    root = untar_infiniband(shared_fixture("ctrl/nic/sysfs/node_exporter_sys_fixtures.ttar"), tmp_path)
    obs = Observations()
    obs.put("rdma", read_sysfs_infiniband(root))
    assert ids(obs) == [("RDMA002", "mlx4_0/1"), ("RDMA006", "i40iw0/1")]
    (cong,) = rdma.rdma_congestion.fn(obs)
    assert "port_xmit_discards=5" in cong.summary and "saturated: port_xmit_wait" in cong.summary


def test_rates_judge_current_state():
    before = [RdmaPort("mlx5_0", 1, {"out_of_buffer": 100, "out_of_sequence": 10, "np_cnp_sent": 5})]
    after = [RdmaPort("mlx5_0", 1, {"out_of_buffer": 100, "out_of_sequence": 2010, "np_cnp_sent": 15})]
    obs = Observations()
    obs.put("rdma", after)
    obs.put("rdma_rates", rates(before, after, 10.0))
    # out_of_buffer did not move: no drop finding although its total is non-zero
    assert ids(obs) == [("RDMA002", "mlx5_0/1"), ("RDMA003", "mlx5_0/1")]
    (re,) = rdma.rdma_retransmission.fn(obs)
    assert re.severity == Severity.CRITICAL  # 200/s >= 100/s
    (cg,) = rdma.rdma_congestion.fn(obs)
    assert cg.severity == Severity.WARNING  # 1/s


def test_ce_marks_without_cnp_is_misconfiguration():
    obs = Observations()
    obs.put("rdma", [RdmaPort("d", 1, {"np_ecn_marked_roce_packets": 50, "np_cnp_sent": 0})])
    sev = sorted(f.severity for f in rdma.rdma_congestion.fn(obs))
    assert Severity.CRITICAL in sev


@pytest.mark.parametrize(
    "rel,expect",
    [
        # Holoscan: port 1 dropped 746 308 (imissed = rx_out_of_buffer) and failed 5.0e9 mbuf allocations
        ("nic/dpdk/dpdk_xstats_mlx5_cx7_holoscan_ano_rx_out_of_buffer.log", [("RDMA001", "critical")]),
        # ice: 3.3e9 missed against 65 408 received; one MAC remote error
        (
            "nic/dpdk/dpdk_xstats_ice_json_dpdk_informer.json",
            [("RDMA001", "critical"), ("RDMA004", "warning")],
        ),
        # e1000e: 12 028 + 401 dropped of 1.26 M received (~1 %)
        ("nic/ethtool/ethtool_S_e1000e_node_exporter.txt", [("RDMA001", "critical")]),
        # i40e: 3 drops and 1 CRC error in 33e9 packets: noise, reported as info
        ("nic/ethtool/ethtool_S_i40e_25g_sr.txt", [("RDMA001", "info"), ("RDMA004", "info")]),
        ("nic/ethtool/ethtool_S_bnxt_en_10g_sr.txt", [("RDMA001", "info")]),
        ("nic/dpdk/dpdk_testpmd_show_port_stats_af_xdp_dts.txt", []),
        ("nic/dpdk/dpdk_testpmd_show_port_xstats_af_xdp_2queue_dts.txt", []),
        ("nic/ethtool/mlnx_perf_mlx5_cx7_rates_holoscan.txt", []),
        ("rdma_iproute2_res_qp_and_stat_p_samples.txt", []),
    ],
)
def test_nic_fixtures(rel, expect):
    obs = obs_of(shared_fixture("ctrl/" + rel))
    got = sorted(
        (f.rule, str(f.severity)) for r in ALL if all(obs.has(k) for k in r.requires) for f in r.fn(obs)
    )
    assert got == expect
