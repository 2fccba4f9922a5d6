"""NCCL log parsing speed on one core, as a ratio to a plain ``for line`` + ``re.search`` loop over the
same text (the Python line-loop floor), measured paired in the same run (issue 26).

Builds a large log by repeating the real NCCL logs of ../shared/fixtures/comm (interleaved multi-rank
INIT/NET lines plus nccl-tests rows), then times, alternately for ``--rounds`` rounds,
``parse_nccl_log`` on the text and the floor loop; then ``load_nccl_log`` on a file. Target:
parse >= 100 MB/s. The machine is shared: the load average is printed, ratios are medians.

Usage: python bench/nccl_log_parse.py [MB] [--rounds N] (default 200 MB, 5 rounds)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time

from clusterdoctor.observe.comm.nccl_log import load_nccl_log, parse_nccl_log
from clusterdoctor.testing import fixture_path

FIXTURES = (
    "comm/nccl_efa_2node_t4_init_and_allreduce_perf.log",
    "comm/nccl_tests_2node_socket_no_efa.log",
    "comm/nccl_tests_2node_efa.log",
)
FLOOR = re.compile(r"NCCL INFO (\w+)")


def floor(text: str) -> int:
    n = 0
    for line in text.splitlines():
        if FLOOR.search(line):
            n += 1
    return n


def timed(fn, *args) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mb", nargs="?", type=float, default=200.0)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    paths = [fixture_path(f) for f in FIXTURES]
    if any(p is None for p in paths):
        sys.exit("shared fixtures absent (../shared/fixtures/comm)")
    unit = "".join(p.read_text() for p in paths)  # type: ignore[union-attr]
    text = unit * max(1, int(args.mb * 1e6 / len(unit)))
    size = len(text.encode())
    log = parse_nccl_log(text)
    print(
        f"log: {size / 1e6:.0f} MB, {text.count(chr(10)):,} lines; kept {log.lines_kept:,} lines, "
        f"{len(log.transports):,} transports, {len(log.affinities):,} affinity masks"
    )
    t_parse, t_floor = [], []
    for _ in range(args.rounds):
        t_floor.append(timed(floor, text))
        t_parse.append(timed(parse_nccl_log, text))
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(text)
        name = f.name
    try:
        t_file = min(timed(load_nccl_log, name) for _ in range(2))
    finally:
        os.unlink(name)
    ratios = [f / p for f, p in zip(t_floor, t_parse)]
    mbs = size / 1e6 / statistics.median(t_parse)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.rounds} paired rounds (medians)")
    print(f"for line + re.search (floor): {size / 1e6 / statistics.median(t_floor):7.1f} MB/s")
    print(
        f"parse_nccl_log              : {mbs:7.1f} MB/s (target >= 100: {'PASS' if mbs >= 100 else 'FAIL'})"
    )
    print(f"load_nccl_log (file)        : {size / 1e6 / t_file:7.1f} MB/s (best of 2)")
    print(f"parse / floor speed ratio   : {statistics.median(ratios):.2f}x")
    return 0 if mbs >= 100 else 1


if __name__ == "__main__":
    raise SystemExit(main())
