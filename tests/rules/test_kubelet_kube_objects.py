"""KUBELET004-006 on kubectl output pasted in public threads: pods not running are symptoms (folded into
the cause beside them), node conditions name their cause, a GPU node without nvidia.com/gpu is named;
healthy listings give nothing at warning or above."""

from __future__ import annotations

from clusterdoctor import diagnosis
from clusterdoctor.model import Severity
from clusterdoctor.observe.control.kubectl_text import parse_kubectl_text
from clusterdoctor.rules.kubelet import gpu_not_advertised, node_not_ready, pods_not_running
from clusterdoctor.rules.registry import Observations, run_rules
from tests.observe.control.test_kubectl_text import DESCRIBE_NODE_TABS, GET_NODES, GET_PODS

NOW = 1_800_000_000.0


def run(text: str, rules=(pods_not_running, node_not_ready, gpu_not_advertised)):
    res = parse_kubectl_text(text, "x.txt")
    obs = Observations({"kube_pods": res.pods, "kube_nodes": res.nodes, "kube_objects": res.objects})
    findings, _, _ = run_rules(obs, list(rules))
    return findings


def test_pods_not_running_are_symptoms_named_by_pod():
    fs = run(GET_PODS)
    assert {f.subject for f in fs} == {
        "pod deepseek-coder-7b-instruct-688778dd76-wzwmg",
        "pod deepseek-coder-7b-kvcache-7c984cdff8-xq5pk",
    }
    assert all(f.role == "symptom" and f.rule == "KUBELET004" for f in fs)


def test_evicted_pod_names_eviction():
    (f,) = run("Status:       Failed\nReason:       Evicted\n")  # github.com/cloud-ark/kubeplus/issues/1382
    assert f.causes == ("kubelet.eviction",)


def test_not_ready_node_and_its_condition():
    (f,) = run(GET_NODES)
    assert f.subject == "node k8s-node1" and f.role == "symptom"
    (g,) = run(DESCRIBE_NODE_TABS)
    assert (
        g.subject == "node kube-01"
        and "KubeletNotReady" in g.summary
        and "cni config uninitialized" in g.summary
    )


def test_describe_node_condition_message_is_the_cause(tmp_path):
    p = tmp_path / "node.txt"
    p.write_text(DESCRIBE_NODE_TABS)
    obs = diagnosis.new_observations(clock=lambda: NOW)
    d = diagnosis.run(obs, diagnosis.load_sources(obs, [p]))
    first = d.findings[0]
    assert first.rule == "KUBELET103" and first.subject == "node kube-01"
    assert any("KUBELET005" in e.description for e in first.evidence)


def test_pressure_condition_names_eviction():
    text = (  # github.com/k3d-io/k3d/issues/18 (describe node, DiskPressure True)
        "Name:               6c2ec9d3c5e7\n"
        "Taints:             node.kubernetes.io/disk-pressure:NoSchedule\n"
        "Unschedulable:      false\n"
        "Conditions:\n"
        "  Type             Status  LastHeartbeatTime                 LastTransitionTime                Reason     "
        "                  Message\n"
        "  ----             ------  -----------------                 ------------------                ------     "
        "                  -------\n"
        "  MemoryPressure   False   Sun, 28 Apr 2019 17:49:14 +0800   Sun, 28 Apr 2019 17:48:04 +0800   "
        "KubeletHasSufficientMemory   kubelet has sufficient memory available\n"
        "  DiskPressure     True    Sun, 28 Apr 2019 17:49:14 +0800   Sun, 28 Apr 2019 17:49:14 +0800   "
        "KubeletHasDiskPressure       kubelet has disk pressure\n"
    )
    fs = run(text)
    (f,) = [f for f in fs if f.causes]
    assert (
        f.causes == ("kubelet.eviction",) and "DiskPressure" in f.summary and f.severity == Severity.WARNING
    )


def test_gpu_node_without_the_resource():
    text = (
        "Name:               gpu-node-1\n"
        "Roles:              <none>\n"
        "Labels:             nvidia.com/gpu.present=true\n"
        "                    nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n"
        "Capacity:\n"
        "  cpu:                192\n"
        "  memory:             2113389548Ki\n"
        "  pods:               110\n"
        "Allocatable:\n"
        "  cpu:                191\n"
        "  pods:               110\n"
    )  # describe.go layout; labels as gpu-feature-discovery sets them
    (f,) = run(text, (gpu_not_advertised,))
    assert f.causes == ("k8s.gpu-not-advertised",) and f.subject == "node gpu-node-1"
    with_gpu = text.replace(
        "  pods:               110\nAllocatable",
        "  nvidia.com/gpu:     8\n  pods:               110\nAllocatable",
    )
    with_gpu += "  nvidia.com/gpu:     8\n"
    assert run(with_gpu, (gpu_not_advertised,)) == []
    no_capacity = text.split("Capacity:")[0]  # the section was not pasted: not judged
    assert run(no_capacity, (gpu_not_advertised,)) == []


def test_healthy_listings_are_quiet():
    healthy = (
        "NAME                                READY   STATUS    RESTARTS   AGE\n"
        "deepseek-coder-7b-kvcache-etcd-0    1/1     Running   0          65m\n"
        "\n"
        "NAME         STATUS     ROLES     AGE       VERSION\n"
        "k8s-master   Ready      master    27m       v1.10.0\n"
    )
    assert run(healthy) == []


def test_a_pod_or_node_just_starting_is_not_judged():
    text = (
        "NAME     READY   STATUS              RESTARTS   AGE\n"
        "web-0    0/1     ContainerCreating   0          20s\n"
        "web-1    0/1     CrashLoopBackOff    3          90s\n"
        "\n"
        "NAME     STATUS     ROLES    AGE   VERSION\n"
        "node-9   NotReady   <none>   45s   v1.29.1\n"
    )
    assert [f.subject for f in run(text)] == ["pod web-1"]


# kubectl describe node as pasted in github.com/NVIDIA/k8s-device-plugin (tests/data/incidents/gpu-026)
CAP_ALLOC = """\
Capacity:
  cpu:                        128
  ephemeral-storage:          7441183616Ki
  hugepages-1Gi:              0
  hugepages-2Mi:              8448Mi
  memory:                     2113276288Ki
  nvidia.com/gpu:             8
  pods:                       110
Allocatable:
  cpu:                        128
  ephemeral-storage:          6857794809152
  hugepages-1Gi:              0
  hugepages-2Mi:              8448Mi
  memory:                     2062682496Ki
  nvidia.com/gpu:             7       <=========== here
  pods:                       110
"""


def test_fewer_gpus_allocatable_than_capacity_names_the_device_plugin():
    from clusterdoctor.rules.kubelet import device_plugin_unhealthy

    (f,) = run(CAP_ALLOC, rules=(device_plugin_unhealthy,))
    assert f.rule == "KUBELET007" and "gpu.device-plugin" in f.causes
    assert "capacity 8, allocatable 7" in f.summary
    # memory and ephemeral storage below capacity are the kubelet's reservations: quiet
    assert not run(CAP_ALLOC.replace("7       <=========== here", "8"), rules=(device_plugin_unhealthy,))


def test_legacy_gpu_resource_without_nvidia_com_gpu_is_a_gpu_node_not_advertised():
    # kubectl describe node of github.com/NVIDIA/k8s-device-plugin/issues/68 (tests/data/incidents/ctrl-019)
    text = (
        "Capacity:\n alpha.kubernetes.io/nvidia-gpu:  1\n cpu:                             4\n"
        " pods:                            110\nAllocatable:\n alpha.kubernetes.io/nvidia-gpu:  1\n"
        " cpu:                             4\n pods:                            110\n"
    )
    (f,) = run(text, rules=(gpu_not_advertised,))
    assert f.rule == "KUBELET006" and "alpha.kubernetes.io/nvidia-gpu=1" in f.summary
    assert not run(text.replace("nvidia-gpu:  1", "nvidia-gpu:  0"), rules=(gpu_not_advertised,))


def test_a_crashing_device_plugin_pod_means_no_gpu_is_advertised():
    # github.com/NVIDIA/k8s-device-plugin/issues/13 (corpus case ctrl-055)
    text = (
        "NAME                                   READY     STATUS             RESTARTS   AGE\n"
        "nvidia-device-plugin-daemonset-csjxw   0/1       CrashLoopBackOff   12         39m\n"
        "web-0                                  0/1       CrashLoopBackOff   12         39m\n"
    )
    fs = {f.subject: f for f in run(text)}
    assert "k8s.gpu-not-advertised" in fs["pod nvidia-device-plugin-daemonset-csjxw"].causes
    assert fs["pod web-0"].causes == ()
