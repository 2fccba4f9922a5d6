"""Defrag (FGD + at most 1 migration per 100 placed pods) against FGD on the FGD paper's protocol:
openb_pod_list_default, 6212 GPUs, tune 1.3, seeds 42-51, allocation at the 130 % column; paired by
seed (same arrival order, same node order). Also the same policy with a zero budget (= FGD) and an
unbounded one (10 per 100 pods) to show where the budget binds.

    .venv/bin/python bench/sim_defrag.py [--seeds 42-51] [--json out.json]
    .venv/bin/python bench/sim_defrag.py --seeds 42-44 --only \
        --variant 'v4=defrag:{"max_victims": 4}'    # FGD plus these variants only

``--variant LABEL=POLICY:JSON-KWARGS`` (repeatable) adds a run; ``--only`` keeps FGD and the variants.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from _openb import openb_default  # bench/_openb.py (the script's folder is on sys.path)
from clusterdoctor.cli.sim import parse_seeds
from clusterdoctor.sim.engine import run_fgd_protocol
from clusterdoctor.sim.policies import get_policy

RUNS = [  # (label, policy, kwargs)
    ("fgd", "fgd", {}),
    ("defrag (0 migrations)", "defrag", {"per_100": 0}),
    ("defrag (1/100 pods)", "defrag", {}),
    ("defrag-cpu (1/100 pods)", "defrag-cpu", {}),
    ("defrag (10/100 pods)", "defrag", {"per_100": 10}),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--json", default=None)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--only", action="store_true")
    a = ap.parse_args()
    runs = [RUNS[0]] if a.only else list(RUNS)
    for v in a.variant:
        label, rest = v.split("=", 1)
        pol, _, kw = rest.partition(":")
        runs.append((label, pol, json.loads(kw) if kw else {}))
    got = openb_default()
    if got is None:
        return 2
    nodes, pods = got
    seeds = parse_seeds(a.seeds)
    res: dict[str, list[dict]] = {}
    for label, pol, kw in runs:
        for seed in seeds:
            t0 = time.process_time()
            r = run_fgd_protocol(nodes, pods, get_policy(pol, **kw), seed)
            res.setdefault(label, []).append({
                "seed": seed, "alloc": r.final_allocation, "failed": r.pods_failed,
                "migrations": r.migrations, "restart_gpu_h": r.restart_gpu_hours,
                "placed": r.pods_arrived - r.pods_failed, "cpu_s": time.process_time() - t0,
            })  # fmt: skip
    base = [x["alloc"] for x in res["fgd"]]
    print(f"openb default, tune 1.3, seeds {a.seeds}: allocation at 130 % (means over the seeds)")
    print(f"{'policy':<24}{'alloc %':>8}{'vs FGD':>8}{'min..max':>14}{'better':>7}{'migr':>6}"
          f"{'GPU-h':>7}{'CPU s':>6}")  # fmt: skip
    for label, rows in res.items():
        al = [x["alloc"] for x in rows]
        d = [x - y for x, y in zip(al, base, strict=True)]
        print(f"{label:<24}{statistics.mean(al):>8.2f}{statistics.mean(d):>+8.2f}"
              f"{f'{min(d):+.2f}..{max(d):+.2f}':>14}{sum(x > 0 for x in d):>4}/{len(d):<2}"
              f"{statistics.mean(x['migrations'] for x in rows):>6.0f}"
              f"{statistics.mean(x['restart_gpu_h'] for x in rows):>7.2f}"
              f"{statistics.mean(x['cpu_s'] for x in rows):>6.1f}")  # fmt: skip
    sd = {k: statistics.pstdev(x["alloc"] - y for x, y in zip(v, base, strict=True)) for k, v in res.items()}
    print("std of the paired difference: " + ", ".join(f"{k} {v:.2f}" for k, v in sd.items() if k != "fgd"))
    print(
        "per seed: " + " | ".join(f"{k}: " + " ".join(f"{x['alloc']:.2f}" for x in v) for k, v in res.items())
    )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
