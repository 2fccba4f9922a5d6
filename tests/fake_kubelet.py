"""A real gRPC pod-resources server (the kubelet's v1 API, from the repository's generated stubs) on a
unix socket, answering with the given allocations: for tests of the clients that read it."""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Allocation:
    """One container's devices (and exclusive CPUs) as the kubelet reports them."""

    namespace: str
    pod: str
    container: str
    gpus: list[str]
    cpus: list[int] = field(default_factory=list)
    resource: str = "nvidia.com/gpu"


def start_fake_kubelet(sock: str | Path, allocations: list[Allocation], allocatable_gpus: list[str]) -> Any:
    """Serve List and GetAllocatableResources on ``unix://sock``; returns the started grpc server
    (``server.stop(None)`` when done)."""
    import grpc

    from clusterdoctor.observe.node.podresources_v1 import api_pb2, api_pb2_grpc

    class Kubelet(api_pb2_grpc.PodResourcesListerServicer):
        def List(self, request, context):
            return api_pb2.ListPodResourcesResponse(
                pod_resources=[
                    api_pb2.PodResources(
                        name=a.pod,
                        namespace=a.namespace,
                        containers=[
                            api_pb2.ContainerResources(
                                name=a.container,
                                devices=[
                                    api_pb2.ContainerDevices(resource_name=a.resource, device_ids=a.gpus)
                                ],
                                cpu_ids=a.cpus,
                            )
                        ],
                    )
                    for a in allocations
                ]
            )

        def GetAllocatableResources(self, request, context):
            return api_pb2.AllocatableResourcesResponse(
                devices=[
                    api_pb2.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=allocatable_gpus)
                ]
                if allocatable_gpus
                else []
            )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(Kubelet(), server)
    server.add_insecure_port(f"unix://{sock}")
    server.start()
    return server
