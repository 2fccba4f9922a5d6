"""Reproduce the FGD paper's allocation table and compare with the published, machine-readable results.

Published: ``experiments/analysis/expected_results/analysis_allo_discrete.csv`` of
hkust-adsl/kubernetes-scheduler-simulator (columns ``workload,sc_policy,tune,seed,total_gpus,0..130``).
Ours: :func:`clusterdoctor.sim.engine.run_fgd_protocol` over the same seeds (42..51). Our seeds drive
our own generator, not Go's ``math/rand``, so runs are compared as means over the 10 seeds, column by
column.
"""

from __future__ import annotations

import csv
import io
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from clusterdoctor.errors import InputError

COLUMNS = tuple(range(0, 131))


def parse_published(
    data: str | bytes, path: str = "<analysis_allo_discrete.csv>"
) -> dict[str, dict[str, dict[int, list[float]]]]:
    """{workload: {sc_policy label: {column: [value per seed]}}} from an FGD ``analysis_*_discrete.csv``."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    reader = csv.DictReader(io.StringIO(text))
    need = {"workload", "sc_policy", "seed", "130"}
    if not reader.fieldnames or not need.issubset(reader.fieldnames):
        raise InputError(f"not an FGD analysis_*_discrete.csv (needs columns {sorted(need)})", path, 1)
    out: dict[str, dict[str, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for i, row in enumerate(reader, start=2):
        for k in COLUMNS:
            v = (row.get(str(k)) or "").strip()
            if v:
                try:
                    out[row["workload"]][row["sc_policy"]][k].append(float(v))
                except ValueError:
                    raise InputError(f"column {k}: {v[:30]!r} is not a number", path, i) from None
    return out


def mean_curve(per_col: dict[int, list[float]]) -> dict[int, float]:
    return {k: sum(v) / len(v) for k, v in sorted(per_col.items()) if v}


@dataclass
class Comparison:
    policy: str
    label: str
    ours: dict[int, float]
    published: dict[int, float]

    @property
    def max_abs_diff(self) -> float:
        common = [k for k in self.ours if k in self.published]
        return max((abs(self.ours[k] - self.published[k]) for k in common), default=float("nan"))

    @property
    def worst_column(self) -> int | None:
        common = [k for k in self.ours if k in self.published]
        return max(common, key=lambda k: abs(self.ours[k] - self.published[k]), default=None)

    @property
    def final_ours(self) -> float:
        return self.ours[max(self.ours)]

    @property
    def final_published(self) -> float:
        return self.published[max(self.published)]


@lru_cache(maxsize=4)
def _load(nodes_path: str, pods_path: str):
    from clusterdoctor.sim.traces import load_openb_nodes, load_openb_pods

    return load_openb_nodes(nodes_path), load_openb_pods(pods_path)


def _one(args):
    """(policy, seed, allocation curve, fragmentation curve, wall s, CPU s, energy summary) of one run;
    the traces are parsed once per process."""
    nodes_path, pods_path, policy, seed, tune = args
    from clusterdoctor.sim.engine import run_fgd_protocol

    c0 = time.process_time()
    nodes, pods = _load(nodes_path, pods_path)
    res = run_fgd_protocol(nodes, pods, policy, seed, tune)
    cpu = time.process_time() - c0
    return policy, seed, res.allocation_curve, res.frag_curve, res.seconds, cpu, res.energy_summary()


def mean_energy(summaries: list[dict[str, float]]) -> dict[str, float]:
    """The per-key mean of several runs' energy summaries (keys every run has; NaN values left out)."""
    keys = set.intersection(*(set(s) for s in summaries)) if summaries else set()
    out: dict[str, float] = {}
    for k in sorted(keys):
        vals = [s[k] for s in summaries if s[k] == s[k]]
        if vals:
            out[k] = round(sum(vals) / len(vals), 4)
    return out


def run_sweep(nodes_path: Path, pods_path: Path, policies: list[str], seeds: list[int], tune: float = 1.3,
              workers: int = 1, on_done=None) -> dict[str, dict[int, dict[int, float]]]:  # fmt: skip
    """{policy: {seed: allocation curve}} for every (policy, seed), on ``workers`` local processes."""
    jobs = [(str(nodes_path), str(pods_path), p, s, tune) for p in policies for s in seeds]
    out: dict[str, dict[int, dict[int, float]]] = defaultdict(dict)
    if workers <= 1:
        results = map(_one, jobs)
        for r in results:
            out[r[0]][r[1]] = r[2]
            if on_done:
                on_done(r)
        return dict(out)
    with ProcessPoolExecutor(max_workers=workers) as ex:
        for r in ex.map(_one, jobs):
            out[r[0]][r[1]] = r[2]
            if on_done:
                on_done(r)
    return dict(out)


def average_curves(curves: dict[int, dict[int, float]]) -> dict[int, float]:
    per: dict[int, list[float]] = defaultdict(list)
    for c in curves.values():
        for k, v in c.items():
            per[k].append(v)
    return {k: sum(v) / len(v) for k, v in sorted(per.items())}


def compare(
    ours: dict[str, dict[int, float]], published: dict[str, dict[int, list[float]]], labels: dict[str, str]
) -> list[Comparison]:
    """One :class:`Comparison` per policy of ours that has a published label."""
    out = []
    for pol, curve in ours.items():
        label = labels.get(pol)
        pub = mean_curve(published[label]) if label and label in published else {}
        out.append(Comparison(pol, label or "-", curve, pub))
    return out
