"""Whole-process timings of the CLI: `clusterdoctor --help` (target < 150 ms) and
`clusterdoctor diagnose --format json` on this machine (target < 1 s).

Each is printed as a ratio to a bare `python -c pass` measured in the same run, since these machines
are noisy: the ratio says how much the CLI adds over starting the interpreter at all.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 7


def best_of(cmd: list[str], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True)
        times.append(time.perf_counter() - t0)
        if p.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr.decode()[-500:]}")
    return min(times), statistics.median(times)


def main() -> int:
    py = sys.executable
    base_min, base_med = best_of([py, "-c", "pass"])
    cases = [
        ("clusterdoctor --help", [py, "-m", "clusterdoctor.cli.main", "--help"], 0.150),
        (
            "clusterdoctor diagnose --format json",
            [py, "-m", "clusterdoctor.cli.main", "diagnose", "--format", "json"],
            1.0,
        ),
    ]
    ok = True
    print(f"baseline python -c pass: best {base_min * 1e3:.1f} ms, median {base_med * 1e3:.1f} ms")
    for name, cmd, target in cases:
        t_min, t_med = best_of(cmd)
        verdict = "PASS" if t_min < target else "FAIL"
        ok &= verdict == "PASS"
        print(
            f"{name}: best {t_min * 1e3:.1f} ms, median {t_med * 1e3:.1f} ms, "
            f"ratio to bare python {t_min / base_min:.1f}x, target < {target * 1e3:.0f} ms: {verdict}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
