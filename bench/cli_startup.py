"""Whole-process timings of the CLI, each as a ratio to a bare ``python -c pass`` measured in the
same run (issue 26): ``clusterdoctor --help`` (target <= 6x), ``comm analyze`` on one rank's log
(and whether it imported numpy: it must not), and ``diagnose --format json`` on this machine.

Paired: every round runs the bare interpreter and then each command, so a burst of load from the
other engineers on this machine hits both sides of a ratio; the median of the per-round ratios is
reported, with the load average. ``--rounds N`` (default 21).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from clusterdoctor.testing import fixture_path

NUMPY_PROBE = (
    "import runpy, sys; sys.argv = ['clusterdoctor', *sys.argv[1:]]\n"
    "try:\n runpy.run_module('clusterdoctor.cli.main', run_name='__main__')\n"
    "except SystemExit:\n pass\n"
    "sys.stderr.write('NUMPY=%d' % ('numpy' in sys.modules))"
)


# as users run it: with bytecode caches (a session that sets PYTHONDONTWRITEBYTECODE would make every
# run compile every module from source)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, env=ENV)
    dt = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr.decode()[-500:]}")
    return dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args(argv)
    py = sys.executable
    cli = [py, "-m", "clusterdoctor.cli.main"]
    cases: list[tuple[str, list[str], float | None]] = [("--help", [*cli, "--help"], 6.0)]
    log = fixture_path("comm/nccl_tests_2node_efa.log")
    if log is not None:
        cases.append(("comm analyze (one rank)", [*cli, "comm", "analyze", str(log)], None))
    cases.append(("diagnose --format json", [*cli, "diagnose", "--format", "json"], None))

    base: list[float] = []
    runs: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    ratios: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for _, cmd, _ in cases:
        timed(cmd)  # warm: bytecode written, files in the page cache
    for _ in range(args.rounds):
        b = timed([py, "-c", "pass"])
        base.append(b)
        for name, cmd, _ in cases:
            t = timed(cmd)
            runs[name].append(t)
            ratios[name].append(t / b)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.rounds} paired rounds")
    print(f"python -c pass: median {statistics.median(base) * 1e3:.1f} ms (the anchor)")
    ok = True
    for name, _, target in cases:
        med = statistics.median(ratios[name])
        verdict = ""
        if target is not None:
            passed = med <= target
            ok &= passed
            verdict = f", target <= {target:.0f}x: {'PASS' if passed else 'FAIL'}"
        print(
            f"{name}: median {statistics.median(runs[name]) * 1e3:.1f} ms, {med:.1f}x python -c pass{verdict}"
        )
    if log is not None:
        p = subprocess.run([py, "-c", NUMPY_PROBE, "comm", "analyze", str(log)], capture_output=True, env=ENV)
        imported = p.stderr.decode().rsplit("NUMPY=", 1)[-1].strip() == "1"
        ok &= not imported
        print(f"comm analyze (one rank) imports numpy: {'yes: FAIL' if imported else 'no: PASS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
