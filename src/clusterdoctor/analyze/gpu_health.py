"""Join every GPU source into one fleet: per node, per GPU, all facts and events together.

:func:`gpu_fleet` gathers the :class:`~clusterdoctor.topology.gpu.GpuReport` objects loaded from
files or read live (``obs["gpu_reports"]``) and the dcgm-exporter series of any metrics window
(``obs["metrics"]``), then joins them:

1. **Node.** A report names its node when the source does (dcgm-exporter ``Hostname``, syslog host);
   reports that do not (``nvidia-smi -q``, ``dmesg``, ``lspci``) are taken to describe one unnamed
   node — the machine of the topology when one was given — unless two of them disagree about a GPU
   (same bus id, different UUID), in which case the later one is kept apart under its file name.
2. **GPU.** Within a node, a GPU is matched by PCI bus id, else by UUID (placeholders such as
   ``GPU-00000000-…`` are not identities), else by index. Facts fill what is unknown; events,
   readings and processes accumulate; each fact keeps the source it came from.
3. **Topology.** A GPU whose bus id is in the topology gets its NUMA node and nearest NIC.
4. **Processes and ranks.** The placement audit (``obs["processes"]``) maps pids and ranks to GPUs;
   NCCL logs (``Init COMPLETE`` bus ids per host and rank) and nccl-tests headers map ranks to GPUs.

Everything here is computed once per :class:`~clusterdoctor.rules.registry.Observations` and cached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.topology.gpu import (
    MERGE_FIELDS,
    GpuEvent,
    GpuReport,
    GpuState,
    NvLinkState,
    PcieLink,
    uuid_is_masked,
)

__all__ = [
    "GPU_CHECKS",
    "GpuFleet",
    "RankGpus",
    "collect_reports",
    "gpu_fleet",
    "gpus_of_rank",
    "health_grid",
    "join_reports",
]

UNNAMED = ""  # the node of reports that do not name one


@dataclass
class GpuFleet:
    """GPUs by node, node-level events, and what each node's sources can state (``facts``)."""

    gpus: list[GpuState] = field(default_factory=list)
    node_events: dict[str, list[GpuEvent]] = field(default_factory=dict)
    facts: dict[str, set[str]] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)  # node -> source descriptions
    reports: list[GpuReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def nodes(self) -> list[str]:
        names = set(self._index()) | set(self.node_events) | set(self.facts)
        return sorted(names)

    def _index(self) -> dict[str, list[GpuState]]:
        idx = getattr(self, "_by_node", None)
        if idx is None or getattr(self, "_indexed", -1) != len(self.gpus):
            idx = {}
            for g in self.gpus:
                idx.setdefault(g.node or UNNAMED, []).append(g)
            self._by_node = idx
            self._indexed = len(self.gpus)
        return idx

    def gpus_of(self, node: str) -> list[GpuState]:
        return list(self._index().get(node, ()))

    def has_fact(self, node: str, fact: str) -> bool:
        return fact in self.facts.get(node, set())

    def find(self, node: str | None, bus_id: str | None = None, index: int | None = None) -> GpuState | None:
        for g in self.gpus_of(node or UNNAMED):
            if bus_id and g.bus_id == bus_id:
                return g
        if index is not None:
            for g in self.gpus_of(node or UNNAMED):
                if g.index == index:
                    return g
        return None

    def __bool__(self) -> bool:
        return bool(self.gpus) or any(self.node_events.values())


def collect_reports(obs: Any) -> list[GpuReport]:
    """Reports loaded or read live plus those made from dcgm-exporter series in ``obs["metrics"]``."""
    reports = list(obs.get("gpu_reports") or [])
    window = obs.get("metrics")
    if window is not None:
        from clusterdoctor.observe.gpu.dcgm_exporter import gpus_from_window, has_dcgm

        if has_dcgm(window):
            reports.extend(gpus_from_window(window))
    return reports


def gpu_fleet(obs: Any) -> GpuFleet:
    """The joined fleet of ``obs`` (computed once, cached in ``obs.data["_gpu_fleet"]``)."""
    cached = obs.get("_gpu_fleet")
    if cached is not None:
        return cached
    fleet = join_reports(
        collect_reports(obs),
        topology=obs.get("topology"),
        processes=obs.get("processes") or [],
        nccl_logs=obs.get("nccl_log") or [],
        nccl_tests=obs.get("nccl_tests") or [],
    )
    obs.data["_gpu_fleet"] = fleet
    return fleet


# -- joining ---------------------------------------------------------------------------------------

_RICH_KINDS = (
    "nvidia-smi -q",
    "nvidia-smi -q -x",
    "nvml",
    "nvidia-smi --query-gpu",
    "dcgm-exporter",
    "dcgmi discovery",
)


def _order(r: GpuReport) -> int:
    return 0 if r.kind in _RICH_KINDS else 1


def _good_uuid(u: str | None) -> str | None:
    return u if u and not uuid_is_masked(u) else None


def _merge_link(dst: PcieLink, src: PcieLink) -> None:
    for k, v in src.__dict__.items():
        if k == "source":
            continue
        if getattr(dst, k) is None and v is not None:
            setattr(dst, k, v)
    if src.source and src.source not in dst.source:
        dst.source = f"{dst.source}; {src.source}" if dst.source else src.source


def _merge_nvlinks(dst: GpuState, src: GpuState) -> None:
    if not src.nvlinks:
        return
    have = {n.link: n for n in dst.nvlinks}
    for n in src.nvlinks:
        cur = have.get(n.link)
        if cur is None:
            dst.nvlinks.append(NvLinkState(**n.__dict__))
            continue
        for k, v in n.__dict__.items():
            if k not in ("link", "source") and getattr(cur, k) is None and v is not None:
                setattr(cur, k, v)
    dst.nvlinks.sort(key=lambda n: n.link)


def merge_gpu(dst: GpuState, src: GpuState) -> None:
    """Fill ``dst``'s unknown facts from ``src``; accumulate events, readings, processes, sources."""
    for k in MERGE_FIELDS:
        v = getattr(src, k)
        if v is None:
            continue
        if k == "uuid" and uuid_is_masked(v) and dst.uuid:
            continue
        if getattr(dst, k) is None or (k == "uuid" and uuid_is_masked(dst.uuid) and not uuid_is_masked(v)):
            setattr(dst, k, v)
            if k in src.field_sources:
                dst.field_sources[k] = src.field_sources[k]
            elif src.sources:
                dst.field_sources.setdefault(k, src.sources[0])
    if src.pcie is not None:
        if dst.pcie is None:
            dst.pcie = PcieLink(**src.pcie.__dict__)
        else:
            _merge_link(dst.pcie, src.pcie)
    if src.nvlink_support and (dst.nvlink_support is None or src.nvlink_support == "links"):
        dst.nvlink_support = src.nvlink_support
    _merge_nvlinks(dst, src)
    dst.events.extend(src.events)
    dst.readings.extend(src.readings)
    for p in src.processes:
        if p not in dst.processes:
            dst.processes.append(p)
    for s in src.sources:
        if s not in dst.sources:
            dst.sources.append(s)
    for k, v in src.field_sources.items():
        dst.field_sources.setdefault(k, v)
    if dst.node is None and src.node is not None:
        dst.node = src.node


def _match(pool: list[GpuState], g: GpuState) -> GpuState | None:
    if g.bus_id:
        for x in pool:
            if x.bus_id == g.bus_id:
                return x
    u = _good_uuid(g.uuid)
    if u:
        for x in pool:
            if _good_uuid(x.uuid) == u:
                return x
    if g.index is not None and not g.bus_id:
        for x in pool:
            if x.index == g.index:
                return x
    return None


_MODEL_TOKEN = re.compile(r"\b(?:RTX|GTX|TITAN|[AHLVTBK])\s?-?\d{1,4}[A-Z]?\b", re.I)


def _model_tokens(model: str | None) -> set[str]:
    return {re.sub(r"[\s-]", "", t).upper() for t in _MODEL_TOKEN.findall(model or "")}


def _conflicts(pool: list[GpuState], report: GpuReport) -> bool:
    """A report that puts another GPU at a bus id already known (another UUID, or a model with no
    name in common: "RTX 3090" vs "RTX 4090"): another machine."""
    for g in report.gpus:
        if not g.bus_id:
            continue
        u = _good_uuid(g.uuid)
        mt = _model_tokens(g.model)
        for x in pool:
            if x.bus_id != g.bus_id:
                continue
            xu = _good_uuid(x.uuid)
            if u and xu and xu != u:
                return True
            xt = _model_tokens(x.model)
            if mt and xt and not (mt & xt):
                return True
    return False


def join_reports(
    reports: list[GpuReport],
    topology: Any = None,
    processes: list[dict[str, Any]] | None = None,
    nccl_logs: list[Any] | None = None,
    nccl_tests: list[Any] | None = None,
) -> GpuFleet:
    """Join reports into a fleet (see the module docstring)."""
    fleet = GpuFleet(reports=list(reports))
    pools: dict[str, list[GpuState]] = {}
    host = getattr(topology, "hostname", None) if topology is not None else None
    for rep in sorted(reports, key=_order):
        node = rep.node or UNNAMED
        if node == UNNAMED and host:
            node = host
        pool = pools.setdefault(node, [])
        if not rep.node and _conflicts(pool, rep):
            node = f"({rep.source})"
            fleet.warnings.append(
                f"{rep.source}: its GPUs disagree with another file about which GPU sits at a bus id; "
                "read as another machine"
            )
            pool = pools.setdefault(node, [])
        fleet.facts.setdefault(node, set()).update(rep.facts)
        fleet.sources.setdefault(node, []).append(f"{rep.kind}: {rep.source}")
        fleet.warnings.extend(rep.warnings)
        for g in rep.gpus:
            g.node = node or None
            hit = _match(pool, g)
            if hit is None:
                new = GpuState(node=node or None)
                merge_gpu(new, g)
                pool.append(new)
            else:
                merge_gpu(hit, g)
        if rep.events:
            fleet.node_events.setdefault(node, []).extend(rep.events)
    for node, pool in pools.items():
        for g in pool:
            g.node = node or None
            g.events.sort(key=lambda e: (e.time is None, e.time or 0.0, e.line or 0))
        pool.sort(key=lambda g: (g.index is None, g.index if g.index is not None else 0, g.bus_id or ""))
        fleet.gpus.extend(pool)
    if topology is not None:
        _join_topology(fleet, topology)
    _join_processes(fleet, processes or [], topology)
    _join_nccl(fleet, nccl_logs or [], nccl_tests or [])
    return fleet


def _join_topology(fleet: GpuFleet, topo: Any) -> None:
    host = getattr(topo, "hostname", None)
    by_bus = {d.pci: d for d in getattr(topo, "gpus", []) if getattr(d, "pci", None)}
    for g in fleet.gpus:
        if g.node not in (None, host) or not g.bus_id:
            continue
        dev = by_bus.get(g.bus_id)
        if dev is None:
            continue
        if g.numa_node is None and dev.numa_node is not None:
            g.set("numa_node", dev.numa_node, topo.source)
        if g.index is None and dev.index is not None:
            g.set("index", dev.index, topo.source)
        if g.uuid is None and dev.attrs.get("uuid"):
            g.set("uuid", dev.attrs["uuid"], topo.source)
        best = topo.best_nic_for(dev) if getattr(topo, "nics", None) else None
        if best is not None:
            nic, kind = best
            g.nearest_nic = nic.name
            g.nearest_nic_path = kind


def _join_processes(fleet: GpuFleet, rows: list[dict[str, Any]], topo: Any) -> None:
    names = {}
    if topo is not None:
        names = {d.name: d.pci for d in getattr(topo, "gpus", [])}
    host = getattr(topo, "hostname", None) if topo is not None else None
    for row in rows:
        if not isinstance(row, dict) or row.get("error"):
            continue
        pid = row.get("pid")
        rank = row.get("rank")
        for gname in row.get("gpus") or []:
            bus = names.get(gname)
            g = fleet.find(host, bus) if bus else None
            if g is None and bus:
                g = fleet.find(None, bus)
            if g is None:
                continue
            if isinstance(pid, int) and all(p != pid for p, _ in g.processes):
                g.processes.append((pid, str(row.get("comm") or "")))
            if rank not in (None, "") and str(rank) not in g.ranks:
                g.ranks.append(str(rank))
        # nvidia-smi/NVML process lists name pids: a placement row with RANK gives the rank
        if rank not in (None, "") and isinstance(pid, int):
            for g in fleet.gpus:
                if any(p == pid for p, _ in g.processes) and str(rank) not in g.ranks:
                    g.ranks.append(str(rank))


def _join_nccl(fleet: GpuFleet, logs: list[Any], tests: list[Any]) -> None:
    from clusterdoctor.observe.gpu.common import norm_bus_id

    def attach(host: str | None, bus: str | None, rank: int | None) -> None:
        if bus is None or rank is None:
            return
        bus = norm_bus_id(bus)
        g = fleet.find(host, bus)
        if g is None:
            cands = [x for x in fleet.gpus if x.bus_id == bus]
            g = cands[0] if len(cands) == 1 else None
        if g is not None and str(rank) not in g.ranks:
            g.ranks.append(str(rank))

    for log in logs:
        for (_comm, proc), info in getattr(log, "comms", {}).items():
            if getattr(info, "bus_id", None) and info.nranks == (log.nranks or info.nranks):
                attach(getattr(proc, "host", None), info.bus_id, info.rank)
    for run in tests:
        for r in getattr(run, "ranks", []):
            attach(getattr(r, "host", None), getattr(r, "bus", None), getattr(r, "rank", None))


# -- a rank's GPU, from what the rank says about itself ----------------------------------------------


@dataclass
class RankGpus:
    """The GPUs of the fleet that a rank (host, GPU label) uses.

    ``match``: ``"gpu"`` (its own GPU, by index on its node), ``"node"`` (its node is known, its GPU
    is not, or is not in the files), or None (its node is not in the GPU data). ``note`` says how
    the node was tied (for the evidence)."""

    node: str | None
    gpus: list[GpuState]
    node_gpus: list[GpuState]
    match: str | None
    note: str = ""


def gpu_index(label: Any) -> int | None:
    """The CUDA index in a probe's GPU label ("2", "cuda:2"); None for "cpu" or unknown."""
    m = re.fullmatch(r"\s*(?:cuda:)?(\d{1,3})\s*", str(label)) if label is not None else None
    return int(m.group(1)) if m else None


def _short(host: str) -> str:
    return host.split(".", 1)[0].lower()


def gpus_of_rank(fleet: GpuFleet, host: str | None, gpu: Any, job_hosts: set[str] | None = None) -> RankGpus:
    """Tie a rank to the fleet: its node by name (exactly, else by short host name), or — when the
    GPU sources name no node and the job runs on one host only — the unnamed node; then its GPU by
    index. Nothing is guessed across hosts: a multi-host job with unnamed GPU files gets no match."""
    nodes = fleet.nodes()
    node = None
    note = ""
    if host:
        if host in nodes:
            node = host
        else:
            same = [n for n in nodes if n and _short(n) == _short(host)]
            if len(same) == 1:
                node, note = same[0], f"node {same[0]} taken as host {host} (same short name)"
    if node is None and UNNAMED in nodes and len(job_hosts or ()) <= 1:
        node = UNNAMED
        note = "the GPU sources name no host; the job runs on one host, taken to be theirs"
    if node is None:
        return RankGpus(None, [], [], None)
    node_gpus = fleet.gpus_of(node)
    idx = gpu_index(gpu)
    mine = [g for g in node_gpus if idx is not None and g.index == idx]
    return RankGpus(node, mine, node_gpus, "gpu" if mine else "node", note)


def coverage(g: GpuState, fleet: GpuFleet) -> dict[str, str]:
    """Per check of :data:`GPU_CHECKS`, "ok" / "unknown" / "n/a" for a GPU no finding names."""
    return {cid: _covered(cid, g, fleet)[0] for cid, _t, _r in GPU_CHECKS}


# -- the per-GPU health grid (GPUs x checks) ---------------------------------------------------------

# check id, title, the rules that judge it, what a GPU's sources must state for it to be judged
GPU_CHECKS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("xid", "Xid / lost", ("GPU001", "GPU002", "GPU003")),
    ("memory", "ECC / remap / pages", ("GPU004", "GPU005", "GPU006", "GPU007", "GPU008")),
    ("clocks", "clocks / throttle", ("GPU009", "GPU010")),
    ("nvlink", "NVLink", ("GPU011", "GPU012", "GPU020")),
    ("pcie", "PCIe link", ("GPU013", "GPU014", "GPU015", "GPU016")),
    ("dcgm", "DCGM diag / health", ("GPU017", "GPU018")),
)


def _covered(check: str, g: GpuState, fleet: GpuFleet) -> tuple[str, str]:
    """("ok"|"unknown"|"n/a", why) for a GPU no finding of ``check`` names."""
    node = g.node or UNNAMED
    if check == "xid":
        if fleet.has_fact(node, "kernel_log") or g.xid_last is not None:
            return "ok", "no Xid in the kernel log / Xid counter"
        return "unknown", "no kernel log or DCGM_FI_DEV_XID_ERRORS"
    if check == "memory":
        known = [
            x
            for x in (
                g.ecc_volatile_uncorrectable,
                g.remap_pending,
                g.remap_failure,
                g.retired_dbe,
                g.retired_sbe,
            )
            if x is not None
        ]
        if known:
            return "ok", "ECC / remap / retired pages stated and clean"
        return "unknown", "no ECC, row-remap or retired-page state exported"
    if check == "clocks":
        if g.clock_reasons is not None:
            return "ok", "no throttle reason that counts"
        if g.sm_clock_mhz is not None and g.sm_max_mhz is not None and g.util_pct is not None:
            return "ok", "SM clock near max under load (throttle reasons not exported)"
        return "unknown", "no clock event reasons exported"
    if check == "nvlink":
        if g.nvlink_support == "none":
            return "n/a", "no NVLink by design"
        if g.nvlink_support is not None or g.nvlinks:
            return "ok", "links up"
        return "unknown", "no NVLink state (nvidia-smi nvlink -s)"
    if check == "pcie":
        if g.pcie is not None:
            return "ok", "link at capability (or idle power saving)"
        return "unknown", "no PCIe link state"
    if check == "dcgm":
        if fleet.has_fact(node, "diag") or fleet.has_fact(node, "health"):
            return "ok", "passed"
        return "unknown", "no dcgmi diag / health output"
    return "unknown", ""


def health_grid(fleet: GpuFleet, findings: list[Any]) -> list[dict[str, Any]]:
    """One row per GPU: identity and, per check, the worst finding's severity or ok/unknown/n/a.

    A finding counts for a GPU when its subject is the GPU's label, or the GPU's node (node-wide
    findings such as the same throttle reason on every GPU)."""
    rows = []
    by_subject: dict[Any, list[tuple[int, Any]]] = {}  # 10,000 GPUs x checks: no scan of every finding
    for i, f in enumerate(findings):
        by_subject.setdefault(f.subject, []).append((i, f))
    for g in fleet.gpus:
        label = g.label()
        node_label = g.node or "the node the files describe"
        mine = by_subject.get(label, [])
        if node_label != label:
            mine = sorted(mine + by_subject.get(node_label, []), key=lambda x: x[0])  # findings' order
        checks = {}
        for cid, _title, rules in GPU_CHECKS:
            hits = [f for _, f in mine if f.rule in rules]
            if hits:
                worst = max(hits, key=lambda f: (int(f.severity), f.score))
                checks[cid] = {
                    "status": str(worst.severity),
                    "detail": worst.summary[:200],
                    "rules": sorted({f.rule for f in hits}),
                }
            else:
                status, why = _covered(cid, g, fleet)
                checks[cid] = {"status": status, "detail": why}
        rows.append(
            {
                "gpu": label,
                "node": g.node,
                "index": g.index,
                "bus_id": g.bus_id,
                "uuid": g.uuid,
                "model": g.model,
                "numa_node": g.numa_node,
                "nearest_nic": g.nearest_nic,
                "ranks": list(g.ranks),
                "pod": g.pod,
                "checks": checks,
            }
        )
    return rows
