"""GPU clocks (DVFS) in the timed engine on openb: FGD and PWR at the top clock against the same with
the ``slack`` clock policy (clusterdoctor.sim.dvfs: while no job waits, a job starts at the clock that
needs the least clock-dependent energy for its work within a 10 % slowdown cap; queued jobs at the
top clock). openb_pod_list_default on its 6212 GPUs, its own creation/deletion times (149 days),
seeds 42-51 (the timed engine's seed drives tie-breaks only). beta (Hsu-Feng: share of a job's
time that follows the graphics clock) is not in the trace: 1.0 (compute-bound: the clock costs the
most time) and 0.5 are run. "stored": clocks move only on models with a stored DVFS range (P100, V100,
T4, A10: 1,508 GPUs); "+G": openb's undisclosed G2/G3 (4,704 GPUs) assumed V100-class (135-1530 MHz).

    .venv/bin/python bench/sim_dvfs.py [--seeds 42-51] [--workers 2]
    .venv/bin/python bench/sim_dvfs.py --synthetic [--seeds 42-44]

``--synthetic``: where load matters (openb is ~0.2 % allocated, no job ever waits): a synthetic
256-GPU H100 cluster (stored range 345-1980 MHz), 3,000 synthetic jobs (openb's shapes, mean 1 h) at
offered load 0.5, 0.9 and 1.2, FGD at the top clock vs FGD + slack (10 % cap), beta 1.0 and 0.5.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from clusterdoctor.cli.sim import parse_seeds
from clusterdoctor.sim.dvfs import get_clock_policy
from clusterdoctor.sim.engine import job_times, run_timed
from clusterdoctor.sim.traces import load_openb_nodes, load_openb_pods
from clusterdoctor.testing import fixture_path

V100_RANGE = (135, 1530)
# (label, placement, clock, beta, assumed range for models without one, slowdown cap)
CONFIGS = [
    ("fgd", "fgd", "max", 1.0, None, 0.10),
    ("pwr", "pwr", "max", 1.0, None, 0.10),
    ("fgd+slack b1 stored", "fgd", "slack", 1.0, None, 0.10),
    ("fgd+slack b1 +G", "fgd", "slack", 1.0, V100_RANGE, 0.10),
    ("fgd+slack b.5 +G", "fgd", "slack", 0.5, V100_RANGE, 0.10),
    ("fgd+slack b.5 +G 5%", "fgd", "slack", 0.5, V100_RANGE, 0.05),
    ("pwr+slack b.5 +G", "pwr", "slack", 0.5, V100_RANGE, 0.10),
]
_DATA: dict = {}


def _load():
    if not _DATA:
        _DATA["nodes"] = load_openb_nodes(
            fixture_path("sched/alibaba_gpu_v2023/openb_node_list_gpu_node.csv")
        )
        _DATA["pods"] = load_openb_pods(fixture_path("sched/alibaba_gpu_v2023/openb_pod_list_default.csv"))
        _DATA["times"] = job_times(_DATA["pods"])
    return _DATA


def one(args: tuple[int, int]) -> tuple[int, int, dict]:
    ci, seed = args
    _, pol, clock, beta, rng, cap = CONFIGS[ci]
    d = _load()
    arr, dur = d["times"]
    r = run_timed(d["nodes"], d["pods"], pol, seed, arrivals=arr, durations=dur,
                  clock=get_clock_policy(clock, cap, rng), beta=beta)  # fmt: skip
    x = r.as_dict()
    jct = r.jct_s
    return ci, seed, {
        "kwh": r.energy_kwh, "kwh_sleep": r.energy_kwh_sleep, "kwh_busy": r.busy_energy_kwh,
        "j_tf": x["j_per_useful_tflop"], "j_tf_sleep": r.energy_kwh_sleep * 3.6e6 / r.useful_tflop, "jct_mean": float(jct.mean()), "jct_p50": x["jct_s"]["p50"],
        "jct_p99": x["jct_s"]["p99"], "q_p99": x["queue_delay_s"]["p99"], "clock": r.mean_clock_rel,
        "tflop": r.useful_tflop, "finished": r.finished, "makespan": r.makespan_s,
    }  # fmt: skip


def synthetic(seeds: list[int]) -> None:
    from clusterdoctor.sim.synthetic import synthetic_cluster, synthetic_jobs

    c = synthetic_cluster(256)
    print(f"synthetic 256 x H100, 3,000 jobs, FGD, seeds {seeds[0]}-{seeds[-1]}: slack vs top clock, paired")
    print(f"{'load':>5}{'beta':>5}{'busy kWh':>10}{'vs top':>8}{'all-on':>8}{'JCT mean':>10}{'vs top':>8}"
          f"{'q p99 top':>10}{'q p99 sl':>9}{'clock':>7}")  # fmt: skip
    for load in (0.5, 0.9, 1.2):
        for beta in (1.0, 0.5):
            rows = []
            for seed in seeds:
                pods, arr, dur = synthetic_jobs(3000, c, seed=seed, load=load)
                top = run_timed(c, pods, "fgd", seed, arrivals=arr, durations=dur)
                sl = run_timed(c, pods, "fgd", seed, arrivals=arr, durations=dur, clock="slack", beta=beta)
                rows.append((top, sl))

            def mean(f, rows=rows):
                return statistics.mean(f(t, s) for t, s in rows)

            print(f"{load:>5.1f}{beta:>5.1f}{mean(lambda t, s: s.busy_energy_kwh):>10.0f}"
                  f"{mean(lambda t, s: 100 * (s.busy_energy_kwh / t.busy_energy_kwh - 1)):>+7.1f}%"
                  f"{mean(lambda t, s: 100 * (s.energy_kwh / t.energy_kwh - 1)):>+7.1f}%"
                  f"{mean(lambda t, s: float(s.jct_s.mean())):>10.0f}"
                  f"{mean(lambda t, s: 100 * (s.jct_s.mean() / t.jct_s.mean() - 1)):>+7.1f}%"
                  f"{mean(lambda t, s: float(np.percentile(t.queue_delay_s, 99))):>10.0f}"
                  f"{mean(lambda t, s: float(np.percentile(s.queue_delay_s, 99))):>9.0f}"
                  f"{mean(lambda t, s: s.mean_clock_rel):>7.3f}")  # fmt: skip


def print_table(res: dict[int, dict[int, dict]], seeds: list[int]) -> None:
    print(f"openb default, timed (own times), 6212 GPUs, seeds {','.join(map(str, seeds))}: means; "
          "vs FGD paired by seed")  # fmt: skip
    print(f"{'config':<20}{'MWh':>8}{'MWh sl':>8}{'busy':>7}{'J/TF':>7}{'clock':>6}"
          f"{'JCT mean':>9}{'p50':>6}{'p99':>7}{'busy vs':>8}{'all vs':>7}{'JCT vs':>7}")  # fmt: skip
    for ci, (label, *_r) in enumerate(CONFIGS):
        rows = [res[ci][s] for s in seeds]
        base = [res[0][s] for s in seeds]

        def m(k, rows=rows):
            return statistics.mean(r[k] for r in rows)

        def rel(k, rows=rows, base=base):
            return 100 * statistics.mean(r[k] / b[k] - 1 for r, b in zip(rows, base, strict=True))

        print(f"{label:<20}{m('kwh') / 1000:>8.1f}{m('kwh_sleep') / 1000:>8.2f}{m('kwh_busy') / 1000:>7.2f}"
              f"{m('j_tf'):>7.2f}{m('clock'):>6.3f}{m('jct_mean'):>9.0f}{m('jct_p50'):>6.0f}{m('jct_p99'):>7.0f}"
              f"{rel('kwh_busy'):>+7.1f}%{rel('kwh'):>+6.2f}%{rel('jct_mean'):>+6.1f}%")  # fmt: skip
        sl = [100 * (r["kwh_sleep"] / b["kwh_sleep"] - 1) for r, b in zip(rows, base, strict=True)]
        print(f"    asleep vs fgd {statistics.mean(sl):+.2f} % ({min(sl):+.2f}..{max(sl):+.2f}); "
              f"J/TF asleep {m('j_tf_sleep'):.3f}; makespan {m('makespan') / 86400:.1f} d; "
              f"q p99 {m('q_p99'):.0f} s; finished {m('finished'):.0f}; TFLOP {m('tflop'):.4g}")  # fmt: skip
    sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--synthetic", action="store_true")
    a = ap.parse_args()
    if a.synthetic:
        synthetic(parse_seeds(a.seeds))
        return 0
    if not fixture_path("sched/alibaba_gpu_v2023/openb_pod_list_default.csv"):
        print("shared fixtures absent (set CLUSTERDOCTOR_FIXTURES)", file=sys.stderr)
        return 2
    seeds = parse_seeds(a.seeds)
    t0 = time.perf_counter()
    # seed by seed, all configurations of a seed together: the table is printed after each seed, so a
    # run cut short still leaves a table of the seeds it finished
    jobs = [(ci, s) for s in seeds for ci in range(len(CONFIGS))]
    res: dict[int, dict[int, dict]] = {}
    done: list[int] = []
    with ProcessPoolExecutor(a.workers) as ex:
        for ci, s, row in ex.map(one, jobs):
            res.setdefault(ci, {})[s] = row
            if all(s in res.get(k, {}) for k in range(len(CONFIGS))):
                done.append(s)
                print_table(res, done)
    print(f"{len(jobs)} runs in {time.perf_counter() - t0:.0f} s wall ({a.workers} workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
