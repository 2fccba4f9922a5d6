"""The diagnosis pipeline: gather observations (live or from files), run the rule catalog, return a
:class:`~clusterdoctor.model.Diagnosis`. The CLI only chooses sources and a report format."""

from __future__ import annotations

import datetime as _dt
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.model import Diagnosis, SourceRef
from clusterdoctor.rules.registry import Observations, run_rules
from clusterdoctor.topology.model import Topology


def add_topology(obs: Observations, topo: Topology) -> None:
    """Put a topology and the derived kinds the NUMA/PCIe rules require into ``obs``."""
    if obs.has("topology"):
        obs.data.setdefault("warnings_list", []).append(
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
        obs.data.setdefault("warnings_list", []).append(f"{topo.source}: {w}")


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
    kube: Any = None,
) -> list[dict[str, Any]]:
    """Audit live processes (``pids``, or those matching ``match``, or every GPU/NIC user).

    With ``kube`` (a :class:`~clusterdoctor.observe.node.kube_context.KubeContext`) each record of a
    process in a pod gets ``pod``: namespace/pod/container and the pod's GPUs and exclusive CPUs.
    """
    from clusterdoctor.observe.node import procfs
    from clusterdoctor.topology import placement

    if pids:
        chosen = list(pids)
    elif match:
        chosen = procfs.find_pids(match, proc_root)
    else:
        chosen = procfs.list_pids(proc_root)
    from clusterdoctor.observe.node.nvml import gpu_uuids

    # sysfs_root maps uverbs fds to HCAs; NVML (when present) adds the GPUs each pid really uses
    infos = procfs.collect_processes(chosen, proc_root, sysfs_root=sysfs_root)
    out = [r.as_dict() for r in placement.audit(infos, topo, gpu_uuids=gpu_uuids() or None)]
    if not pids and not match:
        out = [p for p in out if p.get("gpus") or p.get("nics")]
    if kube is not None:
        kube.annotate(out, proc_root)
    return out


def new_observations(clock: Callable[[], float] = time.time) -> Observations:
    """Empty observations stamped with the time the diagnosis runs (``obs["now"]``).

    ``clock`` is read once, here: rules and the report take "now" from the observations, never
    from the system clock, so a test can pin it (and a bundle diagnosed offline is judged against
    when it was collected, not when it is read)."""
    obs = Observations()
    obs.put("warnings_list", [])
    obs.put("now", float(clock()))
    return obs


def merge_into(obs: Observations, data: dict[str, Any]) -> None:
    """Add loaded observations to ``obs``: topologies, processes and metric windows merge their own way."""
    metric_kinds = {k: v for k, v in data.items() if k == "metrics" or k.endswith("_metrics")}
    if metric_kinds:
        from clusterdoctor.analyze.metric_window import merge_metric_observations

        merge_metric_observations(obs.data, metric_kinds)
    for kind, value in data.items():
        if kind in metric_kinds or kind == "described_as":
            continue
        if kind == "topology":
            add_topology(obs, value)
        elif kind == "warnings":
            obs.data.setdefault("warnings_list", []).extend(value)
        elif kind == "processes":
            add_processes(obs, value)
        elif kind == "etcd_status" and obs.has(kind) and hasattr(obs.get(kind), "merge"):
            obs.put(kind, obs.get(kind).merge(value))
        elif obs.has(kind) and isinstance(obs.get(kind), list) and isinstance(value, list):
            obs.get(kind).extend(value)
        else:
            obs.put(kind, value)


Progress = Callable[[int, int, str], None]


def load_sources(
    obs: Observations, paths: Iterable[str | Path], progress: Progress | None = None
) -> list[SourceRef]:
    """Load each SOURCE into ``obs`` by content; returns the references of those used.

    A SOURCE is a file, a sysfs tree, or a folder (an incident folder: every file under it,
    recursively, see :func:`clusterdoctor.observe.detect.walk_sources`). A file that cannot be used
    — unrecognised, unreadable, malformed — never stops the others: its reason becomes a warning of
    the report. :class:`InputError` only when nothing at all could be used (with the one reason
    when one file was given). ``progress(done, total, path)`` is called before each file.
    """
    from clusterdoctor.observe.detect import walk_sources
    from clusterdoctor.observe.limits import virtual_inputs

    items: list[Path] = []
    warnings = obs.data.setdefault("warnings_list", [])
    virtual: dict[str, bytes] = {}
    for path in paths:
        p = Path(path)
        if str(path) == "-":
            virtual[STDIN_NAME] = read_stdin()
            items.append(Path(STDIN_NAME))
            continue
        if p.is_dir() and not (p.name == "sys" and (p / "devices" / "system").is_dir()):
            walk = walk_sources(p)
            warnings.extend(walk.warnings(p))
            if not walk.sources:
                warnings.append(f"{p}: empty folder (no file to read)")
            items.extend(walk.sources)
        else:
            items.append(p)  # named on the command line: read even if it looks like a backup
    seen: set[Path] = set()
    unique = []
    for item in items:  # `diagnose dir dir/file` reads the file once
        key = item.resolve() if item.exists() else item
        if key not in seen:
            seen.add(key)
            unique.append(item)
    items = unique
    with virtual_inputs(virtual):
        refs, failures = _load_items(obs, items, warnings, progress)
    if not refs:
        if len(failures) == 1:
            raise failures[0]
        if not failures:
            raise InputError("no file to read", ", ".join(str(p) for p in paths) or None)
        raise InputError(
            f"nothing recognised in {len(failures)} files (first: {failures[0].one_line()})",
            ", ".join(str(p) for p in paths),
        )
    return refs


STDIN_NAME = "<stdin>"


def read_stdin(stream: Any = None) -> bytes:
    """Standard input, whole (``diagnose -``: a paste), up to the ``input`` limit; InputError past it.
    On a terminal, one line on stderr says how to end the paste."""
    import sys

    from clusterdoctor.observe.limits import human_size, max_input_bytes

    f = stream if stream is not None else sys.stdin.buffer
    if stream is None and sys.stdin.isatty():
        print("clusterdoctor: paste the output, then press Ctrl-D on a line of its own", file=sys.stderr)
    cap = max_input_bytes()
    data = f.read(cap + 1)
    if len(data) > cap:
        raise InputError(f"more than the input limit of {human_size(cap)}", STDIN_NAME)
    if not data.strip():
        raise InputError("empty (nothing was piped or pasted)", STDIN_NAME)
    return data


def _load_items(
    obs: Observations, items: list[Path], warnings: list[str], progress: Progress | None
) -> tuple[list[SourceRef], list[InputError]]:
    from clusterdoctor.observe.detect import load_path

    refs: list[SourceRef] = []
    failures: list[InputError] = []
    for i, item in enumerate(items):
        if progress is not None:
            progress(i, len(items), str(item))
        try:
            what, data = load_path(item)
        except InputError as e:
            failures.append(e.with_path(str(item)))
            warnings.append(f"not used: {e.with_path(str(item)).one_line()}")
            continue
        except Exception as e:  # a parser bug must not cost the user the other files
            failures.append(
                InputError(
                    f"could not be read ({type(e).__name__}: {str(e)[:200]}); "
                    "this is a clusterdoctor bug, please report it with the file",
                    str(item),
                )
            )
            warnings.append(f"not used: {failures[-1].one_line()}")
            continue
        refs.append(SourceRef(what, str(item)))
        merge_into(obs, data)
    if progress is not None:
        progress(len(items), len(items), "")
    return refs, failures


def add_prometheus(
    obs: Observations, url: str, since_seconds: float, step: float | None = None, auth: Any = None
) -> SourceRef:
    """Pull the series the rules need from a Prometheus server over the last ``since_seconds``:
    the control plane's, and dcgm-exporter's GPU health (the fleet queries of ``gpu health``, over
    at most the last 10 minutes of the window) where the server has them; ``auth``: a
    :class:`~clusterdoctor.observe.prom_auth.PromAuth` (bearer token, CA file, headers)."""
    from clusterdoctor.analyze.metric_window import observations_from_metrics
    from clusterdoctor.errors import CollectError, InputError
    from clusterdoctor.observe.control.prom_api import PromClient, collect_for_rules
    from clusterdoctor.redact import redact_urls

    client = auth.client(url) if auth is not None else PromClient(url)
    res = collect_for_rules(url, since_seconds, step, client=client)
    merge_into(obs, dict(observations_from_metrics(res)))
    shown = redact_urls(url)  # reports name the server, never its credentials
    warnings = obs.data.setdefault("warnings_list", [])
    warnings.extend(redact_urls(f"prometheus {shown}: {e}") for e in res.get("errors") or [])
    detail = f"last {since_seconds:g} s; {len(res.get('present') or [])} metrics"
    try:
        names = client.metric_names()
    except (CollectError, InputError):
        names = set()  # collect_for_rules has already reported what the server would not answer
    if any(n.startswith("DCGM_FI_") for n in names):
        from clusterdoctor.observe.gpu.dcgm_fleet import collect_fleet

        try:
            fleet = collect_fleet(url, min(since_seconds, 600.0), client=client)
        except (CollectError, InputError) as e:
            warnings.append(redact_urls(f"prometheus {shown}: dcgm-exporter series: {e}"))
        else:
            warnings.extend(redact_urls(f"prometheus {shown}: dcgm-exporter {e}") for e in fleet.errors)
            if fleet.reports:
                merge_into(obs, {"gpu_reports": fleet.reports})
                detail += f"; dcgm-exporter: {len(fleet.reports)} nodes"
    detail += _add_node_series(obs, client, names, since_seconds, shown, warnings)
    return SourceRef("prometheus", shown, detail)


def _add_node_series(
    obs: Observations, client: Any, names: set[str], since_seconds: float, shown: str, warnings: list[str]
) -> str:
    """The agents' findings and down sources, node exporter's filesystems (observe.node.prom_fleet),
    where the server has them; returns what the source line adds."""
    from clusterdoctor.errors import CollectError, InputError
    from clusterdoctor.observe.node import prom_fleet
    from clusterdoctor.redact import redact_urls

    ib = {n for n in names if n.startswith("node_infiniband_")}
    if not ({"clusterdoctor_finding", "clusterdoctor_source_up", "node_filesystem_size_bytes"} & names or ib):
        return ""
    detail = ""
    try:
        at = client.server_time()
        if "clusterdoctor_finding" in names or "clusterdoctor_source_up" in names:
            found = prom_fleet.agent_findings(client, since_seconds, at)
            down = prom_fleet.agent_sources_down(client, at)
            obs.put("agent_findings", found)
            nodes = {f.node for f in found}
            detail += f"; clusterdoctor agents: {len(found)} findings on {len(nodes)} nodes"
            warnings.extend(
                f"agent on {node}: source {src} down (clusterdoctor_source_up 0)" for node, src in down
            )
        if "node_filesystem_size_bytes" in names:
            rows = prom_fleet.node_filesystems(client, at)
            if rows:
                merge_into(obs, {"fs_usage": rows})
            nodes = {r.source for r in rows}
            detail += f"; node exporter: {len(rows)} filesystem rows on {len(nodes)} nodes"
        if ib:
            ports, rates = prom_fleet.node_infiniband(client, since_seconds, at, ib)
            if ports:
                merge_into(obs, {"rdma": ports})
                if rates:
                    merge_into(obs, {"rdma_rates": rates})
                detail += f"; node exporter: {len(ports)} InfiniBand ports"
    except (CollectError, InputError) as e:
        warnings.append(redact_urls(f"prometheus {shown}: node series: {e}"))
    return detail


def agent_finding_objects(obs: Observations) -> list[Any]:
    """The agents' findings read from Prometheus as report findings (source ``agent on NODE``)."""
    from clusterdoctor.model import Evidence, Finding, Severity
    from clusterdoctor.rules.registry import get_rule

    out = []
    for a in obs.get("agent_findings") or []:
        try:
            sev = Severity[a.severity.upper()]
        except KeyError:
            continue  # a label this version does not know: not ranked as if it did
        r = get_rule(a.rule)
        src = f"agent on {a.node}"
        when = "exported now" if a.current else "cleared before the end of the window"
        out.append(
            Finding(
                rule=a.rule,
                title=r.title if r is not None else a.rule,
                layer=a.layer or (r.layer if r is not None else "node"),
                severity=sev,
                summary=f"{src}: {a.subject or a.rule} ({when})",
                evidence=[
                    Evidence(
                        f'clusterdoctor_finding{{rule="{a.rule}",subject="{a.subject}"}} on {a.node} ({when})',
                        round(a.score, 3),
                        unit="score",
                        source=src,
                    )
                ],
                fix=getattr(r, "fix", "") or "",
                score=a.score if a.current else a.score * 0.5,
                subject=f"{a.node}: {a.subject}" if a.subject else a.node,
            )
        )
    return out


def add_scrapes(
    obs: Observations, urls: Sequence[str], interval: float = 5.0, insecure: bool = False
) -> SourceRef:
    """Scrape /metrics endpoints twice, ``interval`` seconds apart, for rates."""
    from clusterdoctor.analyze.metric_window import observations_from_metrics
    from clusterdoctor.observe.control.scrape import scrape_window
    from clusterdoctor.redact import redact_urls

    window = scrape_window(list(urls), interval=interval, insecure=insecure)
    obs.data.setdefault("warnings_list", []).extend(redact_urls(w) for w in window.warnings)
    merge_into(obs, dict(observations_from_metrics(window)))
    return SourceRef(
        "scrape",
        ", ".join(redact_urls(u) for u in urls),  # reports name the targets, never their credentials
        f"2 scrapes {interval:g} s apart" if interval > 0 else "1 scrape",
    )


def add_etcd_endpoints(obs: Observations, endpoints: Sequence[str]) -> SourceRef:
    """Ask etcd itself (``etcdctl endpoint status/health -w json``)."""
    from clusterdoctor.observe.control.etcd import collect_etcd_status

    obs.put("etcd_status", collect_etcd_status(list(endpoints)))
    return SourceRef("etcdctl", ",".join(endpoints))


def parse_since(text: str) -> float:
    """``2h``, ``30m``, ``90s``, ``1d`` or plain seconds -> seconds."""
    from clusterdoctor.errors import InputError

    t = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if t and t[-1] in units:
            value = float(t[:-1]) * units[t[-1]]
        else:
            value = float(t)
    except ValueError:
        raise InputError(f"bad duration {text!r} (use e.g. 90s, 30m, 2h, 1d)", "--since") from None
    if value <= 0:
        raise InputError(f"duration must be positive, got {text!r}", "--since")
    return value


HEATMAP_METRICS = (
    ("kube-scheduler scheduling attempt latency", "scheduler_scheduling_attempt_duration_seconds"),
    ("kube-scheduler pod scheduling (end to end)", "scheduler_pod_scheduling_sli_duration_seconds"),
    ("kube-scheduler pod scheduling (end to end)", "scheduler_pod_scheduling_duration_seconds"),
    ("kube-scheduler e2e scheduling latency", "scheduler_e2e_scheduling_duration_seconds"),
    ("etcd WAL fsync latency", "etcd_disk_wal_fsync_duration_seconds"),
)
MAX_TIMELINE_EVENTS = 500


def latency_heatmaps(obs: Observations) -> list[dict[str, Any]]:
    """Per-step bucket increases of the latency histograms worth drawing (needs 2+ scrapes/steps)."""
    window = obs.get("metrics")
    if window is None or not hasattr(window, "histogram_steps"):
        return []
    out, seen = [], set()
    for title, name in HEATMAP_METRICS:
        if title in seen or not window.has(name + "_bucket"):
            continue
        steps = window.histogram_steps(name)
        if not steps:
            continue
        bounds = sorted({b for _, h in steps for b, _ in h.buckets})
        counts = []
        for _, h in steps:
            cum = dict(h.buckets)
            prev, row = 0.0, []
            for b in bounds:
                c = cum.get(b, prev)
                row.append(max(0.0, c - prev))
                prev = max(prev, c)
            counts.append(row)
        out.append(
            {
                "title": title,
                "metric": name,
                "times": [t for t, _ in steps],
                "bounds": bounds,
                "counts": counts,
            }
        )
        seen.add(title)
    return out


def run(obs: Observations, sources: list[SourceRef], host: str | None = None) -> Diagnosis:
    """Run every rule whose inputs are present; the others are listed as skipped with the reason."""
    findings, skipped, ran = run_rules(obs)
    remote = agent_finding_objects(obs)
    if remote:
        from clusterdoctor.rules.registry import rank_key

        findings = sorted(findings + remote, key=rank_key)
    topo = obs.get("topology")
    events = sorted(
        (e for e in obs.get("events") or [] if getattr(e, "time", None) is not None), key=lambda e: e.time
    )
    return Diagnosis(
        # offline sources describe another machine: never label them with this host's name
        host=host or (topo.hostname if topo is not None and topo.hostname else "unknown (offline sources)"),
        generated_at=_dt.datetime.fromtimestamp(
            obs.get("now") if obs.get("now") is not None else time.time(), _dt.timezone.utc
        )
        .replace(microsecond=0)
        .isoformat(),
        sources=sources,
        findings=findings,
        skipped=skipped,
        warnings=list(obs.get("warnings_list") or []),
        rules_run=ran,
        topology=topo,
        placement=obs.get("processes") or [],
        heatmaps=latency_heatmaps(obs),
        timeline=events[:MAX_TIMELINE_EVENTS],
        gpu_grid=gpu_grid(obs, findings),
        step_times=step_times(obs),
    )


def step_times(obs: Observations) -> dict[str, Any]:
    """The step-time chart's data when fail-slow step records were read (see analyze.step_plot)."""
    table = obs.get("watch")
    if table is None or getattr(table, "wall", None) is None:
        return {}
    from clusterdoctor.analyze.step_plot import step_plot

    res = obs.get("_failslow")
    return step_plot(table, list(getattr(res, "episodes", []) or []))


def gpu_grid(obs: Observations, findings: list[Any]) -> list[dict[str, Any]]:
    """The per-GPU health grid when GPU sources were given (see analyze.gpu_health.health_grid)."""
    if not (obs.get("gpu_reports") or obs.get("metrics") is not None):
        return []
    from clusterdoctor.analyze.gpu_health import gpu_fleet, health_grid

    return health_grid(gpu_fleet(obs), findings)


def diagnose_local(
    sysfs_root: str = "/",
    proc_root: str = "/proc",
    obs: Observations | None = None,
    extra_sources: list[SourceRef] | None = None,
    kube: Any = None,
) -> Diagnosis:
    """Diagnose this machine, live: topology from sysfs, placement of every GPU/NIC-using process
    (plus whatever ``obs`` already holds, e.g. metrics pulled from Prometheus). With ``kube`` (a
    :class:`~clusterdoctor.observe.node.kube_context.KubeContext`) findings name pods, not pids."""
    from clusterdoctor.topology.build import from_sysfs

    obs = obs if obs is not None else new_observations()
    topo = from_sysfs(sysfs_root)
    add_topology(obs, topo)
    sources = [SourceRef("sysfs", sysfs_root), *(extra_sources or [])]
    try:
        placements = audit_processes(topo, proc_root=proc_root, sysfs_root=sysfs_root, kube=kube)
        add_processes(obs, placements)
        sources.append(SourceRef("procfs", proc_root, f"{len(placements)} GPU/NIC processes"))
        if not placements:
            obs.absent_reasons["processes"] = "no process on this machine uses a GPU or RDMA NIC"
    except ModuleNotFoundError as e:  # pragma: no cover - procfs module is part of the package
        obs.get("warnings_list").append(f"process audit unavailable: {e}")
    if kube is not None:
        add_kube_context(obs, kube, sources)
    _add_live_rdma(obs, sysfs_root, sources)
    add_live_gpu(obs, sysfs_root, sources)
    if kube is not None:
        from clusterdoctor.observe.node.kube_context import name_gpu_pods

        name_gpu_pods(obs)  # GPU-health findings name the pod holding the GPU
    return run(obs, sources, host=topo.hostname or socket.gethostname())


def add_kube_context(obs: Observations, kube: Any, sources: list[SourceRef]) -> None:
    """Pod resources as an observation (``pod_resources``: GPU → owning container, for GPU-health and
    straggler rules to name pods) and the context's warnings in the report."""
    for w in kube.warnings:
        obs.data.setdefault("warnings_list", []).append(w)
    if kube.resources is not None:
        obs.put("pod_resources", kube.resources)
        sources.append(
            SourceRef(
                "kubelet-pod-resources",
                kube.resources.socket,
                f"{kube.resources.api}, {len(kube.resources.containers)} containers",
            )
        )
    if kube.pods is not None:
        sources.append(SourceRef("kubernetes-pods", kube.pods.source, f"{len(kube.pods)} pods"))


def add_live_gpu(obs: Observations, sysfs_root: str, sources: list[SourceRef]) -> None:
    """This node's GPUs, live (NVML / nvidia-smi, kernel log, sysfs); what could not be read becomes the
    reason the GPU rules give when skipped."""
    from clusterdoctor.observe.gpu.live import collect_live_gpu

    live = collect_live_gpu(sysfs_root)
    if live.reports:
        merge_into(obs, {"gpu_reports": live.reports})
        sources.append(SourceRef("gpu", "live", ", ".join(live.used)))
    if live.skipped and not live.reports:
        obs.absent_reasons.setdefault("gpu_health", "no GPU source on this node: " + "; ".join(live.skipped))
    elif live.skipped:
        obs.data.setdefault("warnings_list", []).extend(f"GPU source not read: {s}" for s in live.skipped)


def _add_live_rdma(obs: Observations, sysfs_root: str, sources: list[SourceRef]) -> None:
    """RDMA port counters from sysfs, when the node has HCAs (one read: totals since reset)."""
    from clusterdoctor.observe.network.rdma import read_sysfs_infiniband

    try:
        ports = read_sysfs_infiniband(sysfs_root)
    except (OSError, InputError) as e:
        obs.data.setdefault("warnings_list", []).append(f"RDMA counters not read: {e}")
        return
    if ports:
        merge_into(obs, {"rdma": ports})
        sources.append(SourceRef("sysfs-infiniband", sysfs_root, f"{len(ports)} RDMA port(s)"))
