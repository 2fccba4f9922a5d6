"""The agent's Kubernetes sources and the series they add to ``/metrics``.

- ``kubernetes`` source: the node's pods (API server) and the kubelet pod-resources API, joined into a
  :class:`~clusterdoctor.observe.node.kube_context.KubeContext`;
- ``numa-placement`` source: the topology from sysfs and the placement audit of every GPU/NIC
  process, each named by its pod (NUMA findings say namespace/pod/container, not a pid).

Series (all gauges; ``node`` is added by the scrape config's relabelling):

* ``clusterdoctor_gpu_allocation{gpu,resource,namespace,pod,container}`` = 1 for each GPU a
  container holds (the pod-resources API), so any GPU series can be joined to its pod;
* ``clusterdoctor_node_gpus{state="allocatable"|"allocated"|"free"}`` — free capacity for the
  scheduler extender and the dashboard;
* ``clusterdoctor_pod_resources_up`` 1/0 and ``clusterdoctor_kubernetes_warning{source}`` = the
  number of warnings of that source (missing socket, older API, unreachable API server, a failed
  audit), so a broken mount is visible; the warnings' text is in the agent's log, never a label.
"""

from __future__ import annotations

from typing import Any

__all__ = ["kube_metric_lines", "kubernetes_source", "placement_source"]


def kubernetes_source(
    node_name: str | None, socket_path: str | None, timeout_s: float, api_url: str | None = None
) -> dict[str, Any]:
    """One reading of pods and pod resources; never raises (warnings instead)."""
    from clusterdoctor.observe.node.kube_context import collect_kube_context

    ctx = collect_kube_context(node_name, socket_path, timeout_s=timeout_s, api_url=api_url)
    out: dict[str, Any] = {"kube_context": ctx}
    if ctx.resources is not None:
        out["pod_resources"] = ctx.resources
    return out


def placement_source(sysfs_root: str, proc_root: str, kube: Any = None) -> dict[str, Any]:
    """Topology and the placement of GPU/NIC processes (named by pod when ``kube`` is given)."""
    from clusterdoctor.diagnosis import audit_processes
    from clusterdoctor.topology.build import from_sysfs

    topo = from_sysfs(sysfs_root)
    placements = audit_processes(topo, proc_root=proc_root, sysfs_root=sysfs_root, kube=kube)
    return {"topology": topo, "processes": placements}


def _esc(v: object) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def kube_metric_lines(data: dict[str, Any], socket_configured: bool) -> list[str]:
    """Exposition lines for what the Kubernetes sources read this scrape (empty when not configured)."""
    ctx = data.get("kube_context")
    if ctx is None and not socket_configured:
        return []
    pr = data.get("pod_resources")
    lines = [
        "# HELP clusterdoctor_pod_resources_up Whether the kubelet pod-resources API answered on this scrape.",
        "# TYPE clusterdoctor_pod_resources_up gauge",
        f"clusterdoctor_pod_resources_up {1 if pr is not None else 0}",
    ]
    if pr is not None:
        lines += [
            "# HELP clusterdoctor_gpu_allocation A GPU allocated to a container (kubelet pod-resources API).",
            "# TYPE clusterdoctor_gpu_allocation gauge",
        ]
        allocated: set[str] = set()
        for c in pr.containers:
            for d in c.devices:
                from clusterdoctor.observe.node.podresources import device_uuid, is_gpu_resource

                if not is_gpu_resource(d.resource):
                    continue
                for dev in sorted({device_uuid(i) for i in d.ids}):
                    allocated.add(dev)
                    lines.append(
                        f'clusterdoctor_gpu_allocation{{gpu="{_esc(dev)}",resource="{_esc(d.resource)}",'
                        f'namespace="{_esc(c.namespace)}",pod="{_esc(c.pod)}",container="{_esc(c.container)}"}} 1'
                    )
        alloc = pr.allocatable_gpus()
        lines += [
            "# HELP clusterdoctor_node_gpus GPUs on this node by state (allocatable, allocated, free).",
            "# TYPE clusterdoctor_node_gpus gauge",
            f'clusterdoctor_node_gpus{{state="allocated"}} {len(allocated)}',
        ]
        if alloc is not None:
            lines.append(f'clusterdoctor_node_gpus{{state="allocatable"}} {len(alloc)}')
            lines.append(f'clusterdoctor_node_gpus{{state="free"}} {len(set(alloc) - allocated)}')
    warnings = list(getattr(ctx, "warnings", []) or [])
    if warnings:
        lines += [
            "# HELP clusterdoctor_kubernetes_warning Warnings of a Kubernetes source that answered partly or not at all.",
            "# TYPE clusterdoctor_kubernetes_warning gauge",
        ]
        by_src: dict[str, int] = {}
        for w in sorted(set(warnings)):
            if w.startswith("placement audit"):
                src = "placement"
            elif "pod resources" in w or "pod-resources" in w:
                src = "pod-resources"
            else:
                src = "api-server"
            by_src[src] = by_src.get(src, 0) + 1
        for src, n in sorted(by_src.items()):
            lines.append(f'clusterdoctor_kubernetes_warning{{source="{src}"}} {n}')
    return lines
