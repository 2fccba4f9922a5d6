"""kube-scheduler extender: filter/prioritize on request bodies in the Kubernetes JSON format
(ExtenderArgs with v1.Pod and v1.NodeList, field names as in k8s.io/kube-scheduler extender/v1), over
real HTTP on 127.0.0.1, plus a 1,000-request load reporting p99 latency."""

from __future__ import annotations

import copy
import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from clusterdoctor.serve.extender import Extender, parse_quantity, run_extender, serve_in_thread


def node(name, free, model="NVIDIA-A100-SXM4-80GB", cpu="96", mem="768Gi", extra=None):
    ann = {
        "clusterdoctor.io/gpu-free-milli": ",".join(str(x) for x in free),
        "clusterdoctor.io/gpu-model": model,
    }
    ann.update(extra or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": model},
            "annotations": ann,
        },
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": {"cpu": cpu, "memory": mem, "nvidia.com/gpu": str(len(free)), "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": mem, "nvidia.com/gpu": str(len(free)), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "train-0",
        "namespace": "ml",
        "uid": "6b3f2a1c-0000-4000-8000-000000000001",
        "annotations": {"clusterdoctor.io/priority": "2"},
    },
    "spec": {
        "schedulerName": "default-scheduler",
        "priority": 1000,
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "resources": {
                    "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                    "limits": {"nvidia.com/gpu": "2"},
                },
            }
        ],
    },
    "status": {"phase": "Pending"},
}

NODES = {
    "apiVersion": "v1",
    "kind": "NodeList",
    "metadata": {"resourceVersion": "12345"},
    "items": [
        node("gpu-a", [1000] * 8),
        node("gpu-b", [0, 0, 0, 0, 0, 0, 1000, 1000]),
        node("gpu-c", [0] * 7 + [1000]),
        node("gpu-d", [1000] * 4, model="Tesla-T4", cpu="4"),
    ],
}
ARGS = {"pod": POD, "nodes": NODES}


def test_quantities():
    assert parse_quantity("500m") == 0.5 and parse_quantity("16Gi") == 16 * 2**30 and parse_quantity("2") == 2
    assert parse_quantity("1G") == 1e9


def test_filter_drops_nodes_that_cannot_host_with_reasons():
    res = Extender("tidal").filter(copy.deepcopy(ARGS))
    assert [n["metadata"]["name"] for n in res["nodes"]["items"]] == ["gpu-a", "gpu-b"]
    assert set(res["failedNodes"]) == {"gpu-c", "gpu-d"}
    assert "insufficient GPU" in res["failedNodes"]["gpu-c"] and "cpu" in res["failedNodes"]["gpu-d"]
    assert res["error"] == ""


def test_tidal_prefers_the_idle_nvlink_node_and_fgd_the_one_it_fragments_least():
    tidal = {h["host"]: h["score"] for h in Extender("tidal").prioritize(copy.deepcopy(ARGS))}
    assert tidal["gpu-a"] == 10 and tidal["gpu-a"] > tidal["gpu-b"] and tidal["gpu-c"] == 0
    assert all(0 <= s <= 10 for s in tidal.values())
    share = copy.deepcopy(ARGS)
    share["pod"]["metadata"]["annotations"]["clusterdoctor.io/gpu-milli"] = "500"
    share["pod"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    share["nodes"]["items"] = [node("half", [500] + [1000] * 7), node("empty", [1000] * 8)]
    fgd = {h["host"]: h["score"] for h in Extender("fgd").prioritize(share)}
    assert fgd["half"] > fgd["empty"]  # filling the half-used GPU removes a fragment


def test_model_constraint_and_node_cache_passthrough():
    args = copy.deepcopy(ARGS)
    args["pod"]["metadata"]["annotations"]["alibabacloud.com/gpu-card-model"] = "Tesla-T4"
    res = Extender("fgd").filter(args)
    assert "not in" in res["failedNodes"]["gpu-a"]
    res = Extender("fgd").filter({"pod": POD, "nodenames": ["x", "y"]})
    assert res["nodenames"] == ["x", "y"]


def _post(conn, path, body):
    data = json.dumps(body)
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, json.loads(r.read())


@pytest.fixture
def server():
    srv, _ = serve_in_thread("127.0.0.1", 0, "tidal")
    yield srv
    srv.shutdown()
    srv.server_close()


def test_http_verbs_and_bad_bodies(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=60)
    code, res = _post(conn, "/scheduler/filter", ARGS)
    assert code == 200 and len(res["nodes"]["items"]) == 2
    code, res = _post(conn, "/scheduler/prioritize", ARGS)
    assert code == 200 and {h["host"] for h in res} == {"gpu-a", "gpu-b", "gpu-c", "gpu-d"}
    code, res = _post(conn, "/scheduler/filter", {"nodes": NODES})
    assert code == 400 and "pod" in res["error"]
    conn.request("POST", "/scheduler/filter", body=b"{not json", headers={"Content-Length": "9"})
    r = conn.getresponse()
    assert r.status == 400 and "bad JSON" in json.loads(r.read())["error"]
    code, res = _post(conn, "/scheduler/bind", ARGS)
    assert code == 404
    conn.request("GET", "/healthz")
    assert json.loads(conn.getresponse().read())["policy"] == "tidal"


def test_1000_requests_under_load_report_p99(server, record_property):
    port = server.server_address[1]
    bodies = [json.dumps(ARGS).encode()]

    def worker(n):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        lat = []
        for i in range(n):
            verb = "filter" if i % 2 else "prioritize"
            t = time.perf_counter()
            conn.request("POST", f"/{verb}", body=bodies[0], headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            payload = json.loads(r.read())
            lat.append(time.perf_counter() - t)
            assert r.status == 200 and payload
        conn.close()
        return lat

    with ThreadPoolExecutor(8) as ex:
        lats = sorted(x for part in ex.map(worker, [125] * 8) for x in part)
    assert len(lats) == 1000
    p99 = lats[int(0.99 * len(lats)) - 1]
    record_property("extender_p99_ms", round(p99 * 1000, 2))
    print(f"extender 1000 requests, 8 clients: p50 {lats[500] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")


def test_run_extender_is_the_entry_point():
    assert callable(run_extender)
    with pytest.raises(ValueError):
        Extender("nope")
