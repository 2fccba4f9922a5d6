"""An upper bound on GPU allocation in the FGD protocol, for any policy and any number of migrations.

In the FGD protocol (docs/sim.md) pods arrive and never leave. Whatever a policy does — placing,
refusing, migrating without limit — the pods on the cluster at any moment are a subset of the pods
arrived so far, packed onto the nodes. So the allocation after the last arrival is at most the most
GPU milli that any subset of the arrived pods can occupy. This module computes a linear-programming
relaxation of that packing problem (so its optimum is an upper bound on the exact one):

- ``x[t, c]``: pods of spec ``t`` on node class ``c`` (nodes with the same CPU, memory, GPU count and
  model), continuous; at most the arrived count of ``t`` over all classes; per class the summed CPU,
  memory and GPU milli are at most the class's totals; a spec goes only to classes whose single node
  could host it when empty;
- GPU sharing: each GPU holding sharing pods (one GPU, < 1000 milli) holds a *pattern* — a multiset of
  their milli values summing to at most 1000, maximal (no value of the trace fits in what is left);
  ``y[p, c]`` GPUs of class ``c`` use pattern ``p`` and every sharing pod placed on class ``c`` needs a
  slot of its milli in one of them; per class, whole-GPU pods' GPUs plus the patterned GPUs are at
  most the class's GPUs.

Pods asking several GPUs at a share each (FGD rejects them; openb has none) enter only through the
class's GPU milli. The pattern count grows fast with many small sharing values (openb default:
~1,500-1,700). Relaxed (dropped): integrality, each node's own CPU/memory/GPUs (only class sums, so
which node of its class a pattern sits on), and multi-GPU pods' need for GPUs of one node. Every one of those only raises the optimum, so the
result bounds what migration can reach. ``scipy`` (HiGHS) solves it; it is imported here only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from clusterdoctor.sim.cluster import Cluster
from clusterdoctor.sim.traces import MILLI, PodTrace


@dataclass
class PackBound:
    """The LP's optimum and what it is made of."""

    bound_milli: float  # most GPU milli any subset of the arrived pods can occupy (relaxed)
    total_gpus: int
    arrived_pods: int
    arrived_milli: int
    patterns: int
    forced: int  # the first this many arrived pods must all be placed
    share_gpus: float  # GPUs the optimum fills with sharing patterns
    unused_share_milli: float  # idle milli on those GPUs (pattern slack plus unfilled slots)
    status: str
    # (GPUs per pod, milli per GPU) -> (pods the optimum places, pods arrived)
    by_shape: dict[tuple[int, int], tuple[float, int]] = field(default_factory=dict)

    @property
    def bound_pct(self) -> float:
        return 100.0 * self.bound_milli / (self.total_gpus * MILLI)


def share_patterns(values: list[int], cap: dict[int, int] | None = None) -> list[dict[int, int]]:
    """Maximal multisets of the sharing milli ``values`` with sum <= 1000 (no value fits in what is
    left); ``cap[m]`` bounds the copies of ``m`` (the arrived count: more copies are never usable)."""
    vals = sorted(set(values), reverse=True)
    out: list[dict[int, int]] = []

    def rec(i: int, left: int, cur: dict[int, int]) -> None:
        if i == len(vals):
            # maximal: no value with a spare copy fits in what is left
            if not any(m <= left and cur.get(m, 0) < (cap or {}).get(m, MILLI) for m in vals):
                out.append(dict(cur))
            return
        m = vals[i]
        top = min(left // m, (cap or {}).get(m, MILLI))
        for k in range(top, -1, -1):
            if k:
                cur[m] = k
            else:
                cur.pop(m, None)
            rec(i + 1, left - k * m, cur)
        cur.pop(m, None)

    if vals:
        rec(0, MILLI, {})
    return [p for p in out if p]


def _key(pods: PodTrace, i: int) -> tuple[int, int, int, int, str]:
    return pods.cpu_milli[i], pods.memory_mib[i], pods.num_gpu[i], pods.gpu_milli[i], pods.gpu_spec[i]


def packing_bound(cluster: Cluster, pods: PodTrace, arrived: np.ndarray, forced: int = 0) -> PackBound:
    """The LP bound for the pods ``arrived`` (indices into ``pods`` in arrival order, repeats allowed)
    on ``cluster``; the first ``forced`` of them must all be placed (a scheduler that turns no pod away
    while some packing could take it places every pod before the first one that no packing can)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    counts = Counter(_key(pods, i) for i in arrived.tolist())
    specs = sorted(counts)
    classes = Counter((n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in cluster.nodes)
    cls = sorted(classes)
    share_m = sorted({s[3] for s in specs if s[2] == 1 and 0 < s[3] < MILLI})
    share_cap = Counter()
    for s in specs:
        if s[2] == 1 and 0 < s[3] < MILLI:
            share_cap[s[3]] += counts[s]
    pats = share_patterns(share_m, dict(share_cap))

    cols: list[tuple[int, int]] = []  # (spec, class) pairs
    for t, (cpu, mem, num, _milli, con) in enumerate(specs):
        allowed = set(con.split("|")) if con else None
        for c, (ccpu, cmem, cg, model) in enumerate(cls):
            if cpu <= ccpu and mem <= cmem and num <= cg and (allowed is None or model in allowed):
                cols.append((t, c))
    nx, ny = len(cols), len(pats)
    rows, cidx, vals, rhs = [], [], [], []
    r = 0

    def add(row_entries, b):
        nonlocal r
        for j, v in row_entries:
            rows.append(r)
            cidx.append(j)
            vals.append(v)
        rhs.append(b)
        r += 1

    by_spec: dict[int, list[int]] = {}
    by_class: dict[int, list[int]] = {}
    for j, (t, c) in enumerate(cols):
        by_spec.setdefault(t, []).append(j)
        by_class.setdefault(c, []).append(j)
    must = Counter(_key(pods, i) for i in arrived[:forced].tolist())
    for t, js in by_spec.items():  # supply, and the forced pods
        add([(j, 1.0) for j in js], counts[specs[t]])
        if must.get(specs[t]):
            add([(j, -1.0) for j in js], -must[specs[t]])
    if any(not by_spec.get(t) for t, s in enumerate(specs) if must.get(s)):
        raise ValueError("a forced pod fits on no node")
    for c, js in by_class.items():  # class CPU, memory, GPU milli
        n_c = classes[cls[c]]
        ccpu, cmem, cg, _ = cls[c]
        add([(j, specs[cols[j][0]][0]) for j in js], n_c * ccpu)
        add([(j, specs[cols[j][0]][1]) for j in js], n_c * cmem)
        add([(j, specs[cols[j][0]][2] * specs[cols[j][0]][3]) for j in js], n_c * cg * MILLI)
    ncls = len(cls)
    for c in range(ncls):  # per class: whole-GPU pods' GPUs plus patterned GPUs <= the class's GPUs
        n_c, cg = classes[cls[c]], cls[c][2]
        whole = [
            (j, float(specs[cols[j][0]][2])) for j in by_class.get(c, []) if specs[cols[j][0]][3] >= MILLI
        ]
        add(whole + [(nx + c * ny + p, 1.0) for p in range(ny)], n_c * cg)
        for m in share_m:  # every sharing pod of milli m there needs a slot of m in a pattern there
            entries = [
                (j, 1.0)
                for j in by_class.get(c, [])
                if specs[cols[j][0]][2] == 1 and specs[cols[j][0]][3] == m
            ]
            entries += [(nx + c * ny + p, -float(pat[m])) for p, pat in enumerate(pats) if m in pat]
            add(entries, 0.0)
    a = coo_matrix((vals, (rows, cidx)), shape=(r, nx + ncls * ny)).tocsr()
    obj = np.zeros(nx + ncls * ny)
    for j, (t, _) in enumerate(cols):
        obj[j] = -float(specs[t][2] * specs[t][3])
    res = linprog(obj, A_ub=a, b_ub=np.array(rhs, dtype=float), bounds=(0, None), method="highs")
    xs = res.x if res.x is not None else np.zeros(nx + ncls * ny)
    share_gpus = float(xs[nx:].sum())
    share_used = sum(
        xs[j] * specs[t][3] for j, (t, _) in enumerate(cols) if specs[t][2] == 1 and specs[t][3] < MILLI
    )
    arrived_milli = sum(k * s[2] * s[3] for s, k in counts.items())
    shape: dict[tuple[int, int], list] = {}
    for s, k in counts.items():
        shape.setdefault((s[2], s[3]), [0.0, 0])[1] += k
    for j, (t, _) in enumerate(cols):
        shape[(specs[t][2], specs[t][3])][0] += float(xs[j])
    return PackBound(
        -float(res.fun) if res.status == 0 else float("nan"), cluster.total_gpus, int(arrived.size),
        int(arrived_milli), ny, forced, share_gpus, share_gpus * MILLI - float(share_used), res.message,
        {k: (round(v[0], 1), v[1]) for k, v in sorted(shape.items())},
    )  # fmt: skip
