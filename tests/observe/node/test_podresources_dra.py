"""DRA claims and MIG instances in the pod-resources reply: messages built with the classes generated
from the kubelet's api.proto, served by a real gRPC server on a unix socket. A GPU allocated through a
ResourceClaim is allocated, never free; allocated + free == allocatable, MIG devices included."""

from __future__ import annotations

import pytest

grpc = pytest.importorskip("grpc")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clusterdoctor.observe.node.podresources import (  # noqa: E402
    PodResources,
    containers_from_list,
    is_gpu_resource,
    is_mig_device,
    read_pod_resources,
)
from clusterdoctor.observe.node.podresources_v1 import api_pb2, api_pb2_grpc  # noqa: E402
from clusterdoctor.serve.kube_sources import kube_metric_lines  # noqa: E402

from .test_podresources import serve, short_socket  # noqa: E402

GPU_A = "GPU-2f4f7d6e-0a4b-7c9e-3f5d-0c1b3b2a8e11"
MIG_1 = "MIG-4c1a9d2e-77b0-5f3e-9a41-2d6c8e0b1f21"
MIG_2 = "MIG-9b2e0f41-1c3d-5a6b-8e7f-0a1b2c3d4e5f"
MIG_3 = "MIG-0e1d2c3b-4a59-6877-9695-a4b3c2d1e0f9"


def dra(claim: str, *devices: str, driver: str = "gpu.nvidia.com") -> api_pb2.DynamicResource:
    return api_pb2.DynamicResource(
        claim_name=claim,
        claim_namespace="training",
        claim_resources=[
            api_pb2.ClaimResource(
                driver_name=driver,
                pool_name="node-7",
                device_name=d,
                cdi_devices=[api_pb2.CDIDevice(name=f"k8s.gpu.nvidia.com/device={d}")],
            )
            for d in devices
        ],
    )


def list_response() -> api_pb2.ListPodResourcesResponse:
    """A DRA pod (two GPUs by one claim, shared by two containers), a MIG pod, a NIC claim."""
    return api_pb2.ListPodResourcesResponse(
        pod_resources=[
            api_pb2.PodResources(
                name="dra-trainer",
                namespace="training",
                containers=[
                    api_pb2.ContainerResources(
                        name="main", dynamic_resources=[dra("gpus", "gpu-0", "gpu-1")]
                    ),
                    api_pb2.ContainerResources(name="sidecar", dynamic_resources=[dra("gpus", "gpu-0")]),
                    api_pb2.ContainerResources(
                        name="net",
                        dynamic_resources=[dra("nic", "eth1", driver="sriovnetwork.k8snetworkplumbingwg.io")],
                    ),
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


def allocatable() -> api_pb2.AllocatableResourcesResponse:
    """What the device plugin offers: a whole GPU and three MIG instances (DRA GPUs are not listed)."""
    return api_pb2.AllocatableResourcesResponse(
        devices=[
            api_pb2.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[GPU_A]),
            api_pb2.ContainerDevices(resource_name="nvidia.com/mig-1g.10gb", device_ids=[MIG_1, MIG_2]),
            api_pb2.ContainerDevices(resource_name="nvidia.com/mig-2g.20gb", device_ids=[MIG_3]),
        ],
        cpu_ids=list(range(8)),
    )


class Kubelet(api_pb2_grpc.PodResourcesListerServicer):
    def List(self, request, context):
        return list_response()

    def GetAllocatableResources(self, request, context):
        return allocatable()


@pytest.fixture
def kubelet(tmp_path):
    path = short_socket(tmp_path)
    server = serve(api_pb2_grpc.add_PodResourcesListerServicer_to_server, Kubelet(), path)
    yield path
    server.stop(None)


def test_dra_claims_are_read_and_their_gpus_allocated(kubelet):
    pr = read_pod_resources(kubelet, timeout_s=5)
    main = pr.container("training", "dra-trainer", "main")
    assert main is not None and main.gpus() == ["node-7/gpu-0", "node-7/gpu-1"]
    assert main.claims[0].name == "gpus" and main.claims[0].devices[0][:3] == (
        "gpu.nvidia.com",
        "node-7",
        "gpu-0",
    )
    assert main.claims[0].devices[0][3] == ("k8s.gpu.nvidia.com/device=gpu-0",)
    net = pr.container("training", "dra-trainer", "net")
    assert net.gpus() == [] and net.claims[0].devices[0][0].startswith("sriov")  # a NIC is no GPU
    c = pr.gpu_counts()
    assert c is not None
    assert c.allocated == {"node-7/gpu-0", "node-7/gpu-1", MIG_1}
    assert c.free == {GPU_A, MIG_2, MIG_3}  # DRA GPUs never free
    assert len(c.allocated) + len(c.free) == len(c.allocatable) == 6
    assert c.mig == {MIG_1, MIG_2, MIG_3}
    assert pr.as_dict()["containers"][0]["claims"][0]["devices"][1]["device"] == "gpu-1"


def test_agent_metrics_count_dra_and_mig(kubelet):
    """What the agent exports (and the extender reads): allocated + free == allocatable."""
    pr = read_pod_resources(kubelet, timeout_s=5)
    lines = kube_metric_lines({"pod_resources": pr, "kube_context": None}, True)
    state = {
        ln.split('"')[1]: int(ln.rsplit(" ", 1)[1])
        for ln in lines
        if ln.startswith("clusterdoctor_node_gpus{")
    }
    assert state == {"allocated": 3, "allocatable": 6, "free": 3}
    assert any('resource="gpu.nvidia.com"' in ln and 'pod="dra-trainer"' in ln for ln in lines)


def test_names():
    assert is_gpu_resource("gpu.nvidia.com") and not is_gpu_resource("sriovnetwork.k8snetworkplumbingwg.io")
    assert is_mig_device("nvidia.com/mig-3g.40gb", MIG_1) and not is_mig_device("nvidia.com/gpu", GPU_A)
    assert is_mig_device("gpu.nvidia.com", "gpu-0-mig-1g10gb-0") and not is_mig_device(
        "gpu.nvidia.com", "gpu-0"
    )


ids = st.sampled_from([GPU_A, MIG_1, MIG_2, MIG_3, f"{GPU_A}::1", "gpu-0", "gpu-1", "gpu-2"])


@settings(max_examples=200, deadline=None)
@given(
    listed=st.lists(
        st.tuples(st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]), ids), max_size=6
    ),
    held=st.lists(
        st.tuples(
            st.sampled_from(["plugin", "dra"]),
            st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]),
            ids,
        ),
        max_size=6,
    ),
)
def test_allocated_plus_free_is_allocatable(listed, held):
    """Whatever the kubelet lists and whoever holds what (also a device it no longer lists)."""
    containers = []
    for i, (how, res, dev) in enumerate(held):
        if how == "dra":
            c = api_pb2.ContainerResources(name=f"c{i}", dynamic_resources=[dra(f"claim{i}", dev.lower())])
        else:
            c = api_pb2.ContainerResources(
                name=f"c{i}", devices=[api_pb2.ContainerDevices(resource_name=res, device_ids=[dev])]
            )
        containers.append(c)
    resp = api_pb2.ListPodResourcesResponse(
        pod_resources=[api_pb2.PodResources(name="p", namespace="ns", containers=containers)]
    )
    alloc = api_pb2.AllocatableResourcesResponse(
        devices=[api_pb2.ContainerDevices(resource_name=r, device_ids=[d]) for r, d in listed]
    )
    from clusterdoctor.observe.node.podresources import _device

    pr = PodResources("s", "v1", containers_from_list(resp), [_device(d) for d in alloc.devices])
    c = pr.gpu_counts()
    assert c is not None
    assert c.allocated <= c.allocatable
    assert len(c.allocated) + len(c.free) == len(c.allocatable) == len(pr.allocatable_gpus())
    assert len(c.allocated) == len(pr.gpu_owners())
