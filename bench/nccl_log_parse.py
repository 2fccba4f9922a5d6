"""NCCL log parsing speed on one core, against a plain line split of the same bytes.

Builds a large log by repeating the real NCCL logs of ../shared/fixtures/comm (interleaved multi-rank
INIT/NET lines plus nccl-tests rows), then times ``parse_nccl_log`` on the text and ``load_nccl_log`` on a
file, and a plain ``text.splitlines()`` of the same text as the baseline. Target: >= 100 MB/s.

Usage: python bench/nccl_log_parse.py [MB] (default 200)
"""

from __future__ import annotations

import os
import sys
import tempfile

from _timing import best_of  # bench/_timing.py (the script's folder is on sys.path)
from clusterdoctor.observe.comm.nccl_log import load_nccl_log, parse_nccl_log
from clusterdoctor.testing import fixture_path

FIXTURES = (
    "comm/nccl_efa_2node_t4_init_and_allreduce_perf.log",
    "comm/nccl_tests_2node_socket_no_efa.log",
    "comm/nccl_tests_2node_efa.log",
)


def main() -> None:
    mb = float(sys.argv[1]) if len(sys.argv) > 1 else 200.0
    paths = [fixture_path(f) for f in FIXTURES]
    if any(p is None for p in paths):
        sys.exit("shared fixtures absent (../shared/fixtures/comm)")
    unit = "".join(p.read_text() for p in paths)  # type: ignore[union-attr]
    text = unit * max(1, int(mb * 1e6 / len(unit)))
    size = len(text.encode())
    log = parse_nccl_log(text)
    print(
        f"log: {size / 1e6:.0f} MB, {text.count(chr(10)):,} lines; kept {log.lines_kept:,} lines, "
        f"{len(log.transports):,} transports, {len(log.affinities):,} affinity masks"
    )
    t_split = best_of(lambda: text.splitlines(), 3)
    t_parse = best_of(lambda: parse_nccl_log(text), 3)
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(text)
        name = f.name
    try:
        t_file = best_of(lambda: load_nccl_log(name), 2)
    finally:
        os.unlink(name)
    print(f"plain splitlines : {size / 1e6 / t_split:8.1f} MB/s")
    print(f"parse_nccl_log   : {size / 1e6 / t_parse:8.1f} MB/s  (target >= 100)")
    print(f"load_nccl_log    : {size / 1e6 / t_file:8.1f} MB/s  (file, 16 MB blocks)")
    print(f"ratio parse / splitlines: {t_split / t_parse:.2f}x (>1 means faster than splitting lines)")


if __name__ == "__main__":
    main()
