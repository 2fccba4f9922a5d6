"""What the scheduler extender knows about nodes from Prometheus: the agents' findings and free GPUs.

Two instant queries (cached for ``ttl_s``; the scheduler calls filter and prioritize for every pod):

- ``clusterdoctor_finding`` at warning or critical, by node: a GPU-health finding (layer ``gpu``),
  a fail-slow finding (layer ``failslow``) or a straggler (rule ``COMM007``) makes the node *sick*.
  Critical: the extender filters the node out. Warning: it scores the node down;
- ``clusterdoctor_node_gpus{state}`` by node (the agent's reading of the kubelet pod-resources API):
  allocatable and free GPUs, which replace the node's static allocatable count.

The ``node`` label comes from the scrape configuration (deploy/: relabelled from the pod's node name).
An unreachable or failing Prometheus leaves the signals empty and says why in :attr:`error`; the
extender then schedules as it would without them (never blocks the scheduler on a dead Prometheus).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterdoctor.model import Threshold

__all__ = ["NodeSignal", "PrometheusSignals", "SICK_LAYERS", "SICK_RULES"]

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


@dataclass
class NodeSignal:
    node: str
    critical: list[str] = field(default_factory=list)  # "RULE subject"
    warning: list[str] = field(default_factory=list)
    free_gpus: int | None = None
    allocatable_gpus: int | None = None

    def filter_reason(self) -> str | None:
        if self.critical:
            return "clusterdoctor: critical finding " + "; ".join(sorted(self.critical)[:3])
        return None

    def score_factor(self) -> float:
        """0 for a critical node (prioritize after filter should not see it), the warning factor, else 1."""
        if self.critical:
            return 0.0
        return WARNING_SCORE_FACTOR.value if self.warning else 1.0


class PrometheusSignals:
    """Node signals from a Prometheus HTTP API, refreshed at most every ``ttl_s`` seconds."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 2.0,
        ttl_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self.clock = clock
        self.error: str | None = None
        self._nodes: dict[str, NodeSignal] = {}
        self._at: float | None = None
        self._lock = threading.Lock()

    def _query(self, expr: str) -> list[dict]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=self.timeout_s) as r:
            doc = json.loads(r.read(16 << 20))
        if doc.get("status") != "success":
            raise ValueError(f"{doc.get('errorType', 'error')}: {doc.get('error', '')}")
        res = (doc.get("data") or {}).get("result") or []
        return res if isinstance(res, list) else []

    def refresh(self) -> None:
        nodes: dict[str, NodeSignal] = {}
        try:
            for r in self._query(FINDINGS_QUERY):
                m = r.get("metric") or {}
                node = m.get("node")
                if not node or not (m.get("layer") in SICK_LAYERS or m.get("rule") in SICK_RULES):
                    continue
                s = nodes.setdefault(node, NodeSignal(node))
                what = f"{m.get('rule', '?')} {m.get('subject', '')}".strip()
                (s.critical if m.get("severity") == "critical" else s.warning).append(what)
            for r in self._query(GPUS_QUERY):
                m = r.get("metric") or {}
                node = m.get("node")
                try:
                    v = int(float(r["value"][1]))
                except (KeyError, IndexError, TypeError, ValueError):
                    continue
                if not node:
                    continue
                s = nodes.setdefault(node, NodeSignal(node))
                if m.get("state") == "free":
                    s.free_gpus = v
                elif m.get("state") == "allocatable":
                    s.allocatable_gpus = v
            self.error = None
        except (OSError, ValueError) as e:
            self.error = f"Prometheus {self.url}: {e}"
            nodes = {}
        self._nodes = nodes

    def get(self, node: str) -> NodeSignal | None:
        with self._lock:
            now = self.clock()
            if self._at is None or now - self._at >= self.ttl_s:
                self.refresh()
                self._at = now
            return self._nodes.get(node)

    def status(self) -> dict:
        return {"prometheus": self.url, "error": self.error, "nodes": len(self._nodes)}
