"""The kubelet pod-resources API (gRPC over a unix socket): which pod and container holds which GPU
and which exclusive CPUs on this node.

``v1`` ``List`` gives every pod's containers with their devices (resource name, device IDs — GPU
UUIDs for the NVIDIA device plugin — and the devices' NUMA nodes), exclusive CPU IDs (static CPU
manager policy) and memory; ``GetAllocatableResources`` gives what the node offers. The code is
generated from the kubelet's published ``api.proto`` (``podresources_v1/SOURCES.md``).

Degrades instead of failing, so the rest of a report still comes out:

- no socket, or nothing listening → :class:`PodResourcesUnavailable` with the reason;
- a kubelet that serves only ``v1alpha1`` (Kubernetes 1.13–1.19): its ``List`` reply has the same
  field numbers as v1's subset (pod name/namespace, container name, devices), so it is decoded with
  the v1 messages and a warning says CPUs, NUMA nodes and allocatable resources are missing;
- ``GetAllocatableResources`` refused (feature gate off before 1.23, or UNIMPLEMENTED) → a warning.

DRA (``ContainerResources.dynamic_resources``, Kubernetes 1.27+): each ResourceClaim's devices come
as :class:`ClaimAlloc` and, for a GPU driver (``gpu.nvidia.com``, …), also as a :class:`DeviceAlloc`
with ``resource`` = the driver and ID ``<pool>/<device>`` (the NVIDIA driver names a full GPU
``gpu-<minor>``), so every reader of ``devices`` counts them allocated. ``GetAllocatableResources``
lists device-plugin devices only, so :meth:`PodResources.allocatable_gpus` adds every allocated GPU
device it does not list (DRA devices, a device the plugin no longer reports): allocated + free ==
allocatable always. The unit is the device as allocated: a whole GPU, a MIG instance
(``nvidia.com/mig-*``, or a DRA MIG device), a time-sliced GPU once whatever its replicas.

``grpcio`` is an optional dependency (``pip install 'clusterdoctor[k8s]'``); it is imported here only.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_SOCKET",
    "ClaimAlloc",
    "ContainerAlloc",
    "DeviceAlloc",
    "GpuCounts",
    "PodResources",
    "PodResourcesUnavailable",
    "is_gpu_driver",
    "is_gpu_resource",
    "is_mig_device",
    "read_pod_resources",
]

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
# kubelet pkg/kubelet/apis/podresources: DefaultMaxMsgSize = 1024 * 1024 * 16
MAX_MESSAGE_BYTES = 16 << 20
V1_LIST = "/v1.PodResourcesLister/List"
V1ALPHA1_LIST = "/v1alpha1.PodResourcesLister/List"


class PodResourcesUnavailable(Exception):
    """The pod-resources API could not be read; ``str(e)`` says why in one line."""


def is_gpu_resource(name: str) -> bool:
    """Extended resources that are whole or partitioned GPUs (NVIDIA, MIG, time-sliced, AMD, Intel)."""
    n = name.lower()
    return (
        is_gpu_driver(n)
        or n.endswith("/gpu")
        or n.startswith("nvidia.com/mig-")
        or n in ("nvidia.com/gpu.shared", "gpu.intel.com/i915", "gpu.intel.com/xe")
    )


# DRA drivers that publish GPUs (ResourceSlice spec.driver): NVIDIA's dra-driver-nvidia-gpu, Intel's
# and AMD's GPU DRA drivers.
GPU_DRIVERS = ("gpu.nvidia.com", "gpu.intel.com", "gpu.amd.com")


def is_gpu_driver(driver: str) -> bool:
    """A DRA driver whose devices are GPUs or GPU partitions."""
    return driver.lower() in GPU_DRIVERS


def is_mig_device(resource: str, device_id: str) -> bool:
    """A MIG instance: a ``nvidia.com/mig-*`` resource, or a DRA device named ``...-mig-...``."""
    r = resource.lower()
    return r.startswith("nvidia.com/mig-") or (is_gpu_driver(r) and "-mig-" in device_id.lower())


def device_uuid(device_id: str) -> str:
    """The GPU behind a device-plugin ID: time-sliced replicas are ``<uuid>::<n>``."""
    return device_id.split("::", 1)[0]


@dataclass(frozen=True)
class DeviceAlloc:
    resource: str
    ids: tuple[str, ...]
    numa_nodes: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "ids": list(self.ids), "numa_nodes": list(self.numa_nodes)}


@dataclass(frozen=True)
class ClaimAlloc:
    """One DRA ResourceClaim's devices in a container: (driver, pool, device, CDI device names)."""

    namespace: str
    name: str
    devices: tuple[tuple[str, str, str, tuple[str, ...]], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "devices": [
                {"driver": d, "pool": p, "device": n, "cdi_devices": list(c)} for d, p, n, c in self.devices
            ],
        }


@dataclass(frozen=True)
class GpuCounts:
    """GPU devices on a node by state; ``allocated`` is within ``allocatable``, ``free`` the rest."""

    allocatable: frozenset[str]
    allocated: frozenset[str]
    mig: frozenset[str] = frozenset()  # the MIG instances among allocatable

    @property
    def free(self) -> frozenset[str]:
        return self.allocatable - self.allocated


@dataclass(frozen=True)
class ContainerAlloc:
    namespace: str
    pod: str
    container: str
    devices: tuple[DeviceAlloc, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[tuple[str, int, tuple[int, ...]], ...] = ()  # (type, bytes, NUMA nodes)
    claims: tuple[ClaimAlloc, ...] = ()  # DRA; their GPU devices are also in ``devices``

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.pod, self.container)

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"

    def gpus(self) -> list[str]:
        """GPU device IDs (UUIDs for the NVIDIA device plugin), replica suffixes removed, in order."""
        out: list[str] = []
        for d in self.devices:
            if is_gpu_resource(d.resource):
                for i in d.ids:
                    u = device_uuid(i)
                    if u not in out:
                        out.append(u)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "pod": self.pod,
            "container": self.container,
            "devices": [d.as_dict() for d in self.devices],
            "cpu_ids": list(self.cpu_ids),
            "memory": [{"type": t, "bytes": b, "numa_nodes": list(n)} for t, b, n in self.memory],
            "claims": [c.as_dict() for c in self.claims],
        }


@dataclass
class PodResources:
    """One read of the API: containers with resources, what the node can allocate, and warnings."""

    socket: str
    api: str  # "v1" or "v1alpha1"
    containers: list[ContainerAlloc] = field(default_factory=list)
    allocatable_devices: list[DeviceAlloc] | None = None  # None: not known (older kubelet, refused)
    allocatable_cpus: tuple[int, ...] | None = None
    warnings: list[str] = field(default_factory=list)

    def container(self, namespace: str, pod: str, container: str) -> ContainerAlloc | None:
        for c in self.containers:
            if c.key == (namespace, pod, container):
                return c
        return None

    def gpu_owners(self) -> dict[str, ContainerAlloc]:
        """GPU device ID (UUID) → the container it is allocated to."""
        out: dict[str, ContainerAlloc] = {}
        for c in self.containers:
            for g in c.gpus():
                out.setdefault(g, c)
        return out

    def allocatable_gpus(self) -> list[str] | None:
        """GPU devices the node offers (None: not known): the kubelet's allocatable devices, then the
        allocated ones it does not list (DRA devices are never in ``GetAllocatableResources``)."""
        if self.allocatable_devices is None:
            return None
        out: list[str] = []
        seen: set[str] = set()
        for d in list(self.allocatable_devices) + [d for c in self.containers for d in c.devices]:
            if is_gpu_resource(d.resource):
                for u in map(device_uuid, d.ids):
                    if u not in seen:
                        seen.add(u)
                        out.append(u)
        return out

    def gpu_counts(self) -> GpuCounts | None:
        """Allocatable, allocated and free GPU devices (None when allocatable is not known)."""
        alloc = self.allocatable_gpus()
        if alloc is None:
            return None
        mig: set[str] = set()
        for d in list(self.allocatable_devices or []) + [d for c in self.containers for d in c.devices]:
            if is_gpu_resource(d.resource):
                mig.update(device_uuid(i) for i in d.ids if is_mig_device(d.resource, i))
        return GpuCounts(frozenset(alloc), frozenset(self.gpu_owners()), frozenset(mig))

    def as_dict(self) -> dict[str, Any]:
        return {
            "socket": self.socket,
            "api": self.api,
            "containers": [c.as_dict() for c in self.containers],
            "allocatable_devices": [d.as_dict() for d in self.allocatable_devices]
            if self.allocatable_devices is not None
            else None,
            "allocatable_cpus": list(self.allocatable_cpus) if self.allocatable_cpus is not None else None,
            "warnings": list(self.warnings),
        }


def _nodes(topology: Any) -> tuple[int, ...]:
    if topology is None:
        return ()
    return tuple(sorted({int(n.ID) for n in topology.nodes}))


def _device(d: Any) -> DeviceAlloc:
    has_topo = d.HasField("topology") if hasattr(d, "HasField") else False
    return DeviceAlloc(
        str(d.resource_name), tuple(str(i) for i in d.device_ids), _nodes(d.topology) if has_topo else ()
    )


def _memory(m: Any) -> tuple[str, int, tuple[int, ...]]:
    return (str(m.memory_type), int(m.size), _nodes(m.topology) if m.HasField("topology") else ())


def _claims(c: Any) -> tuple[ClaimAlloc, ...]:
    out = []
    for r in getattr(c, "dynamic_resources", ()):  # absent from a v1alpha1 reply: empty
        devs = tuple(
            (
                str(x.driver_name),
                str(x.pool_name),
                str(x.device_name),
                tuple(str(d.name) for d in x.cdi_devices),
            )
            for x in r.claim_resources
        )
        out.append(ClaimAlloc(str(r.claim_namespace), str(r.claim_name), devs))
    return tuple(out)


def _claim_devices(claims: tuple[ClaimAlloc, ...]) -> tuple[DeviceAlloc, ...]:
    """The GPU devices of DRA claims as device allocations: resource = driver, ID ``pool/device``."""
    by_driver: dict[str, list[str]] = {}
    for cl in claims:
        for driver, pool, device, _cdi in cl.devices:
            if is_gpu_driver(driver) and device:
                ids = by_driver.setdefault(driver, [])
                if f"{pool}/{device}" not in ids:
                    ids.append(f"{pool}/{device}")
    return tuple(DeviceAlloc(d, tuple(ids)) for d, ids in by_driver.items())


def containers_from_list(resp: Any) -> list[ContainerAlloc]:
    """``ListPodResourcesResponse`` (v1 message) → one :class:`ContainerAlloc` per container."""
    out = []
    for p in resp.pod_resources:
        for c in p.containers:
            claims = _claims(c)
            out.append(
                ContainerAlloc(
                    namespace=str(p.namespace),
                    pod=str(p.name),
                    container=str(c.name),
                    devices=tuple(_device(d) for d in c.devices) + _claim_devices(claims),
                    cpu_ids=tuple(sorted(int(x) for x in c.cpu_ids)),
                    memory=tuple(_memory(m) for m in c.memory),
                    claims=claims,
                )
            )
    return out


def _check_socket(path: str) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise PodResourcesUnavailable(
            f"{path}: no kubelet pod-resources socket (mount /var/lib/kubelet/pod-resources into the "
            "agent; the API exists since Kubernetes 1.13)"
        ) from None
    except OSError as e:
        raise PodResourcesUnavailable(f"{path}: {e.strerror or e}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise PodResourcesUnavailable(f"{path}: not a unix socket")


def read_pod_resources(socket_path: str = DEFAULT_SOCKET, timeout_s: float = 5.0) -> PodResources:
    """Read ``List`` and ``GetAllocatableResources`` from the kubelet at ``socket_path``.

    Raises :class:`PodResourcesUnavailable` (one line) when nothing usable came back; partial
    answers (an older API, allocatable refused) come back with ``warnings``.
    """
    _check_socket(socket_path)
    try:
        import grpc

        from clusterdoctor.observe.node.podresources_v1 import api_pb2, api_pb2_grpc
    except ImportError as e:
        raise PodResourcesUnavailable(
            f"pod resources need grpcio and protobuf ({e}); pip install 'clusterdoctor[k8s]'"
        ) from None
    opts = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.enable_http_proxy", 0)]
    channel = grpc.insecure_channel(f"unix://{os.path.abspath(socket_path)}", options=opts)
    try:
        stub = api_pb2_grpc.PodResourcesListerStub(channel)
        out = PodResources(socket=socket_path, api="v1")
        try:
            resp = stub.List(api_pb2.ListPodResourcesRequest(), timeout=timeout_s)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise PodResourcesUnavailable(_rpc_reason(socket_path, "List", e, timeout_s)) from None
            return _v1alpha1(channel, socket_path, timeout_s, api_pb2)
        out.containers = containers_from_list(resp)
        try:
            alloc = stub.GetAllocatableResources(api_pb2.AllocatableResourcesRequest(), timeout=timeout_s)
            out.allocatable_devices = [_device(d) for d in alloc.devices]
            out.allocatable_cpus = tuple(sorted(int(x) for x in alloc.cpu_ids))
        except grpc.RpcError as e:
            out.warnings.append(
                _rpc_reason(socket_path, "GetAllocatableResources", e, timeout_s)
                + "; free GPUs on this node are unknown (the API is on by default since Kubernetes 1.23)"
            )
        return out
    finally:
        channel.close()


def _v1alpha1(channel: Any, socket_path: str, timeout_s: float, api_pb2: Any) -> PodResources:
    import grpc

    call = channel.unary_unary(
        V1ALPHA1_LIST,
        request_serializer=lambda _req: b"",
        response_deserializer=api_pb2.ListPodResourcesResponse.FromString,
    )
    try:
        resp = call(None, timeout=timeout_s)
    except grpc.RpcError as e:
        raise PodResourcesUnavailable(
            _rpc_reason(socket_path, "List (v1 and v1alpha1)", e, timeout_s)
        ) from None
    return PodResources(
        socket=socket_path,
        api="v1alpha1",
        containers=containers_from_list(resp),
        warnings=[
            f"{socket_path}: the kubelet serves only pod-resources v1alpha1 (Kubernetes older than 1.20): "
            "pods and their devices are known, exclusive CPUs, NUMA nodes and allocatable resources are not"
        ],
    )


def _rpc_reason(socket_path: str, method: str, e: Any, timeout_s: float) -> str:
    import grpc

    code = e.code() if hasattr(e, "code") else None
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"{socket_path}: {method} timed out after {timeout_s:g} s"
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"{socket_path}: kubelet pod-resources API unreachable ({_details(e)})"
    name = code.name if code is not None else type(e).__name__
    return f"{socket_path}: {method} failed: {name} {_details(e)}".rstrip()


def _details(e: Any) -> str:
    try:
        return str(e.details() or "")[:200]
    except Exception:
        return ""
