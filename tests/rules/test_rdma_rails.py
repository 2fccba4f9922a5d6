"""RDMA015: a slower port beside the InfiniBand rails is named (info, a configuration to check);
a host of equal rails is quiet. ibstatus as pasted in github.com/NVIDIA/nccl (tests/data/incidents/rdma-023)."""

from __future__ import annotations

from clusterdoctor.observe.network.ibports import parse_ib_listing
from clusterdoctor.rules.rdma_rails import rdma_mixed_rails
from clusterdoctor.rules.registry import Observations, run_rules


def _port(dev: str, lid: str, sm: str, rate: str = "200 Gb/sec (4X HDR)", layer: str = "InfiniBand") -> str:
    return (
        f"Infiniband device '{dev}' port 1 status:\n"
        "        default gid:     fe80:0000:0000:0000:88e9:a4ff:ff4c:2bdc\n"
        f"        base lid:        {lid}\n"
        f"        sm lid:          {sm}\n"
        "        state:           4: ACTIVE\n"
        "        phys state:      5: LinkUp\n"
        f"        rate:            {rate}\n"
        f"        link_layer:      {layer}\n\n"
    )


def run(text: str):
    obs = Observations({"ib_ports": parse_ib_listing(text, "ibstatus.txt").ports})
    return run_rules(obs, [rdma_mixed_rails])[0]


def test_ethernet_port_beside_the_rails_is_named_at_info():
    rails = _port("mlx5_0", "0x22", "0x47") + _port("mlx5_1", "0xe", "0x47")
    # the paste as cut: mlx5_3's rate and link layer lines are missing, its LIDs say Ethernet
    cut = rails + _port("mlx5_3", "0x0", "0x0").split("        phys state")[0]
    (f,) = run(cut)
    assert f.subject == "mlx5_3/1" and f.severity.name == "INFO" and "NCCL_IB_HCA" in f.summary
    (f,) = run(rails + _port("mlx5_3", "0x0", "0x0", "40 Gb/sec (4X QDR)", "Ethernet"))
    assert "link layer Ethernet, 40 Gb/s" in f.summary


def test_equal_rails_are_quiet():
    assert not run(_port("mlx5_0", "0x22", "0x47") + _port("mlx5_1", "0xe", "0x47"))
    # one IB port beside one Ethernet port is not a set of rails
    assert not run(_port("mlx5_0", "0x22", "0x47") + _port("mlx5_1", "0x0", "0x0", layer="Ethernet"))


def test_ipv4_gid_at_different_indexes_on_two_hosts():
    # the two GID tables of github.com/openucx/ucx (tests/data/incidents/rdma-030): mu01, cu01
    from clusterdoctor.rules.rdma_rails import roce_gid_index_differs

    mu01 = (
        "GID[  0]:\t\tfe80:0000:0000:0000:ee0d:9aff:fe01:3671\n"
        "GID[  1]:\t\tfe80:0000:0000:0000:ee0d:9aff:fe01:3671\n"
        "GID[  2]:\t\t0000:0000:0000:0000:0000:ffff:0c0c:0c64\n"
        "GID[  3]:\t\t0000:0000:0000:0000:0000:ffff:0c0c:0c64\n"
    )
    cu01 = "GID[  0]:\t\tfe80:0000:0000:0000:ee0d:9aff:fe01:3431\nGID[  1]:\t\t0000:0000:0000:0000:0000:ffff:0c0c:0c01\n"
    gids = parse_ib_listing(mu01, "mu01.txt").gids + parse_ib_listing(cu01, "cu01.txt").gids
    (f,) = run_rules(Observations({"ib_gids": gids}), [roce_gid_index_differs])[0]
    assert "mu01.txt: index 2" in f.summary and "cu01.txt: index 1" in f.summary
    # the same table on both hosts: quiet
    same = parse_ib_listing(mu01, "a.txt").gids + parse_ib_listing(mu01, "b.txt").gids
    assert not run_rules(Observations({"ib_gids": same}), [roce_gid_index_differs])[0]
