"""Pods, not PIDs: which namespace/pod/container a process, a GPU or a CPU belongs to on this node.

Joins three readings, each optional:

- ``/proc/<pid>/cgroup`` → pod UID and container ID (:mod:`clusterdoctor.observe.node.cgroup`);
- the node's pods by UID → namespace, name, container name (:mod:`clusterdoctor.observe.control.kube_pods`);
- the kubelet pod-resources API → each container's GPUs and exclusive CPUs
  (:mod:`clusterdoctor.observe.node.podresources`).

What one reading lacks is said in ``warnings`` and the rest still answers: without the pod list a
process is named by its pod UID; without pod resources GPUs have no owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.observe.control.kube_pods import PodIndex
from clusterdoctor.observe.node.cgroup import PodCgroup, read_pod_cgroup
from clusterdoctor.observe.node.podresources import PodResources

__all__ = ["KubeContext", "PodRef", "collect_kube_context"]


@dataclass(frozen=True)
class PodRef:
    """A process's (or a GPU's) pod. ``pod`` is None when only the UID is known."""

    uid: str | None
    namespace: str | None
    pod: str | None
    container: str | None
    container_id: str | None = None
    qos: str | None = None
    gpus: tuple[str, ...] = ()
    cpu_ids: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """``namespace/pod/container`` (or ``pod <uid>`` when the name is unknown)."""
        if self.pod is None:
            return f"pod {self.uid}" if self.uid else "pod ?"
        return "/".join(x for x in (self.namespace, self.pod, self.container) if x)

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "uid": self.uid,
            "namespace": self.namespace,
            "pod": self.pod,
            "container": self.container,
            "container_id": self.container_id,
            "qos": self.qos,
            "gpus": list(self.gpus),
            "cpu_ids": list(self.cpu_ids),
        }


@dataclass
class KubeContext:
    pods: PodIndex | None = None
    resources: PodResources | None = None
    warnings: list[str] = field(default_factory=list)

    def ref_for_cgroup(self, cg: PodCgroup) -> PodRef:
        ident = self.pods.get(cg.pod_uid) if self.pods is not None else None
        ns = name = container = None
        qos = cg.qos
        if ident is not None:
            ns, name, qos = ident.namespace, ident.name, (ident.qos or cg.qos)
            if cg.container_id:
                container = ident.containers.get(cg.container_id)
        gpus: tuple[str, ...] = ()
        cpus: tuple[int, ...] = ()
        if self.resources is not None and ns and name and container:
            alloc = self.resources.container(ns, name, container)
            if alloc is not None:
                gpus, cpus = tuple(alloc.gpus()), alloc.cpu_ids
        return PodRef(cg.pod_uid, ns, name, container, cg.container_id, qos, gpus, cpus)

    def ref_for_pid(self, pid: int, proc_root: str = "/proc") -> PodRef | None:
        """The pod of a live process; None when it is not in a Kubernetes pod (or is gone)."""
        cg = read_pod_cgroup(pid, proc_root)
        return self.ref_for_cgroup(cg) if cg is not None else None

    def gpu_owner(self, gpu_id: str) -> PodRef | None:
        """The container a GPU (UUID or device-plugin ID) is allocated to, from pod resources."""
        if self.resources is None:
            return None
        owner = self.resources.gpu_owners().get(gpu_id.split("::", 1)[0])
        if owner is None:
            return None
        return PodRef(
            None, owner.namespace, owner.pod, owner.container, gpus=tuple(owner.gpus()), cpu_ids=owner.cpu_ids
        )

    def annotate(self, placements: list[dict[str, Any]], proc_root: str = "/proc") -> None:
        """Add ``pod`` (a :meth:`PodRef.as_dict`) to each placement record of a process in a pod."""
        for p in placements:
            pid = p.get("pid")
            if isinstance(pid, int):
                ref = self.ref_for_pid(pid, proc_root)
                if ref is not None:
                    p["pod"] = ref.as_dict()


def collect_kube_context(
    node_name: str | None,
    socket_path: str | None,
    timeout_s: float = 5.0,
    api_url: str | None = None,
    pods_file: str | None = None,
) -> KubeContext:
    """Read what is there (pod list from ``pods_file`` or the API; pod resources), warn for the rest."""
    from clusterdoctor.errors import InputError
    from clusterdoctor.observe.control.kube_pods import list_node_pods, parse_pod_index
    from clusterdoctor.observe.node.podresources import PodResourcesUnavailable, read_pod_resources

    ctx = KubeContext()
    if pods_file:
        try:
            with open(pods_file, "rb") as fh:
                ctx.pods = parse_pod_index(fh.read(), pods_file)
        except (OSError, InputError) as e:
            ctx.warnings.append(f"pods: {e}")
    elif node_name:
        try:
            ctx.pods = list_node_pods(node_name, api_url=api_url, timeout_s=timeout_s)
        except (OSError, InputError, ValueError) as e:
            ctx.warnings.append(
                f"pods on {node_name} from the API server: {e}; processes are named by pod UID"
            )
    if socket_path:
        try:
            ctx.resources = read_pod_resources(socket_path, timeout_s)
            ctx.warnings.extend(ctx.resources.warnings)
        except PodResourcesUnavailable as e:
            ctx.warnings.append(f"pod resources: {e}")
    return ctx


def name_gpu_pods(obs: Any) -> int:
    """Fill the pod of each GPU in ``obs["gpu_reports"]`` from ``obs["pod_resources"]`` (by UUID).

    The GPU-health rules name the pod of a GPU when its state says it (dcgm-exporter's Kubernetes
    mapping does); on a node the kubelet's pod-resources API says it for every source (NVML,
    nvidia-smi, kernel log). A pod the source already names is kept. Returns how many GPUs were named.
    """
    pr = obs.get("pod_resources")
    if pr is None:
        return 0
    owners = pr.gpu_owners()
    n = 0
    for rep in obs.get("gpu_reports") or []:
        for g in getattr(rep, "gpus", None) or []:
            owner = owners.get(g.uuid) if getattr(g, "uuid", None) else None
            if owner is None or g.pod:
                continue
            src = f"kubelet pod-resources ({pr.socket})"
            g.set("namespace", owner.namespace, src)
            g.set("pod", owner.pod, src)
            g.set("container", owner.container, src)
            n += 1
    return n
