"""DRA and MIG allocations from the kubelet to the extender (issue 21 item 5): a real pod-resources gRPC
server (messages from the generated api.proto classes) read by the agent's code, its node_gpus series
served by a Prometheus HTTP stand-in, read by the extender's signals: a GPU held through a
ResourceClaim is never offered, and MIG instances are never offered as whole GPUs."""

from __future__ import annotations

import json

import pytest

grpc = pytest.importorskip("grpc")

from clusterdoctor.observe.node.podresources import read_pod_resources  # noqa: E402
from clusterdoctor.observe.node.podresources_v1 import api_pb2, api_pb2_grpc  # noqa: E402
from clusterdoctor.serve import extender as E  # noqa: E402
from clusterdoctor.serve.kube_sources import kube_metric_lines  # noqa: E402
from clusterdoctor.serve.signals import PrometheusSignals  # noqa: E402
from tests.hostile.test_r25_servers import HostilePrometheus, vector  # noqa: E402
from tests.observe.node.test_podresources import serve, short_socket  # noqa: E402
from tests.observe.node.test_podresources_dra import GPU_A, MIG_1, MIG_2, MIG_3, dra  # noqa: E402

GPU_B = "GPU-6a1e5b0c-91d3-2e8f-aa47-5c3d2b1e0f99"


class Kubelet(api_pb2_grpc.PodResourcesListerServicer):
    """Two whole GPUs by the device plugin (one held), two GPUs held through DRA, three MIG
    instances of a fifth GPU (one held)."""

    def List(self, request, context):
        return api_pb2.ListPodResourcesResponse(
            pod_resources=[
                api_pb2.PodResources(
                    name="dra-trainer",
                    namespace="training",
                    containers=[
                        api_pb2.ContainerResources(
                            name="main", dynamic_resources=[dra("g", "gpu-2", "gpu-3")]
                        )
                    ],
                ),
                api_pb2.PodResources(
                    name="plugin-trainer",
                    namespace="training",
                    containers=[
                        api_pb2.ContainerResources(
                            name="main",
                            devices=[
                                api_pb2.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[GPU_A])
                            ],
                        )
                    ],
                ),
                api_pb2.PodResources(
                    name="inference",
                    namespace="serving",
                    containers=[
                        api_pb2.ContainerResources(
                            name="server",
                            devices=[
                                api_pb2.ContainerDevices(
                                    resource_name="nvidia.com/mig-1g.10gb", device_ids=[MIG_1]
                                )
                            ],
                        )
                    ],
                ),
            ]
        )

    def GetAllocatableResources(self, request, context):
        return api_pb2.AllocatableResourcesResponse(
            devices=[
                api_pb2.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[GPU_A, GPU_B]),
                api_pb2.ContainerDevices(
                    resource_name="nvidia.com/mig-1g.10gb", device_ids=[MIG_1, MIG_2, MIG_3]
                ),
            ]
        )


def gpu_series(tmp_path) -> list:
    path = short_socket(tmp_path)
    server = serve(api_pb2_grpc.add_PodResourcesListerServicer_to_server, Kubelet(), path)
    try:
        pr = read_pod_resources(path, timeout_s=5)
    finally:
        server.stop(None)
    out = []
    for ln in kube_metric_lines({"pod_resources": pr, "kube_context": None}, True):
        if ln.startswith("clusterdoctor_node_gpus{"):
            out.append(({"node": "node-7", "state": ln.split('"')[1]}, int(ln.rsplit(" ", 1)[1])))
    return out


def node(gpus: str, mig: str | None) -> dict:
    alloc = {"nvidia.com/gpu": gpus, "cpu": "96", "memory": "1Ti"}
    if mig is not None:
        alloc["nvidia.com/mig-1g.10gb"] = mig
    return {"metadata": {"name": "node-7"}, "status": {"allocatable": alloc}}


def pod(n: int) -> dict:
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": str(n)}}}]},
    }


def test_dra_and_mig_allocations_reach_the_extender(tmp_path):
    series = gpu_series(tmp_path)
    # allocatable: 2 plugin GPUs + 2 DRA GPUs + 3 MIG instances; allocated: 1 + 2 + 1
    assert dict((m["state"], v) for m, v in series) == {"allocatable": 7, "allocated": 4, "free": 3}
    prom = HostilePrometheus()
    prom.mode = "bad"  # every query gets `answer`; each reads its own series
    prom.answer = vector(series)
    sig = PrometheusSignals(prom.url, timeout_s=2, ttl_s=3600)
    try:
        sig.start()
        assert sig.error is None
        ext = E.Extender("tidal", sig)
        # the node object: 4 whole GPUs and 3 MIG instances. The agent's 3 free devices less the 3 MIG
        # instances leave 0 whole GPUs sure to be free (GPU_B is: it under-offers, never over-offers)
        res = ext.filter({"pod": pod(1), "nodes": {"items": [node("4", "3")]}})
        assert res["failedNodes"]["node-7"].startswith("insufficient GPU")
        # without MIG on the node the same counts offer all 3 free devices as whole GPUs
        res = ext.filter({"pod": pod(3), "nodes": {"items": [node("8", None)]}})
        assert [n["metadata"]["name"] for n in res["nodes"]["items"]] == ["node-7"]
        res = ext.filter({"pod": pod(4), "nodes": {"items": [node("8", None)]}})
        assert "node-7" in res["failedNodes"]  # 4 held (2 through DRA): never free
    finally:
        sig.stop()
        prom.close()


def test_mig_instances_are_not_whole_gpus():
    """Signals say 5 free devices on a node with 2 MIG instances: at most 3 whole GPUs offered."""
    samples = [
        ({"node": "node-7", "state": "allocatable"}, 8),
        ({"node": "node-7", "state": "allocated"}, 3),
        ({"node": "node-7", "state": "free"}, 5),
    ]
    prom = HostilePrometheus()
    prom.mode = "bad"
    prom.answer = vector(samples)
    sig = PrometheusSignals(prom.url, timeout_s=2, ttl_s=3600)
    try:
        sig.start()
        ext = E.Extender("tidal", sig)
        items = {"items": [node("6", "2")]}
        assert ext.filter({"pod": pod(3), "nodes": items})["nodes"]["items"]
        why = ext.filter({"pod": pod(4), "nodes": items})["failedNodes"]["node-7"]
        assert why.startswith("insufficient GPU: 3 GPU(s)"), why
        bad = json.loads(json.dumps(node("6", "2")).replace('"2"', '"-1"'))
        assert (
            "invalid node object"
            in ext.filter({"pod": pod(1), "nodes": {"items": [bad]}})["failedNodes"]["node-7"]
        )
    finally:
        sig.stop()
        prom.close()
