"""A kube-scheduler extender (HTTP JSON ``filter`` and ``prioritize`` verbs) that scores nodes with the
tidal or FGD policy of :mod:`clusterdoctor.sim`.

Protocol (k8s.io/kube-scheduler ``extender/v1``): the scheduler POSTs ``ExtenderArgs``
(``{"pod": Pod, "nodes": NodeList}``, or ``"nodenames"`` when ``nodeCacheCapable``) to
``<urlPrefix>/<verb>``. ``filter`` answers ``ExtenderFilterResult`` (``nodes``/``nodenames``,
``failedNodes`` {name: reason}, ``error``); ``prioritize`` answers ``HostPriorityList``
(``[{"host", "score"}]``, score 0..10 = ``MaxExtenderPriority``; the scheduler multiplies by the
extender's weight). Configure ``nodeCacheCapable: false``: the scores need the node objects.

What the extender reads from a node (annotations first, then standard fields):

- ``clusterdoctor.io/gpu-free-milli``: idle milli per GPU, e.g. ``1000,1000,500,0`` (else all
  ``status.allocatable["nvidia.com/gpu"]`` GPUs idle);
- ``clusterdoctor.io/cpu-free-milli`` / ``clusterdoctor.io/memory-free-mib`` (else allocatable);
- ``clusterdoctor.io/gpu-model`` (else label ``nvidia.com/gpu.product``);
- ``clusterdoctor.io/nvlink-domains`` ``0-1-2-3,4-5-6-7`` and ``clusterdoctor.io/pcie-switches``
  ``0-1,2-3`` (else the synthetic layout of :func:`clusterdoctor.sim.cluster.synthetic_topology`).

From the pod: ``resources.requests`` (``cpu``, ``memory``, ``nvidia.com/gpu``), a GPU share from
annotation ``clusterdoctor.io/gpu-milli`` or ``alibabacloud.com/gpu-milli`` (+ ``...gpu-count``), an
allowed-model list from ``alibabacloud.com/gpu-card-model`` (``A|B``), and the priority (tidal's
multiplier; equal for all nodes of one pod) from ``clusterdoctor.io/priority`` 0..2 or
``spec.priority``. FGD's typical pods default to the openb default trace's
(``sim/data/openb_default_typical.json``).
"""

from __future__ import annotations

import json
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

MAX_EXTENDER_PRIORITY = 10
ANNO = "clusterdoctor.io/"
POLICIES = ("tidal", "fgd")
MILLI = 1000


class RequestError(ValueError):
    """A request body that is not valid ExtenderArgs."""


_QTY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)$")
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DEC = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3}


def parse_quantity(q: Any) -> float:
    """A Kubernetes resource quantity ("500m", "2", "16Gi", "1e3") as a float of base units."""
    if isinstance(q, (int, float)):
        return float(q)
    s = str(q).strip()
    m = _QTY.match(s)
    if not m:
        try:
            return float(s)
        except ValueError:
            raise RequestError(f"bad quantity {s[:30]!r}") from None
    num, suf = float(m.group(1)), m.group(2)
    if suf in _BIN:
        return num * _BIN[suf]
    if suf in _DEC:
        return num * _DEC[suf]
    raise RequestError(f"bad quantity suffix in {s[:30]!r}")


def _groups(text: str) -> tuple[tuple[int, ...], ...]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            try:
                out.append(tuple(int(x) for x in part.split("-")))
            except ValueError:
                raise RequestError(f"bad GPU index group {part[:30]!r}") from None
    return tuple(out)


class NodeView:
    """What the extender knows about one node."""

    def __init__(self, node: dict) -> None:
        from clusterdoctor.sim.cluster import synthetic_topology

        if not isinstance(node, dict):
            raise RequestError("node is not an object")
        meta = node.get("metadata") or {}
        self.name = str(meta.get("name") or "")
        if not self.name:
            raise RequestError("node without metadata.name")
        ann = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        alloc = (node.get("status") or {}).get("allocatable") or {}
        self.model = str(ann.get(ANNO + "gpu-model") or labels.get("nvidia.com/gpu.product") or "")
        if ANNO + "gpu-free-milli" in ann:
            try:
                self.gpu_free = [int(x) for x in str(ann[ANNO + "gpu-free-milli"]).split(",") if x.strip()]
            except ValueError:
                raise RequestError(f"node {self.name}: bad {ANNO}gpu-free-milli") from None
        else:
            self.gpu_free = [MILLI] * int(parse_quantity(alloc.get("nvidia.com/gpu", 0)))
        self.gpu_free = [min(max(x, 0), MILLI) for x in self.gpu_free]
        cpu = ann.get(ANNO + "cpu-free-milli")
        self.cpu_free = float(cpu) if cpu is not None else parse_quantity(alloc.get("cpu", 0)) * 1000
        mem = ann.get(ANNO + "memory-free-mib")
        self.mem_free_mib = float(mem) if mem is not None else parse_quantity(alloc.get("memory", 0)) / 2**20
        nv, sw = synthetic_topology(self.model, len(self.gpu_free))
        self.topology_synthetic = True
        if ANNO + "nvlink-domains" in ann or ANNO + "pcie-switches" in ann:
            nv = _groups(str(ann.get(ANNO + "nvlink-domains", "")))
            sw = _groups(str(ann.get(ANNO + "pcie-switches", "")))
            self.topology_synthetic = False
        n = len(self.gpu_free)
        self.nvlink = tuple(tuple(i for i in d if 0 <= i < n) for d in nv)
        self.switches = tuple(tuple(i for i in s if 0 <= i < n) for s in sw)


class PodRequest:
    def __init__(self, pod: dict) -> None:
        if not isinstance(pod, dict):
            raise RequestError("pod is not an object")
        meta = pod.get("metadata") or {}
        ann = meta.get("annotations") or {}
        spec = pod.get("spec") or {}
        self.name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
        cpu = mem = 0.0
        gpus = 0
        for c in spec.get("containers") or []:
            req = ((c or {}).get("resources") or {}).get("requests") or {}
            cpu += parse_quantity(req.get("cpu", 0)) * 1000
            mem += parse_quantity(req.get("memory", 0)) / 2**20
            gpus += int(parse_quantity(req.get("nvidia.com/gpu", 0)))
        self.cpu_milli, self.mem_mib = cpu, mem
        milli = ann.get(ANNO + "gpu-milli", ann.get("alibabacloud.com/gpu-milli"))
        if milli is not None:
            self.gpu_milli = int(min(max(parse_quantity(milli), 0), MILLI))
            self.num_gpu = int(parse_quantity(ann.get("alibabacloud.com/gpu-count", max(gpus, 1))))
        else:
            self.gpu_milli, self.num_gpu = (MILLI, gpus) if gpus else (0, 0)
        models = str(ann.get("alibabacloud.com/gpu-card-model", "") or "")
        self.models = {m for m in models.split("|") if m}
        if ANNO + "priority" in ann:
            self.priority = int(parse_quantity(ann[ANNO + "priority"]))
        else:
            p = int(spec.get("priority") or 0)
            self.priority = 2 if p >= 1000 else (1 if p > 0 else 0)

    def fits(self, n: NodeView) -> str | None:
        """None when the pod fits on the node, else the reason."""
        if self.cpu_milli > n.cpu_free:
            return f"insufficient cpu ({self.cpu_milli:.0f}m > {n.cpu_free:.0f}m free)"
        if self.mem_mib > n.mem_free_mib:
            return f"insufficient memory ({self.mem_mib:.0f}Mi > {n.mem_free_mib:.0f}Mi free)"
        if self.num_gpu:
            if self.models and n.model not in self.models:
                return f"GPU model {n.model or 'none'} not in {sorted(self.models)}"
            room = sum(1 for x in n.gpu_free if x >= self.gpu_milli)
            if room < self.num_gpu:
                return (
                    f"insufficient GPU: {room} GPU(s) with {self.gpu_milli} milli free, need {self.num_gpu}"
                )
        return None


def tidal_node_score(n: NodeView) -> float:
    """Tidal score in 0..1 (priority factor omitted: equal across nodes for one pod)."""
    from clusterdoctor.sim.policies.tidal import tidal_score

    busy = [MILLI - x for x in n.gpu_free]
    nv_gpus = [i for d in n.nvlink for i in d]
    nv_util = sum(busy[i] for i in nv_gpus) / (len(nv_gpus) * MILLI) if nv_gpus else 1.0
    sw = [s for s in n.switches if s]
    cong = sum(sum(busy[i] for i in s) / (len(s) * MILLI) for s in sw) / len(sw) if sw else 1.0
    free = sum(n.gpu_free) / (len(n.gpu_free) * MILLI) if n.gpu_free else 0.0
    return tidal_score(nv_util, cong, free, 1.0)


_TYPICAL_CACHE: list = []


def _typical():
    if not _TYPICAL_CACHE:
        import numpy as np

        from clusterdoctor.sim.frag import TypicalPods

        doc = json.loads(
            resources.files("clusterdoctor.sim").joinpath("data/openb_default_typical.json").read_text()
        )
        g = doc["gpu_pods"]
        _TYPICAL_CACHE.append(TypicalPods(
            np.array([x["cpu_milli"] for x in g]), np.array([x["gpu_milli"] for x in g]),
            np.array([x["num_gpu"] for x in g]), np.array([x["freq"] for x in g], dtype=float),
            np.ones((len(g), 1), dtype=bool), float(doc["cpu_only_freq"]),
        ))  # fmt: skip
    return _TYPICAL_CACHE[0]


def fgd_node_score(n: NodeView, p: PodRequest) -> int:
    """FGD's 0..100 score of placing ``p`` on ``n`` (best GPU for a shared pod)."""
    import numpy as np

    from clusterdoctor.sim.frag import node_frag

    tp = _typical()
    gl = np.array([n.gpu_free], dtype=np.int64) if n.gpu_free else np.zeros((1, 1), dtype=np.int64)
    t0 = np.array([0])
    before = node_frag(np.array([n.cpu_free]), gl, t0, tp)[0]
    cpu_after = np.array([n.cpu_free - p.cpu_milli])
    cands = []
    if p.num_gpu == 0:
        cands.append(gl)
    elif p.gpu_milli >= MILLI:
        g = gl.copy()
        g[0, np.flatnonzero(g[0] == MILLI)[: p.num_gpu]] = 0
        cands.append(g)
    else:
        for i in np.flatnonzero(gl[0] >= p.gpu_milli):
            g = gl.copy()
            g[0, i] -= p.gpu_milli
            cands.append(g)
    best = 0
    for g in cands:
        after = node_frag(cpu_after, g, t0, tp)[0]
        best = max(best, int(1.0 / (1.0 + np.exp(-(before - after) / 1000.0)) * 100))
    return best


class Extender:
    """The verbs, independent of HTTP (easy to test and to embed).

    ``signals`` (a :class:`clusterdoctor.serve.signals.PrometheusSignals`): nodes with a critical GPU-health
    or straggler finding are filtered out, nodes with a warning scored down, and the agents' free-GPU
    counts replace the static allocatable count (unless the node carries ``gpu-free-milli``).
    """

    def __init__(self, policy: str = "tidal", signals: Any = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}")
        self.policy = policy
        self.signals = signals

    def _node(self, raw: dict) -> tuple[NodeView, Any]:
        n = NodeView(raw)
        sig = self.signals.get(n.name) if self.signals is not None else None
        ann = ((raw.get("metadata") or {}).get("annotations") or {}) if isinstance(raw, dict) else {}
        if (
            sig is not None
            and sig.free_gpus is not None
            and ANNO + "gpu-free-milli" not in ann
            and n.gpu_free
        ):
            # a count, not which GPUs: the free ones are taken to be the lowest indices
            free = max(0, min(sig.free_gpus, len(n.gpu_free)))
            n.gpu_free = [MILLI] * free + [0] * (len(n.gpu_free) - free)
        return n, sig

    @staticmethod
    def _args(body: Any) -> tuple[PodRequest, list[dict] | None, list[str] | None]:
        if not isinstance(body, dict):
            raise RequestError("ExtenderArgs must be a JSON object")
        if "pod" not in body:
            raise RequestError("ExtenderArgs without pod")
        pod = PodRequest(body["pod"])
        nodes = body.get("nodes")
        items = None
        if nodes is not None:
            if not isinstance(nodes, dict) or not isinstance(nodes.get("items", []), list):
                raise RequestError("nodes must be a NodeList")
            items = nodes.get("items") or []
        names = body.get("nodenames")
        if names is not None and (not isinstance(names, list) or not all(isinstance(x, str) for x in names)):
            raise RequestError("nodenames must be a list of strings")
        return pod, items, names

    def filter(self, body: Any) -> dict:
        """ExtenderArgs -> ExtenderFilterResult."""
        pod, items, names = self._args(body)
        if items is None:  # nodeCacheCapable: no node objects to judge; pass the names through
            return {"nodenames": names or [], "failedNodes": {}, "error": ""}
        keep, failed = [], {}
        for raw in items:
            n, sig = self._node(raw)
            why = pod.fits(n) or (sig.filter_reason() if sig is not None else None)
            if why is None:
                keep.append(raw)
            else:
                failed[n.name] = why
        return {
            "nodes": {"apiVersion": "v1", "kind": "NodeList", "items": keep},
            "failedNodes": failed,
            "error": "",
        }

    def prioritize(self, body: Any) -> list[dict]:
        """ExtenderArgs -> HostPriorityList (0..10)."""
        pod, items, names = self._args(body)
        if items is None:
            return [{"host": h, "score": 0} for h in names or []]
        out = []
        for raw in items:
            n, sig = self._node(raw)
            if pod.fits(n) is not None:
                score = 0
            elif self.policy == "tidal":
                score = round(tidal_node_score(n) * MAX_EXTENDER_PRIORITY)
            else:
                score = fgd_node_score(n, pod) * MAX_EXTENDER_PRIORITY // 100
            if sig is not None:
                score = int(score * sig.score_factor())
            out.append({"host": n.name, "score": int(min(max(score, 0), MAX_EXTENDER_PRIORITY))})
        return out


class _Handler(BaseHTTPRequestHandler):
    server_version = "clusterdoctor-extender/1"
    disable_nagle_algorithm = True  # one small JSON reply per request: do not wait for delayed ACKs
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, code: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("healthz"):
            ext = self.server.extender
            doc = {"ok": True, "policy": ext.policy}
            if ext.signals is not None:
                doc["signals"] = ext.signals.status()
            self._send(200, doc)
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        verb = self.path.rstrip("/").rsplit("/", 1)[-1]
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if n < 0 or n > 64 << 20:
            self._send(HTTPStatus.BAD_REQUEST, {"error": "bad Content-Length"})
            return
        try:
            body = json.loads(self.rfile.read(n) or b"null")
        except (ValueError, UnicodeDecodeError) as e:
            self._send(HTTPStatus.BAD_REQUEST, {"error": f"bad JSON: {e}"})
            return
        ext: Extender = self.server.extender
        try:
            if verb == "filter":
                self._send(200, ext.filter(body))
            elif verb == "prioritize":
                self._send(200, ext.prioritize(body))
            else:
                self._send(404, {"error": f"unknown verb {verb!r} (filter, prioritize)"})
        except RequestError as e:
            if verb == "filter":  # the scheduler reads `error` from a filter result
                self._send(HTTPStatus.BAD_REQUEST, {"nodes": None, "failedNodes": {}, "error": str(e)})
            else:
                self._send(HTTPStatus.BAD_REQUEST, {"error": str(e)})


def make_server(host: str, port: int, policy: str = "tidal", signals: Any = None) -> ThreadingHTTPServer:
    """A ready (not yet serving) extender HTTP server; port 0 picks a free port."""
    srv = ThreadingHTTPServer((host, port), _Handler)
    srv.daemon_threads = True
    srv.extender = Extender(policy, signals)  # type: ignore[attr-defined]
    return srv


def run_extender(host: str, port: int, policy: str, signals: Any = None) -> None:
    """Serve the extender on ``host:port`` until interrupted (``clusterdoctor serve extender``)."""
    srv = make_server(host, port, policy, signals)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()


def serve_in_thread(
    host: str = "127.0.0.1", port: int = 0, policy: str = "tidal", signals: Any = None
) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Start a server on a background thread (tests, benchmarks); stop with ``srv.shutdown()``."""
    srv = make_server(host, port, policy, signals)
    t = threading.Thread(target=srv.serve_forever, name="cd-extender", daemon=True)
    t.start()
    return srv, t
