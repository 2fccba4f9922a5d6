"""The pod-resources client against a real gRPC server serving the kubelet's published api.proto
(generated servicer) on a unix socket — v1, an old v1alpha1-only kubelet, and the failure modes."""

from __future__ import annotations

import importlib
import socket
import sys
from concurrent import futures
from pathlib import Path

import pytest

grpc = pytest.importorskip("grpc")

from clusterdoctor.observe.node.podresources import (  # noqa: E402
    PodResourcesUnavailable,
    is_gpu_resource,
    read_pod_resources,
)
from clusterdoctor.observe.node.podresources_v1 import api_pb2, api_pb2_grpc  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
GPU_A = "GPU-2f4f7d6e-0a4b-7c9e-3f5d-0c1b3b2a8e11"
GPU_B = "GPU-6a1e5b0c-91d3-2e8f-aa47-5c3d2b1e0f99"
GPU_C = "GPU-0d9c8b7a-6f5e-4d3c-2b1a-0f9e8d7c6b5a"


def _topo(*nodes: int) -> api_pb2.TopologyInfo:
    return api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n) for n in nodes])


def list_response() -> api_pb2.ListPodResourcesResponse:
    """Two training pods (one with two GPUs on NUMA node 0 and exclusive CPUs), one CPU-only pod."""
    return api_pb2.ListPodResourcesResponse(
        pod_resources=[
            api_pb2.PodResources(
                name="llama-worker-0",
                namespace="training",
                containers=[
                    api_pb2.ContainerResources(
                        name="trainer",
                        devices=[
                            api_pb2.ContainerDevices(
                                resource_name="nvidia.com/gpu", device_ids=[GPU_A, GPU_B], topology=_topo(0)
                            ),
                            api_pb2.ContainerDevices(
                                resource_name="rdma/hca_shared_devices_a",
                                device_ids=["hca0"],
                                topology=_topo(0),
                            ),
                        ],
                        cpu_ids=[3, 1, 2, 0],
                        memory=[
                            api_pb2.ContainerMemory(memory_type="memory", size=64 << 30, topology=_topo(0))
                        ],
                    ),
                    api_pb2.ContainerResources(name="log-shipper"),
                ],
            ),
            api_pb2.PodResources(
                name="notebook",
                namespace="research",
                containers=[
                    api_pb2.ContainerResources(
                        name="jupyter",
                        # time-slicing: replicas of one GPU are <uuid>::<n>
                        devices=[
                            api_pb2.ContainerDevices(
                                resource_name="nvidia.com/gpu", device_ids=[f"{GPU_C}::3"]
                            )
                        ],
                    )
                ],
            ),
        ]
    )


class Kubelet(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, allocatable: str = "ok") -> None:
        self.allocatable = allocatable
        self.calls: list[str] = []

    def List(self, request, context):
        self.calls.append("List")
        return list_response()

    def GetAllocatableResources(self, request, context):
        self.calls.append("GetAllocatableResources")
        if self.allocatable == "disabled":  # what a 1.21-1.22 kubelet answers with the gate off
            context.abort(grpc.StatusCode.UNKNOWN, "Pod Resources API GetAllocatableResources disabled")
        return api_pb2.AllocatableResourcesResponse(
            devices=[
                api_pb2.ContainerDevices(
                    resource_name="nvidia.com/gpu", device_ids=[GPU_A], topology=_topo(0)
                ),
                api_pb2.ContainerDevices(
                    resource_name="nvidia.com/gpu", device_ids=[GPU_B], topology=_topo(0)
                ),
                api_pb2.ContainerDevices(
                    resource_name="nvidia.com/gpu", device_ids=[GPU_C], topology=_topo(1)
                ),
            ],
            cpu_ids=list(range(16)),
        )


def short_socket(tmp_path: Path) -> str:
    # sun_path holds 107 bytes; pytest's tmp_path can be longer on some machines
    p = tmp_path / "kubelet.sock"
    if len(str(p)) > 100:
        pytest.skip(f"tmp path too long for a unix socket: {p}")
    return str(p)


def serve(servicer_adder, servicer, path: str):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer_adder(servicer, server)
    assert server.add_insecure_port(f"unix://{path}") != 0
    server.start()
    return server


@pytest.fixture
def kubelet(tmp_path):
    path = short_socket(tmp_path)
    servicer = Kubelet()
    server = serve(api_pb2_grpc.add_PodResourcesListerServicer_to_server, servicer, path)
    yield path, servicer
    server.stop(None)


def test_v1_list_and_allocatable(kubelet):
    path, servicer = kubelet
    pr = read_pod_resources(path, timeout_s=5)
    assert pr.api == "v1" and pr.warnings == []
    assert servicer.calls == ["List", "GetAllocatableResources"]
    trainer = pr.container("training", "llama-worker-0", "trainer")
    assert trainer is not None
    assert trainer.gpus() == [GPU_A, GPU_B]
    assert trainer.cpu_ids == (0, 1, 2, 3)
    assert trainer.devices[0].numa_nodes == (0,)
    assert trainer.memory == (("memory", 64 << 30, (0,)),)
    assert pr.container("training", "llama-worker-0", "log-shipper").gpus() == []
    # the replica suffix of a time-sliced GPU is dropped: the owner is found by the GPU's UUID
    owners = pr.gpu_owners()
    assert owners[GPU_C].label == "research/notebook/jupyter"
    assert owners[GPU_A].label == "training/llama-worker-0/trainer"
    assert pr.allocatable_gpus() == [GPU_A, GPU_B, GPU_C]
    assert pr.allocatable_cpus == tuple(range(16))
    assert pr.as_dict()["containers"][0]["devices"][1]["resource"] == "rdma/hca_shared_devices_a"


def test_allocatable_refused_is_a_warning(tmp_path):
    path = short_socket(tmp_path)
    server = serve(api_pb2_grpc.add_PodResourcesListerServicer_to_server, Kubelet("disabled"), path)
    try:
        pr = read_pod_resources(path, timeout_s=5)
    finally:
        server.stop(None)
    assert len(pr.containers) == 3
    assert pr.allocatable_gpus() is None
    assert len(pr.warnings) == 1
    assert "GetAllocatableResources failed" in pr.warnings[0] and "disabled" in pr.warnings[0]


def _compile_v1alpha1(tmp_path: Path):
    from grpc_tools import protoc

    src = REPO / "tests" / "data" / "podresources"
    out = tmp_path / "gen"
    pkg = out / "v1alpha1_gen"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    proto = pkg / "v1alpha1.proto"
    proto.write_bytes((src / "v1alpha1.proto").read_bytes())
    rc = protoc.main(["protoc", f"-I{out}", f"--python_out={out}", f"--grpc_python_out={out}", str(proto)])
    assert rc == 0
    sys.path.insert(0, str(out))
    try:
        return (
            importlib.import_module("v1alpha1_gen.v1alpha1_pb2"),
            importlib.import_module("v1alpha1_gen.v1alpha1_pb2_grpc"),
        )
    finally:
        sys.path.remove(str(out))


def test_old_kubelet_serving_only_v1alpha1(tmp_path):
    pytest.importorskip("grpc_tools")
    pb2, pb2_grpc = _compile_v1alpha1(tmp_path)

    class OldKubelet(pb2_grpc.PodResourcesListerServicer):
        def List(self, request, context):
            return pb2.ListPodResourcesResponse(
                pod_resources=[
                    pb2.PodResources(
                        name="bert-0",
                        namespace="nlp",
                        containers=[
                            pb2.ContainerResources(
                                name="worker",
                                devices=[
                                    pb2.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[GPU_B])
                                ],
                            )
                        ],
                    )
                ]
            )

    path = short_socket(tmp_path)
    server = serve(pb2_grpc.add_PodResourcesListerServicer_to_server, OldKubelet(), path)
    try:
        pr = read_pod_resources(path, timeout_s=5)
    finally:
        server.stop(None)
    assert pr.api == "v1alpha1"
    assert [c.label for c in pr.containers] == ["nlp/bert-0/worker"]
    assert pr.containers[0].gpus() == [GPU_B]
    assert pr.allocatable_gpus() is None
    assert "v1alpha1" in pr.warnings[0] and "older than 1.20" in pr.warnings[0]


def test_missing_socket(tmp_path):
    with pytest.raises(PodResourcesUnavailable, match="no kubelet pod-resources socket"):
        read_pod_resources(str(tmp_path / "kubelet.sock"))


def test_not_a_socket(tmp_path):
    p = tmp_path / "kubelet.sock"
    p.write_text("")
    with pytest.raises(PodResourcesUnavailable, match="not a unix socket"):
        read_pod_resources(str(p))


def test_nobody_listening(tmp_path):
    path = short_socket(tmp_path)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)  # a stale socket file: the kubelet died and left it
    s.close()
    with pytest.raises(PodResourcesUnavailable, match="unreachable|timed out"):
        read_pod_resources(path, timeout_s=2)


def test_gpu_resource_names():
    assert is_gpu_resource("nvidia.com/gpu")
    assert is_gpu_resource("nvidia.com/mig-1g.10gb")
    assert is_gpu_resource("amd.com/gpu")
    assert is_gpu_resource("nvidia.com/gpu.shared")
    assert not is_gpu_resource("rdma/hca_shared_devices_a")
    assert not is_gpu_resource("hugepages-1Gi")


def test_committed_code_is_what_protoc_generates(tmp_path):
    """Regenerating from the vendored api.proto gives the committed files byte for byte."""
    pytest.importorskip("grpc_tools")
    from clusterdoctor.observe.node.podresources_v1 import _generate

    written = _generate.generate(tmp_path)
    for p in written:
        committed = _generate.PACKAGE_DIR / p.name
        assert p.read_bytes() == committed.read_bytes(), f"{committed} is stale: run make podresources-proto"


def test_vendored_proto_is_the_published_one():
    import hashlib

    from clusterdoctor.observe.node.podresources_v1 import _generate

    data = (_generate.PACKAGE_DIR / "api.proto").read_bytes()
    assert (
        hashlib.sha256(data).hexdigest() == "a61f7013802cfdb9ccf5b3976fc5f6331f03e83f9eda77c4448074fd75de77cf"
    )
