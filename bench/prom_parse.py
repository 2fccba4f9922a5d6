"""Benchmark: clusterdoctor's Prometheus text parser vs prometheus_client's, on real expositions.

Inputs: the real kube-scheduler and etcd dumps in ../shared/fixtures/ctrl (when present) and the
large scrapes captured here with the real node exporter and Prometheus (tests/data/ctrl). Both
parsers run in the same process on the same text; the best of N runs is taken for each. The
samples both produce are compared (counter names normalised the way prometheus_client renames
them) and the run fails if they differ.

Run: ``.venv/bin/python bench/prom_parse.py [--repeat N] [FILE ...]``. Target: ratio >= 5.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from _timing import best_of  # bench/_timing.py (the script's folder is on sys.path)
from clusterdoctor.observe.control.prom_text import parse_prom_text
from clusterdoctor.testing import comparable_samples, fixture_path, prom_client_samples

REPO = Path(__file__).resolve().parents[1]
TARGET = 5.0  # issue 3, "Speed": at least 5x prometheus_client's text parser on every file
DEFAULT_FILES = (
    ("fixture", "ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom"),
    ("fixture", "ctrl/etcd_v3.6.6_minikube_metrics.prom"),
    ("data", "tests/data/ctrl/node_exporter_1.5.0_metrics.prom"),
    ("data", "tests/data/ctrl/prometheus_2.42.0_federate_all.prom"),
)


def files(args: list[str]) -> list[Path]:
    if args:
        return [Path(a) for a in args]
    out = []
    for kind, rel in DEFAULT_FILES:
        p = fixture_path(rel) if kind == "fixture" else REPO / rel
        if p is None or not p.exists():
            print(f"skip {rel}: absent", file=sys.stderr)
            continue
        out.append(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()
    worst = float("inf")
    failed = []
    print(
        f"{'file':55s} {'bytes':>8s} {'samples':>8s} {'ours MB/s':>10s} {'prom_client MB/s':>17s}"
        f" {'ratio':>6s} {'':4s}"
    )
    for p in files(a.files):
        text = p.read_text(encoding="utf-8")
        ms = parse_prom_text(text, str(p))
        if comparable_samples(ms) != prom_client_samples(text):
            print(f"{p.name}: samples differ from prometheus_client", file=sys.stderr)
            return 1
        n_samples = len(ms.samples)
        del ms
        gc.collect()  # the check's objects must not slow down either parser's collections
        # Alternating rounds so that both parsers see the same load on a shared machine; best of each.
        ours = ref = float("inf")
        for _ in range(max(3, a.repeat // 3)):
            ours = min(ours, best_of(lambda text=text: parse_prom_text(text), 3))
            ref = min(ref, best_of(lambda text=text: list(text_string_to_metric_families(text)), 1))
        ratio = ref / ours
        worst = min(worst, ratio)
        mb = len(text.encode()) / 1e6
        verdict = "PASS" if ratio >= TARGET else "FAIL"
        if verdict == "FAIL":
            failed.append(p.name)
        print(
            f"{p.name:55s} {len(text):8d} {n_samples:8d} {mb / ours:10.1f} {mb / ref:17.1f}"
            f" {ratio:6.1f} {verdict}"
        )
    print(
        f"worst ratio {worst:.1f}x (target >= {TARGET:g}x){'; FAIL: ' + ', '.join(failed) if failed else ''}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
