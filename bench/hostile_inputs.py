"""Hostile inputs, measured. Two parts:

1. Peak memory and time of `clusterdoctor comm analyze` on gzip traces that inflate to 2 GiB (issue 15:
   a 7 MB gzip trace inflating to 2 GiB took 4 min and 17.7 GB before budgets existed), side by side
   with a real fixture trace as the baseline, and issue 25's trace of one ProfilerStep event repeated
   (1.5 GB, 147 s before). Each run is a fresh process; peak RSS from wait4.
2. Issue 25's reproducers: every test of tests/hostile whose name starts with ``test_r25_`` (and every
   test of a ``tests/hostile/test_r25_*.py`` file) is run through pytest with a JUnit XML — the ones
   marked ``serial`` alone, the others on ``--jobs`` workers — and the counts are printed: how many
   were tried, held and failed, and one line per failure.

    .venv/bin/python bench/hostile_inputs.py [--inflated-mib 2048] [--only traces|r25] [--jobs 2]
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
from xml.etree import ElementTree as ET

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile import generators as g  # noqa: E402
from tests.hostile.r25_inputs import kineto_identical_gzip  # noqa: E402


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


def distinct_kernels_gzip(d: Path, inflated: int) -> Path:
    """Plain compute kernels, 4096 distinct start times repeated: records the reader keeps (a copy of
    the event just before would be counted, not kept: issue 25), so that reading it to the end
    measures the reader's bound."""
    head = b'{"distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": [\n'
    block = "".join(
        g._KERNEL_EVENT.replace('"ts": 1000.5', f'"ts": {1000.5 + i}') + ",\n" for i in range(4096)
    )
    return g.gzip_members(
        d / "rank0_kernels.pt.trace.json.gz",
        head,
        block.encode(),
        inflated,
        (g._KERNEL_EVENT + "]}\n").encode(),
    )


def traces(inflated_mib: int) -> dict[str, float]:
    from clusterdoctor.testing import fixture_path

    base = fixture_path("comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz")
    rows = []
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        n = inflated_mib << 20
        cases = [
            ("NCCL kernels with collective args", g.kineto_gzip_bomb(d, n)),
            ("plain compute kernels", distinct_kernels_gzip(d, n)),
            ("one ProfilerStep repeated (400 MB)", kineto_identical_gzip(d, "ProfilerStep", 400 << 20)),
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
    print(f"comm analyze on gzip traces inflating to {inflated_mib} MiB (default budgets), "
          f"{os.cpu_count()} CPUs, RLIMIT none")  # fmt: skip
    print(f"{'input':36} {'on disk':>9} {'exit':>4} {'seconds':>8} {'peak RSS':>9} {'x base':>7}  outcome")
    base_rss = rows[0][4] if base is not None else None
    for what, size, code, secs, rss, last in rows:
        ratio = f"{rss / base_rss:.1f}x" if base_rss else "-"
        print(
            f"{what:36} {size / (1 << 20):>7.1f}MB {code:>4} {secs:>8.1f} {rss:>7.0f}MB {ratio:>7}  {last[:110]}"
        )
    return {"max_peak_rss_mib": max(r[4] for r in rows)}


def _cases(xml: Path) -> list[tuple[str, str, str]]:
    """(test id, outcome: held|failed|skipped, first line of the failure) per test case."""
    if not xml.exists():
        return []
    out = []
    for tc in ET.parse(xml).getroot().iter("testcase"):
        name = f"{tc.get('classname', '').replace('.', '/')}.py::{tc.get('name')}"
        bad = tc.find("failure")
        if bad is None:
            bad = tc.find("error")
        if bad is not None:
            msg = (bad.get("message") or bad.text or "").strip().splitlines()
            out.append((name, "failed", msg[0][:160] if msg else ""))
        elif tc.find("skipped") is not None:
            out.append((name, "skipped", (tc.find("skipped").get("message") or "")[:160]))  # type: ignore[union-attr]
        else:
            out.append((name, "held", ""))
    return out


def reproducers(jobs: int) -> dict[str, int]:
    """Run issue 25's reproducers (see the module docstring) and print the counts."""
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "600",
            "tests/hostile", "-k", "test_r25_"]  # fmt: skip
    cases: list[tuple[str, str, str]] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as td:
        for i, (marker, extra) in enumerate(
            (("not serial", ["-n", str(jobs)] if jobs > 1 else []), ("serial", []))
        ):
            xml = Path(td) / f"r25-{i}.xml"
            subprocess.run([*base, "-m", marker, *extra, f"--junitxml={xml}"], cwd=REPO,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)  # fmt: skip
            cases += _cases(xml)
    took = time.monotonic() - t0
    held = [c for c in cases if c[1] == "held"]
    failed = [c for c in cases if c[1] == "failed"]
    skipped = [c for c in cases if c[1] == "skipped"]
    functions = {c[0].split("[", 1)[0] for c in cases}
    print(f"issue 25 reproducers (tests/hostile, test_r25_*): {len(functions)} tests, {len(cases)} cases "
          f"in {took:.0f} s")  # fmt: skip
    print(
        f"tried {len(cases) - len(skipped)}, held {len(held)}, failed {len(failed)}, skipped {len(skipped)}"
    )
    for name, _, why in failed:
        print(f"FAILED {name}: {why}")
    for name, _, why in skipped:
        print(f"skipped {name}: {why}")
    return {"r25_tried": len(cases) - len(skipped), "r25_held": len(held), "r25_failed": len(failed)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inflated-mib", type=int, default=2048)
    ap.add_argument("--only", choices=("traces", "r25"), default=None)
    ap.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers for the parallel-safe tests")
    a = ap.parse_args()
    summary: dict[str, float] = {}
    if a.only in (None, "traces"):
        summary.update(traces(a.inflated_mib))
    if a.only in (None, "r25"):
        if summary:
            print()
        summary.update(reproducers(a.jobs))
    print(json.dumps(summary))
    return 0  # a report: the failures are listed above (the test suite is what enforces them)


if __name__ == "__main__":
    sys.exit(main())
