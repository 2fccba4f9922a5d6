"""What the scheduler extender knows about nodes from Prometheus: the agents' findings and free GPUs.

Two instant queries, refreshed by a background thread every ``ttl_s`` seconds (the scheduler calls
filter and prioritize for every pod; those calls only read the last result, never the network):

- ``clusterdoctor_finding`` at warning or critical, by node: a GPU-health finding (layer ``gpu``:
  an Xid 79, a failed row remap, ...), a fail-slow finding (layer ``failslow``) or a straggler (rule
  ``COMM007``) makes the node *sick*. Critical: the extender filters the node out. Warning: it
  scores the node down;
- ``clusterdoctor_node_gpus{state}`` by node (the agent's reading of the kubelet pod-resources API):
  allocatable, allocated and free GPUs, which replace the node's static allocatable count. Free is
  taken as at most allocatable - allocated, so that GPUs the agent counts as allocated (DRA claims,
  a GPU partly held through MIG instances) are never offered as free, and allocated + free never
  exceeds allocatable.

The ``node`` label comes from the scrape configuration (deploy/: relabelled from the pod's node name).

Hostile or dead upstreams (issue 25): each fetch has a *total* deadline (``timeout_s``, enforced by
closing the socket, not per read, so a Prometheus dripping a byte a second cannot hold it), the
answer is size-capped and shape-checked (a ``[]``, a metric that is a list, ``1e999``, 100k-deep
nesting are refused with a reason); a failed refresh keeps the last good signals, marked stale
(:meth:`status`, the extender's ``/metrics``, one log line per change of state), until they are
older than ``expire_s``; then the extender schedules as it would without them.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import math
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.model import Threshold

__all__ = ["NodeSignal", "PrometheusSignals", "SICK_LAYERS", "SICK_RULES", "SignalsError", "parse_vector"]

log = logging.getLogger("clusterdoctor.extender")

SICK_LAYERS = frozenset({"gpu", "failslow"})
SICK_RULES = frozenset({"COMM007"})  # straggler-rank
FINDINGS_QUERY = (
    'max by (node, rule, subject, severity, layer) (clusterdoctor_finding{severity=~"warning|critical"})'
)
GPUS_QUERY = "max by (node, state) (clusterdoctor_node_gpus)"
WARNING_SCORE_FACTOR = Threshold(
    "sick_node_score_factor",
    0.5,
    "x score",
    "clusterdoctor default: a node with a warning-level GPU or straggler finding still takes pods, at half "
    "the score, so healthy nodes win ties; a critical finding removes the node (filter)",
    "factor applied to a warned node's extender score",
)
MAX_ANSWER_BYTES = 16 << 20  # one instant query over 5,000 nodes' findings is a few MB
MAX_SERIES = 200_000
MAX_LABEL_CHARS = 1024
MAX_GPUS = 1 << 20
MIN_INTERVAL_S = 0.2  # ttl_s=0 (tests): refresh continuously, not in a busy loop


class SignalsError(ValueError):
    """A Prometheus answer that is not what the queries return (the reason says what is wrong)."""


@dataclass
class NodeSignal:
    node: str
    critical: list[str] = field(default_factory=list)  # "RULE subject"
    warning: list[str] = field(default_factory=list)
    free_gpus: int | None = None
    allocatable_gpus: int | None = None
    allocated_gpus: int | None = None

    def filter_reason(self) -> str | None:
        if self.critical:
            return "clusterdoctor: critical finding " + "; ".join(sorted(self.critical)[:3])
        return None

    def score_factor(self) -> float:
        """0 for a critical node (prioritize after filter should not see it), the warning factor, else 1."""
        if self.critical:
            return 0.0
        return WARNING_SCORE_FACTOR.value if self.warning else 1.0

    def usable_free(self) -> int | None:
        """Free GPUs, never more than allocatable - allocated (DRA and MIG allocations count)."""
        free = self.free_gpus
        if self.allocatable_gpus is not None and self.allocated_gpus is not None:
            room = max(0, self.allocatable_gpus - self.allocated_gpus)
            free = room if free is None else min(free, room)
        return free


def parse_vector(data: bytes) -> list[tuple[dict[str, str], float]]:
    """The samples of a Prometheus instant-query answer (``resultType`` vector), shape-checked.

    SignalsError for an answer of the wrong shape as a whole; a sample of the wrong shape (a metric
    that is not an object of strings, a value that is not ``[time, "number"]``, a non-finite number)
    is left out."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise SignalsError("answer nested too deep") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise SignalsError(f"answer is not JSON ({str(e)[:80]})") from None
    if not isinstance(doc, dict):
        raise SignalsError(f"answer is a JSON {type(doc).__name__}, not an object")
    if doc.get("status") != "success":
        et, err = doc.get("errorType", "error"), doc.get("error", "")
        raise SignalsError(f"{str(et)[:40]}: {str(err)[:160]}")
    d = doc.get("data")
    if not isinstance(d, dict):
        raise SignalsError("answer without a data object")
    if d.get("resultType", "vector") != "vector":
        raise SignalsError(f"resultType {str(d.get('resultType'))[:20]!r}, not vector")
    res = d.get("result")
    if res is None:
        return []
    if not isinstance(res, list):
        raise SignalsError(f"data.result is a {type(res).__name__}, not a list")
    if len(res) > MAX_SERIES:
        raise SignalsError(f"{len(res)} series, more than {MAX_SERIES}")
    out = []
    for r in res:
        if not isinstance(r, dict):
            continue
        m, v = r.get("metric"), r.get("value")
        if not isinstance(m, dict) or not isinstance(v, list) or len(v) != 2:
            continue
        if not all(isinstance(x, str) and len(x) <= MAX_LABEL_CHARS for kv in m.items() for x in kv):
            continue
        try:
            x = float(v[1]) if isinstance(v[1], str) else math.nan
        except ValueError:
            continue
        if math.isfinite(x):
            out.append((m, x))
    return out


def _redact(url: str) -> str:
    p = urllib.parse.urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urllib.parse.urlunsplit((p.scheme, host, p.path, "", ""))


class PrometheusSignals:
    """Node signals from a Prometheus HTTP API, refreshed in the background every ``ttl_s`` seconds;
    each fetch within ``timeout_s`` in total. :meth:`start` does the first fetch (bounded by the
    same deadline) and starts the thread; :meth:`get` never waits on the network."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 2.0,
        ttl_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
        expire_s: float = 600.0,
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.url = url.rstrip("/")
        self.shown_url = _redact(self.url)
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self.expire_s = expire_s
        self.max_bytes = max_bytes
        self.clock = clock
        self.error: str | None = None
        self.refreshes = 0
        self.failures = 0
        self._nodes: dict[str, NodeSignal] = {}
        self._at: float | None = None  # clock() of the last good refresh
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- fetching -------------------------------------------------------------------------------

    def _query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        return parse_vector(self._fetch("/api/v1/query?" + urllib.parse.urlencode({"query": expr})))

    def _fetch(self, path_qs: str) -> bytes:
        """GET within ``timeout_s`` in total: a watchdog shuts the socket down at the deadline, so a
        server that answers one byte at a time cannot hold the fetch longer."""
        p = urllib.parse.urlsplit(self.url)
        if p.scheme not in ("http", "https") or not p.hostname:
            raise SignalsError("not an http(s) URL")
        cls = http.client.HTTPSConnection if p.scheme == "https" else http.client.HTTPConnection
        conn = cls(p.hostname, p.port, timeout=self.timeout_s)
        headers = {"Accept": "application/json"}
        if p.username is not None:
            cred = f"{urllib.parse.unquote(p.username)}:{urllib.parse.unquote(p.password or '')}"
            headers["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
        expired, done = threading.Event(), threading.Event()
        deadline = time.monotonic() + self.timeout_s

        def watchdog() -> None:
            # polls with sleep, not a timed lock wait (libfaketime does not intercept those: .ci)
            while not done.is_set() and time.monotonic() < deadline:
                time.sleep(min(0.02, self.timeout_s))
            if done.is_set():
                return
            expired.set()
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=watchdog, name="cd-signals-deadline", daemon=True).start()
        try:
            conn.request("GET", (p.path.rstrip("/") or "") + path_qs, headers=headers)
            r = conn.getresponse()
            data = r.read(self.max_bytes + 1)
            if expired.is_set():
                raise TimeoutError
            if r.status != 200 and not data.lstrip().startswith(b"{"):
                raise SignalsError(f"HTTP {r.status}")
            if len(data) > self.max_bytes:
                raise SignalsError(f"answer larger than {self.max_bytes} bytes")
            return data
        except (OSError, http.client.HTTPException) as e:
            if expired.is_set() or isinstance(e, TimeoutError):
                raise SignalsError(f"no whole answer within {self.timeout_s:g} s") from None
            raise SignalsError(f"{type(e).__name__}: {str(e)[:120]}") from None
        finally:
            done.set()
            conn.close()

    def _read(self) -> dict[str, NodeSignal]:
        nodes: dict[str, NodeSignal] = {}
        for m, _ in self._query(FINDINGS_QUERY):
            node = m.get("node")
            if not node or not (m.get("layer") in SICK_LAYERS or m.get("rule") in SICK_RULES):
                continue
            s = nodes.setdefault(node, NodeSignal(node))
            what = f"{m.get('rule', '?')} {m.get('subject', '')}".strip()
            (s.critical if m.get("severity") == "critical" else s.warning).append(what[:200])
        for m, x in self._query(GPUS_QUERY):
            node = m.get("node")
            if not node or not 0 <= x <= MAX_GPUS:
                continue
            s = nodes.setdefault(node, NodeSignal(node))
            state = m.get("state")
            if state in ("free", "allocatable", "allocated"):
                setattr(s, f"{state}_gpus", int(x))
        return nodes

    def refresh(self) -> None:
        """One fetch of both queries; on failure the last good signals stay (marked stale)."""
        try:
            nodes = self._read()
        except SignalsError as e:
            err = f"Prometheus {self.shown_url}: {e}"
            with self._lock:
                self.failures += 1
                changed = err != self.error
                self.error = err
                had = self._at is not None
            if changed:
                then = "keeping the last good signals, now stale" if had else "scheduling without signals"
                log.warning("signals: %s (%s)", err, then)
            return
        with self._lock:
            if self.error is not None:
                log.warning("signals: Prometheus %s answers again", self.shown_url)
            self._nodes, self._at, self.error = nodes, self.clock(), None
            self.refreshes += 1

    # --- the background thread ------------------------------------------------------------------

    def start(self) -> None:
        """First fetch now (at most ``timeout_s``), then refresh in a daemon thread."""
        if self._thread is not None:
            return
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="cd-signals", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            until = time.monotonic() + max(self.ttl_s, MIN_INTERVAL_S)
            while not self._stop.is_set() and time.monotonic() < until:
                time.sleep(0.05)  # not a timed Event.wait: see watchdog above
            if self._stop.is_set():
                return
            try:
                self.refresh()
            except Exception as e:  # a bug of ours must not end the refreshes
                log.error("signals: refresh failed: %s: %s", type(e).__name__, e)

    def stop(self) -> None:
        self._stop.set()

    # --- reading --------------------------------------------------------------------------------

    def age(self) -> float | None:
        """Seconds since the last good refresh (None: never)."""
        with self._lock:
            return None if self._at is None else max(0.0, self.clock() - self._at)

    def stale(self) -> bool:
        """The signals are older than two refresh intervals (the last fetches failed)."""
        return self.stale_locked(self.age())

    def get(self, node: str) -> NodeSignal | None:
        """The node's last good signal, or None (no signal, or older than ``expire_s``)."""
        if self._thread is None:
            self.start()
        with self._lock:
            if self._at is None or self.clock() - self._at > self.expire_s:
                return None
            return self._nodes.get(node)

    def status(self) -> dict[str, Any]:
        age = self.age()
        with self._lock:
            return {
                "prometheus": self.shown_url,
                "error": self.error,
                "nodes": len(self._nodes),
                "stale": self.stale_locked(age),
                "age_seconds": None if age is None else round(age, 3),
                "refreshes": self.refreshes,
                "failures": self.failures,
            }

    def stale_locked(self, age: float | None) -> bool:
        return age is None or age > 2 * max(self.ttl_s, MIN_INTERVAL_S) + self.timeout_s
