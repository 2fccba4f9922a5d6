"""Pod start phases from real PodList JSON (kubelet /pods, same schema as kubectl get pods -o json)."""

from __future__ import annotations

import calendar
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.kube import load_pods, parse_pods, pod_starts_from_events, sniff_pods
from clusterdoctor.observe.control.logs import parse_logs
from tests.conftest import shared_fixture

D = "ctrl/app/pods/"


def t(s):
    return calendar.timegm(
        tuple(int(x) for x in s.replace("T", "-").replace(":", "-").rstrip("Z").split("-")) + (0, 0, 0)
    )


def test_135_pod_phases():
    pods = {
        p.name: p
        for p in parse_pods(shared_fixture(D + "pods_kubelet_podlist_k8s1.35_minikube.json").read_bytes())
    }
    assert len(pods) == 24
    sc = pods["e2e-scraper-5f97dc94d8-vkcjl"]
    # created 10:12:51, PodScheduled 10:12:51, PodReadyToStartContainers 10:14:08, started 10:14:08
    assert sc.created == t("2026-06-26T10:12:51Z")
    assert sc.schedule_s == 0 and sc.sandbox_s == 77 and sc.start_s == 77
    assert sc.ready == t("2026-06-26T10:14:09Z")
    # static pods have no creationTimestamp: measured from startTime, flagged static
    assert pods["etcd-datagen-1-35"].static and not sc.static
    # restarted container: first start no longer known
    assert pods["e2e-container-creating"].restarts == 2 and pods["e2e-container-creating"].start_s is None
    # a False condition is not a transition time: failed job pods have PodReadyToStartContainers=False
    assert pods["e2e-failjob-64h4g"].sandbox_ready is None
    assert pods["e2e-failjob-64h4g"].start_s == t("2026-06-26T10:14:03Z") - t("2026-06-26T10:12:51Z")
    slow = sorted(p.name for p in pods.values() if not p.static and p.start_s and p.start_s > 30)
    assert slow == sorted(
        [
            "e2e-scraper-5f97dc94d8-vkcjl",
            "e2e-statefulset-0",
            "e2e-deployment-79967c5968-8bnn8",
            "e2e-deployment-79967c5968-zjslc",
            "e2e-daemonset-kb65b",
            "e2e-failjob-64h4g",
            "e2e-failjob-4kj9v",
            "e2e-cronjob-29707813-dhlr2",
        ]
    )


def test_131_no_slow_start():
    pods = parse_pods(shared_fixture(D + "pods_kubelet_podlist_k8s1.31_minikube.json").read_text())
    assert len(pods) == 23
    starts = [p.start_s for p in pods if not p.static and p.start_s is not None]
    assert starts and max(starts) < 30
    ss0 = next(p for p in pods if p.name == "e2e-statefulset-0")
    assert ss0.schedule_s == 8  # created 19:14:18, scheduled 19:14:26


def test_pod_starts_from_tracker_log():
    p = shared_fixture("ctrl/kubelet_pod_startup_latency_tracker_aks_eks.log")
    starts = pod_starts_from_events(parse_logs(p.read_bytes()).events)
    assert len(starts) == 8 and all(s.excludes_pulls for s in starts)
    assert starts[-1].start_s == pytest.approx(2.471963941)


def test_single_pod_and_errors():
    d = json.loads(shared_fixture(D + "pods_kubelet_podlist_k8s1.31_minikube.json").read_text())
    # `kubectl get pod NAME -o json` is one item with kind/apiVersion set
    one = parse_pods(json.dumps(dict(d["items"][0], kind="Pod", apiVersion="v1")))
    assert len(one) == 1
    for bad in ("", "[]", '{"kind":"Node"}', "{"):
        with pytest.raises(InputError):
            parse_pods(bad)


def test_sniff_load():
    p = shared_fixture(D + "pods_kubelet_podlist_k8s1.35_minikube.json")
    assert sniff_pods(p.read_bytes()[:65536])
    assert len(load_pods(p)["pod_starts"]) == 24


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_fuzz(data):
    base = shared_fixture(D + "pods_kubelet_podlist_k8s1.31_minikube.json").read_text()
    cut = data.draw(st.integers(0, len(base)))
    text = base[:cut] + data.draw(st.text(max_size=20)) + base[cut + data.draw(st.integers(0, 100)) :]
    try:
        parse_pods(text)
    except InputError:
        pass
