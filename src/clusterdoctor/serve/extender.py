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
- with agent signals, free GPUs are at most allocatable - allocated (DRA claims count) and the
  node's ``nvidia.com/mig-*`` instances are taken off the agent's free count (no whole GPUs);
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

import functools
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

log = logging.getLogger("clusterdoctor.extender")

MAX_EXTENDER_PRIORITY = 10
ANNO = "clusterdoctor.io/"
POLICIES = ("tidal", "fgd")
MILLI = 1000


class RequestError(ValueError):
    """A request body that is not valid ExtenderArgs (answered 400, naming what is wrong)."""


class RequestTooLarge(RequestError):
    """A request past a size bound no real cluster reaches (answered 413, naming the bound)."""


# Bounds on numbers taken from a request, so that nothing is allocated or looped over in proportion to
# an input quantity: the largest GPU nodes have 8-16 GPUs (DGX B200: 8; GB200 NVL72 trays: 4), so
# 1,024 GPUs per node is far above any real node; milli-GPU shares are 0..1000 by definition.
MAX_GPUS_PER_NODE = 1024
MAX_QUANTITY = 1e18  # bytes/milli-cores: an exabyte of memory is not a node
MAX_ANNOTATION_CHARS = 64 << 10
MAX_PRIORITY_CLASS = 2  # clusterdoctor.io/priority: 0 best effort, 1 normal, 2 high
# JSON items (commas) in one body: a real Node object has about one per 60 bytes, so a 64 MiB NodeList
# of real nodes has ~1.1 M; 57 MB of ``{},`` (19 M empty objects, 1.5 GB as Python objects) is refused
MAX_JSON_ITEMS = 2_000_000
# nodes and GPUs in one request: above the largest clusters (Kubernetes supports 5,000 nodes; the
# largest managed clusters 65,000), so that no request costs minutes of CPU however it is built
MAX_REQUEST_NODES = 100_000
MAX_REQUEST_GPUS = 1 << 20
FGD_DEADLINE_S = 5.0  # FGD scoring of one request; the rest of its nodes get tidal's score

_QTY = re.compile(r"^([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DEC = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def parse_quantity(q: Any, what: str = "quantity") -> float:
    """A Kubernetes resource quantity ("500m", "2", "16Gi", "1e3") as a float of base units: finite,
    non-negative and at most :data:`MAX_QUANTITY`; RequestError otherwise (NaN, inf, "abc", lists)."""
    if isinstance(q, bool) or not isinstance(q, (int, float, str)):
        raise RequestError(f"{what}: {type(q).__name__} is not a quantity")
    if isinstance(q, (int, float)):
        v = float(q)
    else:
        s = q.strip()
        m = _QTY.match(s)
        if not m:
            raise RequestError(f"{what}: bad quantity {s[:30]!r}")
        num, suf = float(m.group(1)), m.group(2)
        if suf in _BIN:
            v = num * _BIN[suf]
        elif suf in _DEC:
            v = num * _DEC[suf]
        else:
            raise RequestError(f"{what}: bad quantity suffix in {s[:30]!r}")
    if not math.isfinite(v) or v < 0 or v > MAX_QUANTITY:
        raise RequestError(f"{what}: {str(q)[:30]!r} is not a finite quantity in 0..{MAX_QUANTITY:g}")
    return v


def _count(q: Any, what: str, maximum: int) -> int:
    """A whole count (GPUs) from a quantity, in 0..maximum."""
    v = parse_quantity(q, what)
    if v != int(v):
        raise RequestError(f"{what}: {str(q)[:30]!r} is not a whole number")
    if v > maximum:
        raise RequestError(f"{what}: {str(q)[:30]!r} is more than {maximum}")
    return int(v)


def _int(x: Any, what: str, lo: int, hi: int) -> int:
    if isinstance(x, bool):
        raise RequestError(f"{what}: {x!r} is not an integer")
    if isinstance(x, str):
        try:
            x = int(x.strip())
        except ValueError:
            raise RequestError(f"{what}: {x[:30]!r} is not an integer") from None
    if not isinstance(x, int):
        raise RequestError(f"{what}: {type(x).__name__} is not an integer")
    if not lo <= x <= hi:
        raise RequestError(f"{what}: {x} is outside {lo}..{hi}")
    return x


def _obj(x: Any, what: str) -> dict:
    """``x`` when it is a JSON object, {} when absent (null), RequestError otherwise."""
    if x is None:
        return {}
    if not isinstance(x, dict):
        raise RequestError(f"{what} must be an object, not {type(x).__name__}")
    return x


def _text(x: Any, what: str) -> str:
    if x is None:
        return ""
    if not isinstance(x, (str, int, float)) or isinstance(x, bool):
        raise RequestError(f"{what} must be a string")
    s = str(x)
    if len(s) > MAX_ANNOTATION_CHARS:
        raise RequestError(f"{what} is longer than {MAX_ANNOTATION_CHARS} characters")
    return s


def _groups(text: str, what: str) -> tuple[tuple[int, ...], ...]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            ids = part.split("-")
            if len(ids) > MAX_GPUS_PER_NODE:
                raise RequestError(f"{what}: group {part[:30]!r} lists more than {MAX_GPUS_PER_NODE} GPUs")
            out.append(tuple(_int(x, what, 0, MAX_GPUS_PER_NODE - 1) for x in ids))
            if len(out) > MAX_GPUS_PER_NODE:
                raise RequestError(f"{what}: more than {MAX_GPUS_PER_NODE} groups")
    return tuple(out)


class NodeView:
    """What the extender knows about one node (validated: RequestError names the field)."""

    def __init__(self, node: Any) -> None:
        node = _obj(node, "node")
        meta = _obj(node.get("metadata"), "node metadata")
        self.name = _text(meta.get("name"), "node metadata.name")
        if not self.name:
            raise RequestError("node without metadata.name")
        where = f"node {self.name[:80]}"
        ann = _obj(meta.get("annotations"), f"{where}: annotations")
        labels = _obj(meta.get("labels"), f"{where}: labels")
        alloc = _obj(_obj(node.get("status"), f"{where}: status").get("allocatable"), f"{where}: allocatable")
        self.model = _text(
            ann.get(ANNO + "gpu-model") or labels.get("nvidia.com/gpu.product"), f"{where}: GPU model"
        )
        if ANNO + "gpu-free-milli" in ann:
            raw = _text(ann[ANNO + "gpu-free-milli"], f"{where}: {ANNO}gpu-free-milli")
            parts = [x for x in raw.split(",") if x.strip()]
            if len(parts) > MAX_GPUS_PER_NODE:
                raise RequestError(f"{where}: {ANNO}gpu-free-milli lists more than {MAX_GPUS_PER_NODE} GPUs")
            self.gpu_free = [
                min(max(_int(x, f"{where}: {ANNO}gpu-free-milli", -(2**31), 2**31), 0), MILLI) for x in parts
            ]
        else:
            n = _count(
                alloc.get("nvidia.com/gpu", 0), f"{where}: allocatable nvidia.com/gpu", MAX_GPUS_PER_NODE
            )
            self.gpu_free = [MILLI] * n  # n <= MAX_GPUS_PER_NODE
        # MIG instances (nvidia.com/mig-*, mixed strategy) are no whole GPUs, but the agent's counts
        # include them: see Extender._node
        self.mig_devices = sum(
            _count(v, f"{where}: allocatable {k[:60]}", MAX_GPUS_PER_NODE)
            for k, v in alloc.items()
            if isinstance(k, str) and k.startswith("nvidia.com/mig-")
        )
        cpu = ann.get(ANNO + "cpu-free-milli")
        self.cpu_free = (
            parse_quantity(cpu, f"{where}: {ANNO}cpu-free-milli")
            if cpu is not None
            else parse_quantity(alloc.get("cpu", 0), f"{where}: allocatable cpu") * 1000
        )
        mem = ann.get(ANNO + "memory-free-mib")
        self.mem_free_mib = (
            parse_quantity(mem, f"{where}: {ANNO}memory-free-mib")
            if mem is not None
            else parse_quantity(alloc.get("memory", 0), f"{where}: allocatable memory") / 2**20
        )
        n = len(self.gpu_free)
        self.topology_synthetic = True  # nvlink/switches computed when first read (filter needs neither)
        if ANNO + "nvlink-domains" in ann or ANNO + "pcie-switches" in ann:
            nv = _groups(_text(ann.get(ANNO + "nvlink-domains", ""), where), f"{where}: {ANNO}nvlink-domains")
            sw = _groups(_text(ann.get(ANNO + "pcie-switches", ""), where), f"{where}: {ANNO}pcie-switches")
            self.topology_synthetic = False
            self.__dict__["nvlink"] = tuple(tuple(i for i in d if 0 <= i < n) for d in nv)
            self.__dict__["switches"] = tuple(tuple(i for i in s if 0 <= i < n) for s in sw)

    @functools.cached_property
    def nvlink(self) -> tuple[tuple[int, ...], ...]:
        from clusterdoctor.sim.cluster import synthetic_topology

        return synthetic_topology(self.model, len(self.gpu_free))[0]

    @functools.cached_property
    def switches(self) -> tuple[tuple[int, ...], ...]:
        from clusterdoctor.sim.cluster import synthetic_topology

        return synthetic_topology(self.model, len(self.gpu_free))[1]


class PodRequest:
    def __init__(self, pod: Any) -> None:
        pod = _obj(pod, "pod")
        meta = _obj(pod.get("metadata"), "pod metadata")
        ann = _obj(meta.get("annotations"), "pod annotations")
        spec = _obj(pod.get("spec"), "pod spec")
        self.name = f"{_text(meta.get('namespace'), 'pod namespace') or 'default'}/{_text(meta.get('name'), 'pod name') or '?'}"
        cpu = mem = 0.0
        gpus = 0
        containers = spec.get("containers")
        if containers is not None and not isinstance(containers, list):
            raise RequestError("pod spec.containers must be a list")
        for i, c in enumerate(containers or []):
            c = _obj(c, f"pod container {i}")
            req = _obj(
                _obj(c.get("resources"), f"pod container {i} resources").get("requests"),
                f"pod container {i} requests",
            )
            cpu += parse_quantity(req.get("cpu", 0), f"pod container {i} cpu request") * 1000
            mem += parse_quantity(req.get("memory", 0), f"pod container {i} memory request") / 2**20
            gpus += _count(
                req.get("nvidia.com/gpu", 0), f"pod container {i} nvidia.com/gpu request", MAX_GPUS_PER_NODE
            )
        if gpus > MAX_GPUS_PER_NODE:
            raise RequestError(f"pod requests more than {MAX_GPUS_PER_NODE} GPUs")
        self.cpu_milli, self.mem_mib = cpu, mem
        milli = ann.get(ANNO + "gpu-milli", ann.get("alibabacloud.com/gpu-milli"))
        if milli is not None:
            self.gpu_milli = int(min(parse_quantity(milli, "pod gpu-milli annotation"), MILLI))
            self.num_gpu = _count(
                ann.get("alibabacloud.com/gpu-count", max(gpus, 1)),
                "pod gpu-count annotation",
                MAX_GPUS_PER_NODE,
            )
        else:
            self.gpu_milli, self.num_gpu = (MILLI, gpus) if gpus else (0, 0)
        models = _text(ann.get("alibabacloud.com/gpu-card-model", ""), "pod gpu-card-model annotation")
        self.models = {m for m in models.split("|") if m}
        if ANNO + "priority" in ann:
            self.priority = _int(
                ann[ANNO + "priority"], f"pod annotation {ANNO}priority", 0, MAX_PRIORITY_CLASS
            )
        else:
            p = _int(spec.get("priority") or 0, "pod spec.priority", -(2**31), 2**31)  # int32 in the API
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
    """FGD's 0..100 score of placing ``p`` on ``n`` (best GPU for a shared pod).

    Linear in the node's GPUs: fragmentation sums per-GPU terms, so each candidate GPU (one per
    distinct free share, at most 1,001) changes the node's sums by one GPU's term, computed for all
    candidates at once (K x T, not K node evaluations of G x T each: issue 25's 160 KB request)."""
    import numpy as np

    from clusterdoctor.sim.frag import node_frag, node_parts

    tp = _typical()
    gl = np.array([n.gpu_free], dtype=np.int64) if n.gpu_free else np.zeros((1, 1), dtype=np.int64)
    t0 = np.array([0])
    before = float(node_frag(np.array([n.cpu_free]), gl, t0, tp)[0])
    cpu_after = np.array([n.cpu_free - p.cpu_milli])
    if p.num_gpu == 0 or p.gpu_milli >= MILLI:
        g = gl.copy()
        if p.num_gpu:
            g[0, np.flatnonzero(g[0] == MILLI)[: p.num_gpu]] = 0
        after = np.array([node_frag(cpu_after, g, t0, tp)[0]])
    else:
        # GPUs with the same free milli give the same node after placement: one candidate per value
        vals = np.unique(gl[0][gl[0] >= p.gpu_milli])
        if not len(vals):
            return 0
        a, cnt, total, acc = node_parts(np.array([n.cpu_free]), gl, t0, tp)  # (1,T), (1,T), (1,), (1,T)
        one = np.zeros(len(vals), dtype=np.int64)
        a_v, cnt_v, _, _ = node_parts(one, vals[:, None], one, tp)  # one GPU's terms, (K,T)
        a_w, cnt_w, _, _ = node_parts(one, (vals - p.gpu_milli)[:, None], one, tp)
        a2, cnt2 = a - a_v + a_w, cnt - cnt_v + cnt_w
        total2 = total - p.gpu_milli  # (1,) -> broadcast over K
        ok = (cnt2 >= tp.num[None, :]) & (cpu_after[:, None] >= tp.cpu[None, :]) & acc
        per_t = np.where(ok, a2, total2[:, None])
        after = per_t @ tp.freq + tp.cpu_only_freq * total2
    best = 1.0 / (1.0 + np.exp(-(before - float(np.min(after))) / 1000.0))
    return int(best * 100)


class Extender:
    """The verbs, independent of HTTP (easy to test and to embed).

    ``signals`` (a :class:`clusterdoctor.serve.signals.PrometheusSignals`): nodes with a critical GPU-health
    or straggler finding are filtered out, nodes with a warning scored down, and the agents' free-GPU
    counts (at most allocatable - allocated) replace the static allocatable count (unless the node
    carries ``gpu-free-milli``). The signals are read from memory, never fetched during a request.

    A node object that names itself but claims something impossible (5e7 GPUs, a negative count, a
    malformed annotation) is filtered out with its reason (``failedNodes``) and scored 0; only a
    request that is not ExtenderArgs at all is refused (400). ``deadline_s``: FGD scoring past it in
    one request scores the remaining nodes with tidal (cheap), logged with the reason."""

    def __init__(
        self,
        policy: str = "tidal",
        signals: Any = None,
        deadline_s: float = FGD_DEADLINE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}")
        self.policy = policy
        self.signals = signals
        self.deadline_s = deadline_s
        self.clock = clock
        self.counts: dict[str, int] = {"invalid_nodes": 0, "fgd_fallbacks": 0, "fgd_fallback_nodes": 0}
        self._lock = threading.Lock()

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def _node(self, raw: dict) -> tuple[NodeView, Any]:
        n = NodeView(raw)
        sig = self.signals.get(n.name) if self.signals is not None else None
        ann = ((raw.get("metadata") or {}).get("annotations") or {}) if isinstance(raw, dict) else {}
        free_sig = sig.usable_free() if sig is not None else None
        if free_sig is not None and ANNO + "gpu-free-milli" not in ann and n.gpu_free:
            # a count, not which GPUs: the free ones are taken to be the lowest indices. The agent counts
            # devices (whole GPUs, MIG instances, DRA devices); free whole GPUs are at least that count
            # less the node's MIG instances, never more.
            free = max(0, min(free_sig - n.mig_devices, len(n.gpu_free)))
            n.gpu_free = [MILLI] * free + [0] * (len(n.gpu_free) - free)
        return n, sig

    def _nodes(self, items: list) -> Iterator[tuple[Any, NodeView | None, Any, str | None]]:
        """(raw, view, signal, why invalid) per node, one at a time (a view lives while it is judged);
        RequestError for an entry with no name, RequestTooLarge past :data:`MAX_REQUEST_GPUS`."""
        gpus = 0
        for i, raw in enumerate(items):
            try:
                n, sig = self._node(raw)
            except RequestError as e:
                name = _node_name(raw)
                if name is None:
                    raise RequestError(f"nodes.items[{i}]: {e}") from None
                self._count("invalid_nodes")
                yield raw, None, None, f"clusterdoctor: invalid node object: {e}"[:300]
                continue
            gpus += len(n.gpu_free)
            if gpus > MAX_REQUEST_GPUS:
                raise RequestTooLarge(f"the nodes hold more than {MAX_REQUEST_GPUS} GPUs in all")
            yield raw, n, sig, None

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
            if not isinstance(nodes, dict) or not isinstance(nodes.get("items") or [], list):
                raise RequestError("nodes must be a NodeList")
            items = nodes.get("items") or []
            if len(items) > MAX_REQUEST_NODES:
                raise RequestTooLarge(f"{len(items)} nodes, more than {MAX_REQUEST_NODES}")
        names = body.get("nodenames")
        if names is not None and (not isinstance(names, list) or not all(isinstance(x, str) for x in names)):
            raise RequestError("nodenames must be a list of strings")
        return pod, items, names

    def filter(self, body: Any) -> dict:
        """ExtenderArgs -> ExtenderFilterResult."""
        pod, items, names = self._args(body)
        if items is None:  # nodeCacheCapable: no node objects; only the health signals can judge
            keep_names, failed_names = [], {}
            for h in names or []:
                sig = self.signals.get(h) if self.signals is not None else None
                why = sig.filter_reason() if sig is not None else None
                if why is None:
                    keep_names.append(h)
                else:
                    failed_names[h] = why
            return {"nodenames": keep_names, "failedNodes": failed_names, "error": ""}
        keep, failed = [], {}
        for raw, n, sig, bad in self._nodes(items):
            if n is None:
                failed[_node_name(raw)] = bad
                continue
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
        t0 = self.clock()
        fallback = 0
        for raw, n, sig, _ in self._nodes(items):
            if n is None:
                out.append({"host": _node_name(raw), "score": 0})
                continue
            if pod.fits(n) is not None:
                score = 0
            elif self.policy == "tidal" or fallback or self.clock() - t0 > self.deadline_s:
                fallback += self.policy == "fgd"
                score = round(tidal_node_score(n) * MAX_EXTENDER_PRIORITY)
            else:
                score = fgd_node_score(n, pod) * MAX_EXTENDER_PRIORITY // 100
            if sig is not None:
                score = int(score * sig.score_factor())
            out.append({"host": n.name, "score": int(min(max(score, 0), MAX_EXTENDER_PRIORITY))})
        if fallback:
            self._count("fgd_fallbacks")
            self._count("fgd_fallback_nodes", fallback)
            log.warning(
                "prioritize %s: FGD scoring ran past %g s; %d of %d node(s) scored with tidal instead",
                pod.name[:120], self.deadline_s, fallback, len(items),
            )  # fmt: skip
        return out

    def metrics(self) -> str:
        """The extender's own exposition: fallbacks, invalid nodes, the signals' freshness."""
        with self._lock:
            c = dict(self.counts)
        lines = [
            "# HELP clusterdoctor_extender_invalid_nodes_total Node objects filtered out as invalid.",
            "# TYPE clusterdoctor_extender_invalid_nodes_total counter",
            f"clusterdoctor_extender_invalid_nodes_total {c['invalid_nodes']}",
            "# HELP clusterdoctor_extender_fgd_fallbacks_total Requests whose FGD scoring ran past the deadline.",
            "# TYPE clusterdoctor_extender_fgd_fallbacks_total counter",
            f"clusterdoctor_extender_fgd_fallbacks_total {c['fgd_fallbacks']}",
            "# HELP clusterdoctor_extender_fgd_fallback_nodes_total Nodes scored with tidal instead of FGD.",
            "# TYPE clusterdoctor_extender_fgd_fallback_nodes_total counter",
            f"clusterdoctor_extender_fgd_fallback_nodes_total {c['fgd_fallback_nodes']}",
        ]
        reqs = sorted((k.split(" ", 2)[1:], n) for k, n in c.items() if k.startswith("requests "))
        if reqs:
            lines += [
                "# HELP clusterdoctor_extender_requests_total Requests by verb and status code.",
                "# TYPE clusterdoctor_extender_requests_total counter",
            ]
        for (verb, status), n in reqs:
            lines.append(f'clusterdoctor_extender_requests_total{{verb="{verb}",code="{status}"}} {n}')
        if self.signals is not None:
            st = self.signals.status()
            age = st.get("age_seconds")
            lines += [
                "# HELP clusterdoctor_extender_signals_up Whether the last refresh from Prometheus succeeded.",
                "# TYPE clusterdoctor_extender_signals_up gauge",
                f"clusterdoctor_extender_signals_up {0 if st.get('error') else 1}",
                "# HELP clusterdoctor_extender_signals_stale Whether the signals in use are stale.",
                "# TYPE clusterdoctor_extender_signals_stale gauge",
                f"clusterdoctor_extender_signals_stale {1 if st.get('stale') else 0}",
                "# HELP clusterdoctor_extender_signals_age_seconds Age of the signals in use (-1: none yet).",
                "# TYPE clusterdoctor_extender_signals_age_seconds gauge",
                f"clusterdoctor_extender_signals_age_seconds {-1 if age is None else age}",
                "# HELP clusterdoctor_extender_signals_refresh_failures_total Failed refreshes.",
                "# TYPE clusterdoctor_extender_signals_refresh_failures_total counter",
                f"clusterdoctor_extender_signals_refresh_failures_total {st.get('failures', 0)}",
                "# HELP clusterdoctor_extender_signals_nodes Nodes with a signal.",
                "# TYPE clusterdoctor_extender_signals_nodes gauge",
                f"clusterdoctor_extender_signals_nodes {st.get('nodes', 0)}",
            ]
        return "\n".join(lines) + "\n"


def _node_name(raw: Any) -> str | None:
    """The node's name when the entry is an object naming itself (so it can be reported by name)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("metadata"), dict):
        return None
    name = raw["metadata"].get("name")
    return name if isinstance(name, str) and 0 < len(name) <= 253 else None


class ExtenderApp:
    """The WSGI application: ``POST <prefix>/filter``, ``POST <prefix>/prioritize``, ``GET /healthz``,
    ``GET /metrics``. Every malformed request gets a 4xx naming what is wrong (bad JSON, JSON nested
    too deep, more JSON items than :data:`MAX_JSON_ITEMS` (413), a field of the wrong type or out of
    range); only a bug of ours answers 500."""

    def __init__(self, extender: Extender) -> None:
        self.extender = extender

    def __call__(self, environ: dict[str, Any], start: Any) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = (environ.get("PATH_INFO") or "/").rstrip("/")
        verb = path.rsplit("/", 1)[-1]
        code = ["500"]

        def started(status: str, headers: list[tuple[str, str]]) -> Any:
            code[0] = status.split(" ", 1)[0]
            return start(status, headers)

        out = self._answer(method, verb, environ, started)
        if verb in ("filter", "prioritize"):
            self.extender._count(f"requests {verb} {code[0]}")
        return out

    def _answer(self, method: str, verb: str, environ: dict[str, Any], start: Any) -> list[bytes]:
        from clusterdoctor.serve.http import json_response, read_body

        if method == "GET":
            if verb == "healthz":
                doc: dict[str, Any] = {"ok": True, "policy": self.extender.policy}
                if self.extender.signals is not None:
                    doc["signals"] = self.extender.signals.status()
                return json_response(start, 200, doc)
            if verb == "metrics":
                data = self.extender.metrics().encode()
                ctype = "text/plain; version=0.0.4"
                start("200 OK", [("Content-Type", ctype), ("Content-Length", str(len(data)))])
                return [data]
            return json_response(start, 404, {"error": "not found"})
        if method != "POST":
            return json_response(start, 405, {"error": f"method {method[:20]} not allowed (POST)"})
        if verb not in ("filter", "prioritize"):
            return json_response(start, 404, {"error": f"unknown verb {verb[:40]!r} (filter, prioritize)"})
        try:
            data = read_body(environ)
            items = data.count(b",")
            if items > MAX_JSON_ITEMS:
                why = f"request body has {items} JSON items, more than {MAX_JSON_ITEMS}"
                return json_response(start, 413, {"nodes": None, "failedNodes": {}, "error": why})
            body = _load_body(data)
            del data
            result: Any = self.extender.filter(body) if verb == "filter" else self.extender.prioritize(body)
        except RequestError as e:
            code = 413 if isinstance(e, RequestTooLarge) else 400
            if verb == "filter":  # the scheduler reads `error` from a filter result
                return json_response(start, code, {"nodes": None, "failedNodes": {}, "error": str(e)})
            return json_response(start, code, {"error": str(e)})
        return json_response(start, 200, result)


def _load_body(data: bytes) -> Any:
    from clusterdoctor.errors import InputError
    from clusterdoctor.observe.limits import load_json

    try:
        return load_json(data or b"null", None, "JSON")
    except InputError as e:
        raise RequestError(f"bad JSON: {e.reason}") from None


def make_server(
    host: str, port: int, policy: str = "tidal", limits: Any = None, signals: Any = None, web: Any = None
) -> Any:
    """A bound, listening (not yet serving) extender server (:mod:`clusterdoctor.serve.http`); port 0
    picks a free port; ``OSError`` if the address is taken. ``signals``: see :class:`Extender`;
    ``web``: a :class:`~clusterdoctor.serve.agent_web.WebConfig` whose ``tls_server_config`` makes it
    HTTPS only (kube-scheduler's ``enableHTTPS``; client certificates from its ``tlsConfig``)."""
    from clusterdoctor.serve.agent_web import tls_context_factory
    from clusterdoctor.serve.http import make_server as http_server

    ext = Extender(policy, signals)
    srv = http_server(ExtenderApp(ext), host, port, limits, tls=tls_context_factory(web))
    srv.extender = ext  # type: ignore[attr-defined]
    if signals is not None and hasattr(signals, "start"):
        signals.start()  # the first fetch (within its deadline), then refreshed in the background
    return srv


def run_extender(host: str, port: int, policy: str, signals: Any = None) -> None:
    """Serve the extender on ``host:port`` until interrupted (``clusterdoctor serve extender``)."""
    srv = make_server(host, port, policy, signals=signals)
    try:
        srv.serve_forever()
    finally:
        srv.server_close()


def serve_in_thread(
    host: str = "127.0.0.1", port: int = 0, policy: str = "tidal", limits: Any = None, signals: Any = None
) -> tuple[Any, threading.Thread]:
    """Start a server on a background thread (tests, benchmarks); stop with ``srv.shutdown()``."""
    srv = make_server(host, port, policy, limits, signals=signals)
    t = threading.Thread(target=srv.serve_forever, name="cd-extender", daemon=True)
    t.start()
    return srv, t
