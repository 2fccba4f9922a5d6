"""RDMA port rules (RDMA007-013) through the whole pipeline: pasted text in, the first finding out.

Pastes are real (thread named) or printed with the programs' own formats; what is normal must give
nothing at warning or above."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdoctor.model import Severity
from clusterdoctor.rules import rdma_ports
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, get_rule
from tests.observe.network.test_ibports import (
    DEVINFO_GID_EXCERPT,
    IBDEV2NETDEV,
    IBSTAT_ELIDED,
    LSHCA,
    RDMA_LINK,
)
from tests.observe.network.test_perftest_ucx_info import POST_LIST_8B, UCX_INFO
from tests.observe.node.test_limits_text import ULIMIT_BASH

NOW = 1_700_000_000.0


def diagnose(tmp_path: Path, *texts: str):
    from clusterdoctor import diagnosis

    paths = []
    for i, text in enumerate(texts):
        p = tmp_path / f"paste-{i}.txt"
        p.write_text(text)
        paths.append(p)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    refs = diagnosis.load_sources(obs, paths)
    return diagnosis.run(obs, refs)


def first(d):
    return (d.findings[0].rule, d.findings[0].subject) if d.findings else None


def alarms(d):
    return [(f.rule, f.subject) for f in d.findings if f.severity >= Severity.WARNING]


def test_documented():
    for r in (
        rdma_ports.rdma_port_down,
        rdma_ports.rdma_port_initializing,
        rdma_ports.rdma_link_degraded,
        rdma_ports.roce_gid,
        rdma_ports.rdma_memlock,
        rdma_ports.rdma_netdevs_down,
        rdma_ports.rdma_hca_pcie_narrow,
    ):
        assert set(REQUIRED_SECTIONS) <= set(r.sections()), r.id
        assert r.finding("x").verify


def test_down_port_in_an_elided_ibstat(tmp_path):
    d = diagnose(tmp_path, "/export/home/me/mscclpp# ibstat\n" + IBSTAT_ELIDED)
    assert first(d) == ("RDMA007", "mlx5_1/1")
    f = d.findings[0]
    assert "ib.port-down" in f.causes and "Disabled" in f.summary
    assert any("cut out of the paste" in w for w in d.warnings)  # the '...' is named, not judged
    # evidence names the line as the user pasted it (the prompt line counts)
    assert any(
        e.description.endswith("paste-0.txt:26: ibstat: state Down, physical state Disabled")
        for e in f.evidence
    )


def test_healthy_ibstat_is_quiet(tmp_path):
    healthy = IBSTAT_ELIDED.split("CA 'mlx5_1'")[0]
    assert alarms(diagnose(tmp_path, healthy)) == []


def test_flapping_link_across_three_reads(tmp_path):
    d = diagnose(tmp_path, *(line + "\n" for line in RDMA_LINK))
    assert first(d) == ("RDMA007", "mlx5_7/1")
    assert "flapping" in d.findings[0].summary and "ib.link-degraded" in d.findings[0].causes


def test_initializing_port_leads_a_down_one(tmp_path):
    d = diagnose(tmp_path, LSHCA)
    assert first(d) == ("RDMA008", "mlx5_1/1")
    assert d.findings[0].causes == ("ib.no-subnet-manager",)
    assert {(f.rule, f.subject) for f in d.findings} >= {("RDMA007", "mlx5_0/1"), ("RDMA013", "mlx5_0/1")}


def _devinfo_port(link_layer: str, width: str, speed: str) -> str:
    # libibverbs/examples/devinfo.c -v
    return (
        "hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
        f"\t\t\tlink_layer:\t\t{link_layer}\n\t\t\tactive_width:\t\t{width}\n"
        f"\t\t\tactive_speed:\t\t{speed}\n\t\t\tphys_state:\t\tLINK_UP (5)\n"
    )


def test_roce_width_is_never_judged_but_an_ib_1x_link_is(tmp_path):
    assert alarms(diagnose(tmp_path, _devinfo_port("Ethernet", "1X (1)", "100.0 Gbps (128)"))) == []
    d = diagnose(tmp_path, _devinfo_port("InfiniBand", "1X (1)", "25.0 Gbps (32)"))
    assert first(d) == ("RDMA009", "mlx5_0/1")


def test_ib_port_at_half_the_rate_of_its_siblings(tmp_path):
    ports = []
    for i, rate in enumerate((400, 400, 200)):
        ports.append(
            f"CA 'mlx5_{i}'\n\tCA type: MT4129\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
            f"\t\tRate: {rate}\n\t\tLink layer: InfiniBand\n"
        )
    d = diagnose(tmp_path, "".join(ports))
    assert alarms(d) == [("RDMA009", "mlx5_2/1")]


def test_ibdev2netdev_down_netdevs_on_a_pure_ib_host_are_normal(tmp_path):
    # https://github.com/imbue-ai/cluster-health/issues/4: IPoIB down, one Ethernet port up, a spare down
    assert alarms(diagnose(tmp_path, "$ ibdev2netdev | column -t\n" + IBDEV2NETDEV)) == []
    only_ipoib = "mlx5_0 port 1 ==> ibp26s0 (Down)\nmlx5_3 port 1 ==> ibp60s0 (Down)\n"
    assert alarms(diagnose(tmp_path, only_ipoib)) == []


def test_the_only_netdev_of_a_pod_down(tmp_path):
    # https://github.com/k8snetworkplumbingwg/sriov-network-operator/issues/382
    paste = (
        "n-MacBookPro:~/go/src$ kubectl exec -it sample-pod-4-5bddf8c4b4-hf49j -- bash\n"
        "[root@sample-pod-4-5bddf8c4b4-hf49j /]# ibdev2netdev\n"
        "mlx5_3 port 1 ==> net1 (Down)\n"
        "[root@sample-pod-4-5bddf8c4b4-hf49j /]# ifconfig\n"
        "eth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1450\n"
    )
    d = diagnose(tmp_path, paste)
    assert first(d) == ("RDMA012", "mlx5_3/1")
    assert "net1" in d.findings[0].summary
    assert any(
        w.endswith("line 5 not read (not ibdev2netdev output)") for w in d.warnings
    )  # ifconfig's, as pasted


def test_link_local_gid_and_a_modify_qp_timeout(tmp_path):
    # https://github.com/NVIDIA/nccl/issues/769
    d = diagnose(
        tmp_path,
        DEVINFO_GID_EXCERPT,
        "_ibvwrap.cc: NCCL WARN Call to ibv_modify_qp failed with error Connection timed out_\n",
    )
    f = d.findings[0]
    assert (f.rule, f.severity) == ("RDMA010", Severity.CRITICAL)
    assert "index 3" in f.summary and "NCCL_IB_GID_INDEX=3" in f.summary
    assert "roce.gid" in f.causes


def test_a_gid_table_alone_is_not_a_fault(tmp_path):
    assert alarms(diagnose(tmp_path, DEVINFO_GID_EXCERPT)) == []
    only_local = "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0ac0:ebff:feda:1cfb, RoCE v1\n\t\t\tGID[  1]:\t\tfe80::ac0:ebff:feda:1cfb, RoCE v2\n"
    d = diagnose(tmp_path, only_local)
    assert [(f.rule, f.severity) for f in d.findings] == [("RDMA010", Severity.INFO)]


def test_memlock_names_the_device_from_ucx_info(tmp_path):
    # https://github.com/openucx/ucx/issues/8229
    err = (
        "[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed: "
        "Cannot allocate memory\n[cn0022:4071024] pml_ucx.c:309  Error: Failed to create UCP worker\n"
    )
    d = diagnose(tmp_path, err, UCX_INFO, "ulimit -a\n" + ULIMIT_BASH)
    f = d.findings[0]
    assert (f.rule, f.subject, f.severity) == ("RDMA011", "mlx5_0", Severity.CRITICAL)
    assert "64 KiB" in f.summary
    assert not any(g.rule == "IB115" for g in d.findings)  # the UCP worker failure folds into the cause


def test_memlock_unlimited_is_not_the_cause(tmp_path):
    err = "[1] [h:1:0] ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed: Cannot allocate memory\n"
    d = diagnose(tmp_path, err, ULIMIT_BASH.replace("(kbytes, -l) 64", "(kbytes, -l) unlimited"))
    assert not any(f.rule == "RDMA011" for f in d.findings)


def test_open_mpi_openib_notices_on_a_finished_job_are_info(tmp_path):
    # https://github.com/open-mpi/ompi/issues/10693
    paste = (
        "By default, for Open MPI 4.0 and later, infiniband ports on a device\n"
        "are not used by default.  The intent is to use UCX for these devices.\n"
        "WARNING: There was an error initializing an OpenFabrics device.\n\n"
        "  Local host:   lxbk1039\n  Local device: mlx5_0\n"
    )
    d = diagnose(tmp_path, paste)
    assert d.findings and alarms(d) == []


def test_a_small_message_perftest_run_is_not_slow(tmp_path):
    d = diagnose(tmp_path, POST_LIST_8B)
    assert alarms(d) == [] and not any("not used" in w for w in d.warnings)


def test_rules_are_registered_with_causes():
    for rid, cls in (
        ("RDMA007", "ib.port-down"),
        ("RDMA008", "ib.no-subnet-manager"),
        ("RDMA010", "roce.gid"),
    ):
        assert cls in get_rule(rid).causes


@pytest.mark.parametrize("rid", ["RDMA001", "RDMA002", "RDMA003", "RDMA004", "RDMA005"])
def test_counter_rules_declare_causes(rid):
    assert get_rule(rid).causes


def test_iblinkinfo_could_be_and_unused_switch_ports(tmp_path):
    from tests.observe.network.test_fabric import IBLINKINFO

    d = diagnose(tmp_path, IBLINKINFO)
    assert alarms(d) == [("RDMA014", "Quantum Mellanox Technologies lid 1 port 2")]


def test_ibqueryerrors_link_errors_and_transmit_wait_alone(tmp_path):
    from tests.observe.network.test_fabric import IBQUERYERRORS

    d = diagnose(tmp_path, IBQUERYERRORS)
    # link_downed 25 and port_rcv_errors 26 (link errors), 2846 transmit discards (congestion)
    assert {r for r, _ in alarms(d)} == {"RDMA002", "RDMA004"}
    waits = IBQUERYERRORS.replace(
        "[LinkDownedCounter == 25 (25.000)] [PortRcvErrors == 26 (26.000)] [PortXmitDiscards == 2846 (2.779K)] ",
        "",
    )
    assert alarms(diagnose(tmp_path, waits)) == []  # transmit wait totals alone: a busy fabric, not a fault
