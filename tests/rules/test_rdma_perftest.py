"""RDMA016 on perftest output as pasted in github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/72
(tests/data/incidents/rdma-031): all-zero GIDs on a RoCE port name the device; real GIDs are quiet."""

from __future__ import annotations

from clusterdoctor.observe.network.perftest import parse_perftest
from clusterdoctor.rules.rdma_perftest import perftest_zero_gid
from clusterdoctor.rules.registry import Observations, run_rules

ZERO = """\
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_2
 Number of qps   : 1            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 TX depth        : 128
 CQ Moderation   : 100
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 0
 Max inline data : 0[B]
 rdma_cm QPs     : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x003b PSN 0xab3a5e RKey 0x015b1a VAddr 0x007f72e9620000
 GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00
 remote address: LID 0000 QPN 0x003c PSN 0x65b096 RKey 0x014d0c VAddr 0x007fcb322d5000
 GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00
Failed to modify QP 59 to RTR
 Unable to Connect the HCA's through the link
"""


def run(text: str):
    obs = Observations({"perftest": parse_perftest(text, "pt.txt")})
    return run_rules(obs, [perftest_zero_gid])[0]


def test_zero_gids_on_roce_name_the_device():
    (run_,) = parse_perftest(ZERO, "pt.txt")
    assert len(run_.gids) == 2
    (f,) = run(ZERO)
    assert f.subject == "mlx5_2" and "both ends" in f.summary and "roce.gid" in f.causes


def test_real_gids_are_quiet():
    ok = ZERO.replace(
        " GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00",
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:05",
    )
    assert not run(ok)
