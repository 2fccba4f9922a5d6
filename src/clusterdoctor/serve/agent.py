"""``clusterdoctor serve agent``: this node's findings and key gauges as Prometheus metrics.

The agent diagnoses on a timer (``interval_s``, ``--interval``) in a worker thread: every source runs
in a pool with its own timeout; one that does not answer in time is abandoned for that round (and not
started again while it still runs), reported as ``clusterdoctor_source_up{source="…"} 0`` and its
rules as skipped. Then the rule catalogue runs over what arrived. A scrape of ``/metrics`` never
waits for a diagnosis: it gets the last result at once (the first scrape after start waits for the
first round, at most the longest source timeout plus a second).

Logs and the kernel log are read incrementally and their events expire after ``window_s``
(``--event-window``, :mod:`clusterdoctor.serve.agent_events`), so findings they raised clear and
alerts resolve. Exposition by Prometheus practice (:mod:`clusterdoctor.serve.agent_metrics`):

* ``clusterdoctor_finding{rule,severity,layer,subject}`` = score (subject without pids);
* ``clusterdoctor_findings{severity}``, ``clusterdoctor_rule_skipped{rule}``;
* ``clusterdoctor_source_up{source}``, ``clusterdoctor_source_duration_seconds{source}``;
* ``clusterdoctor_events_total{kind}`` (counter: events read from logs and the kernel log),
  ``clusterdoctor_log_lines_truncated_total{source}``;
* ``clusterdoctor_rdma_counter_total{device,port,counter}`` (the sysfs counters as they are; rates
  are PromQL's ``rate()``);
* ``clusterdoctor_diagnosis_timestamp_seconds``, ``clusterdoctor_diagnosis_duration_seconds``,
  ``clusterdoctor_diagnoses_total``, ``clusterdoctor_event_window_seconds``;
* ``clusterdoctor_build_info{version,python_version}``, ``process_*``;
* the Kubernetes series of :mod:`clusterdoctor.serve.kube_sources`.

Binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.serve.agent_events import DEFAULT_WINDOW_S
from clusterdoctor.serve.agent_metrics import Exposition, bounded_subject, build_info_lines, escape_label

__all__ = ["Agent", "Source", "default_sources", "escape_label", "make_server", "serve"]

DEFAULT_INTERVAL_S = 30.0  # --interval: one diagnosis per usual scrape interval


@dataclass
class Source:
    """A named collector: ``fn() -> {kind: value}``, given ``timeout_s`` per round."""

    name: str
    fn: Callable[[], dict[str, Any]]
    timeout_s: float = 5.0
    running: cf.Future | None = field(default=None, repr=False)
    harvested: bool = field(default=True, repr=False)  # the running call's counts were taken


@dataclass
class Snapshot:
    """One diagnosis round, rendered."""

    body: list[str]
    time: float
    duration_s: float


class Agent:
    """Runs sources and rules on a timer and serves the last result (see the module docstring)."""

    def __init__(
        self,
        sources: list[Source],
        max_workers: int = 8,
        pod_resources: bool = False,
        interval_s: float = DEFAULT_INTERVAL_S,
        window_s: float = DEFAULT_WINDOW_S,
        clock: Callable[[], float] = time.time,
        log: Any = None,
    ) -> None:
        self.sources = sources
        self.pod_resources = pod_resources  # a pod-resources socket is configured: always report its state
        self.pool = cf.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="cd-source")
        self.lock = threading.Lock()  # one diagnosis at a time
        self.interval_s = interval_s
        self.window_s = window_s
        self.clock = clock
        self.log = log
        self.prev_rdma: list[Any] | None = None
        self.events_total: dict[str, int] = {}
        self.truncated_total: dict[str, int] = {}
        self.diagnoses = 0
        self.last: Snapshot | None = None
        self._have_first = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_up: dict[str, bool] = {}
        self._warned: set[str] = set()

    # --- one round ----------------------------------------------------------------------------------

    def collect(self) -> tuple[dict[str, Any], list[tuple[str, bool, float, str]]]:
        """Run every source (bounded by its timeout); returns observations and per-source status.

        The wait polls (``time.sleep`` slices) rather than blocking in ``Future.result(timeout)``:
        libfaketime, under which the suite runs a second time, does not intercept the semaphore wait
        behind a lock timeout (it overruns by the fake offset), and the agent must keep time there too."""
        status: dict[str, tuple[str, bool, float, str]] = {}
        answers: dict[str, dict[str, Any]] = {}
        pending = []
        for s in self.sources:
            if s.running is not None and not s.running.done():
                status[s.name] = (s.name, False, 0.0, "still running from an earlier round")
                continue
            if s.running is not None and not s.harvested and s.running.exception() is None:
                self._count(s, dict(s.running.result() or {}))  # a call abandoned in an earlier round
            s.running = self.pool.submit(s.fn)
            s.harvested = False
            pending.append((s, time.monotonic()))
        while pending:
            still = []
            for s, t0 in pending:
                fut = s.running
                assert fut is not None
                secs = time.monotonic() - t0
                if fut.done():
                    err = fut.exception()
                    if err is None:
                        answers[s.name] = self._count(s, dict(fut.result() or {}))
                        status[s.name] = (s.name, True, secs, "")
                    else:
                        status[s.name] = (s.name, False, secs, f"{type(err).__name__}: {err}")
                elif secs >= s.timeout_s:
                    status[s.name] = (s.name, False, secs, f"timed out after {s.timeout_s:g} s")
                else:
                    still.append((s, t0))
            pending = still
            if pending:
                time.sleep(0.005)
        data: dict[str, Any] = {}
        for s in self.sources:  # merged in source order, whatever order they finished in
            for k, v in (answers.get(s.name) or {}).items():
                if isinstance(v, list) and isinstance(data.get(k), list):
                    data[k] = data[k] + v
                else:
                    data[k] = v
        ordered = [status[s.name] for s in self.sources if s.name in status]
        self._log_status(ordered, data)
        return data, ordered

    def _count(self, s: Source, out: dict[str, Any]) -> dict[str, Any]:
        """Take the source's new-event and cut-line counts out of its answer (once per call)."""
        counts = out.pop("event_counts", None) or {}
        cut = int(out.pop("lines_truncated", 0) or 0)
        if not s.harvested:
            s.harvested = True
            for k, n in counts.items():
                self.events_total[k] = self.events_total.get(k, 0) + int(n)
            if cut or s.name in self.truncated_total:
                self.truncated_total[s.name] = self.truncated_total.get(s.name, 0) + cut
        return out

    def _log_status(self, status: list[tuple[str, bool, float, str]], data: dict[str, Any]) -> None:
        if self.log is None:
            return
        for name, ok, secs, why in status:
            if self._was_up.get(name) != ok:
                if ok:
                    self.log.info("source up", source=name, seconds=f"{secs:.3f}")
                else:
                    self.log.warn("source down", source=name, reason=why)
            self._was_up[name] = ok
        warnings = set(getattr(data.get("kube_context"), "warnings", None) or [])
        for w in sorted(warnings - self._warned):
            self.log.warn("kubernetes source", warning=w[:500])
        self._warned = warnings

    def diagnose(self) -> Snapshot:
        """One round: collect, run the rules, render; kept as the result scrapes get."""
        from clusterdoctor.observe.network.rdma import rates
        from clusterdoctor.rules.registry import Observations, run_rules
        from clusterdoctor.serve.kube_sources import kube_metric_lines

        with self.lock:
            t0 = time.monotonic()
            data, status = self.collect()
            obs = Observations()
            obs.put("now", self.clock())  # the agent is live: now is when it ran
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
            e = Exposition()
            e.family(
                "clusterdoctor_source_up",
                "gauge",
                "Whether the source answered within its timeout in the last diagnosis.",
                [({"source": n}, 1 if ok else 0) for n, ok, _, _ in status],
            )
            e.family(
                "clusterdoctor_source_duration_seconds",
                "gauge",
                "Time the source took in the last diagnosis.",
                [({"source": n}, round(secs, 6)) for n, _, secs, _ in status],
            )
            best: dict[tuple[str, str, str, str], float] = {}
            for f in findings:
                key = (f.rule, str(f.severity), f.layer, bounded_subject(f.subject))
                best[key] = max(best.get(key, float("-inf")), float(f.score))
            e.family(
                "clusterdoctor_finding",
                "gauge",
                "A finding of the rule catalogue (value: score).",
                [
                    ({"rule": r, "severity": sev, "layer": lay, "subject": sub}, round(v, 6))
                    for (r, sev, lay, sub), v in best.items()
                ],
            )
            e.family(
                "clusterdoctor_findings",
                "gauge",
                "Findings of the last diagnosis by severity.",
                [
                    ({"severity": sev}, sum(1 for f in findings if str(f.severity) == sev))
                    for sev in ("info", "warning", "critical")
                ],
            )
            e.family(
                "clusterdoctor_rule_skipped",
                "gauge",
                "A rule that could not run (its input is missing).",
                [({"rule": s.rule}, 1) for s in skipped],
            )
            e.family(
                "clusterdoctor_events_total",
                "counter",
                "Events of interest read from the watched logs and the kernel log since the agent started.",
                [({"kind": k}, n) for k, n in sorted(self.events_total.items())],
            )
            if self.truncated_total:
                e.family(
                    "clusterdoctor_log_lines_truncated_total",
                    "counter",
                    "Log lines longer than the line limit, cut before parsing.",
                    [({"source": k}, n) for k, n in sorted(self.truncated_total.items())],
                )
            ports = data.get("rdma") or []
            if ports:
                e.family(
                    "clusterdoctor_rdma_counter_total",
                    "counter",
                    "RDMA port hardware counters as sysfs reads them (rate() them in PromQL).",
                    [
                        ({"device": p.device, "port": str(p.port), "counter": k}, int(v))
                        for p in ports
                        for k, v in sorted(p.counters.items())
                        if k != "lifespan" and isinstance(v, int)
                    ],
                )
            e.raw(kube_metric_lines(data, self.pod_resources))
            snap = Snapshot(e.lines, self.clock(), time.monotonic() - t0)
            self.diagnoses += 1
            self.last = snap
            self._have_first.set()
        if self.log is not None:
            self.log.debug(
                "diagnosis", findings=len(findings), skipped=len(skipped), seconds=f"{snap.duration_s:.3f}"
            )
        return snap

    # --- the timer ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Diagnose now and then every ``interval_s`` in a daemon thread (idempotent)."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.is_set():
                t0 = time.monotonic()
                try:
                    self.diagnose()
                except Exception as e:  # a bug in one round must not stop the timer
                    if self.log is not None:
                        self.log.error("diagnosis failed", error=f"{type(e).__name__}: {e}")
                _sleep_until(t0 + self.interval_s, self._stop)

        self._thread = threading.Thread(target=loop, name="cd-diagnosis", daemon=True)
        self._thread.start()

    def scrape(self, wait_s: float | None = None) -> str:
        """The exposition of the last round (waiting for the first at most ``wait_s``)."""
        from clusterdoctor.serve.agent_metrics import process_lines

        if wait_s is None:
            wait_s = max((s.timeout_s for s in self.sources), default=1.0) + 1.0
        _sleep_until(time.monotonic() + wait_s, self._have_first)
        snap = self.last
        e = Exposition()
        e.raw(build_info_lines())
        e.raw(process_lines())
        e.family(
            "clusterdoctor_event_window_seconds",
            "gauge",
            "Events older than this no longer raise findings (--event-window).",
            [({}, self.window_s)],
        )
        e.family(
            "clusterdoctor_diagnoses_total", "counter", "Diagnosis rounds completed.", [({}, self.diagnoses)]
        )
        if snap is not None:
            e.family(
                "clusterdoctor_diagnosis_timestamp_seconds",
                "gauge",
                "When the last diagnosis completed (unix time).",
                [({}, snap.time)],
            )
            e.family(
                "clusterdoctor_diagnosis_duration_seconds",
                "gauge",
                "How long the last diagnosis took.",
                [({}, round(snap.duration_s, 6))],
            )
            e.raw(snap.body)
        return e.text()

    def render(self) -> str:
        """A diagnosis now and its exposition (without the timer: tests, one-shot use)."""
        self.diagnose()
        return self.scrape(0)

    def close(self) -> None:
        self._stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)


def _sleep_until(deadline: float, event: threading.Event) -> None:
    """Sleep until ``deadline`` (monotonic) or ``event`` is set, in short slices (see collect)."""
    while not event.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


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
    kernel_logs: list[str] | None = None,
    window_s: float = DEFAULT_WINDOW_S,
    clock: Callable[[], float] = time.time,
) -> list[Source]:
    """RDMA counters from sysfs and the given log files, each with ``timeout_s``; with ``proc_root``
    the placement of GPU/NIC processes, and with a pod-resources socket / node name their pods;
    with ``kernel_logs`` the kernel log (first readable path) for GPU events."""
    from clusterdoctor.observe.network.rdma import read_sysfs_infiniband
    from clusterdoctor.serve.agent_events import KernelLogSource, LogFileSource

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

            # the kernel log has a source of its own when configured (incremental, windowed)
            live = collect_live_gpu(sysfs_root, timeout=timeout_s, kernel_log=not kernel_logs)
            return {"gpu_reports": live.reports}

        # GPU health (NVML, nvidia-smi, sysfs) on the node the agent is deployed to
        srcs.append(Source("gpu", gpu, timeout_s))
    if kernel_logs:
        srcs.append(Source("kernel-log", KernelLogSource(kernel_logs, window_s, clock), timeout_s))
    for path in logs or []:
        srcs.append(Source(f"file {path}", LogFileSource(path, window_s, clock), timeout_s))
    return srcs


def make_server(
    agent: Agent, host: str = "127.0.0.1", port: int = 9877, limits: Any = None, web: Any = None
) -> Any:
    """A bound, listening server answering ``/metrics`` (and ``/healthz``) from ``agent``'s last
    diagnosis, on the stack of :mod:`clusterdoctor.serve.http`; starts the agent's timer. ``web``: a
    :class:`~clusterdoctor.serve.agent_web.WebConfig` (basic auth; HTTPS only with its
    ``tls_server_config``). ``OSError`` if the address is taken."""
    from clusterdoctor.serve.agent_web import tls_context_factory
    from clusterdoctor.serve.http import make_server as http_server

    def app(environ: dict[str, Any], start: Any) -> list[bytes]:
        path = environ.get("PATH_INFO") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        headers = []
        if method not in ("GET", "HEAD"):
            body, ctype, code = b"method not allowed; GET /metrics\n", "text/plain", "405 Method Not Allowed"
        elif path == "/healthz":
            body, ctype, code = b"ok\n", "text/plain", "200 OK"
        elif web is not None and not web.authorized(environ.get("HTTP_AUTHORIZATION")):
            body, ctype, code = b"unauthorized\n", "text/plain", "401 Unauthorized"
            headers.append(("WWW-Authenticate", 'Basic realm="clusterdoctor"'))
        elif path == "/metrics":
            body = agent.scrape().encode("utf-8", "replace")  # a non-UTF-8 file name: "?", not a 500
            ctype, code = "text/plain; version=0.0.4; charset=utf-8", "200 OK"
        else:
            body, ctype, code = b"not found; try /metrics\n", "text/plain", "404 Not Found"
        start(code, [("Content-Type", ctype), ("Content-Length", str(len(body))), *headers])
        return [body]

    srv = http_server(app, host, port, limits, tls=tls_context_factory(web))
    agent.start()
    return srv


def serve(agent: Agent, host: str = "127.0.0.1", port: int = 9877) -> None:
    """Serve until interrupted."""
    srv = make_server(agent, host, port)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()
        agent.close()
