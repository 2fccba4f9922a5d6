"""kubectl's text output on lines pasted in public threads: get pods/nodes/events (with and without their
header), describe pod/node (spaces and the tabs of old releases), and the event rows of a describe."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.kubectl_text import (
    load_kubectl_observations,
    parse_kubectl_text,
    sniff_kubectl_text,
)

# github.com/vllm-project/aibrix/pull/909 (kubectl get pod)
GET_PODS = """\
NAME                                            READY   STATUS             RESTARTS       AGE
deepseek-coder-7b-instruct-688778dd76-wzwmg     0/1     CrashLoopBackOff   13 (68s ago)   65m
deepseek-coder-7b-kvcache-7c984cdff8-xq5pk      0/1     Pending            0              65m
deepseek-coder-7b-kvcache-etcd-0                1/1     Running            0              65m
"""
# github.com/kubernetes/website/issues/8030 (kubectl get node, 1.10)
GET_NODES = """\
NAME         STATUS     ROLES     AGE       VERSION
k8s-master   Ready      master    27m       v1.10.0
k8s-node1    NotReady   <none>    21m       v1.10.0
"""
# github.com/hystax/optscale/issues/568 (kubectl get events rows, pasted without the header)
EVENT_ROWS = (
    "39h         Warning   FailedScheduling          pod/ohsu-7ffd6bcb7f-mnsjf                          "
    "                        0/1 nodes are available: 1 node(s) had untolerated taint "
    "{node.kubernetes.io/unreachable: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
    "scheduling.\n"
    "39h         Normal    SuccessfulCreate          replicaset/ohsu-7ffd6bcb7f                         "
    "                        Created pod: ohsu-7ffd6bcb7f-mnsjf\n"
)
# github.com/k3s-io/k3s/pull/916 (describe pod events, no header)
DESCRIBE_ROWS = (
    "  Warning  Failed     14s (x3 over 32s)  kubelet, k3s-1     Error: failed to create containerd task: failed to "
    'start shim: exec: "containerd-shim": executable file not found in $PATH: unknown\n'
    "  Warning  BackOff    8s (x5 over 31s)   kubelet, k3s-1     Back-off restarting failed container\n"
)
# github.com/kubernetes/kubernetes/issues/43790 (kubectl describe node, 1.6: tab-separated)
DESCRIBE_NODE_TABS = (
    "Name:\t\t\tkube-01\n"
    "Role:\n"
    "Labels:\t\t\tbeta.kubernetes.io/arch=arm\n"
    "\t\t\tbeta.kubernetes.io/os=linux\n"
    "\t\t\tkubernetes.io/hostname=kube-01\n"
    "Taints:\t\t\t<none>\n"
    "CreationTimestamp:\tTue, 28 Mar 2017 22:06:40 -0700\n"
    "Phase:\n"
    "Conditions:\n"
    "  Type\t\t\tStatus\tLastHeartbeatTime\t\t\tLastTransitionTime\t\t\tReason\t\t\t\tMessage\n"
    "  ----\t\t\t------\t-----------------\t\t\t------------------\t\t\t------\t\t\t\t-------\n"
    "  OutOfDisk \t\tFalse \tTue, 28 Mar 2017 22:17:24 -0700 \tTue, 28 Mar 2017 22:06:40 -0700 \t"
    "KubeletHasSufficientDisk \tkubelet has sufficient disk space available\n"
    "  MemoryPressure \tFalse \tTue, 28 Mar 2017 22:17:24 -0700 \tTue, 28 Mar 2017 22:06:40 -0700 \t"
    "KubeletHasSufficientMemory \tkubelet has sufficient memory available\n"
    "  DiskPressure \t\tFalse \tTue, 28 Mar 2017 22:17:24 -0700 \tTue, 28 Mar 2017 22:06:40 -0700 \t"
    "KubeletHasNoDiskPressure \tkubelet has no disk pressure\n"
    "  Ready \t\tFalse \tTue, 28 Mar 2017 22:17:24 -0700 \tTue, 28 Mar 2017 22:06:40 -0700 \t"
    "KubeletNotReady \t\truntime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:docker: network plugin is not ready: cni config uninitialized\n"
    "Addresses:\t\t10.0.1.101,10.0.1.101,kube-01\n"
    "Capacity:\n"
    " cpu:\t\t4\n"
    " memory:\t882632Ki\n"
    " pods:\t\t110\n"
)
# github.com/cloud-ark/kubeplus/issues/1382 (describe pod, three fields pasted)
DESCRIBE_POD_PART = (
    "Status:       Failed\n"
    "Reason:       Evicted\n"
    "Message:      The node was low on resource: ephemeral-storage. Threshold quantity: 2146223340, available: "
    "1883424Ki. Container helmer was using 10304Ki, request is 10Mi, has larger consumption of ephemeral-storage.\n"
)


def test_get_pods_rows_with_restarts_ago():
    res = parse_kubectl_text(GET_PODS, "pods.txt")
    assert [(p.name, p.status, p.restarts) for p in res.pods] == [
        ("deepseek-coder-7b-instruct-688778dd76-wzwmg", "CrashLoopBackOff", 13),
        ("deepseek-coder-7b-kvcache-7c984cdff8-xq5pk", "Pending", 0),
        ("deepseek-coder-7b-kvcache-etcd-0", "Running", 0),
    ]
    assert res.pods[1].line == 3 and res.describe() == "kubectl get pods"


def test_get_pods_all_namespaces_wide():
    text = (  # kubectl get pods -A -o wide (printers.go columns)
        "NAMESPACE     NAME                      READY   STATUS    RESTARTS   AGE   IP           NODE      "
        "NOMINATED NODE   READINESS GATES\n"
        "kube-system   coredns-565d847f94-8xqvl  1/1     Running   0          10d   10.244.0.2   node-1    "
        "<none>           <none>\n"
    )
    (p,) = parse_kubectl_text(text).pods
    assert p.key == "kube-system/coredns-565d847f94-8xqvl" and p.node == "node-1"


def test_get_nodes():
    res = parse_kubectl_text(GET_NODES)
    assert [(n.name, n.status, n.roles, n.version) for n in res.nodes] == [
        ("k8s-master", "Ready", "master", "v1.10.0"),
        ("k8s-node1", "NotReady", "<none>", "v1.10.0"),
    ]


def test_event_rows_without_header_name_their_object():
    res = parse_kubectl_text(EVENT_ROWS)
    ev = res.events[0]
    assert (ev.type, ev.reason, ev.object) == ("Warning", "FailedScheduling", "pod/ohsu-7ffd6bcb7f-mnsjf")
    assert ev.message.startswith("0/1 nodes are available")
    assert res.about[1] == "pod ohsu-7ffd6bcb7f-mnsjf"


def test_describe_event_rows_without_header():
    res = parse_kubectl_text(DESCRIBE_ROWS)
    assert [(e.reason, e.count, e.origin) for e in res.events] == [
        ("Failed", 3, "kubelet, k3s-1"),
        ("BackOff", 5, "kubelet, k3s-1"),
    ]


def test_old_describe_node_with_tabs():
    (node,) = parse_kubectl_text(DESCRIBE_NODE_TABS).objects
    assert node.kind == "node" and node.name == "kube-01" and node.ref == "node kube-01"
    conds = {c.type: (c.status, c.reason) for c in node.conditions}
    assert conds["Ready"] == ("False", "KubeletNotReady") and conds["DiskPressure"][0] == "False"
    assert "cni config uninitialized" in next(c.message for c in node.conditions if c.type == "Ready")
    assert node.capacity == {"cpu": "4", "memory": "882632Ki", "pods": "110"}
    assert node.labels["kubernetes.io/hostname"] == "kube-01"


def test_a_few_describe_fields_are_a_pod():
    (pod,) = parse_kubectl_text(DESCRIBE_POD_PART).objects
    assert pod.kind == "pod" and pod.fields["Reason"] == "Evicted" and pod.ref == ""


def test_describe_pod_with_events_table():
    text = (  # kubectl describe pod (describe.go layout), events as in github.com/kubernetes/kubernetes/issues/116133
        "Name:             apache-7f6fddb7df-q229r\n"
        "Namespace:        default\n"
        "Status:           Pending\n"
        "Containers:\n"
        "  apache:\n"
        "    Image:          httpd\n"
        "    State:          Waiting\n"
        "      Reason:       ContainerCreating\n"
        "Events:\n"
        "  Type     Reason            Age                  From               Message\n"
        "  ----     ------            ----                 ----               -------\n"
        "  Warning  FailedScheduling  61s (x2 over 6m23s)  default-scheduler  0/1 nodes are available: 1 node(s) "
        "had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/1 nodes are available: 1 "
        "Preemption is not helpful for scheduling..\n"
    )
    res = parse_kubectl_text(text)
    (pod,) = res.objects
    assert pod.ref == "pod default/apache-7f6fddb7df-q229r" and pod.fields["Status"] == "Pending"
    assert pod.container_states == [("apache", "State: Waiting", "ContainerCreating")]
    (ev,) = pod.events
    assert ev.reason == "FailedScheduling" and ev.count == 2 and ev.object == pod.ref
    assert res.about[12] == pod.ref  # the event's line is about the described pod


def test_loader(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text(GET_PODS + "\n" + GET_NODES)
    out = load_kubectl_observations(f)
    assert len(out["kube_pods"]) == 3 and len(out["kube_nodes"]) == 2
    assert out["described_as"] == "kubectl get pods + get nodes"


def test_sniff():
    for text in (GET_PODS, GET_NODES, EVENT_ROWS, DESCRIBE_ROWS, DESCRIBE_NODE_TABS, DESCRIBE_POD_PART):
        assert sniff_kubectl_text(text.encode()), text[:40]
    for other in (
        b"Apr 05 05:33:40 master kubelet[4759]: F0405 server.go:274] failed to run Kubelet\n",
        b"\xe2\x97\x8f kubelet.service - kubelet\n   Loaded: loaded\n   Active: activating\n",
        b"# HELP x y\nx 1\n",
        b"\x00binary",
    ):
        assert not sniff_kubectl_text(other)


@pytest.mark.parametrize("text", ["", "hello world\n", "NAME   STATUS   AGE\ndefault   Active   5d\n"])
def test_not_kubectl_rows_is_one_input_error(tmp_path, text):
    f = tmp_path / "x.txt"
    f.write_text(text)
    with pytest.raises(InputError):
        load_kubectl_observations(f)


_NAME = st.from_regex(r"[a-z][a-z0-9\-]{0,30}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(_NAME, st.sampled_from(["Running", "Pending", "Evicted", "Init:0/1"]), st.integers(0, 999)),
        min_size=1,
        max_size=8,
    )
)
def test_generated_pod_listings_round_trip(rows):
    width = max(4, *(len(n) for n, _, _ in rows)) + 3
    text = "NAME".ljust(width) + "READY   STATUS     RESTARTS   AGE\n"
    text += "".join(f"{n.ljust(width)}1/1     {s.ljust(11)}{r:<11d}5m\n" for n, s, r in rows)
    got = parse_kubectl_text(text).pods
    assert [(p.name, p.status, p.restarts) for p in got] == rows


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_read_or_refused_in_one_line(text):
    try:
        res = parse_kubectl_text(text)
    except InputError as e:
        assert e.reason
        return
    assert res.read >= 1


def test_long_hostile_lines_are_linear():
    import time

    for line in (
        "  Warning  Failed  14s  " + "k" * 200_000,
        "Name:  " + "x " * 100_000,
        "NAME  " * 50_000,
        "|" * 100_000,
    ):
        t0 = time.perf_counter()
        try:
            parse_kubectl_text(line + "\n" + line + "\n")
        except InputError:
            pass
        assert time.perf_counter() - t0 < 30, line[:30]  # a cap on a hostile line, generous under load


def test_condition_row_grepped_out_of_describe_node():
    # `kubectl describe node 127.0.0.1|grep DiskPressure` (tests/data/incidents/ctrl-027)
    from clusterdoctor.observe.control.kubectl_text import parse_kubectl_text, sniff_kubectl_text

    row = (
        "  DiskPressure \t\tTrue \tTue, 18 Oct 2016 02:09:49 -0400 \tTue, 18 Oct 2016 02:05:38 -0400 "
        "\tKubeletHasDiskPressure \t\tkubelet has disk pressure\n"
    )
    assert sniff_kubectl_text(row.encode())
    (obj,) = parse_kubectl_text(row, "x").objects
    (c,) = obj.conditions
    assert (obj.kind, c.type, c.status, c.reason) == (
        "node",
        "DiskPressure",
        "True",
        "KubeletHasDiskPressure",
    )
    assert not sniff_kubectl_text(b"  DiskPressure is a word in a sentence\n")


# kubernetes-the-hard-way, before and after the fix (tests/data/incidents/ctrl-056, ok-ctrl-012)
CS_BAD = """\
NAME                 STATUS      MESSAGE                                                                                     ERROR
scheduler            Unhealthy   Get http://127.0.0.1:10251/healthz: dial tcp 127.0.0.1:10251: connect: connection refused
controller-manager   Unhealthy   Get http://127.0.0.1:10252/healthz: dial tcp 127.0.0.1:10252: connect: connection refused
etcd-0               Healthy     {"health":"true"}
"""
CS_OK = """\
NAME                 STATUS    MESSAGE             ERROR
scheduler            Healthy   ok
controller-manager   Healthy   ok
etcd-0               Healthy   {"health":"true"}
"""


def test_componentstatuses_rows_and_the_rule():
    from clusterdoctor.observe.control.kubectl_text import parse_kubectl_text, sniff_kubectl_text
    from clusterdoctor.rules.k8s_components import component_unhealthy
    from clusterdoctor.rules.registry import Observations, run_rules

    assert sniff_kubectl_text(CS_BAD.encode()) and sniff_kubectl_text(CS_OK.encode())
    bad = parse_kubectl_text(CS_BAD, "cs").components
    assert [(c.name, c.status) for c in bad] == [
        ("scheduler", "Unhealthy"),
        ("controller-manager", "Unhealthy"),
        ("etcd-0", "Healthy"),
    ]
    assert "connection refused" in bad[0].message + bad[0].error
    found, _, _ = run_rules(Observations({"kube_components": bad}), [component_unhealthy])
    assert sorted(f.subject for f in found) == ["controller-manager", "scheduler"]
    ok = parse_kubectl_text(CS_OK, "cs").components
    assert not run_rules(Observations({"kube_components": ok}), [component_unhealthy])[0]


def test_get_all_rows_with_the_kind_prefix():
    # `kubectl get all` output as pasted in github.com/kubernetes/community (tests/data/incidents/ctrl-051)
    from clusterdoctor.observe.control.kubectl_text import parse_kubectl_text

    text = (
        "NAME                                                  READY   STATUS    RESTARTS   AGE\n"
        "pod/kube-flannel-ds-kq47c                             0/1     CrashloopBackoff   0          5s\n"
    )
    (row,) = parse_kubectl_text(text, "x").pods
    assert (row.name, row.status) == ("kube-flannel-ds-kq47c", "CrashloopBackoff")


# github.com/kubernetes-sigs/sig-windows-tools/pull/112 (kubectl get nodes -o wide, command line on top)
GET_NODES_WIDE = """\
kubectl get nodes -o wide
NAME           STATUS   ROLES    AGE   VERSION   INTERNAL-IP   EXTERNAL-IP   OS-IMAGE                         KERNEL-VERSION     CONTAINER-RUNTIME
controller-0   Ready    master   19h   v1.19.3   10.240.0.10   <none>        Ubuntu 18.04.4 LTS               5.3.0-1028-azure   docker://19.3.13
worker-win-2   Ready    <none>   17h   v1.19.3   10.240.0.22   <none>        Windows Server 2019 Datacenter   10.0.17763.1397    containerd://1.4.1
"""


def test_get_nodes_wide_is_read() -> None:
    assert sniff_kubectl_text(GET_NODES_WIDE.encode())
    nodes = parse_kubectl_text(GET_NODES_WIDE).nodes
    assert [(n.name, n.status) for n in nodes] == [("controller-0", "Ready"), ("worker-win-2", "Ready")]
