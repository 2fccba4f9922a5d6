"""Benchmark: auditing 1,000 processes' numa_maps, against a plain read of the same files.

Builds a temporary proc-like tree from REAL processes of this machine: ``status``, ``numa_maps``,
``comm`` and ``cmdline`` of every live process whose numa_maps is readable, plus one child started
here that imports torch (or numpy) so a typical ML process's map (hundreds of VMAs) is among them.
Those are replicated to N pid directories. Then, in the same run, best of ``--repeat``:

* baseline: open and read every ``status`` and ``numa_maps`` file of the tree;
* audit: :func:`collect_process` (status, numa_maps, cmdline, comm, environ, fds, threads -- the
  last three are absent in the tree and recorded as such) and :func:`audit_process` against a
  topology of this machine's NUMA nodes, for every pid.

Prints both times and the ratio audit/baseline, and PASS/FAIL against the target (audit of 1,000
processes under 1 s; issue #2 "Speed"). Exit 1 on FAIL.

Run: ``.venv/bin/python bench/numa_maps_audit.py [--processes 1000] [--repeat 3] [--heaviest]``
(``--heaviest``: every process a copy of the largest map, the worst case).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import best_of  # bench/_timing.py (the script's folder is on sys.path)
from clusterdoctor.observe.node.procfs import collect_process, list_pids
from clusterdoctor.topology.cpuset import parse_cpulist
from clusterdoctor.topology.model import NumaNode, Topology
from clusterdoctor.topology.placement import audit_process

TARGET_S = 1.0
FILES = ("status", "numa_maps", "comm", "cmdline")

ML_CHILD = r"""
import sys
try:
    import torch  # noqa: F401
except ImportError:
    import numpy  # noqa: F401
print("ready", flush=True)
sys.stdin.read()
"""


def this_topology() -> Topology:
    nodes = []
    for d in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        nodes.append(NumaNode(int(d.name[4:]), parse_cpulist((d / "cpulist").read_text())))
    return Topology(source="/sys", source_kind="sysfs", nodes=nodes)


def snapshot(pid: int) -> dict[str, bytes] | None:
    out = {}
    for name in FILES:
        try:
            out[name] = Path(f"/proc/{pid}/{name}").read_bytes()
        except OSError:
            return None
    return out if out["numa_maps"] else None  # skip kernel threads (empty map)


def build_tree(root: Path, n: int, heaviest: bool = False) -> tuple[list[int], int]:
    child = subprocess.Popen([sys.executable, "-c", ML_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        child.stdout.readline()
        sources = [s for s in (snapshot(p) for p in list_pids()) if s is not None]
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)
    if not sources:
        sys.exit("no readable /proc/<pid>/numa_maps on this machine")
    if heaviest:  # worst case: every process as large as the largest map here (the ML child's)
        sources = [max(sources, key=lambda s: len(s["numa_maps"]))]
    pids = []
    lines = 0
    for i in range(n):
        pid = 100000 + i
        d = root / str(pid)
        d.mkdir()
        src = sources[i % len(sources)]
        for name, data in src.items():
            (d / name).write_bytes(data)
        lines += src["numa_maps"].count(b"\n")
        pids.append(pid)
    return pids, lines


def plain_read(root: str, pids: list[int]) -> None:
    for pid in pids:
        for name in ("status", "numa_maps"):
            with open(f"{root}/{pid}/{name}", "rb") as f:
                f.read()


def run_audit(root: str, pids: list[int], topo: Topology) -> int:
    flagged = 0
    for pid in pids:
        pl = audit_process(collect_process(pid, root), topo)
        if pl.error is not None:
            raise SystemExit(f"pid {pid}: {pl.error}")
        flagged += bool(pl.raised())
    return flagged


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--heaviest", action="store_true", help="replicate only the largest numa_maps (worst case)"
    )
    args = ap.parse_args()
    topo = this_topology()
    tmp = Path(tempfile.mkdtemp(prefix="cd-bench-proc-"))
    try:
        pids, lines = build_tree(tmp, args.processes, args.heaviest)
        root = str(tmp)
        run_audit(root, pids[:10], topo)  # warm caches (policy strings, imports)
        base = best_of(lambda: plain_read(root, pids), args.repeat)
        audit_t = best_of(lambda: run_audit(root, pids, topo), args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = audit_t < TARGET_S
    print(
        f"processes: {len(pids)}  numa_maps lines: {lines}  (copied from live processes, cpu count {os.cpu_count()})"
    )
    print(f"plain read of status+numa_maps: {base * 1e3:8.1f} ms")
    print(f"audit (collect + placement):    {audit_t * 1e3:8.1f} ms")
    print(f"ratio audit/plain read: {audit_t / base:.1f}x")
    print(
        f"{'PASS' if ok else 'FAIL'}: audit of {len(pids)} processes {'<' if ok else '>='} {TARGET_S:.0f} s target"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
