"""perftest and ucx_info -d output, on real pastes from public threads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.perftest import parse_perftest, sniff_perftest
from clusterdoctor.observe.network.ucx_info import parse_ucx_info, sniff_ucx_info

# https://github.com/linux-rdma/perftest/issues/273
POST_LIST_8B = """\
                    RDMA_Write Post List BW Test
 Dual-port       : OFF\t\tDevice         : ib0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 PCIe relax order: Unsupported
 ibv_wr* API     : OFF
 TX depth        : 256
 Post List       : 128
 CQ Moderation   : 128
 Mtu             : 4096[B]
 Link type       : Ethernet
 GID index       : 2
 Max inline data : 0[B]
 rdma_cm QPs\t : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 8          224958464        0.00               0.48   \t\t   7.498617
---------------------------------------------------------------------------------------
"""

# https://github.com/linux-rdma/perftest/pull/342 (header as a terminal copy: spaces, not tabs)
WRITE_BW_SPACES = """\
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_0
 Number of qps   : 1            Transport type : IB
 Link type       : Ethernet
 GID index       : 0
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      403504           0.00               42.31                0.080701
"""

# https://github.com/openucx/ucx/issues/8229 (`ucx_info -d`, cut by the search excerpt)
UCX_INFO = """\
# Memory domain: mlx5_0
#     Component: ib
#             register: unlimited, cost: 180 nsec
#           remote key: 8 bytes
#           local memory handle is required for zcopy
#
#      Transport: rc_verbs
#         Device: mlx5_0:1
#           Type: network
#  System device: mlx5_0 (0)
[1652740949.516025] [cn0337:3290573:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed: Cannot allocate memory
#   < failed to open interface >
#
#      Transport: rc_mlx5
#         Device: mlx5_0:1
#           Type: network
#  System device: mlx5_0 (0)
[1652740949.516398] [cn0337:3290573:0]         ib_mlx5.c:90   UCX  ERROR mlx5dv_create_cq(cqe=4096) failed: Cannot allocate memory
#   < failed to open interface >
#
#      Transport: dc_mlx5
#         Device: mlx5_0:1
#           Type: network
#  System device: mlx5_0 (0)
"""


def test_perftest_header_and_rows():
    (run,) = parse_perftest(POST_LIST_8B)
    assert run.title == "RDMA_Write Post List BW Test"
    assert (run.device, run.fields["Link type"], run.fields["GID index"], run.fields["Mtu"]) == (
        "ib0", "Ethernet", "2", "4096[B]",
    )  # fmt: skip
    assert run.unit == "Gb/sec" and run.avg_gbps() == [(8, 0.48)]
    (run,) = parse_perftest(WRITE_BW_SPACES)
    assert (run.device, run.fields["Transport type"]) == ("mlx5_0", "IB")
    assert run.avg_gbps() == [(65536, 42.31)]


def test_perftest_mib_units_and_latency():
    text = (
        " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"
        " 65536      5000             11000.00            10988.43\t\t   0.175815\n"
    )
    (run,) = parse_perftest(text)
    ((size, gbps),) = run.avg_gbps()
    assert size == 65536 and gbps == pytest.approx(92.2, abs=0.1)
    lat = (
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
        "99% percentile[usec]   99.9% percentile[usec] \n"
        " 2       1000          1.04           3.42         1.07     \t       1.08     \t0.07\t\t1.14 \t\t3.42\n"
    )
    (run,) = parse_perftest(lat)
    assert run.lat[0]["t_typical"] == 1.07


def test_perftest_sniff_and_refusal():
    assert sniff_perftest(POST_LIST_8B.encode()) and sniff_perftest(WRITE_BW_SPACES.encode())
    assert not sniff_perftest(b"# nThread 1 nGpus 1 minBytes 8 maxBytes 128M step: 2(factor)\n")
    with pytest.raises(InputError):
        parse_perftest("nothing here\n", "p")


def test_ucx_info_failed_interfaces_keep_their_errors():
    ifaces = parse_ucx_info(UCX_INFO)
    assert [(i.transport, i.device, i.failed) for i in ifaces] == [
        ("rc_verbs", "mlx5_0:1", True),
        ("rc_mlx5", "mlx5_0:1", True),
        ("dc_mlx5", "mlx5_0:1", False),
    ]
    assert ifaces[0].hca == "mlx5_0"
    assert "ibv_create_cq(cqe=4096) failed: Cannot allocate memory" in ifaces[0].errors[0]
    assert sniff_ucx_info(UCX_INFO.encode())
    assert not sniff_ucx_info(b"# HELP x y\n# TYPE x gauge\nx 1\n")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=500))
def test_any_text_is_read_or_refused(text):
    for parse in (parse_perftest, parse_ucx_info):
        try:
            parse(text, "t")
        except InputError as e:
            assert e.one_line().startswith("t")
