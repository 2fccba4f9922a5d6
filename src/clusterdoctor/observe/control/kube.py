"""Pod start phases from ``kubectl get pods -o json`` (or kubelet ``/pods``) → :class:`PodStart`.

For each pod the phase boundaries come from the object itself: ``metadata.creationTimestamp``,
the ``lastTransitionTime`` of the ``PodScheduled``, ``PodReadyToStartContainers`` (1.29+; older
``Initialized`` is used for nothing else), ``Ready`` conditions **when their status is True**, and
each container's ``state.running.startedAt`` / ``state.terminated.startedAt``.

Caveats the durations carry (and the rules repeat): condition times have second resolution;
kubelet records ``PodReadyToStartContainers`` at its next status sync, so image pulls fall inside
the "sandbox" phase and cannot be separated from it with the pod object alone (kubelet's
``pod_startup_latency_tracker`` log line or ``kubelet_pod_start_sli_duration_seconds`` can); a
static (mirror) pod has no ``creationTimestamp`` and is measured from ``status.startTime``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.logs import parse_time

__all__ = ["PodStart", "load_pods", "parse_pods", "pod_starts_from_events", "sniff_pods"]


@dataclass(frozen=True)
class PodStart:
    """Start phases of one pod (epoch seconds; durations in seconds, None when unknown)."""

    namespace: str
    name: str
    node: str | None
    phase: str | None
    created: float | None
    scheduled: float | None = None
    sandbox_ready: float | None = None
    first_container_started: float | None = None
    last_container_started: float | None = None
    ready: float | None = None
    restarts: int = 0
    static: bool = False
    zone: str | None = None
    owner: str | None = None  # first ownerReference as Kind/name (e.g. Job/backup-29707813)
    source: str = ""
    # When the start duration is known directly (kubelet tracker line): seconds, and whether it
    # excludes image pulls (the SLO duration).
    reported_start_s: float | None = None
    excludes_pulls: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def start_s(self) -> float | None:
        """Creation → all containers started (kubelet's pod start, including image pulls)."""
        if self.reported_start_s is not None:
            return self.reported_start_s
        if self.created is None or self.last_container_started is None or self.restarts:
            return None  # a restarted container's first start is no longer in the pod object
        return max(0.0, self.last_container_started - self.created)

    @property
    def schedule_s(self) -> float | None:
        if self.created is None or self.scheduled is None:
            return None
        return max(0.0, self.scheduled - self.created)

    @property
    def sandbox_s(self) -> float | None:
        """Scheduled → sandbox ready (sandbox + CNI setup, and image pulls; see the module docstring)."""
        if self.scheduled is None or self.sandbox_ready is None:
            return None
        return max(0.0, self.sandbox_ready - self.scheduled)


def _t(v: Any) -> float | None:
    if not isinstance(v, str):
        return None
    return parse_time(v)


def _pod(item: dict[str, Any], source: str) -> PodStart | None:
    meta = item.get("metadata")
    status = item.get("status")
    if not isinstance(meta, dict) or not isinstance(status, dict):
        return None
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    conds: dict[str, float | None] = {}
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("status") == "True" and isinstance(c.get("type"), str):
            conds[c["type"]] = _t(c.get("lastTransitionTime"))
    starts = []
    restarts = 0
    for cs in status.get("containerStatuses") or []:
        if not isinstance(cs, dict):
            continue
        r = cs.get("restartCount")
        if isinstance(r, int):
            restarts += r
        state = cs.get("state") or {}
        # for a restarted container, the first start is in lastState
        first = None
        last = cs.get("lastState") or {}
        for st in (last.get("terminated"), state.get("running"), state.get("terminated")):
            if isinstance(st, dict):
                t = _t(st.get("startedAt"))
                if t is not None:
                    first = t if first is None else min(first, t)
        if first is not None:
            starts.append(first)
    ann = meta.get("annotations") or {}
    static = meta.get("creationTimestamp") is None and ann.get("kubernetes.io/config.source") in (
        "file",
        "http",
    )
    created = _t(meta.get("creationTimestamp"))
    if created is None:
        created = _t(status.get("startTime"))
        static = True
    owner = None
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and isinstance(ref.get("kind"), str) and isinstance(ref.get("name"), str):
            owner = f"{ref['kind']}/{ref['name']}"
            break
    spec = item.get("spec") or {}
    labels = meta.get("labels") or {}
    return PodStart(
        namespace=str(meta.get("namespace", "")),
        name=name,
        node=spec.get("nodeName") if isinstance(spec, dict) else None,
        phase=status.get("phase") if isinstance(status.get("phase"), str) else None,
        created=created,
        scheduled=conds.get("PodScheduled"),
        sandbox_ready=conds.get("PodReadyToStartContainers"),
        first_container_started=min(starts) if starts else None,
        last_container_started=max(starts) if starts else None,
        ready=conds.get("Ready"),
        restarts=restarts,
        static=static,
        zone=labels.get("topology.kubernetes.io/zone") if isinstance(labels, dict) else None,
        owner=owner,
        source=source,
    )


def parse_pods(data: str | bytes, path: str | None = None) -> list[PodStart]:
    """A PodList (or a single Pod) as JSON → pod starts. InputError when it is not one."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    try:
        v = json.loads(text)
    except (ValueError, RecursionError):
        raise InputError("not valid JSON", path) from None
    if not isinstance(v, dict):
        raise InputError("not a Kubernetes Pod or PodList object", path)
    kind = v.get("kind")
    items = v.get("items") if kind in ("PodList", "List") else [v] if kind == "Pod" else None
    if not isinstance(items, list):
        raise InputError("not a Kubernetes Pod or PodList object (kind is not PodList/List/Pod)", path)
    out = []
    for it in items:
        if isinstance(it, dict) and it.get("kind", "Pod") == "Pod":
            p = _pod(it, path or "<pods>")
            if p is not None:
                out.append(p)
    if not out and items:
        raise InputError("PodList without a readable pod", path)
    return out


def pod_starts_from_events(events: list[Any]) -> list[PodStart]:
    """Pod starts from kubelet ``Observed pod startup duration`` events (kind ``kubelet.pod_startup``).

    The SLO duration (image pulls excluded) is used; the end-to-end duration is kept when no pull
    happened (then they are equal).
    """
    out = []
    for ev in events:
        if getattr(ev, "kind", None) != "kubelet.pod_startup":
            continue
        a = dict(ev.attrs)
        pod = a.get("pod", "?/?")
        ns, _, name = pod.partition("/")
        try:
            slo = float(a["slo_s"])
        except (KeyError, ValueError):
            continue
        created = float(a["created"]) if a.get("created") not in (None, "") else None
        out.append(
            PodStart(
                namespace=ns,
                name=name or ns,
                node=None,
                phase="Running",
                created=created,
                last_container_started=ev.time,
                source=ev.source.location if ev.source else "",
                reported_start_s=slo,
                excludes_pulls=True,
            )
        )
    return out


def sniff_pods(head: bytes, name: str = "") -> bool:
    """True for a Pod/PodList JSON document."""
    h = head.lstrip()
    return h.startswith(b"{") and (
        b'"kind":"PodList"' in h.replace(b" ", b"") or b'"kind":"Pod"' in h.replace(b" ", b"")
    )


def load_pods(path: str | Path) -> dict[str, Any]:
    """Read ``kubectl get pods -o json`` output → ``{"pod_starts": [PodStart…]}``."""
    p = Path(path)
    from clusterdoctor.observe.limits import read_input

    data = read_input(p)  # size-limited, one-line errors
    return {"pod_starts": parse_pods(data, str(p))}


def sniff_nodes(head: bytes, name: str = "") -> bool:
    """True for ``kubectl get nodes -o json`` output (a Node or a List of Nodes)."""
    h = head.lstrip()
    return h.startswith(b"{") and (
        b'"kind":"Node"' in h.replace(b" ", b"") or b'"kind":"NodeList"' in h.replace(b" ", b"")
    )


def load_nodes(path: str | Path) -> dict[str, Any]:
    """Read ``kubectl get nodes -o json`` → ``{"node_zones": {node: zone}}`` (topology.kubernetes.io/zone)."""
    from clusterdoctor.analyze.topology_split import zones_from_nodes

    p = Path(path)
    from clusterdoctor.observe.limits import read_input

    data = read_input(p)  # size-limited, one-line errors
    zones = zones_from_nodes(data, str(p))
    out: dict[str, Any] = {"node_zones": zones}
    if not zones:
        out["warnings"] = [f"{p}: no node carries a topology.kubernetes.io/zone label"]
    return out
