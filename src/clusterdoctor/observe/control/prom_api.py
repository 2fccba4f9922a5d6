"""Prometheus HTTP API client (stdlib ``urllib``): instant and range queries, series, label values.

:class:`PromClient` returns :class:`~clusterdoctor.model.Series` lists; every call has a timeout.
Errors are one line: :class:`~clusterdoctor.errors.CollectError` when the server cannot be reached,
times out or does not speak the Prometheus API; :class:`~clusterdoctor.errors.InputError` when
Prometheus rejects the query (``bad_data``) or the URL is malformed.

:func:`collect_for_rules` pulls, over ``[now - since, now]``, the series the control-plane rules
use. Names differ across Kubernetes versions, so it first lists the metric names the server has
and only queries those present.
"""

from __future__ import annotations

import json
import math
import urllib.parse
from typing import Any

from clusterdoctor.analyze.metric_window import MetricWindow
from clusterdoctor.errors import CollectError, InputError
from clusterdoctor.model import Series

__all__ = [
    "RULE_METRICS",
    "PromClient",
    "answer_cap",
    "collect_for_rules",
    "default_step",
    "series_from_response",
]

# Metric families the rules read (histograms by base name), newest names first where renamed.
RULE_HISTOGRAMS: tuple[str, ...] = (
    "etcd_disk_wal_fsync_duration_seconds",
    "etcd_disk_backend_commit_duration_seconds",
    "etcd_network_peer_round_trip_time_seconds",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_scheduling_algorithm_duration_seconds",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_pod_scheduling_duration_seconds",
    "scheduler_e2e_scheduling_duration_seconds",
    "apiserver_request_sli_duration_seconds",
    "apiserver_request_slo_duration_seconds",
    "apiserver_request_duration_seconds",
    "kubelet_pod_start_sli_duration_seconds",
    "kubelet_pod_worker_duration_seconds",
    "kubelet_pleg_relist_duration_seconds",
)
RULE_SCALARS: tuple[str, ...] = (
    "up",
    "kubernetes_build_info",
    "etcd_server_has_leader",
    "etcd_server_is_leader",
    "etcd_server_leader_changes_seen_total",
    "etcd_server_slow_apply_total",
    "etcd_server_heartbeat_send_failures_total",
    "etcd_server_slow_read_indexes_total",
    "etcd_server_proposals_failed_total",
    "etcd_network_peer_sent_failures_total",
    "etcd_mvcc_db_total_size_in_bytes",
    "etcd_server_quota_backend_bytes",
    "scheduler_pending_pods",
    "scheduler_schedule_attempts_total",
    "apiserver_request_total",
    "kubelet_runtime_operations_errors_total",
    "kubelet_started_pods_errors_total",
)
RULE_METRICS = RULE_HISTOGRAMS + RULE_SCALARS

# High-cardinality histograms are summed server-side down to the labels the rules group by.
AGGREGATE_BY: dict[str, tuple[str, ...]] = {
    "apiserver_request_duration_seconds": ("instance", "verb", "resource", "scope", "subresource"),
    "apiserver_request_sli_duration_seconds": ("instance", "verb", "resource", "scope", "subresource"),
    "apiserver_request_slo_duration_seconds": ("instance", "verb", "resource", "scope", "subresource"),
    "kubelet_pod_worker_duration_seconds": ("instance", "operation_type"),
}


# A decoded answer takes about 12 times its JSON (measured: 32 MiB of range-query answer peaks at
# 0.45 GB), so one answer is held to 64 MiB or a quarter of the ``input`` budget when that is more (and
# never more than ``input``), refused as it arrives past that: that query is reported, the others kept.
ANSWER_MAX = 64 << 20
ANSWER_SHARE = 4


def answer_cap() -> int:
    """The most bytes of one Prometheus answer read (see :data:`ANSWER_MAX`)."""
    from clusterdoctor.observe.limits import max_input_bytes

    limit = max_input_bytes()
    return min(limit, max(ANSWER_MAX, limit // ANSWER_SHARE))


def default_step(since_seconds: float) -> float:
    """A step that keeps a range query near 720 points (at least 15 s)."""
    return max(15.0, math.ceil(since_seconds / 720.0))


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


class PromClient:
    """A Prometheus server at ``url`` (``http://host:9090``, optionally with a path prefix).

    Every request is bounded (:mod:`clusterdoctor.observe.http_client`): connect within
    ``min(5, timeout)`` s, each read within ``timeout`` s, the whole answer within ``6 * timeout`` s,
    and all requests of this client within ``run_seconds`` (default: the ``seconds`` budget of
    :mod:`clusterdoctor.observe.limits`); answers above the ``input`` budget are refused as they
    arrive and error replies are read to 64 KiB at most."""

    def __init__(
        self, url: str, timeout: float = 10.0, headers: dict[str, str] | None = None,
        run_seconds: float | None = None, ssl_context: Any = None,
    ) -> None:  # fmt: skip
        from clusterdoctor.observe.http_client import Deadline
        from clusterdoctor.observe.limits import current

        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InputError("not an http(s) URL of a Prometheus server", url)
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.ssl_context = ssl_context  # https: a CA file / client certificate (observe/prom_auth.py)
        self.run = Deadline(current().seconds if run_seconds is None else run_seconds)

    # -- transport -----------------------------------------------------------------------------
    def _call(self, path: str, params: list[tuple[str, str]], post: bool = True) -> Any:
        where = f"{self.url}{path}"
        raw = self._fetch(path, params, post)
        try:
            doc = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise CollectError(f"{where}: answer is not JSON (not a Prometheus API?)") from None
        if not isinstance(doc, dict) or "status" not in doc:
            raise CollectError(f"{where}: answer is not a Prometheus API response")
        if doc["status"] != "success":
            msg = f"{doc.get('errorType', 'error')}: {doc.get('error', '?')}"
            if doc.get("errorType") == "bad_data":
                raise InputError(f"Prometheus rejected the query: {msg}", where)
            raise CollectError(f"{where}: {msg}")
        return doc.get("data")

    def _fetch(self, path: str, params: list[tuple[str, str]], post: bool = True) -> bytes:
        """The answer's bytes (a 2xx status); an error status is an InputError (the query
        rejected) or a CollectError, one line."""
        from clusterdoctor.observe.http_client import request

        query = urllib.parse.urlencode(params)
        where = f"{self.url}{path}"
        resp = request(
            f"{self.url}{path}" if post else f"{self.url}{path}{'?' + query if query else ''}",
            method="POST" if post else "GET",
            data=query.encode() if post else None,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
                **self.headers,
            },
            connect_timeout=min(5.0, self.timeout),
            read_timeout=self.timeout,
            total_timeout=6 * self.timeout,
            run=self.run,
            ssl_context=self.ssl_context,
            max_body=answer_cap(),
        )
        raw = resp.body
        if not 200 <= resp.status < 300:
            err = _api_error(raw)
            if err is not None and resp.status in (400, 422):
                raise InputError(f"Prometheus rejected the query: {err}", where)
            detail = err or raw[:200].decode("utf-8", "replace").strip().replace("\n", " ")
            raise CollectError(f"{where}: HTTP {resp.status} {detail}".rstrip())
        return raw

    # -- API -----------------------------------------------------------------------------------
    def query(self, expr: str, at: float | None = None) -> list[Series]:
        """Instant query; each result is a Series with one point (a scalar is named ``scalar``)."""
        params = [("query", expr)]
        if at is not None:
            params.append(("time", f"{at:.3f}"))
        return _to_series(self._call("/api/v1/query", params), f"{self.url} query {expr!r}")

    def query_raw(self, expr: str, at: float | None = None) -> bytes:
        """Instant query; the answer's JSON bytes undecoded, for a caller with its own typed
        decoder (a 10,000-GPU answer: ``observe/gpu/dcgm_fleet.decode_answer``)."""
        params = [("query", expr)]
        if at is not None:
            params.append(("time", f"{at:.3f}"))
        return self._fetch("/api/v1/query", params)

    def server_time(self) -> float:
        """The server's own clock (PromQL ``time()``): windows ending "now" end at the server's now,
        so a client whose clock is off (a laptop, a container under faketime) still asks for the
        data the server holds."""
        data = self._call("/api/v1/query", [("query", "time()")])
        try:
            return float(data["result"][0])
        except (TypeError, KeyError, IndexError, ValueError):
            raise CollectError(f"{self.url}: unexpected answer to time()") from None

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """Range query over ``[start, end]`` every ``step`` seconds."""
        if step <= 0:
            raise InputError(f"step must be positive, got {step:g}", f"{self.url} query_range")
        if end < start:
            raise InputError("end is before start", f"{self.url} query_range")
        params = [("query", expr), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"), ("step", f"{step:g}")]
        return _to_series(self._call("/api/v1/query_range", params), f"{self.url} query_range {expr!r}")

    def series(
        self, matchers: list[str], start: float | None = None, end: float | None = None
    ) -> list[dict[str, str]]:
        """Label sets of the series matching any of ``matchers`` (``/api/v1/series``)."""
        params = [("match[]", m) for m in matchers]
        if start is not None:
            params.append(("start", f"{start:.3f}"))
        if end is not None:
            params.append(("end", f"{end:.3f}"))
        data = self._call("/api/v1/series", params)
        if not isinstance(data, list):
            raise CollectError(f"{self.url}/api/v1/series: unexpected answer")
        return [dict(x) for x in data if isinstance(x, dict)]

    def metric_names(self) -> set[str]:
        """Every metric name the server knows (``/api/v1/label/__name__/values``)."""
        data = self._call("/api/v1/label/__name__/values", [], post=False)
        if not isinstance(data, list):
            raise CollectError(f"{self.url}: unexpected answer listing metric names")
        return {str(x) for x in data}


def _api_error(raw: bytes) -> str | None:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None
    if isinstance(doc, dict) and doc.get("status") == "error":
        return f"{doc.get('errorType', 'error')}: {doc.get('error', '?')}"
    return None


def series_from_response(raw: bytes | str, where: str = "<response>") -> list[Series]:
    """Series of a saved ``/api/v1/query`` or ``/api/v1/query_range`` answer (the JSON Prometheus sent).

    Raises :class:`InputError` when it is not a successful Prometheus API answer.
    """
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise InputError("not JSON (not a Prometheus API answer)", where) from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        err = _api_error(raw if isinstance(raw, bytes) else raw.encode())
        raise InputError(f"not a successful Prometheus API answer{': ' + err if err else ''}", where)
    try:
        return _to_series(doc.get("data"), where)
    except (CollectError, KeyError, TypeError, ValueError) as e:
        raise InputError(f"unexpected Prometheus API answer: {e}", where) from None


def zone_latency_names(client: PromClient, start: float | None = None, end: float | None = None) -> list[str]:
    """Latency metrics (histogram bases and plain series) the server has with the zones of both ends."""
    from clusterdoctor.analyze.topology_split import ZONE_LABEL_PAIRS, is_latency_metric

    found = client.series([f'{{{dst}=~".+"}}' for _, dst in ZONE_LABEL_PAIRS], start, end)
    names = set()
    for labels in found:
        n = labels.get("__name__", "")
        if not any(labels.get(a) for a, _ in ZONE_LABEL_PAIRS):
            continue
        base = n[: -len("_bucket")] if n.endswith("_bucket") else n
        if n.endswith(("_sum", "_count")) or not is_latency_metric(base):
            continue
        names.add(n)
    return sorted(names)


def _timestamp(t: Any, where: str) -> float:
    """A sample's time: a finite number (Prometheus sends seconds as a JSON number)."""
    if isinstance(t, bool) or not isinstance(t, (int, float, str)):
        raise CollectError(f"{where}: unexpected answer: timestamp {str(t)[:40]!r} is not a number")
    try:
        v = float(t)
    except ValueError:
        raise CollectError(f"{where}: unexpected answer: timestamp {str(t)[:40]!r} is not a number") from None
    if not math.isfinite(v):
        raise CollectError(f"{where}: unexpected answer: timestamp {str(t)[:40]!r} is not a finite number")
    return v


def _pair(p: Any, where: str) -> tuple[float, float]:
    if not isinstance(p, (list, tuple)) or len(p) != 2:
        raise CollectError(f"{where}: unexpected answer: a sample {str(p)[:40]!r} is not [time, value]")
    return _timestamp(p[0], where), _float(p[1])


def _to_series(data: Any, where: str) -> list[Series]:
    """Series of an answer's ``data``; a part of the wrong shape (a result that is not an object, a
    timestamp that is not a finite number) is a CollectError naming it, one line. Each result is
    dropped from the decoded answer once converted, so the two are never both held whole."""
    if not isinstance(data, dict) or "resultType" not in data:
        raise CollectError(f"{where}: unexpected answer")
    rtype = data["resultType"]
    result = data.get("result")
    out: list[Series] = []
    if rtype == "scalar" or rtype == "string":
        return [Series("scalar", {}, [_pair(result, where)])]
    if rtype not in ("vector", "matrix") or not isinstance(result, list):
        raise CollectError(f"{where}: unexpected result")
    for i, r in enumerate(result):
        result[i] = None
        if not isinstance(r, dict) or not isinstance(r.get("metric") or {}, dict):
            raise CollectError(f"{where}: unexpected answer: a result is not an object with a metric")
        metric = {str(k): str(v) for k, v in (r.get("metric") or {}).items()}
        name = metric.pop("__name__", "")
        if rtype == "vector":
            pts = [_pair(r.get("value"), where)]
        else:
            values = r.get("values") or []
            if not isinstance(values, list):
                raise CollectError(f"{where}: unexpected answer: values is not a list")
            pts = [_pair(p, where) for p in values]
        out.append(Series(name, metric, pts))
    return out


def collect_for_rules(
    url: str,
    since_seconds: float,
    step: float | None = None,
    *,
    end: float | None = None,
    timeout: float = 10.0,
    client: PromClient | None = None,
    workers: int = 4,
) -> dict[str, Any]:
    """Pull the series the rules need over the last ``since_seconds`` (ending at ``end`` or the
    server's now: the window never depends on this machine's clock).

    Returns ``{"window": MetricWindow, "present": [...], "missing": [...], "errors": [...],
    "url", "start", "end", "step"}``; ``window`` feeds
    :func:`clusterdoctor.analyze.metric_window.observations_from_metrics`. A failing query is
    recorded in ``errors`` and the others are kept; an unreachable server raises CollectError.
    """
    if since_seconds <= 0:
        raise InputError(f"--since must be positive, got {since_seconds:g} s", url)
    c = client or PromClient(url, timeout=timeout)
    end_t = float(end if end is not None else c.server_time())
    start_t = end_t - float(since_seconds)
    st = float(step) if step else default_step(since_seconds)
    names = c.metric_names()
    present: list[str] = []
    queries: list[tuple[str, str]] = []
    for base in RULE_HISTOGRAMS:
        if f"{base}_bucket" not in names:
            continue
        present.append(base)
        by = AGGREGATE_BY.get(base)
        for suffix in ("_bucket", "_sum", "_count"):
            metric = base + suffix
            if metric not in names:
                continue
            if by:
                labels = ", ".join(by + (("le",) if suffix == "_bucket" else ()))
                queries.append((metric, f"sum by ({labels}) ({metric})"))
            else:
                queries.append((metric, metric))
    for name in RULE_SCALARS:
        if name in names:
            present.append(name)
            queries.append((name, name))
    missing = [n for n in RULE_METRICS if n not in present]
    errors: list[str] = []
    # Latency series labelled with the zones of both ends (the cross-zone rule): raw, as stored.
    try:
        for n in zone_latency_names(c, start_t, end_t):
            if n not in present and not any(q[0] == n for q in queries):
                present.append(n)
                queries.append((n, n))
    except (CollectError, InputError) as e:
        errors.append(f"zone-labelled series: {e}")

    def run(q: tuple[str, str]) -> list[Series]:
        metric, expr = q
        try:
            res = c.query_range(expr, start_t, end_t, st)
        except (CollectError, InputError) as e:
            errors.append(f"{metric}: {e}")
            return []
        for s in res:
            if not s.name:
                s.name = metric
        return res

    from concurrent.futures import ThreadPoolExecutor

    series: list[Series] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        for res in ex.map(run, queries):
            series.extend(res)
    window = MetricWindow.from_series(series, start_t, end_t, source=f"prometheus {c.url}")
    return {
        "window": window,
        "present": present,
        "missing": missing,
        "errors": errors,
        "url": c.url,
        "start": start_t,
        "end": end_t,
        "step": st,
    }
