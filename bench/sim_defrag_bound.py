"""How far can migration take FGD at all? (issue 24, defrag.) openb default, tune 1.3, per seed:

- ``fgd``: FGD's allocation at the 130 % column, and the arrival index of its first failed pod;
- ``lp-any``: the LP bound (clusterdoctor.sim.pack_bound) over the arrived pods, no pod forced: what
  any subset of them could occupy — a bound for every policy, any number of migrations, refusals
  allowed;
- ``lp-forced``: the same with every pod before the latest first failure of the runs below forced in
  (that prefix can be packed — the run packed it — so a scheduler that turns no pod away while some
  packing could take it, i.e. an unlimited-migration oracle inside the protocol, places all of it);
  it bounds every policy that places every pod of that prefix (the defrag runs fail no earlier than
  FGD: the first-failure column says);
- ``unlimited``: the defrag policy with an unbounded budget (10^6 per 100 pods), repacking after every
  placement from the start (``repack_every=1, start_alloc=0``) and moving up to 4 pods to admit one —
  what our migration moves reach when migrations cost nothing.

    .venv/bin/python bench/sim_defrag_bound.py [--seeds 42-44] [--no-unlimited] [--verbose]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from _openb import openb_default  # bench/_openb.py (the script's folder is on sys.path)
from clusterdoctor.cli.sim import parse_seeds
from clusterdoctor.sim.engine import FGD_TUNE, fgd_arrival_order, run_fgd_protocol
from clusterdoctor.sim.pack_bound import packing_bound
from clusterdoctor.sim.policies import get_policy

UNLIMITED = {"per_100": 1e6, "repack_every": 1, "start_alloc": 0.0, "max_victims": 4, "min_gain_milli": 1}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="42-44")
    ap.add_argument("--no-unlimited", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    got = openb_default()
    if got is None:
        return 2
    nodes, pods = got
    print("seed  fgd@130 defrag@130  first failure fgd/defrag/unl of arrivals  lp-any  lp-forced  "
          "unlimited (migrations, CPU s)")  # fmt: skip
    for seed in parse_seeds(a.seeds):
        fgd = run_fgd_protocol(nodes, pods, "fgd", seed)
        dfg = run_fgd_protocol(nodes, pods, "defrag", seed)
        firsts = [fgd.first_failed, dfg.first_failed]
        un = ""
        if not a.no_unlimited:
            t0 = time.process_time()
            r = run_fgd_protocol(nodes, pods, get_policy("defrag", **UNLIMITED), seed)
            un = f"{r.final_allocation:.2f} ({r.migrations}, {time.process_time() - t0:.0f} s)"
            firsts.append(r.first_failed)
        order = fgd_arrival_order(pods, nodes.total_gpus, FGD_TUNE, np.random.default_rng(seed))
        b0 = packing_bound(nodes, pods, order)
        bk = packing_bound(nodes, pods, order, forced=max(firsts))
        ff = "/".join(str(x) for x in firsts)
        print(f"{seed:<6}{fgd.final_allocation:>7.2f}{dfg.final_allocation:>11.2f}  {ff:>22} of {len(order):<8}"
              f"{b0.bound_pct:>8.2f}{bk.bound_pct:>11.2f}  {un}", flush=True)  # fmt: skip
        if a.verbose:
            print("  lp-forced places (GPUs, milli): placed/arrived " + ", ".join(
                f"{k[0]}x{k[1]}: {v[0]:.0f}/{v[1]}" for k, v in bk.by_shape.items()))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
