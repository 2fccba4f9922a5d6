"""Fail-slow bench: real faults on a real 4-rank DDP job (gloo, CPU), detected by the probe + detector.

Parts (each resumable; results accumulate in bench/failslow-runs.jsonl, one line per run):

  python bench/failslow.py runs [--minutes M]   # the fault/clean runs still missing from the plan
  python bench/failslow.py overhead [--pairs N] # probe on/off A/B runs + the probe's own cost per step
  python bench/failslow.py scale                # one detector evaluation over 10,000 ranks' streams
  python bench/failslow.py report               # the table (precision, recall, ...) from what was run

Needs root (cgroups, network namespaces) and the training extra. The runs are "episodes": fresh
models and probes in the same 4 processes (torch takes ~10 s to start on this shared 2-core
machine). Faults are injected from this process, once rank 0's probe file shows step ONSET.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = HERE / "failslow-runs.jsonl"
# each run's probe files, kept so that `report --reanalyse` judges them again with the current detector
EPISODES = HERE / ".failslow-episodes"
ONSET = 25
STEPS = 70
PERIODIC_STEPS = 200
EXPECTED = {
    "quota": "compute",
    "stop": "compute",
    "link": "communication",
    "loader": "data",
    "periodic": "periodic",
    "job": "job",
    "clean": None,
}


def plan() -> list[dict]:
    """44 faulty and 44 clean runs, interleaved; victims rotate over the ranks."""
    faulty = []
    for i in range(8):
        faulty += [
            {"fault": "quota", "rank": (i + 2) % 4},
            {"fault": "stop", "rank": (i + 1) % 4},
            {"fault": "link", "rank": (i + 3) % 4},
            {"fault": "loader", "rank": i % 4},
            {"fault": "periodic", "rank": (i + 2) % 4},
        ]
    faulty += [{"fault": "job", "rank": None} for _ in range(4)]
    out = []
    for i, f in enumerate(faulty):
        out.append({"id": f"f{i:02d}-{f['fault']}", **f})
        out.append({"id": f"c{i:02d}-clean", "fault": "clean", "rank": None})
    return out


def make_fault(spec: dict):
    from clusterdoctor.training import faultlab as fl

    r = spec["rank"]
    return {
        "clean": lambda: None,
        "quota": lambda: fl.CpuQuota(r, 0.15),
        "stop": lambda: fl.StopCont(r, 0.03, 0.03),
        "link": lambda: fl.SlowLink(r, "400mbit"),
        "loader": lambda: fl.SlowLoader(r, 0.02),
        "periodic": lambda: fl.Periodic(fl.CpuQuota(r, 0.15), 1.0, 1.0),
        "job": lambda: fl.JobWide(0.5),
    }[spec["fault"]]()


def done_ids() -> set[str]:
    if not RUNS.exists():
        return set()
    out = set()
    for line in RUNS.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("part") == "run" and not rec.get("error"):
            out.add(rec["id"])
    return out


def analyse(ep_dir: str, injected_at: float | None) -> dict:
    """Detector verdict and the truth (onset step) for one episode's probe files."""
    import numpy as np

    from clusterdoctor.analyze.failslow import detect, table_from_records
    from clusterdoctor.observe.watch.records import load_watch_dir

    wf = load_watch_dir(ep_dir)
    tb = table_from_records(wf.steps, wf.identities, wf.links, wf.warnings)
    res = detect(tb)
    true_onset = None
    if injected_at is not None:
        med_t = np.nanmedian(tb.t, axis=0)
        after = np.nonzero(med_t >= injected_at)[0]
        true_onset = int(tb.steps[after[0]]) if len(after) else None
    # relative noise of the clean baseline, for the scale part's generated streams
    base = slice(3, min(ONSET, tb.shape[1]))
    noise = {}
    for k in ("wall", "own", "wait", "data", "stall"):
        a = getattr(tb, k)[:, base]
        med = float(np.nanmedian(a))
        noise[k] = {"median_s": med, "mad_s": float(np.nanmedian(np.abs(a - med)))}
    return {
        "episodes": [
            {
                "kind": e.kind,
                "rank": e.rank,
                "onset_step": e.onset_step,
                "detect_step": e.detect_step,
                "detect_t": e.detect_t,
                "factor": e.factor,
                "confidence": e.confidence,
                "periodic_of": e.periodic_of,
            }
            for e in res.episodes
        ],
        "silent": [s.rank for s in res.silent],
        "true_onset_step": true_onset,
        "baseline_s": res.baseline_s,
        "noise": noise,
        "warnings": res.warnings[:5],
    }


def part_runs(minutes: float, only: str | None) -> None:
    from clusterdoctor.training.faultlab import Lab, lab_available

    why = lab_available(netns=True)
    if why:
        sys.exit(f"cannot run the fault lab here: {why}")
    todo = [s for s in plan() if s["id"] not in done_ids() and (only is None or s["fault"] == only)]
    print(f"{len(todo)} run(s) to do", flush=True)
    if not todo:
        return
    deadline = time.monotonic() + minutes * 60
    with tempfile.TemporaryDirectory(prefix="cdfs-bench-") as tmp:
        lab = Lab(Path(tmp), world=4, netns=True)
        lab.start()
        try:
            for spec in todo:
                if time.monotonic() > deadline:
                    print("time is up; run again to continue", flush=True)
                    break
                fault = make_fault(spec)
                steps = PERIODIC_STEPS if spec["fault"] == "periodic" else STEPS
                res = lab.episode(steps, fault, onset_step=ONSET)
                rec = {"part": "run", **spec, "steps": steps, "seconds": round(res.seconds, 2),
                       "median_step_s": res.median_step_s, "injected_after_step": res.injected_after_step,
                       "error": res.error}  # fmt: skip
                if res.error is None:
                    keep = EPISODES / spec["id"]
                    shutil.rmtree(keep, ignore_errors=True)
                    shutil.copytree(res.dir, keep)
                    rec.update(analyse(res.dir, res.injected_at))
                    if res.injected_at is not None:
                        rec["injected_at"] = res.injected_at
                with RUNS.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
                eps = rec.get("episodes") or []
                print(
                    f"{spec['id']:<16} {res.seconds:5.1f} s  "
                    + (", ".join(f"{e['kind']}@{e['rank']} d={e['detect_step']}" for e in eps) or "-")
                    + (f"  ERROR {res.error}" if res.error else ""),
                    flush=True,
                )
                if res.error and not lab.alive():
                    break
        finally:
            lab.close()


def judge(rec: dict) -> dict:
    """Per-run verdict: detected, right rank, right class, delay."""
    expected = EXPECTED[rec["fault"]]
    onset = rec.get("true_onset_step")
    eps = rec.get("episodes") or []
    if expected is None:
        return {"fp": bool(eps or rec.get("silent")), "faulty": False}
    tol = 3  # an onset estimate a few steps early is still this fault
    after = [e for e in eps if onset is None or e["detect_step"] >= onset - tol]
    before = [e for e in eps if onset is not None and e["detect_step"] < onset - tol]
    out = {"faulty": True, "fp": bool(before), "detected": bool(after)}
    if after:
        e = after[0]
        out["right_class"] = e["kind"] == expected
        if rec["rank"] is not None:
            out["right_rank"] = e["rank"] == rec["rank"]
        if onset is not None:
            out["delay_steps"] = e["detect_step"] - onset
            if e.get("detect_t") and rec.get("injected_at"):
                out["delay_s"] = e["detect_t"] - rec["injected_at"]
    return out


def part_report(reanalyse: bool = False) -> str:
    recs = [json.loads(x) for x in RUNS.read_text().splitlines()] if RUNS.exists() else []
    runs = [r for r in recs if r.get("part") == "run" and not r.get("error")]
    if reanalyse:
        for r in runs:
            d = EPISODES / r["id"]
            if d.is_dir():
                r.update(analyse(str(d), r.get("injected_at")))
    verdicts = [(r, judge(r)) for r in runs]
    faulty = [v for r, v in verdicts if v["faulty"]]
    clean = [v for r, v in verdicts if not v["faulty"]]
    tp = sum(1 for v in faulty if v.get("detected"))
    fp = sum(1 for v in clean if v["fp"]) + sum(1 for v in faulty if v["fp"])
    rr = [v["right_rank"] for v in faulty if "right_rank" in v]
    rc = [v["right_class"] for v in faulty if "right_class" in v]
    ds = [v["delay_steps"] for v in faulty if "delay_steps" in v]
    dt = [v["delay_s"] for v in faulty if "delay_s" in v]
    lines = [
        f"runs: {len(faulty)} faulty, {len(clean)} clean",
        f"precision {tp / max(1, tp + fp):.3f} (target 0.95)   recall {tp / max(1, len(faulty)):.3f} (target 0.95)",
        f"right rank {sum(rr) / max(1, len(rr)):.3f} of {len(rr)} (target 0.95)   "
        f"right class {sum(rc) / max(1, len(rc)):.3f} of {len(rc)} (target 0.9)",
    ]
    if ds:
        lines.append(
            f"detection delay after onset: median {statistics.median(ds):.0f} steps (target <= 10), "
            f"max {max(ds)}; median {statistics.median(dt):.2f} s"
            if dt
            else ""
        )
    # the detector's thresholds were set looking at runs 00-21; runs 22+ were judged after, unseen
    for name, sel in (
        ("runs 00-21 (thresholds tuned on)", lambda i: i < 22),
        ("runs 22+ (held out)", lambda i: i >= 22),
    ):
        part = [(r, v) for r, v in verdicts if sel(int(r["id"][1:3]))]
        pf = [v for r, v in part if v["faulty"]]
        ptp = sum(1 for v in pf if v.get("detected"))
        pfp = sum(1 for r, v in part if v["fp"])
        prr = [v["right_rank"] for v in pf if "right_rank" in v]
        prc = [v["right_class"] for v in pf if "right_class" in v]
        if part:
            lines.append(
                f"{name}: precision {ptp / max(1, ptp + pfp):.3f} recall {ptp / max(1, len(pf)):.3f} "
                f"rank {sum(prr) / max(1, len(prr)):.3f} class {sum(prc) / max(1, len(prc)):.3f} "
                f"({len(pf)} faulty, {len(part) - len(pf)} clean)"
            )
    by = {}
    for r, v in verdicts:
        b = by.setdefault(r["fault"], {"n": 0, "det": 0, "rank": 0, "cls": 0, "fp": 0, "delay": []})
        b["n"] += 1
        b["det"] += bool(v.get("detected"))
        b["rank"] += bool(v.get("right_rank"))
        b["cls"] += bool(v.get("right_class"))
        b["fp"] += bool(v["fp"])
        if "delay_steps" in v:
            b["delay"].append(v["delay_steps"])
    lines.append("")
    lines.append(
        f"{'fault':<10}{'runs':>5}{'detected':>9}{'rank ok':>8}{'class ok':>9}{'false +':>8}{'delay':>7}"
    )
    for k, b in sorted(by.items()):
        d = f"{statistics.median(b['delay']):.0f}" if b["delay"] else "-"
        rank = "-" if k in ("job", "clean") else b["rank"]  # no rank to name
        lines.append(f"{k:<10}{b['n']:>5}{b['det']:>9}{rank:>8}{b['cls']:>9}{b['fp']:>8}{d:>7}")
    for r in recs:
        if r.get("part") == "overhead":
            lines.append("")
            lines.append(
                f"probe overhead, A/B: median step {r['on_ms']:.2f} ms with the probe, {r['off_ms']:.2f} ms without "
                f"over {r['pairs']} interleaved pairs: ratio {r['ratio']:.4f}"
            )
            lines.append(
                f"probe overhead, its own cost per step: {r['cost_us']:.1f} us = "
                f"{100 * r['cost_us'] / 1000 / r['off_ms']:.3f}% of the median step (target <= 1%)"
            )
        if r.get("part") == "scale":
            lines.append("")
            lines.append(
                f"scale: {r['ranks']} ranks x {r['steps']} steps: detect() {r['seconds']:.3f} s (target < 1 s); "
                f"baseline (rank-by-rank Python CUSUM) {r['baseline_s']:.2f} s: {r['baseline_s'] / r['seconds']:.1f}x; "
                f"found {r['found']}"
            )
    return "\n".join(x for x in lines if x is not None)


def probe_cost_us(n: int = 20000) -> tuple[float, float]:
    """The probe's own CPU cost per step in this process: step() with one timed collective's marks and
    one loader item, plus the heartbeat thread's share (measured as this process' CPU time per second)."""
    from clusterdoctor.training import watch

    w = watch.install(
        None,
        port=None,
        jsonl_dir=tempfile.mkdtemp(prefix="cdfs-cost-"),
        exchange=False,
        tap_collectives=False,
    )
    items = w.loader(range(n))
    t0 = time.perf_counter()
    for _ in items:
        w._clk.enter()
        w._clk.done()
        w.step()
    per_step = (time.perf_counter() - t0) / n
    # heartbeat: CPU time of this idle process over 2 s, per second, times a 100 ms step's share
    c0, t1 = time.process_time(), time.perf_counter()
    time.sleep(2.0)
    hb_per_s = (time.process_time() - c0) / (time.perf_counter() - t1)
    w.close()
    return per_step * 1e6, hb_per_s


def part_overhead(pairs: int) -> None:
    from clusterdoctor.training.faultlab import Lab, lab_available

    why = lab_available()
    if why:
        sys.exit(f"cannot run the fault lab here: {why}")
    on, off = [], []
    with tempfile.TemporaryDirectory(prefix="cdfs-ovh-") as tmp:
        lab = Lab(Path(tmp), world=4, netns=False)
        lab.start()
        try:
            for i in range(pairs):
                order = (True, False) if i % 2 == 0 else (False, True)
                for probe in order:
                    res = lab.episode(100, None, extra={"probe": probe})
                    if res.error:
                        sys.exit(res.error)
                    (on if probe else off).append(res.median_step_s)
                print(f"pair {i}: on {on[-1] * 1000:.2f} ms off {off[-1] * 1000:.2f} ms", flush=True)
        finally:
            lab.close()
    cost, hb = probe_cost_us()
    off_ms = statistics.median(off) * 1000
    rec = {
        "part": "overhead",
        "pairs": pairs,
        "on_ms": statistics.median(on) * 1000,
        "off_ms": off_ms,
        "ratio": statistics.median(a / b for a, b in zip(on, off)),
        "step_cost_us": cost,
        "heartbeat_cpu_share": hb,
        # per step: step() + marks + loader, plus the heartbeat's CPU over one median step
        "cost_us": cost + hb * off_ms * 1000,
    }
    with RUNS.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))


def part_scale(ranks: int = 10_000, steps: int = 200) -> None:
    import numpy as np

    from clusterdoctor.analyze.failslow import StepTable, detect

    recs = [json.loads(x) for x in RUNS.read_text().splitlines()] if RUNS.exists() else []
    noise = [r["noise"] for r in recs if r.get("part") == "run" and r.get("noise") and r["fault"] == "clean"]
    if not noise:
        sys.exit("no clean runs measured yet: run `bench/failslow.py runs` first")
    med = {k: statistics.median(n[k]["median_s"] for n in noise) for k in noise[0]}
    mad = {k: statistics.median(n[k]["mad_s"] for n in noise) for k in noise[0]}
    rng = np.random.default_rng(7)
    shape = (ranks, steps)

    def draw(k: str) -> np.ndarray:
        return np.abs(med[k] + 1.4826 * mad[k] * rng.standard_normal(shape))

    own, wait, data, stall = draw("own"), draw("wait"), draw("data"), draw("stall")
    victim, onset, extra = 4321, 120, med["wall"]  # a 2x compute straggler from step 120
    own[victim, onset:] += extra
    wait[:, onset:] += extra
    wait[victim, onset:] -= extra
    wait = np.abs(wait)
    wall = own + wait + np.abs(med["wall"] - med["own"] - med["wait"])
    t = 1.7e9 + np.cumsum(np.median(wall, axis=0))[None, :].repeat(ranks, 0)
    tb = StepTable(list(range(ranks)), np.arange(steps), t, wall, own, wall - own, wait, data, stall)
    detect(tb)  # warm
    t0 = time.perf_counter()
    res = detect(tb)
    secs = time.perf_counter() - t0
    found = [(e.kind, e.rank, e.onset_step, e.detect_step) for e in res.episodes]
    # baseline: the same CUSUM on each rank's lateness one rank at a time in plain Python
    late = np.maximum(own - np.median(own, axis=0), np.median(wait, axis=0) - wait) / med["wall"]
    rows = late.tolist()
    t0 = time.perf_counter()
    for row in rows:
        s = 0.0
        for v in row[13:]:
            s = max(0.0, s + min(1.0, v) - 0.1)
            if s > 1.5:
                break
    base = time.perf_counter() - t0
    rec = {
        "part": "scale",
        "ranks": ranks,
        "steps": steps,
        "seconds": secs,
        "baseline_s": base,
        "found": found,
    }
    with RUNS.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", nargs="?", default="report", choices=("runs", "overhead", "scale", "report"))
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--only", default=None, help="runs: only this fault kind")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument(
        "--stored",
        action="store_true",
        help="report: the verdicts stored when each run was made (default: judge the kept probe files again "
        "with the current detector, when they are here)",
    )
    args = ap.parse_args()
    if args.part == "runs":
        part_runs(args.minutes, args.only)
    elif args.part == "overhead":
        part_overhead(args.pairs)
    elif args.part == "scale":
        part_scale()
    print(part_report(not args.stored and EPISODES.is_dir()))


if __name__ == "__main__":
    # SIGTERM unwinds like Ctrl-C, so the lab removes its namespaces, cgroups and processes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
