"""Energy on the FGD paper's protocol: FGD, PWR (CCGrid'25: pack onto powered GPUs), PWR+FGD (the
paper's combination, equal weights), pwr-sleep (ours: FGD first, then the smallest power step,
waking a sleeping node counted) and pwr-eff (ours: the same per useful TFLOPS).
openb_pod_list_default, 6212 GPUs, tune 1.3, seeds 42-51; power from clusterdoctor.sim.energy at
each percent of capacity arrived (pods arrive at a steady rate, so the mean is proportional to
energy). Then the same on the design's fleet (--nodes design-mix: 10,000 GPUs,
42 % A100 / 58 % H100; openb's GPU-model constraints dropped, they name other models).

    .venv/bin/python bench/sim_energy.py [--seeds 42-51] [--mix-seeds 42-44]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

from _openb import openb_default  # bench/_openb.py (the script's folder is on sys.path)
from clusterdoctor.cli.sim import parse_seeds
from clusterdoctor.sim.engine import run_fgd_protocol
from clusterdoctor.sim.synthetic import design_mix_cluster

POLICIES = ["fgd", "pwr", "pwr-fgd", "pwr-sleep", "pwr-eff"]
KEYS = [("alloc", "alloc %"), ("mean_kw_all_on_to80", "kW<=80"), ("mean_kw_sleep_to80", "sleep<=80"),
        ("mean_kw_all_on", "kW all"), ("j_per_tflop_all_on", "J/TF"), ("j_per_tflop_sleep", "J/TF sl")]  # fmt: skip


def table(title: str, cluster, pods, seeds: list[int]) -> None:
    res: dict[str, list[dict]] = {}
    for pol in POLICIES:
        for seed in seeds:
            r = run_fgd_protocol(cluster, pods, pol, seed)
            res.setdefault(pol, []).append({"alloc": r.final_allocation, **r.energy_summary()})
    print(title)
    print(f"{'policy':<11}" + "".join(f"{h:>10}" for _, h in KEYS) + f"{'vs PWR':>8}")
    pwr = [x["mean_kw_all_on_to80"] for x in res["pwr"]]
    for pol, rows in res.items():
        vals = [statistics.mean(x[k] for x in rows) for k, _ in KEYS]
        d = statistics.mean(x["mean_kw_all_on_to80"] / y - 1 for x, y in zip(rows, pwr, strict=True))
        print(
            f"{pol:<11}"
            + "".join(
                f"{v:>10.3f}" if k.startswith("j_") else f"{v:>10.2f}"
                for v, (k, _) in zip(vals, KEYS, strict=True)
            )
            + f"{d * 100:>+7.1f}%"
        )
    fgd = [x["mean_kw_all_on_to80"] for x in res["fgd"]]
    for pol in POLICIES[1:]:
        d = [x["mean_kw_all_on_to80"] / y - 1 for x, y in zip(res[pol], fgd, strict=True)]
        s = [
            x["mean_kw_sleep_to80"] / y["mean_kw_sleep_to80"] - 1
            for x, y in zip(res[pol], res["fgd"], strict=True)
        ]
        a = [x["alloc"] - y["alloc"] for x, y in zip(res[pol], res["fgd"], strict=True)]
        print(
            f"  {pol} vs FGD (paired): power<=80 % {statistics.mean(d) * 100:+.1f} % "
            f"({min(d) * 100:+.1f}..{max(d) * 100:+.1f}), asleep {statistics.mean(s) * 100:+.1f} %,"
        )
        print(f"    alloc {statistics.mean(a):+.2f} ({min(a):+.2f}..{max(a):+.2f})")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--mix-seeds", default="42-44")
    a = ap.parse_args()
    got = openb_default()
    if got is None:
        return 2
    cluster, pods = got
    table(f"openb default, 6212 GPUs, tune 1.3, seeds {a.seeds} (means)", cluster, pods,
          parse_seeds(a.seeds))  # fmt: skip
    if a.mix_seeds:
        free = dataclasses.replace(pods, gpu_spec=[""] * len(pods))
        table(f"design-mix (4200 A100 + 5800 H100), openb default pods, seeds {a.mix_seeds}",
              design_mix_cluster(), free, parse_seeds(a.mix_seeds))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
