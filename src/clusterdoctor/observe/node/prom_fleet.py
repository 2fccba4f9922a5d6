"""What ``diagnose --prometheus`` reads about nodes from a Prometheus server, besides the control
plane (:mod:`clusterdoctor.observe.control.prom_api`) and dcgm-exporter
(:mod:`clusterdoctor.observe.gpu.dcgm_fleet`), through the same :class:`PromClient`:

* **the agents' own findings** (``clusterdoctor_finding{rule,severity,layer,subject}``, value: score;
  :mod:`clusterdoctor.serve.agent`): each series seen in the window, with its highest score and
  whether it is still exported at the end of the window; and the agents' sources that were down
  (``clusterdoctor_source_up == 0``);
* **node exporter's filesystems** (``node_filesystem_{size,free,avail}_bytes``,
  ``node_filesystem_files{,_free}``) at the end of the window, as ``df`` rows for the storage rule
  (STOR001): Use% as ``df`` computes it, ``used / (used + avail)``; a filesystem node exporter could
  not read (``node_filesystem_device_error 1``) is left out;
* **node exporter's InfiniBand port counters** (``node_infiniband_*_total``, the sysfs
  ``counters/`` of each port under node exporter's names, mapped back to the sysfs names the RDMA
  rules know): their values at the end of the window and their ``rate()`` over its last 10 minutes
  at most, as the RDMA rules read two sysfs reads. Ports are named ``NODE:DEVICE/PORT``. The agent's
  own ``clusterdoctor_rdma_counter_total`` is not read here: the agent has judged those already (its
  findings above).

``gpu health --prometheus`` and ``watch --prometheus`` read the agents through :func:`agent_fleet`:
their GPU findings only (:func:`is_gpu_finding`), every source down, and the agents whose series
ended inside the window (an agent that died: its findings would otherwise silently disappear).

Nodes are named by the scrape's ``node`` label where the scrape config sets one (deploy/ does), else
by ``instance``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clusterdoctor.observe.storage.usage import FsUsage

__all__ = [
    "GPU_SOURCES",
    "NE_INFINIBAND",
    "AgentFinding",
    "AgentFleet",
    "agent_findings",
    "agent_fleet",
    "agent_sources",
    "agent_sources_down",
    "node_filesystems",
    "is_gpu_finding",
    "node_infiniband",
]

# node exporter's InfiniBand counter names (node_infiniband_<name>_total) -> the sysfs counter names
NE_INFINIBAND: dict[str, str] = {
    "link_downed": "link_downed",
    "link_error_recovery": "link_error_recovery",
    "symbol_error": "symbol_error",
    "local_link_integrity_errors": "local_link_integrity_errors",
    "excessive_buffer_overrun_errors": "excessive_buffer_overrun_errors",
    "port_errors_received": "port_rcv_errors",
    "port_receive_remote_physical_errors": "port_rcv_remote_physical_errors",
    "port_receive_switch_relay_errors": "port_rcv_switch_relay_errors",
    "port_constraint_errors_received": "port_rcv_constraint_errors",
    "port_constraint_errors_transmitted": "port_xmit_constraint_errors",
    "port_discards_transmitted": "port_xmit_discards",
    "port_transmit_wait": "port_xmit_wait",
    "port_packets_received": "port_rcv_packets",
}
RATE_WINDOW_MAX_S = 600.0
# the agent's sources that read GPU health (serve/agent.py): NVML/nvidia-smi/sysfs, and the kernel
# log (Xid/SXid lines)
GPU_SOURCES = ("gpu", "kernel-log")
GPU_RULE_PREFIXES = ("GPU", "NVML", "DCGM")


@dataclass(frozen=True)
class AgentFinding:
    """One ``clusterdoctor_finding`` series of one agent over the window."""

    node: str
    rule: str
    severity: str
    layer: str
    subject: str
    score: float  # the highest over the window
    current: bool  # still exported at the end of the window


def _node(labels: dict[str, str]) -> str:
    return labels.get("node") or labels.get("instance") or labels.get("job") or "?"


def _val(s: Any) -> float | None:
    if not s.points:
        return None
    v = float(s.points[-1][1])
    return v if math.isfinite(v) else None


def _window(seconds: float) -> str:
    return f"{max(1, int(math.ceil(seconds)))}s"


def agent_findings(client: Any, since_seconds: float, at: float) -> list[AgentFinding]:
    """The agents' findings exported at any time in ``[at - since, at]`` (CollectError/InputError
    from the client as they come)."""
    key = ("rule", "severity", "layer", "subject")
    grouped = "node, instance, job, rule, severity, layer, subject"
    peak = client.query(
        f"max by ({grouped}) (max_over_time(clusterdoctor_finding[{_window(since_seconds)}]))", at
    )
    now = client.query(f"max by ({grouped}) (clusterdoctor_finding)", at)
    live = {(_node(s.labels), *(s.labels.get(k, "") for k in key)) for s in now}
    out = []
    for s in peak:
        v = _val(s)
        if v is None:
            continue
        ident = (_node(s.labels), *(s.labels.get(k, "") for k in key))
        out.append(AgentFinding(*ident, score=v, current=ident in live))
    out.sort(key=lambda f: (-f.score, f.node, f.rule, f.subject))
    return out


def agent_sources_down(client: Any, at: float) -> list[tuple[str, str]]:
    """``(node, source)`` of each agent source down at the end of the window."""
    res = client.query("max by (node, instance, job, source) (clusterdoctor_source_up) == 0", at)
    return sorted({(_node(s.labels), s.labels.get("source", "?")) for s in res})


def agent_sources(client: Any, since_seconds: float, at: float) -> dict[str, dict[str, bool | None]]:
    """``{node: {source: up}}`` of every agent source exported in ``[at - since, at]``: ``True`` up
    at the end of the window, ``False`` down, ``None`` no longer exported (the agent stopped or its
    scrape fails)."""
    grouped = "node, instance, job, source"
    seen = client.query(
        f"max by ({grouped}) (max_over_time(clusterdoctor_source_up[{_window(since_seconds)}]))", at
    )
    now = client.query(f"max by ({grouped}) (clusterdoctor_source_up)", at)
    out: dict[str, dict[str, bool | None]] = {}
    for s in seen:
        out.setdefault(_node(s.labels), {})[s.labels.get("source", "?")] = None
    for s in now:
        v = _val(s)
        out.setdefault(_node(s.labels), {})[s.labels.get("source", "?")] = v is not None and v >= 1
    return out


def is_gpu_finding(f: AgentFinding) -> bool:
    """A GPU finding of an agent: its ``layer`` label is ``gpu`` (the rule's layer), or, without a
    layer label, its rule is a GPU/NVML/DCGM rule."""
    if f.layer:
        return f.layer == "gpu"
    return f.rule.upper().startswith(GPU_RULE_PREFIXES)


@dataclass
class AgentFleet:
    """What the agents said over a window: GPU findings (or all, see :func:`agent_fleet`), and the
    state of each agent's sources."""

    findings: list[AgentFinding]
    sources: dict[str, dict[str, bool | None]]

    @property
    def nodes(self) -> list[str]:
        return sorted(set(self.sources) | {f.node for f in self.findings})

    def down(self) -> list[tuple[str, str]]:
        """``(node, source)`` down at the end of the window."""
        return sorted((n, s) for n, srcs in self.sources.items() for s, up in srcs.items() if up is False)

    def gone(self) -> list[str]:
        """Nodes whose agent exported sources in the window but none at its end."""
        return sorted(
            n for n, srcs in self.sources.items() if srcs and all(up is None for up in srcs.values())
        )

    def gpu_checked(self) -> list[str]:
        """Nodes whose agent read a GPU source (:data:`GPU_SOURCES`) at the end of the window."""
        return sorted(n for n, srcs in self.sources.items() if any(srcs.get(s) for s in GPU_SOURCES))

    def warnings(self, gpu: bool = True) -> list[str]:
        """One line per source down and per agent gone (``gpu``: the GPU sources named as such)."""
        out = []
        for node, src in self.down():
            what = " (GPU health not read there)" if gpu and src in GPU_SOURCES else ""
            out.append(f"agent on {node}: source {src} down (clusterdoctor_source_up 0){what}")
        out += [
            f"agent on {node}: no longer exported (stopped, or its scrape fails): its findings are not current"
            for node in self.gone()
        ]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "gpu_checked": self.gpu_checked(),
            "sources_down": [{"node": n, "source": s} for n, s in self.down()],
            "gone": self.gone(),
            "findings": len(self.findings),
        }


def agent_fleet(client: Any, since_seconds: float, at: float, gpu_only: bool = True) -> AgentFleet:
    """The agents' findings (``gpu_only``: :func:`is_gpu_finding` ones) and sources over the window."""
    found = agent_findings(client, since_seconds, at)
    if gpu_only:
        found = [f for f in found if is_gpu_finding(f)]
    return AgentFleet(found, agent_sources(client, since_seconds, at))


def node_filesystems(client: Any, at: float) -> list[FsUsage]:
    """node exporter's filesystems at ``at``, as ``df`` rows (space, then inodes); the mount is named
    ``NODE:MOUNTPOINT`` so that one full disk per node is one finding per node."""
    by = "node, instance, job, device, mountpoint, fstype"
    names = ("size_bytes", "free_bytes", "avail_bytes", "files", "files_free", "device_error")
    got: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for n in names:
        for s in client.query(f"max by ({by}) (node_filesystem_{n})", at):
            v = _val(s)
            if v is None:
                continue
            lab = s.labels
            k = (_node(lab), lab.get("device", "?"), lab.get("mountpoint", "?"), lab.get("fstype", ""))
            got.setdefault(k, {})[n] = v
    rows: list[FsUsage] = []
    for (node, device, mount, fstype), v in sorted(got.items()):
        if v.get("device_error"):
            continue
        src = f"node exporter on {node}"
        size, free, avail = v.get("size_bytes"), v.get("free_bytes"), v.get("avail_bytes")
        if size and free is not None and avail is not None:
            used = max(0.0, size - free)
            pct = round(100.0 * used / (used + avail), 1) if used + avail > 0 else None
            rows.append(
                FsUsage(
                    device, f"{node}:{mount}", src, 0, int(size), int(used), int(avail), pct, fstype or None
                )
            )
        files, ffree = v.get("files"), v.get("files_free")
        if files and ffree is not None:
            iused = max(0.0, files - ffree)
            rows.append(
                FsUsage(
                    device,
                    f"{node}:{mount}",
                    src,
                    0,
                    int(files),
                    int(iused),
                    int(ffree),
                    round(100.0 * iused / files, 1),
                    fstype or None,
                    inodes=True,
                )
            )
    return rows


def node_infiniband(
    client: Any, since_seconds: float, at: float, present: set[str]
) -> tuple[list[Any], list[Any]]:
    """``(ports, rates)``: :class:`RdmaPort` values at ``at`` and :class:`RdmaRate` over the last
    ``min(since, 10 min)``, for the node exporter counters in ``present`` (metric names)."""
    from clusterdoctor.observe.network.rdma import RdmaPort, RdmaRate

    win = min(max(since_seconds, 60.0), RATE_WINDOW_MAX_S)
    by = "node, instance, job, device, port"
    ports: dict[tuple[str, str, str], Any] = {}
    rated: dict[tuple[str, str, str], Any] = {}
    for ne, name in NE_INFINIBAND.items():
        metric = f"node_infiniband_{ne}_total"
        if metric not in present:
            continue
        for expr, rate in (
            (f"max by ({by}) ({metric})", False),
            (f"max by ({by}) (rate({metric}[{_window(win)}]))", True),
        ):
            for s in client.query(expr, at):
                v = _val(s)
                try:
                    port = int(s.labels.get("port", ""))
                except ValueError:
                    continue
                if v is None or v < 0:
                    continue
                node, dev = _node(s.labels), s.labels.get("device", "?")
                k = (node, dev, str(port))
                if rate:
                    r = rated.setdefault(k, RdmaRate(f"{node}:{dev}", port, win))
                    r.per_s[name] = v
                    r.deltas[name] = int(round(v * win))
                else:
                    p = ports.setdefault(
                        k, RdmaPort(f"{node}:{dev}", port, source=f"node exporter on {node}")
                    )
                    p.counters[name] = int(v)
    keys = sorted(ports)
    return [ports[k] for k in keys], [rated[k] for k in keys if k in rated]
