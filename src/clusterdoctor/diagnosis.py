"""The diagnosis pipeline: gather observations (live or from files), run the rule catalog, return a
:class:`~clusterdoctor.model.Diagnosis`. The CLI only chooses sources and a report format."""

from __future__ import annotations

import datetime as _dt
import socket
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from clusterdoctor.model import Diagnosis, SourceRef
from clusterdoctor.rules.registry import Observations, run_rules
from clusterdoctor.topology.model import Topology


def add_topology(obs: Observations, topo: Topology) -> None:
    """Put a topology and the derived kinds the NUMA/PCIe rules require into ``obs``."""
    if obs.has("topology"):
        obs.get("warnings_list", []).append(
            f"more than one topology given; using {obs.get('topology').source}"
        )
        return
    obs.put("topology", topo)
    cpu_nodes = [n for n in topo.nodes if n.cpus]
    if len(cpu_nodes) > 1:
        obs.put("multi_numa", True)
    elif topo.nodes:
        obs.absent_reasons["multi_numa"] = (
            f"{topo.source} shows a single NUMA node with CPUs, so cross-node placement cannot occur"
        )
    else:
        obs.absent_reasons["multi_numa"] = f"{topo.source} gives no NUMA information"
    obs.put("gpus", topo.gpus or None)
    obs.put("nics", topo.nics or None)
    rdma = [n for n in topo.nics if n.is_rdma]
    obs.put("rdma_nics", rdma or None)
    gpu_names = {g.name for g in topo.gpus}
    nic_names = {n.name for n in topo.nics}
    paths = [p for p in topo.paths if {p.a, p.b} & gpu_names and {p.a, p.b} & nic_names]
    obs.put("gpu_nic_paths", paths or None)
    for w in topo.warnings:
        obs.get("warnings_list", []).append(f"{topo.source}: {w}")


def add_processes(obs: Observations, placements: list[dict[str, Any]]) -> None:
    obs.put("processes", placements or None)
    if placements and any(p.get("gpus") for p in placements if not p.get("error")):
        obs.put("gpu_processes", True)


def audit_processes(
    topo: Topology,
    pids: Sequence[int] | None = None,
    match: str | None = None,
    proc_root: str = "/proc",
    sysfs_root: str = "/",
) -> list[dict[str, Any]]:
    """Audit live processes (``pids``, or those matching ``match``, or every GPU/NIC user)."""
    from clusterdoctor.observe import procfs
    from clusterdoctor.topology import placement

    if pids:
        chosen = list(pids)
    elif match:
        chosen = procfs.find_pids(match, proc_root)
    else:
        chosen = procfs.list_pids(proc_root)
    infos = [procfs.collect_process(pid, proc_root) for pid in chosen]
    results = (
        placement.audit(infos, topo, sysfs_root=sysfs_root)
        if _accepts_sysfs(placement.audit)
        else placement.audit(infos, topo)
    )
    out = [r.as_dict() for r in results]
    if not pids and not match:
        out = [p for p in out if p.get("gpus") or p.get("nics")]
    return out


def _accepts_sysfs(fn: Any) -> bool:
    import inspect

    try:
        return "sysfs_root" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def new_observations() -> Observations:
    obs = Observations()
    obs.put("warnings_list", [])
    return obs


def load_sources(obs: Observations, paths: Iterable[str | Path]) -> list[SourceRef]:
    """Load each SOURCE path by content into ``obs``; returns the source references."""
    from clusterdoctor.observe.detect import load_path

    refs = []
    for path in paths:
        what, data = load_path(path)
        refs.append(SourceRef(what, str(path)))
        for kind, value in data.items():
            if kind == "topology":
                add_topology(obs, value)
            elif kind == "warnings":
                obs.get("warnings_list", []).extend(value)
            elif kind == "processes":
                add_processes(obs, value)
            elif obs.has(kind) and isinstance(obs.get(kind), list) and isinstance(value, list):
                obs.get(kind).extend(value)
            else:
                obs.put(kind, value)
    return refs


def run(obs: Observations, sources: list[SourceRef], host: str | None = None) -> Diagnosis:
    """Run every rule whose inputs are present; the others are listed as skipped with the reason."""
    findings, skipped, ran = run_rules(obs)
    topo = obs.get("topology")
    return Diagnosis(
        host=host or (topo.hostname if topo is not None and topo.hostname else socket.gethostname()),
        generated_at=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        sources=sources,
        findings=findings,
        skipped=skipped,
        warnings=list(obs.get("warnings_list") or []),
        rules_run=ran,
        topology=topo,
        placement=obs.get("processes") or [],
    )


def diagnose_local(sysfs_root: str = "/", proc_root: str = "/proc") -> Diagnosis:
    """Diagnose this machine, live: topology from sysfs, placement of every GPU/NIC-using process."""
    from clusterdoctor.topology.build import from_sysfs

    obs = new_observations()
    topo = from_sysfs(sysfs_root)
    add_topology(obs, topo)
    sources = [SourceRef("sysfs", sysfs_root)]
    try:
        placements = audit_processes(topo, proc_root=proc_root, sysfs_root=sysfs_root)
        add_processes(obs, placements)
        sources.append(SourceRef("procfs", proc_root, f"{len(placements)} GPU/NIC processes"))
        if not placements:
            obs.absent_reasons["processes"] = "no process on this machine uses a GPU or RDMA NIC"
    except ModuleNotFoundError as e:  # pragma: no cover - procfs module is part of the package
        obs.get("warnings_list").append(f"process audit unavailable: {e}")
    return run(obs, sources, host=topo.hostname)
