"""Peak memory and time of `clusterdoctor comm analyze` on gzip traces that inflate to 2 GiB (issue 15:
a 7 MB gzip trace inflating to 2 GiB took 4 min and 17.7 GB before budgets existed), side by side with
a real fixture trace as the baseline. Each run is a fresh process; peak RSS from wait4.

    .venv/bin/python bench/hostile_inputs.py [--inflated-mib 2048]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile import generators as g


def measure(args: list[str]) -> tuple[int, float, float, str]:
    """(exit code, seconds, peak RSS MiB, last stderr line) of ``clusterdoctor ARGS``."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "clusterdoctor.cli.main", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    err = p.stderr.read()  # type: ignore[union-attr]
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return p.returncode, time.monotonic() - t0, ru.ru_maxrss / 1024, (lines[-1] if lines else "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inflated-mib", type=int, default=2048)
    a = ap.parse_args()
    from clusterdoctor.testing import fixture_path

    base = fixture_path("comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz")
    rows = []
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        n = a.inflated_mib << 20
        cases = [
            ("NCCL kernels with collective args", g.kineto_gzip_bomb(d, n)),
            ("plain compute kernels", g.kineto_kernel_gzip(d, n)),
        ]
        if base is not None:
            rows.append(
                (
                    "baseline: real fixture trace",
                    base.stat().st_size,
                    *measure(["comm", "analyze", str(base)]),
                )
            )
        for what, p in cases:
            rows.append((what, p.stat().st_size, *measure(["comm", "analyze", str(p)])))
        # the same 2 GiB read to the end: memory follows the records kept, not the bytes inflated
        p = cases[1][1]
        rows.append(("plain kernels, --limit records=20M", p.stat().st_size,
                     *measure(["--limit", "records=20000000", "comm", "analyze", str(p)])))  # fmt: skip
    print(f"comm analyze on gzip traces inflating to {a.inflated_mib} MiB (default budgets), "
          f"{os.cpu_count()} CPUs, RLIMIT none")  # fmt: skip
    print(f"{'input':36} {'on disk':>9} {'exit':>4} {'seconds':>8} {'peak RSS':>9} {'x base':>7}  outcome")
    base_rss = rows[0][4] if base is not None else None
    for what, p, code, secs, rss, last in rows:
        ratio = f"{rss / base_rss:.1f}x" if base_rss else "-"
        size = p / (1 << 20)
        print(f"{what:36} {size:>7.1f}MB {code:>4} {secs:>8.1f} {rss:>7.0f}MB {ratio:>7}  {last[:110]}")
    print(json.dumps({"max_peak_rss_mib": max(r[4] for r in rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
