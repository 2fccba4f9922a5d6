"""QAT drift experiment on scikit-learn's bundled digits (offline, CPU, a few minutes).

A small CNN is trained in FP32, then fine-tuned with W8A8 and W4A4 fake quantization
(clusterdoctor.training.qat.fakequant), observers frozen afterwards (the deployed, "stale" scales).
Drift is injected into the inputs (gain 0.5/1.5/2.5, offset, noise, shear). For every seed, scheme
and drift the script reports:

* FP32, stale quantized and recalibrated accuracy (recalibrated = DriftMonitor.apply on 200
  unlabeled drifted images, i.e. only what the detector flagged and the SQNR gate accepted),
  and the share of the FP32-vs-stale gap closed;
* the detector's precision and recall for "recalibration helps" (truth: recalibrating every
  quantizer on the unlabeled batch raises test accuracy by >= 1 point; positive: the monitor
  flags any layer);
* false alarms on undrifted data (random 50-image windows of the clean test split);
* the monitor's overhead per forward pass (median time with hooks / without, interleaved);
* recalibration cost (seconds of DriftMonitor.apply).

    python bench/qat_digits.py [--seeds 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn

from clusterdoctor.training.qat import DriftMonitor, quantize_model, thresholds
from clusterdoctor.training.qat import recalibrate as rc
from clusterdoctor.training.qat.fakequant import quantizers, set_observers

SCHEMES = {"W8A8": ("int8", "int8"), "W4A4": ("int4", "int4")}
K = [
    thresholds.DEFAULT_K_LOW,
    thresholds.DEFAULT_K_HIGH,
]  # learned-threshold σ multipliers (--k-low/--k-high)
GATE_DB = 1.0  # "flag + gate" predicts help when apply() raised SQNR by at least this much
HELPS_POINTS = 0.01  # "recalibration helps" = +1 accuracy point or more
WINDOW = 50  # monitor window for the false-alarm trials (images)
CALIB_BATCH = 25  # monitor calibration batches: 200 held-out clean images in 8 batches


def drift_fns() -> dict[str, Any]:
    def shear(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        theta = torch.tensor([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0]]).expand(x.shape[0], 2, 3)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    return {
        "none": lambda x, g: x,
        "gain x0.5": lambda x, g: x * 0.5,
        "gain x1.5": lambda x, g: x * 1.5,
        "gain x2.5": lambda x, g: x * 2.5,
        "offset +0.3": lambda x, g: x + 0.3,
        "noise s0.15": lambda x, g: x + 0.15 * torch.randn(x.shape, generator=g),
        "shear 0.5": shear,
    }


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 16, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(x.shape[0], generator=g)
        for i in range(0, x.shape[0], 64):
            idx = perm[i : i + 64]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    return float((model(x).argmax(1) == y).float().mean())


def batches(x: torch.Tensor, size: int) -> list[torch.Tensor]:
    return [x[i : i + size] for i in range(0, x.shape[0], size)]


def oracle_recalibrate(model: nn.Module, unl: torch.Tensor, method: str = "minmax") -> rc.UndoLog:
    """Recalibrate every activation quantizer on the unlabeled batch, no detector, no gate."""
    named = [(n, q) for n, q in quantizers(model) if "input_quantizer" in n]
    undo = rc.UndoLog()
    ranges = rc.measure_ranges(model, named, batches(unl, 64), [q for _, q in quantizers(model)], method)
    for n, q in named:
        r = ranges[n]
        if not isinstance(r, str):
            undo.remember(n, q)
            rc.set_range(q, *r)
    return undo


def overhead(model: nn.Module, mon: DriftMonitor, x: torch.Tensor, reps: int) -> tuple[float, float]:
    """Median forward time with the monitor observing / without (monitor paused), interleaved."""
    on, off = [], []
    with torch.no_grad():
        for _ in range(3):
            model(x)
        for _ in range(reps):
            mon._mode = "observe"
            t0 = time.perf_counter()
            model(x)
            on.append(time.perf_counter() - t0)
            mon._mode = "paused"
            t0 = time.perf_counter()
            model(x)
            off.append(time.perf_counter() - t0)
    mon._mode = "observe"
    return statistics.median(on) / statistics.median(off) - 1.0, 1000 * statistics.median(off)


def run_seed(seed: int, X: torch.Tensor, Y: torch.Tensor, fa_trials: int, reps: int) -> list[dict[str, Any]]:
    torch.manual_seed(seed)
    perm = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(seed))
    tr, ca, un, te = perm[:1000], perm[1000:1200], perm[1200:1400], perm[1400:]
    xtr, ytr, xca, xun, xte, yte = X[tr], Y[tr], X[ca], X[un], X[te], Y[te]
    fp32 = CNN()
    train(fp32, xtr, ytr, epochs=30, lr=3e-3, seed=seed)
    rows = []
    for scheme, (w, a) in SCHEMES.items():
        qat = quantize_model(fp32, weight=w, act=a)
        train(qat, xtr, ytr, epochs=8, lr=5e-4, seed=seed + 1)
        set_observers(qat, False)
        mon = DriftMonitor(qat, k_low=K[0], k_high=K[1])  # float reference: QAT weights, fake quant off
        mon.calibrate(batches(xca, CALIB_BATCH))
        # False alarms on undrifted data: random windows of the clean test split.
        g = torch.Generator().manual_seed(seed * 7 + 1)
        alarms = 0
        for _ in range(fa_trials):
            idx = torch.randperm(xte.shape[0], generator=g)[:WINDOW]
            mon.reset_window()
            with torch.no_grad():
                qat(xte[idx])
            alarms += any(e["action"] != "keep" for e in mon.report() if e.get("monitored"))
        ovh_full, ms_full = overhead(qat, mon, xte, reps)
        ovh_small, ms_small = overhead(qat, mon, xte[:WINDOW], reps)
        for drift, fn in drift_fns().items():
            gd = torch.Generator().manual_seed(seed * 1000 + 17)
            xte_d, xun_d = fn(xte, gd), fn(xun, gd)
            acc_fp = accuracy(fp32, xte_d, yte)
            acc_stale = accuracy(qat, xte_d, yte)
            with rc.quantizer_flags([q for _, q in quantizers(qat)], False, None):
                acc_qat_float = accuracy(qat, xte_d, yte)
            undo = oracle_recalibrate(qat, xun_d)
            acc_oracle = accuracy(qat, xte_d, yte)
            undo.restore()

            mon.reset_window()
            with torch.no_grad():
                for b in batches(xte_d, WINDOW):
                    qat(b)
            rep = [e for e in mon.report() if e.get("monitored")]
            flagged = any(e["action"] != "keep" for e in rep)
            t0 = time.perf_counter()
            res = mon.apply(batches(xun_d, 64))
            apply_s = time.perf_counter() - t0
            acc_recal = accuracy(qat, xte_d, yte)
            gains = [r["sqnr_after_db"] - r["sqnr_before_db"] for r in res if r["taken"]]
            sqnr_gain = sum(g for g in gains if g is not None and g != float("inf"))
            mon.restore()
            assert abs(accuracy(qat, xte_d, yte) - acc_stale) < 1e-9, "restore() did not restore"
            rows.append(
                {
                    "seed": seed,
                    "scheme": scheme,
                    "drift": drift,
                    "fp32": acc_fp,
                    "qat_float": acc_qat_float,
                    "stale": acc_stale,
                    "recal": acc_recal,
                    "oracle": acc_oracle,
                    "flagged": flagged,
                    "gated": flagged and sqnr_gain >= GATE_DB,
                    "sqnr_gain_db": sqnr_gain,
                    "actions": {e["layer"]: e["action"] for e in rep},
                    "taken": [r["layer"] for r in res if r["taken"]],
                    "not_taken": [r["reason"] for r in res if not r["taken"]],
                    "helps": acc_oracle - acc_stale >= HELPS_POINTS,
                    "helps_any": acc_oracle > acc_stale,
                    "apply_s": apply_s,
                    "false_alarms": alarms if drift == "none" else None,
                    "fa_trials": fa_trials if drift == "none" else None,
                    "overhead_full": ovh_full,
                    "overhead_window": ovh_small,
                    "forward_ms_full": ms_full,
                    "forward_ms_window": ms_small,
                    "max_score_ratio": max(
                        (
                            e["score"] / e["threshold_low"]
                            for e in rep
                            if e["score"] is not None and e["threshold_low"]
                        ),
                        default=None,
                    ),
                }
            )
        mon.close()
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    table = []
    for scheme in SCHEMES:
        for drift in drift_fns():
            rs = [r for r in rows if r["scheme"] == scheme and r["drift"] == drift]
            fp, st, re, orc, qf = (
                statistics.fmean(r[k] for r in rs) for k in ("fp32", "stale", "recal", "oracle", "qat_float")
            )
            gap = fp - st
            table.append(
                {
                    "scheme": scheme,
                    "drift": drift,
                    "fp32": fp,
                    "qat_float": qf,
                    "stale": st,
                    "recal": re,
                    "oracle": orc,
                    "gap_closed": (re - st) / gap if gap > 0.005 else None,
                    "gap_closed_vs_qat_float": (re - st) / (qf - st) if qf - st > 0.005 else None,
                    "flag_rate": statistics.fmean(r["flagged"] for r in rs),
                    "gated_rate": statistics.fmean(r["gated"] for r in rs),
                    "sqnr_gain_db": statistics.fmean(r["sqnr_gain_db"] for r in rs),
                    "helps_rate": statistics.fmean(r["helps"] for r in rs),
                    "apply_ms": 1000 * statistics.fmean(r["apply_s"] for r in rs),
                }
            )
    drifted = [r for r in rows if r["drift"] != "none"]

    def pr(key: str, truth: str = "helps") -> dict[str, Any]:
        tp = sum(r[key] and r[truth] for r in drifted)
        fp_ = sum(r[key] and not r[truth] for r in drifted)
        fn = sum((not r[key]) and r[truth] for r in drifted)
        return {
            "tp": tp,
            "fp": fp_,
            "fn": fn,
            "precision": tp / (tp + fp_) if tp + fp_ else None,
            "recall": tp / (tp + fn) if tp + fn else None,
        }

    clean = [r for r in rows if r["drift"] == "none"]
    pooled = {}
    for scheme in SCHEMES:
        go = [r for r in drifted if r["scheme"] == scheme and r["drift"].startswith(("gain", "offset"))]
        gap = sum(r["fp32"] - r["stale"] for r in go)
        pooled[scheme] = sum(r["recal"] - r["stale"] for r in go) / gap if gap > 0 else None
    fa = sum(r["false_alarms"] for r in clean)
    fa_n = sum(r["fa_trials"] for r in clean)
    return {
        "table": table,
        "detector": pr("flagged"),
        "detector_gated": pr("gated"),
        "detector_any": pr("flagged", "helps_any"),
        "gap_closed_gain_offset_pooled": pooled,
        "false_alarm_rate": fa / fa_n if fa_n else None,
        "false_alarms": fa,
        "false_alarm_trials": fa_n,
        "full_window_flag_rate_undrifted": statistics.fmean(r["flagged"] for r in clean),
        "overhead_test_split": statistics.median(r["overhead_full"] for r in clean),
        "overhead_window50": statistics.median(r["overhead_window"] for r in clean),
        "forward_ms_test_split": statistics.median(r["forward_ms_full"] for r in clean),
        "forward_ms_window50": statistics.median(r["forward_ms_window"] for r in clean),
        "apply_ms_mean": 1000 * statistics.fmean(r["apply_s"] for r in rows),
    }


def fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1%}" if pct else f"{v:.3f}"


def print_table(s: dict[str, Any]) -> None:
    print(
        "| scheme | drift | FP32 | QAT fq off | stale | recalibrated | oracle recal | gap closed | gap closed "
        "vs fq off | flagged | SQNR gain dB | flag+gate | helps | apply ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for t in s["table"]:
        print(
            f"| {t['scheme']} | {t['drift']} | {fmt(t['fp32'])} | {fmt(t['qat_float'])} | {fmt(t['stale'])} | "
            f"{fmt(t['recal'])} | "
            f"{fmt(t['oracle'])} | {fmt(t['gap_closed'], True)} | {fmt(t['gap_closed_vs_qat_float'], True)} | "
            f"{t['flag_rate']:.0%} | {t['sqnr_gain_db']:.1f} | "
            f"{t['gated_rate']:.0%} | {t['helps_rate']:.0%} | "
            f"{t['apply_ms']:.0f} |"
        )
    print()
    for scheme, v in s["gap_closed_gain_offset_pooled"].items():
        print(f"{scheme}: gap closed, pooled over gain and offset drifts and seeds: {fmt(v, True)}")
    for key, label in (
        ("detector", "drift flag, helps = +1 point"),
        ("detector_gated", f"flag + SQNR gain >= {GATE_DB:g} dB, helps = +1 point"),
        ("detector_any", "drift flag, helps = any gain"),
    ):
        d = s[key]
        print(
            f"{label} (drifted runs): precision {fmt(d['precision'])}, "
            f"recall {fmt(d['recall'])} (tp {d['tp']}, fp {d['fp']}, fn {d['fn']})"
        )
    print(
        f"false alarms on undrifted {WINDOW}-image windows: {s['false_alarms']}/{s['false_alarm_trials']}"
        f" = {fmt(s['false_alarm_rate'], True)}; on the whole clean test split: {s['full_window_flag_rate_undrifted']:.0%}"
    )
    print(
        f"monitor overhead per forward: {fmt(s['overhead_test_split'], True)} (whole test split, batch 397, "
        f"{s['forward_ms_test_split']:.2f} ms without monitor), {fmt(s['overhead_window50'], True)} "
        f"(batch {WINDOW}, {s['forward_ms_window50']:.2f} ms)"
    )
    print(f"recalibration cost (DriftMonitor.apply incl. SQNR gating): {s['apply_ms_mean']:.0f} ms mean")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--fa-trials", type=int, default=20, help="undrifted windows per seed and scheme")
    ap.add_argument("--reps", type=int, default=60, help="timing repetitions for the overhead")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--k-low", type=float, default=K[0])
    ap.add_argument("--k-high", type=float, default=K[1])
    ap.add_argument("--json", dest="json_file", default=None)
    args = ap.parse_args(argv)
    K[:] = [args.k_low, args.k_high]
    torch.set_num_threads(args.threads)
    d = load_digits()
    X = torch.tensor(d.data / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    Y = torch.tensor(d.target, dtype=torch.long)
    np.random.seed(0)
    t0 = time.time()
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        rows += run_seed(seed, X, Y, args.fa_trials, args.reps)
        print(f"seed {seed} done ({time.time() - t0:.0f} s)", file=sys.stderr)
    s = summarise(rows)
    print_table(s)
    if args.json_file:
        meta = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": f"{platform.machine()} {platform.processor() or ''} {platform.platform()}".strip(),
            "torch": torch.__version__,
            "threads": args.threads,
            "seeds": list(range(args.first_seed, args.first_seed + args.seeds)),
            "k_low": K[0],
            "k_high": K[1],
            "seconds": time.time() - t0,
        }
        with open(args.json_file, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "summary": s, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
