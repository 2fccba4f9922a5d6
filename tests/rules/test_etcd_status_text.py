"""ETCD008 on etcdctl's text output: unhealthy members name their cause class by etcdctl's error, alarms in
the ERRORS column and a database at its quota are findings, a healthy cluster is quiet."""

from __future__ import annotations

from clusterdoctor.observe.control.etcdctl_text import parse_etcdctl_text
from clusterdoctor.rules.etcd_status import error_causes, etcd_endpoint_status
from clusterdoctor.rules.registry import Observations, run_rules
from tests.observe.control.test_etcdctl_text import CLUSTER_HEALTH, MEMBER_TABLE, SIMPLE, STATUS_TABLE_32


def run(*texts: str):
    obs = Observations({})
    for t in texts:
        res = parse_etcdctl_text(t, "x.txt")
        st = obs.get("etcd_status")
        obs.put("etcd_status", st.merge(res.status) if st else res.status)
        obs.data.setdefault("etcd_members", []).extend(res.members)
    return run_rules(obs, [etcd_endpoint_status])[0]


def test_healthy_outputs_are_quiet():
    assert run(STATUS_TABLE_32, MEMBER_TABLE) == []
    assert run(SIMPLE) == [] and run(CLUSTER_HEALTH) == []


def test_unhealthy_endpoint_names_member_down_and_the_member():
    fs = run(
        MEMBER_TABLE,
        "http://127.0.0.1:22379 is unhealthy: failed to commit proposal: context deadline exceeded\n",
    )
    (f,) = fs
    assert f.causes == ("etcd.member-down",) and "infra2" in f.subject


def test_two_leaders_in_one_table():
    fs = run(
        STATUS_TABLE_32.replace(
            "|     false |         2 |          8 |\n| http://127.0.0.1:22379",
            "|      true |         2 |          8 |\n| http://127.0.0.1:22379",
            1,
        )
    )
    assert [f.summary.split(" (")[0] for f in fs] == ["etcd endpoints disagree on the leader"]


def test_alarm_in_errors_and_quota():
    row = "127.0.0.1:2379, 8e9e05c52164694d, 3.5.0, 2.1 GB, true, false, 2, 4, 4, memberID:1 alarm:NOSPACE\n"
    (f,) = run(row)
    assert f.causes == ("etcd.db-space-exceeded",)
    full = "127.0.0.1:2379, 8e9e05c52164694d, 3.5.0, 2.1 GB, true, false, 2, 4, 4, \n"
    (g,) = run(full)
    assert g.causes == ("etcd.db-space-exceeded",) and "default backend quota" in g.summary


def test_error_classes():
    assert error_causes("x509: certificate signed by unknown authority") == ("etcd.tls",)
    assert error_causes("dial tcp 10.0.0.1:2379: connect: connection refused") == ("etcd.member-down",)
    assert error_causes("etcdserver: mvcc: database space exceeded") == ("etcd.db-space-exceeded",)
    assert error_causes("something else") == ()


def test_member_removed_names_the_one_etcd_node_not_ready() -> None:
    # dev case ctrl-1001 (k3s#13498): k3s' embedded etcd prints "the member has been
    # permanently removed from the cluster" with no host; the `kubectl get nodes` beside it shows node2,
    # the one node with the etcd role that is NotReady
    from clusterdoctor.observe.control.kubectl_text import parse_kubectl_text
    from clusterdoctor.rules.catalog.etcd import MESSAGES as ETCD_MESSAGES
    from clusterdoctor.rules.etcd_status import member_subject
    from tests.conftest import TEST_DATA

    case = TEST_DATA / "incidents" / "ctrl-1001"
    nodes = parse_kubectl_text((case / "paste-2.txt").read_bytes(), "paste-2.txt").nodes
    (m,) = [x for x in ETCD_MESSAGES if x.code == "ETCD120"]
    assert member_subject(Observations({"kube_nodes": nodes}), m, [], "") == "node2"
    # two etcd nodes down, or no table: the line's own (empty) subject stays
    both = list(nodes) + [type(nodes[0])("node3", "NotReady", "control-plane,etcd,master")]
    assert member_subject(Observations({"kube_nodes": both}), m, [], "") == ""
    assert member_subject(Observations({}), m, [], "") == ""
    # another entry (not about the printer's own removal) is not given the node
    (other,) = [x for x in ETCD_MESSAGES if x.code == "ETCD121"]
    assert member_subject(Observations({"kube_nodes": nodes}), other, [], "") == ""
