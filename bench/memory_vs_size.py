"""Peak memory and time against input size (issue 26): ``diagnose`` on an etcd log and on a Prometheus
text dump, and ``comm analyze`` on an NCCL log, of 100 MB, 500 MB and 1 GB, each a whole process,
beside the Python line-loop floor (``for line in open(path, "rb")``) in a process of its own on the
same file, measured back to back.

The inputs are built in a temporary folder by repeating real captures (../shared/fixtures): the two
etcd zap logs (lost leader with slow applies, slow-disk heartbeats: every copy holds events), four
lines of the first that hold no event ("etcd-info": what most of a real etcd log is), and the
three NCCL logs (init, transports, nccl-tests tables), and the four real ``/metrics`` dumps of
bench/prom_parse.py ("prom"; two in tests/data). They are deleted afterwards. Each run gets
``--limit input=2G`` (the default refuses files over 256 MiB before reading them).

Usage: python bench/memory_vs_size.py [--sizes 100,500,1000] [--only etcd|etcd-info|prom|nccl] [--python PY]
(``--python``: another tree's interpreter, e.g. main's, for a before/after at the same sizes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterdoctor.testing import fixture_path

REPO = Path(__file__).resolve().parents[1]

INPUTS = {
    "etcd": (
        (
            "ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log",
            "ctrl/etcd_zap_json_heartbeat_slow_disk_pr9761.log",
        ),
        ["diagnose", "{f}", "--format", "json", "-o", "{out}"],
    ),
    # lines 2-5 of the lost-leader capture only (candidate, votes sent and received): no event
    "etcd-info": (
        ("ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log#2-5",),
        ["diagnose", "{f}", "--format", "json", "-o", "{out}"],
    ),
    # the four real dumps bench/prom_parse.py reads (kube-scheduler, etcd, node exporter, Prometheus
    # federate), each copy's series the same (untimed ones and timed federate ones)
    "prom": (
        (
            "ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom",
            "ctrl/etcd_v3.6.6_minikube_metrics.prom",
            "data:ctrl/node_exporter_1.5.0_metrics.prom",
            "data:ctrl/prometheus_2.42.0_federate_all.prom",
        ),
        ["diagnose", "{f}", "--format", "json", "-o", "{out}"],
    ),
    "nccl": (
        (
            "comm/nccl_efa_2node_t4_init_and_allreduce_perf.log",
            "comm/nccl_tests_2node_socket_no_efa.log",
            "comm/nccl_tests_2node_efa.log",
        ),
        ["comm", "analyze", "{f}", "--format", "json", "-o", "{out}"],
    ),
}
FLOOR = "import sys\nn = 0\nfor line in open(sys.argv[1], 'rb'):\n    n += 1\n"


def run(cmd: list[str]) -> tuple[float, float, int]:
    """(seconds, peak RSS in MiB, exit code) of one child."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    err = p.stderr.read().decode()[-300:] if p.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        print(f"  {' '.join(cmd[:6])}... exit {code}: {err}", file=sys.stderr)
    return dt, usage.ru_maxrss / 1024, code


def build(kind: str, mb: int, folder: Path) -> Path:
    rels, _ = INPUTS[kind]
    parts = []
    for rel in rels:
        name, _, span = rel.partition("#")
        p = REPO / "tests" / "data" / name[5:] if name.startswith("data:") else fixture_path(name)
        if p is None:
            sys.exit("shared fixtures absent (set CLUSTERDOCTOR_FIXTURES)")
        data = p.read_bytes()
        if span:  # lines a-b (1-based) only
            a, b = (int(x) for x in span.split("-"))
            data = b"".join(data.splitlines(keepends=True)[a - 1 : b])
        parts.append(data)
    unit = b"".join(parts)
    target = mb * 1_000_000
    out = folder / f"{kind}-{mb}MB.{'prom' if kind == 'prom' else 'log'}"
    with out.open("wb") as f:
        block = unit * max(1, (8 << 20) // len(unit))
        written = 0
        while written + len(block) <= target:
            f.write(block)
            written += len(block)
        f.write(unit * max(0, (target - written) // len(unit)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,500,1000")
    ap.add_argument("--only", choices=tuple(INPUTS), default=None)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; interpreter {a.python}")
    print(
        f"{'input':14s} {'MB':>6s} {'time s':>8s} {'floor s':>8s} {'x floor':>8s} {'peak MiB':>9s} {'MiB/MB':>7s}"
    )
    folder = Path(tempfile.mkdtemp(prefix="cd-memsize-"))
    try:
        for kind in [a.only] if a.only else list(INPUTS):
            _, argv = INPUTS[kind]
            for mb in sizes:
                f = build(kind, mb, folder)
                size = f.stat().st_size / 1e6
                out = folder / "report.json"
                cmd = [a.python, "-m", "clusterdoctor.cli.main", "--limit", "input=2G"]
                cmd += [x.format(f=f, out=out) for x in argv]
                floor, _, _ = run([a.python, "-c", FLOOR, str(f)])
                dt, rss, code = run(cmd)
                print(
                    f"{kind + (' (exit ' + str(code) + ')' if code not in (0, 1) else ''):14s} {size:6.0f} "
                    f"{dt:8.1f} {floor:8.2f} {dt / floor:8.1f} {rss:9.0f} {rss / size:7.2f}",
                    flush=True,
                )
                f.unlink()
                out.unlink(missing_ok=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
