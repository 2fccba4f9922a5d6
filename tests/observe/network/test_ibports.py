"""Port listings as users paste them: ibstat, ibstatus, ibv_devinfo, rdma link, show_gids, ibdev2netdev, lshca.

Real pastes come from public threads (named beside each); the synthetic ones are printed with the
programs' own format strings (rdma-core ``ibstat.c``/``devinfo.c``/``ibstatus``, mlnx-tools ``show_gids``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.ibports import (
    load_ib_listing,
    normal_phys_state,
    normal_state,
    parse_ib_listing,
    sniff_ib_listing,
)

# https://github.com/microsoft/mscclpp/issues/493 (elided by the user with '...')
IBSTAT_ELIDED = """\
CA 'mlx5_0'
\tCA type: MT4125
\tNumber of ports: 1
\tFirmware version: 22.38.1002
\tHardware version: 0
\tNode GUID: 0x9562220300de222c
\tSystem image GUID: 0x9562220300de222c
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 100
\t\tBase lid: 0
\t\tLMC: 0
\t\tSM lid: 0
\t\tCapability mask: 0x00010000
\t\tPort GUID: 0x976222fffede222c
\t\tLink layer: Ethernet
CA 'mlx5_1'
\tCA type: MT4125
\tNumber of ports: 1
\tFirmware version: 22.38.1002
\tHardware version: 0
\tNode GUID: 0x9562220300de222d
\tSystem image GUID: 0x9562220300de222c
\tPort 1:
\t\tState: Down
\t\tPhysical state: Disabled
\t\tRate: 40
\t\tBase lid: 0
\t\tLMC: 0
\t\tSM lid: 0
\t\tCapability mask: 0x00010000
\t\tPort GUID: 0x976222fffede222d
\t\tLink layer: Ethernet
...
"""

# https://github.com/NVIDIA/nccl/issues/769: a GID table cut out of `ibv_devinfo -v`, no hca_id line
DEVINFO_GID_EXCERPT = """\
\t\t\tphys_state:\t\tLINK_UP (5)
\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0ac0:ebff:feda:1cfb, RoCE v1
\t\t\tGID[  1]:\t\tfe80::ac0:ebff:feda:1cfb, RoCE v2
\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:c800:d106, RoCE v1
\t\t\tGID[  3]:\t\t::ffff:200.0.209.6, RoCE v2
"""

# https://github.com/openucx/ucx/issues/5732 (ibv_devinfo -vv, device part cut by us at the port)
DEVINFO_VV = """\
hca_id:\tmlx5_1
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t20.27.6202
\tnode_guid:\t\t\tb883:03ff:ffa3:f05c
\tphys_port_cnt:\t\t\t1
\tmax_mr_size:\t\t\t0xffffffffffffffff
\tdevice_cap_flags:\t\t0xe17e1c36
\t\t\t\t\tBAD_PKEY_CNTR
\t\t\t\t\tUnknown flags: 0xe16e0000
\tlog atomic arg sizes (mask)\t\t0x8
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t4096 (5)
\t\t\tsm_lid:\t\t\t1
\t\t\tport_lid:\t\t17
\t\t\tport_lmc:\t\t0x00
\t\t\tlink_layer:\t\tInfiniBand
\t\t\tactive_width:\t\t4X (2)
\t\t\tactive_speed:\t\t50.0 Gbps (64)
\t\t\tphys_state:\t\tLINK_UP (5)
\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:b883:03ff:ffa3:f05c
"""

# https://github.com/ROCm/rccl/issues/1423 (three reads of the same port)
RDMA_LINK = [
    "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state DOWN physical_state POLLING",
    "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state DOWN physical_state LINK_UP",
    "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP",
]

# https://github.com/imbue-ai/cluster-health/issues/4 (`ibdev2netdev | column -t`, annotated)
IBDEV2NETDEV = """\
mlx5_0   port  1  ==>  ibp26s0        (Down)  # CX-7 1/8 infiniband
mlx5_1   port  1  ==>  enp27s0f0np0   (Up)    # CX-6 2/2 *ethernet* port 1/2
mlx5_2   port  1  ==>  enp27s0f1np1   (Down)  # CX-6 2/2 *ethernet* port 2/2
"""

# https://github.com/openucx/ucx/issues/5970 (lshca)
LSHCA = """\
-----------------------------------------------------------------------------------------------------------
  PCI_addr   |  RDMA  | Net | Numa | LnkStat | IpStat | Link | Rate | LnkCapWidth | LnkStaWidth | HCA_Type
-----------------------------------------------------------------------------------------------------------
000a:11:00.0 | mlx5_0 | ib0 |  2   |  down   |  down  |  IB  | 10*  |   x16 G3    |   x8 >!<    |  MT4119
000a:11:00.1 | mlx5_1 | ib1 |  2   |  init   |  down  |  IB  | 100  |   x16 G3    |   x8 >!<    |  MT4119
-----------------------------------------------------------------------------------------------------------
"""

# lshca's own README: the elastic view drops LnkStat when every port is "actv"
LSHCA_ALL_ACTIVE = """\
  PCI_addr   |  RDMA  | Net  | Numa | IpStat  | Link | Rate | LnkCapWidth | LnkStaWidth | HCA_Type
---------------------------------------------------------------------------------------------------
0000:81:00.0 | mlx5_2 | ib2  |  1   | up_ip4  |  IB  | 100  |   x16 G3    |   x8 >!<    |  MT4119
"""

# printed with infiniband-diags/scripts/ibstatus's echo lines
IBSTATUS = """\
Infiniband device 'mlx5_0' port 1 status:
\tdefault gid:\t fe80:0000:0000:0000:0c42:a103:0023:ac92
\tbase lid:\t 0x11
\tsm lid:\t\t 0x1
\tstate:\t\t 4: ACTIVE
\tphys state:\t 5: LinkUp
\trate:\t\t 100 Gb/sec (4X EDR)
\tlink_layer:\t InfiniBand

Infiniband device 'mlx5_1' port 1 status:
\tdefault gid:\t fe80:0000:0000:0000:0c42:a103:0023:ac93
\tbase lid:\t 0x0
\tsm lid:\t\t 0x0
\tstate:\t\t 2: INIT
\tphys state:\t 5: LinkUp
\trate:\t\t 100 Gb/sec (4X EDR)
\tlink_layer:\t InfiniBand
"""

# printed with mlnx-tools sbin/show_gids's echo lines (tabs), and as a terminal copy turns them to spaces
SHOW_GIDS = (
    "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n"
    "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n"
    "mlx5_0\t1\t0\tfe80:0000:0000:0000:ba59:9fff:fe1e:8de2\t\t\tv1\tenp1s0f0\n"
    "mlx5_0\t1\t1\tfe80:0000:0000:0000:ba59:9fff:fe1e:8de2\t\t\tv2\tenp1s0f0\n"
    "mlx5_0\t1\t2\t0000:0000:0000:0000:0000:ffff:c0a8:0101\t192.168.1.1  \tv1\tenp1s0f0\n"
    "mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:c0a8:0101\t192.168.1.1  \tv2\tenp1s0f0\n"
    "n_gids_found=4\n"
)


def test_ibstat_two_cas_down_port_and_elision():
    lst = parse_ib_listing(IBSTAT_ELIDED, "p")
    assert lst.programs == ["ibstat"]
    a, b = lst.ports
    assert (a.name, a.state, a.phys_state, a.link_layer, a.rate_gbps, a.ca_type) == (
        "mlx5_0/1", "Active", "LinkUp", "Ethernet", 100.0, "MT4125",
    )  # fmt: skip
    assert (b.name, b.state, b.phys_state, b.firmware) == ("mlx5_1/1", "Down", "Disabled", "22.38.1002")
    assert lst.skipped == [35]  # the '...' (a paste's cleaning removes it before the parser sees it)


def test_ibstat_port_alone():
    """`ibstat mlx5_0 1` prints the port's fields alone, unindented, without CA or Port lines."""
    lst = parse_ib_listing(
        "State: Initializing\nPhysical state: LinkUp\nRate: 100\nSM lid: 0\nLink layer: InfiniBand\n"
    )
    (p,) = lst.ports
    assert (p.device, p.state, p.phys_state, p.rate_gbps, p.sm_lid) == (
        None,
        "Initializing",
        "LinkUp",
        100.0,
        0,
    )


def test_devinfo_gid_excerpt_without_header():
    lst = parse_ib_listing(DEVINFO_GID_EXCERPT, "p")
    (port,) = lst.ports
    assert (port.device, port.phys_state) == (None, "LinkUp")
    assert [(g.index, g.version, g.link_local, g.ipv4) for g in lst.gids] == [
        (0, "v1", True, None),
        (1, "v2", True, None),
        (2, "v1", False, "200.0.209.6"),
        (3, "v2", False, "200.0.209.6"),
    ]


def test_devinfo_verbose_reads_port_and_skips_device_attributes():
    lst = parse_ib_listing(DEVINFO_VV, "p")
    (p,) = lst.ports
    assert (p.name, p.state, p.phys_state, p.link_layer, p.width, p.rate_gbps) == (
        "mlx5_1/1", "Active", "LinkUp", "InfiniBand", "4X", 200.0,
    )  # fmt: skip
    assert (p.lid, p.sm_lid, p.active_mtu, p.firmware) == (17, 1, 4096, "20.27.6202")
    assert lst.skipped == []
    (g,) = lst.gids
    assert (g.device, g.port, g.version) == ("mlx5_1", 1, None)  # IB GID: no RoCE version


def test_rdma_link_states_and_statistics_lines_left_alone():
    for line, state, phys in zip(RDMA_LINK, ("Down", "Down", "Active"), ("Polling", "LinkUp", "LinkUp")):
        (p,) = parse_ib_listing(line + "\n").ports
        assert (p.name, p.state, p.phys_state, p.link_layer, p.lid) == (
            "mlx5_7/1",
            state,
            phys,
            "InfiniBand",
            3403,
        )
    (p,) = parse_ib_listing("link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0np0\n").ports
    assert (p.netdev, p.link_layer) == ("ens1f0np0", None)
    with pytest.raises(InputError):  # `rdma statistic show` is read by observe/network/rdma.py
        parse_ib_listing("link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 out_of_buffer 12\n")


def test_ibdev2netdev_comments_and_verbose():
    lst = parse_ib_listing(IBDEV2NETDEV)
    assert [(n.device, n.netdev, n.up) for n in lst.netdevs] == [
        ("mlx5_0", "ibp26s0", False),
        ("mlx5_1", "enp27s0f0np0", True),
        ("mlx5_2", "enp27s0f1np1", False),
    ]
    assert lst.ports == []  # the netdev state is not the IB port state
    verbose = "0000:04:00.0 mlx5_0 (MT4115 - MT1609X01234) CX456A - ConnectX-4 QSFP28 fw 12.17.2010 port 1 (ACTIVE) ==> ib0 (Down)\n"
    lst = parse_ib_listing(verbose)
    (p,) = lst.ports
    assert (p.name, p.state, p.netdev, p.pci, p.program) == (
        "mlx5_0/1",
        "Active",
        "ib0",
        "0000:04:00.0",
        "ibdev2netdev -v",
    )


def test_lshca_states_and_pcie_marks():
    a, b = parse_ib_listing(LSHCA).ports
    assert (a.name, a.state, a.rate_gbps, a.pcie_width, a.pcie_capability, a.netdev) == (
        "mlx5_0/1", "Down", None, "x8", "x16 G3", "ib0",
    )  # fmt: skip
    assert (b.name, b.state, b.phys_state, b.link_layer) == (
        "mlx5_1/1",
        "Initializing",
        "LinkUp",
        "InfiniBand",
    )
    (c,) = parse_ib_listing(LSHCA_ALL_ACTIVE).ports
    assert (c.state, c.rate_gbps) == ("Active", 100.0)


def test_ibstatus():
    a, b = parse_ib_listing(IBSTATUS).ports
    assert (a.name, a.state, a.phys_state, a.rate_gbps, a.width, a.speed, a.lid) == (
        "mlx5_0/1", "Active", "LinkUp", 100.0, "4X", "EDR", 17,
    )  # fmt: skip
    assert (b.name, b.state) == ("mlx5_1/1", "Initializing")


@pytest.mark.parametrize("text", [SHOW_GIDS, SHOW_GIDS.replace("\t", "    ")])
def test_show_gids_tabs_or_spaces(text):
    lst = parse_ib_listing(text)
    assert [(g.index, g.version, g.ipv4, g.netdev) for g in lst.gids] == [
        (0, "v1", None, "enp1s0f0"),
        (1, "v2", None, "enp1s0f0"),
        (2, "v1", "192.168.1.1", "enp1s0f0"),
        (3, "v2", "192.168.1.1", "enp1s0f0"),
    ]
    assert lst.skipped == []


def test_mixed_paste_names_lines_of_other_programs():
    text = "mlx5_3 port 1 ==> net1 (Down)\neth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1450\n"
    lst = parse_ib_listing(text, "p")
    assert len(lst.netdevs) == 1 and lst.skipped == [2]


def test_state_names_of_every_program():
    for raw in ("Active", "PORT_ACTIVE (4)", "ACTIVE", "4: ACTIVE", "actv"):
        assert normal_state(raw) == "Active"
    for raw in ("Initializing", "PORT_INIT (2)", "INIT", "2: INIT", "init"):
        assert normal_state(raw) == "Initializing"
    for raw in ("LinkUp", "LINK_UP (5)", "LINK_UP", "5: LinkUp"):
        assert normal_phys_state(raw) == "LinkUp"
    assert normal_phys_state("PORT_CONFIGURATION TRAINNING (4)") == "PortConfigurationTraining"
    assert normal_state("bogus") is None


def test_sniff_claims_listings_not_logs_or_metrics():
    for text in (
        IBSTAT_ELIDED,
        DEVINFO_GID_EXCERPT,
        DEVINFO_VV,
        RDMA_LINK[0],
        IBDEV2NETDEV,
        LSHCA,
        IBSTATUS,
        SHOW_GIDS,
    ):
        assert sniff_ib_listing(text.encode()), text[:40]
    for text in (
        '# HELP node_infiniband_state_id State\nnode_infiniband_state_id{device="mlx5_0",port="1"} 4\n',
        "link mlx5_0/1 rx_write_requests 0 rx_read_requests 0\n",
        "Dec 02 10:00:01 node1 kernel: mlx5_core 0000:61:00.0: Port module event: module 0, Cable plugged\n",
        "State: running\nPhase: Pending\n",
    ):
        assert not sniff_ib_listing(text.encode()), text[:40]


def test_load_warns_about_skipped_lines(tmp_path):
    p = tmp_path / "paste.txt"
    p.write_text("mlx5_3 port 1 ==> net1 (Down)\nlo: flags=73<UP,LOOPBACK,RUNNING>  mtu 65536\n")
    out = load_ib_listing(p)
    assert [n.netdev for n in out["ib_netdevs"]] == ["net1"]
    assert out["warnings"] == [f"{p}: line 2 not read (not ibdev2netdev output)"]
    assert out["described_as"] == "ibdev2netdev output (1 port(s))"


def test_nothing_of_ours_is_one_input_error():
    with pytest.raises(InputError) as e:
        parse_ib_listing("hello\nworld\n", "x.txt")
    assert "x.txt" in e.value.one_line()


_STATE = st.sampled_from(["Down", "Initializing", "Armed", "Active"])
_PHYS = st.sampled_from(
    ["Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery"]
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_STATE, _PHYS, st.sampled_from([10, 25, 40, 56, 100, 200, 400])), min_size=1, max_size=6
    )
)
def test_ibstat_round_trip(ports):
    """What ibstat.c prints for any set of ports reads back as those ports."""
    out = []
    for i, (state, phys, rate) in enumerate(ports):
        out.append(f"CA 'mlx5_{i}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n")
        out.append(
            f"\t\tState: {state}\n\t\tPhysical state: {phys}\n\t\tRate: {rate}\n\t\tLink layer: InfiniBand\n"
        )
    lst = parse_ib_listing("".join(out))
    assert [(p.name, p.state, p.phys_state, p.rate_gbps) for p in lst.ports] == [
        (f"mlx5_{i}/1", s, ph, float(r)) for i, (s, ph, r) in enumerate(ports)
    ]
    assert lst.skipped == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=600))
def test_any_text_is_read_or_refused_in_one_line(text):
    try:
        lst = parse_ib_listing(text, "t")
    except InputError as e:
        assert e.one_line().startswith("t")
        return
    assert lst.ports or lst.gids or lst.netdevs


def test_command_line_names_the_device_of_a_headerless_excerpt(tmp_path):
    from clusterdoctor.observe.detect import load_path
    from clusterdoctor.observe.network.ibports import command_device

    p = tmp_path / "paste.txt"
    p.write_text("$ ibv_devinfo -d mlx5_bond_0 -v | grep -A5 phys_state\n" + DEVINFO_GID_EXCERPT)
    _what, data = load_path(p)
    assert {g.device for g in data["ib_gids"]} == {"mlx5_bond_0"}
    assert data["ib_ports"][0].name == "mlx5_bond_0"
    assert command_device(["ibstat mlx5_2 1"]) == "mlx5_2"
    assert command_device(["ibstatus mlx5_0:1", "show_gids mlx5_1"]) is None  # two devices: no guess
    assert command_device(["ibv_devinfo --ib-dev=mlx5_4"]) == "mlx5_4"


SYSFS_GREP = """\
/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE
/sys/class/infiniband/mlx5_0/ports/1/phys_state:5: LinkUp
/sys/class/infiniband/mlx5_0/ports/1/rate:200 Gb/sec (4X HDR)
/sys/class/infiniband/mlx5_1/ports/1/state:1: DOWN
/sys/class/infiniband/mlx5_1/ports/1/phys_state:2: Polling
/sys/class/infiniband/mlx5_1/ports/1/counters/link_downed:3
/sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error:0
"""


def test_grep_of_sysfs_port_files(tmp_path):
    """`grep . /sys/class/infiniband/*/ports/*/{state,phys_state,rate,counters/*}` (the kernel's sysfs
    formats: ``4: ACTIVE``, ``200 Gb/sec (4X HDR)``)."""
    lst = parse_ib_listing(SYSFS_GREP)
    assert [(p.name, p.state, p.phys_state, p.rate_gbps, p.width) for p in lst.ports] == [
        ("mlx5_0/1", "Active", "LinkUp", 200.0, "4X"),
        ("mlx5_1/1", "Down", "Polling", None, None),
    ]
    p = tmp_path / "grep.txt"
    p.write_text(SYSFS_GREP)
    out = load_ib_listing(p)
    (counters,) = out["rdma"]
    assert (counters.name, counters.counters["link_downed"]) == ("mlx5_1/1", 3)


def test_rdma_res_qp_lines_are_not_ports():
    """`rdma res show qp` prints `link DEV/PORT lqpn N type T state S`: a QP's state (RTS, INIT), not
    the port's; reading INIT as a port Initializing raised RDMA008 (no subnet manager) on healthy QPs."""
    from clusterdoctor.testing import fixture_path

    p = fixture_path("ctrl/rdma_iproute2_res_qp_and_stat_p_samples.txt")
    if p is None:
        pytest.skip("shared fixtures absent (CLUSTERDOCTOR_FIXTURES)")
    data = p.read_bytes()
    assert not sniff_ib_listing(data[:65536])
    with pytest.raises(InputError):
        parse_ib_listing(data.decode())
    for line in (
        "link ibp0s9/1 lqpn 42 type XRC_TGT state INIT sq-psn 0 path-mig-state MIGRATED comm [ib_uverbs]",
        "link mlx5_0/1 lqpn 1 type GSI state RTS sq-psn 0 comm ib_core",
    ):
        assert not sniff_ib_listing(line.encode())
    # the port listing keeps its IB addressing before the state
    line = "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state INIT physical_state LINK_UP"
    assert sniff_ib_listing(line.encode())
    (port,) = parse_ib_listing(line + "\n").ports
    assert port.state == "Initializing"


def test_rdma_res_qp_fixture_raises_no_port_alarm():
    from clusterdoctor.observe.detect import load_path
    from clusterdoctor.testing import fixture_path

    p = fixture_path("ctrl/rdma_iproute2_res_qp_and_stat_p_samples.txt")
    if p is None:
        pytest.skip("shared fixtures absent (CLUSTERDOCTOR_FIXTURES)")
    what, data = load_path(p)
    assert not data.get("ib_ports"), what


def test_records_module_split_from_the_reader() -> None:
    """The records and state names moved to ib_records (issue 26's module split): the old path still
    names the same objects, and ib_records imports nothing of the reader (no cycle)."""
    import subprocess
    import sys

    from clusterdoctor.observe.network import ib_records, ibports

    for name in ib_records.__all__:
        assert getattr(ibports, name) is getattr(ib_records, name), name
        assert name in ibports.__all__, name
    code = (
        "import sys; import clusterdoctor.observe.network.ib_records as r; "
        "print(sorted(m for m in sys.modules if m.startswith('clusterdoctor.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "ibports" not in out and "clusterdoctor.observe.network.ib_records" in out
