"""QAT fine-tuning with and without the design's weight-gradient rescaling, on the QAT digits CNN.

The model, data and training recipe of bench/qat_digits.py (FP32 CNN 30 epochs, then QAT 8 epochs
with Adam lr 5e-4), once plainly and once with ``rescale=True`` (weight gradient x s_act/s_weight per
output channel, clipped to ±grad_clip_max), from the same FP32 weights and batch order, per seed and
scheme. Reported per scheme: clean test accuracy of both (mean over seeds, the paired difference and
its spread), the mean weight-gradient norm the optimizer saw, the mean ratio and the share of
elements the clip cut. The baseline is the plain run of the same seed, side by side.

    python bench/qat_rescale.py [--seeds 5] [--grad-clip-max 2.0] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from sklearn.datasets import load_digits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clusterdoctor.training.qat import qat_finetune, quantize_model
from qat_digits import CNN, SCHEMES, accuracy, train


def run(seeds: list[int], clip: float) -> list[dict]:
    d = load_digits()
    X = torch.tensor(d.data / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    Y = torch.tensor(d.target, dtype=torch.long)
    rows = []
    for seed in seeds:
        torch.manual_seed(seed)
        perm = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(seed))
        tr, te = perm[:1000], perm[1400:]
        fp32 = CNN()
        train(fp32, X[tr], Y[tr], epochs=30, lr=3e-3, seed=seed)
        for scheme, (w, a) in SCHEMES.items():
            row = {"seed": seed, "scheme": scheme}
            for rescale in (False, True):
                torch.manual_seed(seed + 1)
                qat = quantize_model(fp32, weight=w, act=a)
                st = qat_finetune(qat, X[tr], Y[tr], epochs=8, lr=5e-4, seed=seed + 1, rescale=rescale,
                              grad_clip_max=clip)  # fmt: skip
                key = "rescaled" if rescale else "plain"
                row[key] = {**st, "accuracy": accuracy(qat, X[te], Y[te])}
            rows.append(row)
            print(f"seed {seed} {scheme}: plain {row['plain']['accuracy']:.3f} rescaled "
                  f"{row['rescaled']['accuracy']:.3f}", file=sys.stderr)  # fmt: skip
    return rows


def table(rows: list[dict]) -> list[str]:
    out = [
        "| scheme | accuracy plain | accuracy rescaled | paired Δ (points) mean [min, max] | grad norm plain "
        "| grad norm rescaled | mean ratio s_act/s_w | clipped share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for scheme in SCHEMES:
        rs = [r for r in rows if r["scheme"] == scheme]
        dp = [100 * (r["rescaled"]["accuracy"] - r["plain"]["accuracy"]) for r in rs]
        m = statistics.fmean
        out.append(
            f"| {scheme} | {m(r['plain']['accuracy'] for r in rs):.4f} | {m(r['rescaled']['accuracy'] for r in rs):.4f} "
            f"| {m(dp):+.2f} [{min(dp):+.2f}, {max(dp):+.2f}] | {m(r['plain']['grad_norm_mean'] for r in rs):.4f} "
            f"| {m(r['rescaled']['grad_norm_mean'] for r in rs):.4f} | {m(r['rescaled']['ratio_mean'] for r in rs):.3g} "
            f"| {100 * m(r['rescaled']['clipped_share_mean'] for r in rs):.2f}% |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--grad-clip-max", type=float, default=2.0)
    ap.add_argument("--json", dest="json_file")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.time()
    seeds = list(range(a.first_seed, a.first_seed + a.seeds))
    rows = run(seeds, a.grad_clip_max)
    print(f"qat_rescale: seeds {seeds}, grad_clip_max {a.grad_clip_max}, torch {torch.__version__}, "
          f"{time.time() - t0:.0f} s")  # fmt: skip
    print("\n".join(table(rows)))
    if a.json_file:
        Path(a.json_file).write_text(
            json.dumps({"seeds": seeds, "grad_clip_max": a.grad_clip_max, "rows": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
