"""Kubelet rules on the real pod lists, startup-tracker log and CNI/sandbox timeout excerpts."""

from __future__ import annotations

from clusterdoctor.model import Severity
from clusterdoctor.rules import kubelet
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, Observations
from tests.conftest import shared_fixture
from tests.rules.test_etcd_log_rules import obs_of


def test_sections():
    for r in (kubelet.pod_start_slow, kubelet.cni_cri_timeouts):
        assert set(REQUIRED_SECTIONS) <= set(r.sections())


def test_aks_daemonsets_slow_without_pulls():
    obs = obs_of(shared_fixture("ctrl/kubelet_pod_startup_latency_tracker_aks_eks.log"))
    (f,) = kubelet.pod_start_slow.fn(obs)
    # six AKS daemonset pods 46-58 s (no image pull), the two EKS pods below 30 s
    assert f.summary.startswith("6 of 8 pods")
    assert f.subject == "kube-system/azure-ip-masq-agent-nqw99"
    assert "without image pulls" in f.summary
    assert f.severity == Severity.WARNING


def test_minikube_135_slow_starts_cause_unknown():
    obs = obs_of(shared_fixture("ctrl/app/pods/pods_kubelet_podlist_k8s1.35_minikube.json"))
    (f,) = kubelet.pod_start_slow.fn(obs)
    assert f.summary.startswith("8 of 20 pods")  # 24 pods, 4 static
    assert f.subject == "scraper/e2e-scraper-5f97dc94d8-vkcjl"
    assert "No CNI/CRI timeout" in f.summary and f.confidence < 0.7


def test_minikube_131_no_finding():
    obs = obs_of(shared_fixture("ctrl/app/pods/pods_kubelet_podlist_k8s1.31_minikube.json"))
    assert list(kubelet.pod_start_slow.fn(obs)) == []


def test_cni_sandbox_timeouts_point_at_apiserver():
    obs = obs_of(shared_fixture("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt"))
    (f,) = kubelet.cni_cri_timeouts.fn(obs)
    assert f.severity == Severity.CRITICAL  # FailedCreatePodSandBox present
    assert "API server" in f.summary
    kinds = {e.description.split(" ")[0] for e in f.evidence}
    assert {"cni.timeout", "sandbox.create_failed", "sandbox.stop_failed"} <= kinds


def test_slow_pods_with_timeouts_become_critical():
    obs = obs_of(
        shared_fixture("ctrl/kubelet_pod_startup_latency_tracker_aks_eks.log"),
        shared_fixture("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt"),
    )
    (f,) = kubelet.pod_start_slow.fn(obs)
    assert f.severity == Severity.CRITICAL and "KUBELET002" in f.summary


def test_static_pods_ignored():
    obs = Observations()
    obs.put(
        "pod_starts",
        [
            p
            for p in obs_of(shared_fixture("ctrl/app/pods/pods_kubelet_podlist_k8s1.35_minikube.json")).get(
                "pod_starts"
            )
            if p.static
        ],
    )
    assert list(kubelet.pod_start_slow.fn(obs)) == []
