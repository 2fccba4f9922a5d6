"""Load + full communication analysis vs HTA's TraceAnalysis: wall time and peak RSS, same run.

Each tool runs as its own subprocess on the same traces; wall time is measured around the process and
peak RSS comes from ``os.wait4`` (the child's ``ru_maxrss``), so imports count for both.

* ours (library): ``load_comm_observations`` + every comm rule (per-rank breakdown, collectives,
  stragglers, hangs) + the JSON document — what ``comm analyze`` does, without the CLI's start-up;
* ours (CLI): ``clusterdoctor comm analyze DIR --format json`` as a user runs it (adds typer and the
  registration of every command group at start-up);
* HTA: ``TraceAnalysis(trace_dir=DIR)`` then ``get_temporal_breakdown``, ``get_comm_comp_overlap`` and
  ``get_gpu_kernel_breakdown`` (visualize=False).

Workloads: each real Kineto trace of ../shared/fixtures/comm/kineto; a large CPU trace captured here with
torch.profiler over many steps (HTA's analyses raise on traces without GPU kernels, so for it only the
load is timed — a lower bound of its cost); and a large GPU trace derived from the real 2-rank AllReduce
fixture by repeating its events shifted in time (so both tools run their full analyses). Large traces
are written to /tmp and not committed.

Targets: >= 10x faster and <= 1/3 of HTA's peak memory.

Usage: python bench/comm_analyze.py [--large-mb 300] [--skip-large]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterdoctor.testing import fixture_path

PY = sys.executable
HTA_SCRIPT = r"""
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
if sys.argv[2] == "full":
    ta.get_temporal_breakdown(visualize=False)
    ta.get_comm_comp_overlap(visualize=False)
    ta.get_gpu_kernel_breakdown(visualize=False)
"""

OURS_SCRIPT = r"""
import json, sys
from clusterdoctor.observe.comm_sources import load_comm_observations
from clusterdoctor.rules.comm import comm_analysis, run_comm_rules
from clusterdoctor.rules.registry import Observations
obs = Observations(load_comm_observations(sys.argv[1]))
findings, skipped = run_comm_rules(obs)
doc = comm_analysis(obs).as_dict()
doc["findings"] = [f.as_dict() for f in findings]
sys.stdout.write(json.dumps(doc, default=str))
"""

CAPTURE_SCRIPT = r"""
import sys, torch
from torch.profiler import ProfilerActivity, profile, schedule
steps = int(sys.argv[2])
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()) for _ in range(8)])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
    for _ in range(steps + 1):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        prof.step()
prof.export_chrome_trace(sys.argv[1])
"""


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit code) of one child process."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if p.returncode not in (0, 1):
        print(
            f"    ({cmd[2] if len(cmd) > 2 else cmd[0]} exited {p.returncode}: {err.strip().splitlines()[-1:]})"
        )
    return wall, ru.ru_maxrss / 1024, p.returncode


def ours(d: Path) -> tuple[float, float, int]:
    return run([PY, "-c", OURS_SCRIPT, str(d)])


def ours_cli(d: Path) -> tuple[float, float, int]:
    return run([PY, "-m", "clusterdoctor.cli.main", "comm", "analyze", str(d), "--format", "json"])


def hta(d: Path, mode: str) -> tuple[float, float, int]:
    return run([PY, "-c", HTA_SCRIPT, str(d), mode])


def compare(label: str, d: Path, hta_mode: str = "full") -> None:
    size = sum(f.stat().st_size for f in d.iterdir())
    o = ours(d)
    c = ours_cli(d)
    h = hta(d, hta_mode)
    speed = h[0] / o[0] if o[0] > 0 else float("inf")
    mem = o[1] / h[1] if h[1] > 0 else float("nan")
    what = "load + 3 analyses" if hta_mode == "full" else "load only"
    print(f"{label} ({size / 1e6:.1f} MB on disk)")
    print(f"  ours : {o[0]:7.2f} s  {o[1]:8.1f} MB peak RSS  (library, exit {o[2]})")
    print(f"  CLI  : {c[0]:7.2f} s  {c[1]:8.1f} MB peak RSS  (clusterdoctor comm analyze, exit {c[2]})")
    print(f"  HTA  : {h[0]:7.2f} s  {h[1]:8.1f} MB peak RSS  ({what}, exit {h[2]})")
    print(
        f"  speed-up {speed:5.1f}x library, {h[0] / c[0]:5.1f}x CLI (target >= 10); "
        f"memory ratio {mem:.2f} library, {c[1] / h[1]:.2f} CLI (target <= 0.33)"
    )


def derived_gpu_trace(src: Path, dst: Path, target_mb: float) -> None:
    """Repeat the real trace's events shifted in time (and correlation ids) to about ``target_mb``."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in xs)
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - t0 + 1000.0
    one = len(json.dumps(events))
    reps = max(1, int(target_mb * 1e6 / one))
    with open(dst, "w") as f:
        head = {k: v for k, v in doc.items() if k != "traceEvents"}
        f.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
        first = True
        for r in range(reps):
            for e in events:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + r * span
                args = e2.get("args")
                if isinstance(args, dict) and "correlation" in args:
                    e2["args"] = dict(args, correlation=args["correlation"] + r * 10_000_000)
                if e2.get("name", "").startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{r * 100 + int(e2['name'].split('#')[1])}"
                f.write(("" if first else ",\n") + json.dumps(e2))
                first = False
        f.write("\n]}\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--large-mb", type=float, default=300.0)
    ap.add_argument("--skip-large", action="store_true")
    args = ap.parse_args()
    try:
        import hta  # noqa: F401
    except ImportError:
        sys.exit(
            "holistictraceanalysis is not installed: pip install -c constraints.txt holistictraceanalysis"
        )
    root = fixture_path("comm/kineto")
    if root is None:
        sys.exit("shared fixtures absent (../shared/fixtures/comm/kineto)")
    tmp = Path(tempfile.mkdtemp(prefix="cd_comm_bench_", dir="/tmp"))
    try:
        for f in sorted(root.iterdir()):
            d = tmp / f.name.split(".")[0]
            d.mkdir()
            shutil.copy(f, d / f.name)
            compare(f"fixture {f.name}", d)
        if args.skip_large:
            return
        d = tmp / "large_gpu"
        d.mkdir()
        derived_gpu_trace(root / "hta_nccl_data_rank0_ws2_allreduce.json.gz", d / "rank0.json", args.large_mb)
        compare("large GPU trace derived from the real AllReduce fixture", d)
        shutil.rmtree(d)
        d = tmp / "large_cpu"
        d.mkdir()
        steps = max(50, int(args.large_mb * 1e6 / 110_000))  # ~110 kB of JSON per step of this model
        t = time.perf_counter()
        subprocess.run(
            [PY, "-c", CAPTURE_SCRIPT, str(d / "rank0.json"), str(steps)], check=True, capture_output=True
        )
        print(f"(captured {steps} torch.profiler steps in {time.perf_counter() - t:.0f} s)")
        compare("large CPU trace captured with torch.profiler", d, hta_mode="load")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
