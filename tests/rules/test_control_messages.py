"""The control-plane catalogues (etcd, kubelet, containerd, scheduler events) through `diagnose`, on real
lines: each entry's finding names its cause class and instance; of a scheduler message's reasons the one
that rules out most nodes leads; a scheduler reason names the one Pending pod; what is normal at start-up
is quiet."""

from __future__ import annotations

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.model import Severity
from clusterdoctor.rules.catalog import FAMILIES, all_messages

NOW = 1_800_000_000.0
MINE = ("etcd", "kubelet", "containerd", "scheduler_events")


def diagnose(tmp_path, *texts: str):
    paths = []
    for i, t in enumerate(texts):
        p = tmp_path / f"paste-{i}.txt"
        p.write_text(t)
        paths.append(p)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    refs = diagnosis.load_sources(obs, paths)
    return diagnosis.run(obs, refs)


@pytest.mark.parametrize("m", [m for m in all_messages() if m.family in MINE], ids=lambda m: m.code)
def test_each_entry_is_found_on_its_real_line_with_its_classes(tmp_path, m):
    d = diagnose(tmp_path, m.example + "\n")
    f = next(f for f in d.findings if f.rule == m.code)
    assert set(f.causes) == set(m.causes)
    assert f.layer == (m.layer or FAMILIES[m.family])


def test_clock_difference_names_the_peer(tmp_path):
    # github.com/etcd-io/etcd/issues/5938
    d = diagnose(
        tmp_path,
        "2016-07-13 16:59:59.776094 W | rafthttp: the clock difference against peer 4e8d454852097618 is too high "
        "[12.407738276s > 1s]\n",
    )
    f = d.findings[0]
    assert (
        f.rule == "ETCD103" and f.subject == "member 4e8d454852097618" and "12.407738276s > 1s" in f.summary
    )


@pytest.mark.parametrize(
    ("line", "first", "second"),
    [
        # github.com/kubernetes/kubernetes/issues/49896: 10 excluded by the selector, 4 short of cpu
        # (SCHED109: the selector's count is every node of the cluster)
        ("message: '0/10 nodes are available: 10 node(s) didn't match node selector, 4 Insufficient cpu.'",
         "SCHED109", "SCHED101"),
        # github.com/kubernetes/kubernetes/issues/107194
        ("0/5 nodes are available: 2 node(s) were unschedulable, 3 Insufficient pods.", "SCHED101", "SCHED107"),
        # github.com/kubernetes/test-infra/pull/32945
        ("(0/31 nodes are available: 28 Insufficient cpu, 3 node(s) had untolerated taint {node-group: stable}.",
         "SCHED101", "SCHED102"),
    ],
)  # fmt: skip
def test_the_reason_that_rules_out_most_nodes_leads(tmp_path, line, first, second):
    rules = [f.rule for f in diagnose(tmp_path, line + "\n").findings]
    assert rules.index(first) < rules.index(second)


def test_control_plane_taint_yields_to_any_other_reason(tmp_path):
    # github.com/kubernetes/kubernetes/issues/116133 (one control-plane node) and a GPU request on it
    one = " Warning  FailedScheduling  61s (x2 over 6m23s)  default-scheduler  0/1 nodes are available: 1 node(s) "
    d = diagnose(tmp_path, one + "had untolerated taint {node-role.kubernetes.io/control-plane: }.\n")
    assert d.findings[0].rule == "SCHED103"
    d = diagnose(
        tmp_path,
        one + "had untolerated taint {node-role.kubernetes.io/control-plane: }.\n"
        "  Warning  FailedScheduling  5s  default-scheduler  0/1 nodes are available: 1 Insufficient nvidia.com/gpu.\n",
    )
    assert d.findings[0].rule == "SCHED101" and "nvidia.com/gpu" in d.findings[0].summary


def test_a_count_must_precede_a_scheduler_reason(tmp_path):
    # an LVM line in a pasted journal (github.com/etcd-io/etcd/issues/6998) is not a scheduler reason
    from clusterdoctor.errors import InputError

    try:
        d = diagnose(
            tmp_path,
            "Dec 14 10:42:33 xt1 lvm[1170]: Insufficient free space: 8602 extents needed, but only 81 available\n",
        )
    except InputError:
        return  # nothing in it is ours
    assert not any(f.rule.startswith("SCHED") for f in d.findings)


GET_PODS = """\
$ kubectl get pod
NAME                                            READY   STATUS             RESTARTS       AGE
deepseek-coder-7b-instruct-688778dd76-wzwmg     0/1     CrashLoopBackOff   13 (68s ago)   65m
deepseek-coder-7b-kvcache-7c984cdff8-xq5pk      0/1     Pending            0              65m
deepseek-coder-7b-kvcache-etcd-0                1/1     Running            0              65m
"""  # github.com/vllm-project/aibrix/pull/909
TAINT_EVENT = (
    "FailedScheduling   2m21s (x42 over 60m)  default-scheduler  1 node(s) had untolerated taint "
    "{nvidia.com/gpu: present}\n"
)


def test_scheduler_reason_names_the_one_pending_pod(tmp_path):
    d = diagnose(tmp_path, GET_PODS, TAINT_EVENT)
    f = d.findings[0]
    assert f.rule == "SCHED102" and f.subject == "pod deepseek-coder-7b-kvcache-7c984cdff8-xq5pk"
    assert "sched.taint-or-affinity" in f.causes
    # the pods' states are symptoms the scheduler finding explains: folded into it
    assert not any(x.rule == "KUBELET004" for x in d.findings)
    assert any("KUBELET004" in e.description for e in f.evidence)


def test_event_rows_name_their_object(tmp_path):
    # github.com/hystax/optscale/issues/568
    row = (
        "39h         Warning   FailedScheduling          pod/ohsu-7ffd6bcb7f-mnsjf                          "
        "                        0/1 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful "
        "for scheduling.\n"
    )
    f = next(f for f in diagnose(tmp_path, row).findings if f.rule == "SCHED105")
    assert f.subject == "pod ohsu-7ffd6bcb7f-mnsjf"


def test_pleg_and_runtime_down_on_one_line_lead_with_the_runtime(tmp_path):
    # github.com/kubernetes/kubernetes/issues/65843
    d = diagnose(
        tmp_path,
        "I0705 13:07:12.269821   32911 kubelet.go:1799] skipping pod synchronization - [container runtime is down "
        "PLEG is not healthy: pleg was last seen active 2562047h47m16.854775807s ago; threshold is 3m0s]\n",
    )
    assert [f.rule for f in d.findings][:2] == ["KUBELET102", "KUBELET101"]


@pytest.mark.parametrize(
    "line",
    [
        # a kubelet starting: its first runtime status check and PLEG relist have not run yet
        'Sep 11 10:57:09 ip-172-31-63-152 kubelet[9919]: E0911 10:57:09.673575    9919 kubelet.go:2327] "Skipping '
        'pod synchronization" err="PLEG is not healthy: pleg has yet to be successful"',
        "I1010 23:58:17.901213    7847 kubelet.go:1821] skipping pod synchronization - [container runtime status "
        "check may not have completed yet]",
        # etcdctl endpoint health, all healthy (github.com/etcd-io/etcd/issues/15836)
        "https://10.50.32.153:2379 is healthy: successfully committed proposal: took = 23.34261ms",
    ],
)
def test_normal_lines_are_quiet(tmp_path, line):
    d = diagnose(tmp_path, line + "\n")
    assert not [f for f in d.findings if f.severity >= Severity.WARNING]


def test_x509_variants_name_expiry_or_clock(tmp_path):
    after = "x509: certificate has expired or is not yet valid: current time 2021-04-26T10:18:22+02:00 is after 2021-04-07T03:12:06Z\n"
    before = (
        "Unable to connect to the server: x509: certificate has expired or is not yet valid: current time "
        "2021-04-01T14:43:32+02:00 is before 2021-04-01T15:31:09Z\n"
    )
    assert [f.rule for f in diagnose(tmp_path, after).findings] == ["KUBELET109"]
    assert [f.rule for f in diagnose(tmp_path, before).findings] == ["KUBELET110"]


# a --cgroup-driver value with literal single quotes (kubelet.config), on the lines of two threads
QUOTED_DRIVER = [
    # github.com/kubernetes/kubernetes/issues/87918 (khassel, posted in single backticks)
    'failed to run Kubelet: failed to create kubelet: misconfiguration:"kubelet cgroup driver: '
    '"\'cgroupfs\'" is different from docker cgroup driver: "cgroupfs"',
    # github.com/kubernetes/minikube/issues/6544 (zigarn's journal line; the thread's excerpt ends at
    # 'driver: "sys', its end as the issue's title quotes it)
    "Feb 07 16:53:07 kubernetes.2020-02-07-k8s-user-test.local kubelet[21449]: F0207 16:53:07.576611   "
    "21449 server.go:273] failed to run Kubelet: failed to create kubelet: misconfiguration: kubelet cgroup "
    'driver: "\'systemd\'" is different from docker cgroup driver: "systemd"',
]


@pytest.mark.parametrize("line", QUOTED_DRIVER)
def test_a_quoted_cgroup_driver_leads_before_the_start_failure(tmp_path, line):
    d = diagnose(tmp_path, line + "\n")
    f = d.findings[0]
    assert f.rule == "KUBELET126" and "kubelet.config" in f.causes
    assert "with its quotes" in f.summary
    # the generic 'failed to run Kubelet' on the same line is its symptom, and the bare-word mismatch
    # entry does not claim a quoted value
    assert "KUBELET104" not in {g.rule for g in d.findings}


def test_a_bare_driver_mismatch_stays_kubelet104(tmp_path):
    # github.com/opsnull/follow-me-install-kubernetes-cluster/issues/101 (the title)
    line = (
        "error: failed to run Kubelet: failed to create kubelet: misconfiguration: kubelet cgroup driver: "
        '"cgroupfs" is different from docker cgroup driver: "systemd"\n'
    )
    rules = [f.rule for f in diagnose(tmp_path, line).findings]
    assert rules[0] == "KUBELET104" and "KUBELET126" not in rules


def test_kueue_resource_not_covered_is_not_a_quota_shortfall(tmp_path):
    # xpk#603: the ClusterQueue covers no cpu/memory; the resource is named
    d = diagnose(
        tmp_path,
        "  Warning  Pending  4m23s  kueue-admission  couldn't assign flavors to pod set job: resource memory "
        "unavailable in ClusterQueue\n",
    )
    (f,) = [f for f in d.findings if f.rule == "SCHED113"]
    assert "memory" in f.summary and f.causes == ("kueue.resource-not-covered",)
    # kueue#1344: a covered resource over its borrowing limit is another state
    (m,) = [m for m in all_messages() if m.code == "SCHED113"]
    line = "message: 'couldn''t assign flavors to pod set main: borrowing limit for cpu in flavor flav-1 exceeded'"
    assert m.regex.search(line) is None
