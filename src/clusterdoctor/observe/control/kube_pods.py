"""Pods of one node by UID: ``kubectl get pods -o json`` / kubelet ``/pods`` PodList, or the API server.

The pod-resources API names pods (namespace/name) but not their UIDs, and ``/proc/<pid>/cgroup``
gives the UID but not the name; this index joins them. Containers are keyed by their runtime ID
(``status.containerStatuses[].containerID``, ``containerd://<64 hex>``), which the cgroup path holds.

In a pod, :func:`list_node_pods` asks the API server with the service account's token for the pods
on ``spec.nodeName=<node>`` (RBAC: ``get``/``list`` on ``pods``; deploy/base/agent-rbac.yaml).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["PodIdentity", "PodIndex", "list_node_pods", "parse_pod_index"]

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MAX_PODLIST_BYTES = 64 << 20


@dataclass(frozen=True)
class PodIdentity:
    uid: str
    namespace: str
    name: str
    node: str | None
    containers: dict[str, str] = field(default_factory=dict)  # runtime container ID (hex) → name
    qos: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class PodIndex:
    by_uid: dict[str, PodIdentity] = field(default_factory=dict)
    source: str = ""

    def get(self, uid: str) -> PodIdentity | None:
        return self.by_uid.get(uid.lower())

    def __len__(self) -> int:
        return len(self.by_uid)


def _cid(raw: Any) -> str | None:
    s = str(raw or "")
    if "://" in s:
        s = s.split("://", 1)[1]
    return s.lower() or None


def _identity(item: Any) -> PodIdentity | None:
    if not isinstance(item, dict):
        return None
    meta = item.get("metadata") or {}
    status = item.get("status") or {}
    spec = item.get("spec") or {}
    uid = str(meta.get("uid") or "").lower()
    if not uid or not isinstance(meta, dict):
        return None
    containers: dict[str, str] = {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or []:
            if isinstance(cs, dict) and cs.get("name"):
                cid = _cid(cs.get("containerID"))
                if cid:
                    containers[cid] = str(cs["name"])
    return PodIdentity(
        uid=uid,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or "?"),
        node=spec.get("nodeName") if isinstance(spec, dict) else None,
        containers=containers,
        qos=status.get("qosClass"),
    )


def parse_pod_index(data: str | bytes, path: str | None = None) -> PodIndex:
    """A PodList (or a single Pod) as JSON → :class:`PodIndex`; raises :class:`InputError` otherwise."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"not JSON ({e})", path) from None
    if not isinstance(doc, dict):
        raise InputError("not a Kubernetes object (expected a PodList)", path)
    items = doc.get("items") if "items" in doc else [doc]
    if not isinstance(items, list):
        raise InputError("'items' is not a list", path)
    idx = PodIndex(source=path or "")
    for it in items:
        p = _identity(it)
        if p is not None:
            idx.by_uid[p.uid] = p
    return idx


def list_node_pods(
    node_name: str,
    api_url: str | None = None,
    token: str | None = None,
    ca_file: str | None = None,
    timeout_s: float = 5.0,
) -> PodIndex:
    """The pods on ``node_name`` from the API server (in-cluster defaults from the service account).

    Raises :class:`OSError` (unreachable, HTTP error) or :class:`InputError` (a reply that is not a
    PodList); the caller turns either into a warning.
    """
    if api_url is None:
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise OSError("not in a pod (KUBERNETES_SERVICE_HOST unset) and no API URL given")
        api_url = f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}"
    if token is None and os.path.exists(f"{SA_DIR}/token"):
        with open(f"{SA_DIR}/token") as fh:
            token = fh.read().strip()
    if ca_file is None and os.path.exists(f"{SA_DIR}/ca.crt"):
        ca_file = f"{SA_DIR}/ca.crt"
    q = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={node_name}"})
    url = f"{api_url.rstrip('/')}/api/v1/pods?{q}"
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    ctx = ssl.create_default_context(cafile=ca_file) if url.startswith("https") else None
    with urllib.request.urlopen(req, timeout=timeout_s, context=ctx) as r:
        body = r.read(MAX_PODLIST_BYTES + 1)
    if len(body) > MAX_PODLIST_BYTES:
        raise InputError(f"PodList larger than {MAX_PODLIST_BYTES >> 20} MiB", url)
    idx = parse_pod_index(body, url)
    idx.source = f"{api_url} pods on node {node_name}"
    return idx
