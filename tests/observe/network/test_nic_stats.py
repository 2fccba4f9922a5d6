"""ethtool -S, DPDK testpmd/xstats/JSON, Holoscan ANO logs and mlnx_perf (real fixtures)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.nic_stats import load_nic_stats, parse_nic_stats, sniff_nic_stats
from tests.conftest import shared_fixture

D = "ctrl/nic/"


def one(rel):
    p = shared_fixture(D + rel)
    ports, rates = parse_nic_stats(p.read_bytes(), str(p))
    return ports, rates


def test_holoscan_ports_and_generic_names():
    ports, _ = one("dpdk/dpdk_xstats_mlx5_cx7_holoscan_ano_rx_out_of_buffer.log")
    p0, p1 = sorted(ports, key=lambda p: p.port)
    assert p0.counters["opackets"] == 6005066864 and p0.counters["ipackets"] == 0
    c = p1.counters
    assert c["ipackets"] == 6004323692
    assert c["imissed"] == 746308 and c["rx_out_of_buffer"] == 746308 and c["rx_missed_errors"] == 746308
    assert c["rx_nombuf"] == 5047027287 and c["rx_mbuf_allocation_errors"] == 5047027287


def test_dpdk_json_informer():
    (p,), _ = one("dpdk/dpdk_xstats_ice_json_dpdk_informer.json")
    assert p.device == "dpdk:0000:98:00.0"
    assert p.counters["imissed"] == 3339358633  # stats.rx_missed
    assert p.counters["rx_missed_errors"] == 3339358737  # xstats, read a moment later
    assert p.counters["ipackets"] == 65375 and p.rate == "100000 Mb/s"


def test_testpmd_stats_and_xstats():
    (s,), _ = one("dpdk/dpdk_testpmd_show_port_stats_af_xdp_dts.txt")
    assert (
        s.port == 0
        and s.counters["ipackets"] == 31534568
        and s.counters["imissed"] == 0
        and s.counters["rx_nombuf"] == 0
    )
    (x,), _ = one("dpdk/dpdk_testpmd_show_port_xstats_af_xdp_2queue_dts.txt")
    assert x.counters["rx_q0_packets"] == 158878968 and x.counters["rx_mbuf_allocation_errors"] == 0
    assert len(x.counters) == 18


def test_ethtool_forms():
    (e,), _ = one("ethtool/ethtool_S_e1000e_node_exporter.txt")
    assert e.device == "eth0"  # from the `# ethtool -S eth0` comment
    assert e.counters["port.rx_dropped"] == 12028 and e.counters["rx_missed"] == 401
    assert e.counters["duplicate metric"] == 1 and e.counters["duplicate_metric"] == 2
    (i,), _ = one("ethtool/ethtool_S_i40e_25g_sr.txt")
    assert i.counters["rx_dropped"] == 3 and i.counters["rx_crc_errors.nic"] == 1
    assert len(i.counters) == 607  # 608 lines minus the `NIC statistics:` header
    (b,), _ = one("ethtool/ethtool_S_bnxt_en_10g_sr.txt")
    assert b.counters["[0].rx_ucast_packets"] == 276347403
    assert b.counters["rx_total_discard_pkts"] == 13 and b.counters["tx_err"] == 12
    assert b.counters["rx_ucast_packets"] == sum(
        v for k, v in b.counters.items() if k.endswith("].rx_ucast_packets")
    )


def test_mlnx_perf_rates():
    ports, (r,) = one("ethtool/mlnx_perf_mlx5_cx7_rates_holoscan.txt")
    assert ports == []
    assert r.per_s["rx_bytes_phy"] == 12404657664  # thousands separators removed
    assert r.per_s["rx_packets_phy"] == 11614847 and r.interval_s == 1.0


def test_sniff_and_load():
    for rel in (
        "dpdk/dpdk_xstats_mlx5_cx7_holoscan_ano_rx_out_of_buffer.log",
        "dpdk/dpdk_xstats_ice_json_dpdk_informer.json",
        "dpdk/dpdk_testpmd_show_port_stats_af_xdp_dts.txt",
        "ethtool/ethtool_S_bnxt_en_10g_sr.txt",
        "ethtool/mlnx_perf_mlx5_cx7_rates_holoscan.txt",
    ):
        assert sniff_nic_stats(shared_fixture(D + rel).read_bytes()[:65536]), rel
    assert "rdma" in load_nic_stats(shared_fixture(D + "ethtool/ethtool_S_e1000e_node_exporter.txt"))
    assert "rdma_rates" in load_nic_stats(shared_fixture(D + "ethtool/mlnx_perf_mlx5_cx7_rates_holoscan.txt"))
    assert not sniff_nic_stats(
        shared_fixture("ctrl/etcd_zap_json_heartbeat_slow_disk_pr9761.log").read_bytes()
    )


@pytest.mark.parametrize("text", ["", "hello", "{}", "[]", "{"])
def test_not_nic_stats(text):
    with pytest.raises(InputError):
        parse_nic_stats(text, "x")


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz(data):
    base = shared_fixture(
        D
        + data.draw(
            st.sampled_from(
                [
                    "ethtool/ethtool_S_bnxt_en_10g_sr.txt",
                    "dpdk/dpdk_xstats_mlx5_cx7_holoscan_ano_rx_out_of_buffer.log",
                    "dpdk/dpdk_xstats_ice_json_dpdk_informer.json",
                ]
            )
        )
    ).read_text()
    cut = data.draw(st.integers(0, len(base)))
    text = base[:cut] + data.draw(st.text(max_size=20)) + base[cut + data.draw(st.integers(0, 100)) :]
    try:
        parse_nic_stats(text, "fuzz")
    except InputError:
        pass


def test_grep_excerpt_of_ethtool_s_takes_the_port_from_the_command(tmp_path):
    from clusterdoctor.observe.detect import load_path

    p = tmp_path / "paste.txt"
    p.write_text(
        '$ ethtool -S ens1f0np0 | grep -E "discard|pause"\n'
        "     rx_discards_phy: 154328\n     tx_pause_ctrl_phy: 0\n     rx_pause_ctrl_phy: 8123456\n"
    )
    what, data = load_path(p)
    (port,) = data["rdma"]
    assert port.device == "ens1f0np0" and port.counters["rx_discards_phy"] == 154328
    assert what == "NIC statistics (ens1f0np0: 3 counters)"


def test_indented_key_values_that_are_not_nic_counters_are_not_claimed():
    from clusterdoctor.observe.network.nic_stats import sniff_nic_stats

    assert not sniff_nic_stats(b"spec:\n  replicas: 3\n  port: 8080\n")
    assert not sniff_nic_stats(b"  rx_errors: 0\nsomething else entirely\n  tx_errors: 0\n")
    assert sniff_nic_stats(b"     rx_out_of_buffer: 4521\n     rx_discards_phy: 0\n")
