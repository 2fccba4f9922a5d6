"""Benchmark: clusterdoctor's Prometheus text parser vs prometheus_client's, on real expositions.

Inputs: the real kube-scheduler and etcd dumps in ../shared/fixtures/ctrl (when present) and the
large scrapes captured here with the real node exporter and Prometheus (tests/data/ctrl). Both
parsers run in the same process on the same text; the best of N runs is taken for each. The
samples both produce are compared (counter names normalised the way prometheus_client renames
them) and the run fails if they differ.

Run: ``.venv/bin/python bench/prom_parse.py [--repeat N] [--whole N] [FILE ...]``. Target: ratio >= 5
in-process (issue 3).

Whole process (issue 26, target >= 10x with less memory): each parser in a fresh interpreter that
imports it, reads the file and parses it (ours: ``prom_stream.parse_prom_stream`` on the open file,
read in blocks; prometheus_client: the text read whole, as its API takes it); timed paired with a bare ``python -c pass`` in the same
round and reported net of it (what the parser adds to starting Python), median of ``--whole``
rounds, with each child's peak RSS. On the real dumps and on a concatenation of them (~50 MB,
written to a temporary file and deleted), where every family repeats. ``--distinct``: one more row,
the same concatenation with each copy's series made distinct (a label ``copy="i"``), where no series
repeats (not a target: it shows what the series cache does not help).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
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


CHILD = {
    # the file in blocks (prom_stream, issue 26 sixth round): samples packed, no tuple per sample
    "ours": "from clusterdoctor.observe.control.prom_stream import parse_prom_stream as p\n"
    "ms = p(open(sys.argv[1], 'rb'))\nn = len(ms)\n",
    "prometheus_client": "from prometheus_client.parser import text_string_to_metric_families as p\n"
    "n = sum(len(f.samples) for f in p(open(sys.argv[1], encoding='utf-8').read()))\n",
}
# peak RSS of this process image (VmHWM, KiB); ru_maxrss would count the forking parent too
RSS = (
    "hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')]\n"
    "print(n, hwm[0] if hwm else 0)\n"
)


def _child(code: str, path: str) -> tuple[float, int, int]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as users run it
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", "import sys\n" + code, path], capture_output=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(p.stderr.decode()[-400:])
    out = p.stdout.split()
    return dt, int(out[0]) if out else 0, int(out[1]) if len(out) > 1 else 0


def distinct_copies(unit: str, n: int) -> str:
    """``unit`` ``n`` times, each copy's series made distinct by a label ``copy="i"`` (a bare name gets
    ``{copy="i"}``): the same text shape with no series repeated, as one scrape of a large fleet."""
    out = []
    lines = unit.rstrip("\n").split("\n")
    for i in range(n):
        for ln in lines:
            if ln and not ln.startswith("#"):
                head, brace, rest = ln.rpartition("}")
                if brace:
                    ln = f'{head}{"" if head.endswith("{") else ","}copy="{i}"}}{rest}'
                else:
                    name, sp, rest = ln.partition(" ")
                    ln = f'{name}{{copy="{i}"}}{sp}{rest}'
            out.append(ln)
    return "\n".join(out) + "\n"


def whole_process(paths: list[Path], rounds: int, not_target: tuple[Path, ...] = ()) -> float:
    """Print the whole-process table; return the worst net ratio (rows in ``not_target`` left out)."""
    worst = float("inf")
    print(f"\nwhole process, net of python -c pass, median of {rounds} paired rounds")
    print(f"{'file':44s} {'MB':>6s} {'ours ms':>8s} {'ref ms':>8s} {'ratio':>6s} {'RSS MiB ours/ref':>17s}")
    for p in paths:
        for code in CHILD.values():
            _child(code + RSS, str(p))  # warm: bytecode written, file in the page cache
        net: dict[str, list[float]] = {k: [] for k in CHILD}
        rss: dict[str, int] = {}
        counts: dict[str, int] = {}
        for _ in range(rounds):
            base = _child("n = 0\n" + RSS, str(p))[0]
            for k, code in CHILD.items():
                dt, counts[k], rss[k] = _child(code + RSS, str(p))
                net[k].append(max(dt - base, 1e-4))
        ours, ref = statistics.median(net["ours"]), statistics.median(net["prometheus_client"])
        ratio = ref / ours
        if p not in not_target:
            worst = min(worst, ratio)
        print(
            f"{p.name[:44]:44s} {p.stat().st_size / 1e6:6.1f} {ours * 1e3:8.1f} {ref * 1e3:8.1f} {ratio:6.1f}"
            f" {rss['ours'] / 1024:8.0f}/{rss['prometheus_client'] / 1024:<8.0f}"
            + ("  (not a target)" if p in not_target else "")
        )
        if counts["ours"] != counts["prometheus_client"]:
            print(f"  samples differ: {counts['ours']} vs {counts['prometheus_client']}")
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--whole", type=int, default=5, help="whole-process rounds (0: skip)")
    ap.add_argument("--concat-mb", type=float, default=50.0)
    ap.add_argument(
        "--distinct",
        action="store_true",
        help="also a whole-process row on the concatenation with every series made distinct (not a target)",
    )
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
    if a.whole:
        real = files(a.files)
        unit = "".join(p.read_text(encoding="utf-8") for p in real)
        copies = max(1, int(a.concat_mb * 1e6 / len(unit)))
        made = []
        with tempfile.NamedTemporaryFile("w", suffix="-concatenated.prom", delete=False) as f:
            f.write(unit * copies)
        made.append(Path(f.name))
        if a.distinct:
            with tempfile.NamedTemporaryFile("w", suffix="-distinct-series.prom", delete=False) as f:
                f.write(distinct_copies(unit, copies))
            made.append(Path(f.name))
        try:
            w = whole_process([*real, *made], a.whole, tuple(made[1:]))
        finally:
            for m in made:
                os.unlink(m)
        load = os.getloadavg()
        print(f"worst whole-process ratio {w:.1f}x (target >= 10x); load average {load[0]:.2f} {load[1]:.2f}")
        if w < 10:
            failed.append("whole process")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
