"""``clusterdoctor serve agent``: this node's findings and key derived gauges as Prometheus metrics.

Each scrape of ``/metrics`` runs every source with its own timeout in worker threads and then the
rule catalog over what arrived. A source that is slow or dead is reported as
``clusterdoctor_source_up{source="…"} 0`` and its rules as skipped; it never blocks the scrape.
A source still running from an earlier scrape is not started again (no pile-up of stuck threads).

Exposed (text format 0.0.4):

* ``clusterdoctor_finding{rule,severity,layer,subject}`` = score, one per finding;
* ``clusterdoctor_findings{severity}`` counts; ``clusterdoctor_rule_skipped{rule}`` = 1;
* ``clusterdoctor_source_up{source}``, ``clusterdoctor_source_duration_seconds{source}``;
* ``clusterdoctor_rdma_counter_rate{device,port,counter}`` between consecutive scrapes (error and
  congestion counters; data counters in bytes/s), ``clusterdoctor_events{kind}`` from logs.

Binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Agent", "Source", "default_sources", "escape_label", "make_server", "serve"]


def escape_label(v: str) -> str:
    """Escape a label value for the text exposition format."""
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class Source:
    """A named collector: ``fn() -> {kind: value}``, given ``timeout_s`` per scrape."""

    name: str
    fn: Callable[[], dict[str, Any]]
    timeout_s: float = 5.0
    running: cf.Future | None = field(default=None, repr=False)


class Agent:
    """Runs sources and rules on demand and renders the exposition."""

    def __init__(self, sources: list[Source], max_workers: int = 8, pod_resources: bool = False) -> None:
        self.sources = sources
        self.pod_resources = pod_resources  # a pod-resources socket is configured: always report its state
        self.pool = cf.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="cd-source")
        self.lock = threading.Lock()
        self.prev_rdma: list[Any] | None = None

    def collect(self) -> tuple[dict[str, Any], list[tuple[str, bool, float, str]]]:
        """Run every source (bounded by its timeout); returns observations and per-source status."""
        status = []
        data: dict[str, Any] = {}
        started = []
        for s in self.sources:
            if s.running is not None and not s.running.done():
                status.append((s.name, False, 0.0, "still running from an earlier scrape"))
                continue
            s.running = self.pool.submit(s.fn)
            started.append((s, time.monotonic()))
        for s, t0 in started:
            assert s.running is not None
            try:
                remaining = max(0.0, s.timeout_s - (time.monotonic() - t0))
                out = s.running.result(timeout=remaining)
                for k, v in (out or {}).items():
                    if isinstance(v, list) and isinstance(data.get(k), list):
                        data[k].extend(v)
                    else:
                        data[k] = v
                status.append((s.name, True, time.monotonic() - t0, ""))
            except cf.TimeoutError:
                status.append((s.name, False, time.monotonic() - t0, f"timed out after {s.timeout_s:g} s"))
            except Exception as e:
                status.append((s.name, False, time.monotonic() - t0, f"{type(e).__name__}: {e}"))
        return data, status

    def render(self) -> str:
        """One scrape: collect, run the rules, format the metrics."""
        from clusterdoctor.observe.network.rdma import rates
        from clusterdoctor.rules.registry import Observations, run_rules

        with self.lock:
            data, status = self.collect()
            obs = Observations()
            obs.put("now", time.time())  # the agent is live: now is when it scraped
            for k, v in data.items():
                obs.put(k, v)
            _add_node_observations(obs, data)
            if data.get("rdma"):
                if self.prev_rdma:
                    try:
                        obs.put("rdma_rates", rates(self.prev_rdma, data["rdma"]))
                    except Exception:
                        pass
                self.prev_rdma = data["rdma"]
            findings, skipped, _ = run_rules(obs)
        lines = [
            "# HELP clusterdoctor_source_up Whether the source answered within its timeout on this scrape.",
            "# TYPE clusterdoctor_source_up gauge",
        ]
        for name, ok, _, _ in status:
            lines.append(f'clusterdoctor_source_up{{source="{escape_label(name)}"}} {1 if ok else 0}')
        lines += [
            "# HELP clusterdoctor_source_duration_seconds Time the source took on this scrape.",
            "# TYPE clusterdoctor_source_duration_seconds gauge",
        ]
        for name, _, secs, _ in status:
            lines.append(f'clusterdoctor_source_duration_seconds{{source="{escape_label(name)}"}} {secs:.6f}')
        lines += [
            "# HELP clusterdoctor_finding A finding of the rule catalog (value: score).",
            "# TYPE clusterdoctor_finding gauge",
        ]
        for f in findings:
            lab = f'rule="{escape_label(f.rule)}",severity="{f.severity}",layer="{escape_label(f.layer)}",subject="{escape_label(f.subject or "")}"'
            lines.append(f"clusterdoctor_finding{{{lab}}} {f.score:.6g}")
        lines += [
            "# HELP clusterdoctor_findings Findings by severity.",
            "# TYPE clusterdoctor_findings gauge",
        ]
        for sev in ("info", "warning", "critical"):
            n = sum(1 for f in findings if str(f.severity) == sev)
            lines.append(f'clusterdoctor_findings{{severity="{sev}"}} {n}')
        lines += [
            "# HELP clusterdoctor_rule_skipped A rule that could not run (its input is missing).",
            "# TYPE clusterdoctor_rule_skipped gauge",
        ]
        for s in skipped:
            lines.append(f'clusterdoctor_rule_skipped{{rule="{escape_label(s.rule)}"}} 1')
        rr = obs.get("rdma_rates") or []
        if rr:
            lines += [
                "# HELP clusterdoctor_rdma_counter_rate RDMA counter increase per second between two scrapes.",
                "# TYPE clusterdoctor_rdma_counter_rate gauge",
            ]
            for r in rr:
                for k, v in sorted(r.per_s.items()):
                    lines.append(
                        f'clusterdoctor_rdma_counter_rate{{device="{escape_label(r.device)}",port="{r.port}",counter="{escape_label(k)}"}} {v:.6g}'
                    )
        from clusterdoctor.serve.kube_sources import kube_metric_lines

        lines += kube_metric_lines(data, self.pod_resources)
        evs = obs.get("events") or []
        if evs:
            counts: dict[str, int] = {}
            for e in evs:
                counts[e.kind] = counts.get(e.kind, 0) + 1
            lines += [
                "# HELP clusterdoctor_events Events of interest found in the watched logs.",
                "# TYPE clusterdoctor_events gauge",
            ]
            for k, n in sorted(counts.items()):
                lines.append(f'clusterdoctor_events{{kind="{escape_label(k)}"}} {n}')
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _add_node_observations(obs: Any, data: dict[str, Any]) -> None:
    """Topology and processes from the placement source merge the way diagnose merges them."""
    from clusterdoctor import diagnosis

    if data.get("topology") is not None:
        diagnosis.add_topology(obs, data["topology"])
    if "processes" in data:
        diagnosis.add_processes(obs, data["processes"])
    if data.get("gpu_reports"):
        from clusterdoctor.observe.node.kube_context import name_gpu_pods

        name_gpu_pods(obs)  # GPU-health findings name the pod holding the GPU


def default_sources(
    sysfs_root: str = "/",
    logs: list[str] | None = None,
    timeout_s: float = 5.0,
    proc_root: str | None = None,
    pod_resources_socket: str | None = None,
    node_name: str | None = None,
) -> list[Source]:
    """RDMA counters from sysfs and the given log files, each with ``timeout_s``; with ``proc_root``
    the placement of GPU/NIC processes, and with a pod-resources socket / node name their pods."""
    from clusterdoctor.observe.network.rdma import read_sysfs_infiniband

    srcs = [Source("rdma-sysfs", lambda: {"rdma": read_sysfs_infiniband(sysfs_root)}, timeout_s)]
    if proc_root or pod_resources_socket or node_name:

        def node() -> dict[str, Any]:
            from clusterdoctor.serve.kube_sources import kubernetes_source, placement_source

            out: dict[str, Any] = {}
            if pod_resources_socket or node_name:
                out.update(kubernetes_source(node_name, pod_resources_socket, timeout_s))
            if proc_root:
                ctx = out.get("kube_context")
                try:
                    out.update(placement_source(sysfs_root, proc_root, ctx))
                except Exception as e:
                    if ctx is None:
                        raise
                    # keep the pods reading; the failed audit shows as a warning series
                    ctx.warnings.append(f"placement audit: {type(e).__name__}: {e}")
            return out

        # placement needs the pod context first: one source, both readings, one timeout
        srcs.append(Source("node-placement" if proc_root else "kubernetes", node, timeout_s))

        def gpu() -> dict[str, Any]:
            from clusterdoctor.observe.gpu.live import collect_live_gpu

            live = collect_live_gpu(sysfs_root, timeout=timeout_s)
            return {"gpu_reports": live.reports}

        # GPU health (NVML, nvidia-smi, kernel log, sysfs) on the node the agent is deployed to
        srcs.append(Source("gpu", gpu, timeout_s))
    for path in logs or []:

        def load(path: str = path) -> dict[str, Any]:
            from clusterdoctor.observe.event_sources import load_event_observations

            out = load_event_observations(path)
            out.pop("warnings", None)
            return out

        srcs.append(Source(f"file {path}", load, timeout_s))
    return srcs


def make_server(agent: Agent, host: str = "127.0.0.1", port: int = 9877, limits: Any = None) -> Any:
    """A bound, listening server answering ``/metrics`` (and ``/healthz``) from ``agent``, on the
    stack of :mod:`clusterdoctor.serve.http` (body and read/idle limits, bounded worker threads);
    ``OSError`` if the address is taken. Scrapes are serialised by the agent's lock."""
    from clusterdoctor.serve.http import make_server as http_server

    def app(environ: dict[str, Any], start: Any) -> list[bytes]:
        path = environ.get("PATH_INFO") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            body, ctype, code = b"method not allowed; GET /metrics\n", "text/plain", "405 Method Not Allowed"
        elif path == "/healthz":
            body, ctype, code = b"ok\n", "text/plain", "200 OK"
        elif path == "/metrics":
            body = agent.render().encode("utf-8", "replace")  # a non-UTF-8 file name: "?", not a 500
            ctype, code = "text/plain; version=0.0.4; charset=utf-8", "200 OK"
        else:
            body, ctype, code = b"not found; try /metrics\n", "text/plain", "404 Not Found"
        start(code, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
        return [body]

    return http_server(app, host, port, limits)


def serve(agent: Agent, host: str = "127.0.0.1", port: int = 9877) -> None:
    """Serve until interrupted."""
    srv = make_server(agent, host, port)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()
        agent.close()
