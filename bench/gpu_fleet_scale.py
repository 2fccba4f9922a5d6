"""Benchmark: ``clusterdoctor gpu health --prometheus URL --format json`` on a 10,000-GPU fleet held
by a REAL Prometheus, against a bare Python process fetching and json-decoding the same answers.

The fleet is SYNTHETIC: 1,250 hosts x 8 GPUs of dcgm-exporter-shaped series (the label set of
dcgm-exporter: Hostname, gpu, UUID, pci_bus_id, device, modelName, DCGM_FI_DRIVER_VERSION, plus
instance and job), for every DCGM_FI_* field the fleet reader queries
(``observe/gpu/dcgm_fleet.FLEET_QUERIES``); every GPU healthy except a few with a fault written in
(an Xid 79, a row-remap failure, PCIe replays growing, throttle reasons). Samples every 5 minutes
from 10 minutes before the run to 30 minutes after it (a query at the server's now finds them, and
``increase(...[10m])`` has two or three samples). Written as OpenMetrics, backfilled with the real
``promtool tsdb create-blocks-from openmetrics``, served by the real ``prometheus`` on 127.0.0.1.

Timed, as whole processes, paired (order alternating per round), median of the rounds:
- ours: ``clusterdoctor gpu health --prometheus URL --format json -o FILE``;
- anchor: ``python -c`` fetching the same queries (the ones the report lists, the exported-fields
  query, the server time and the metric names) with urllib and ``json.loads`` on each.
Peak RSS of each process from ``os.wait4``. Needs /usr/bin/prometheus and /usr/bin/promtool.

Usage: .venv/bin/python bench/gpu_fleet_scale.py [GPUS] [ROUNDS]   (default 10000 5)\n(PROFILE=FILE: also one profiled run of ours, its top functions printed)
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _prometheus import backfill, serving  # bench/_prometheus.py (the script's folder is on sys.path)
from clusterdoctor.observe.gpu.dcgm_fleet import _EXPORTED_QUERY, FLEET_QUERIES

STEP = 300
BEFORE, AFTER = 600, 1800
SICK = {  # GPU index -> {field: value}: the few faults of the synthetic fleet
    17: {"DCGM_FI_DEV_XID_ERRORS": 79.0},
    4242: {"DCGM_FI_DEV_ROW_REMAP_FAILURE": 1.0, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 3.0},
    7777: {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 8.0},
}
REPLAYING = {1234, 9001}  # PCIe replay counter grows by 40 a scrape
GAUGE = {
    "DCGM_FI_DEV_GPU_UTIL": 97.0,
    "DCGM_FI_DEV_SM_CLOCK": 1980.0,
    "DCGM_FI_DEV_MAX_SM_CLOCK": 1980.0,
    "DCGM_FI_DEV_PCIE_LINK_GEN": 5.0,
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": 5.0,
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": 16.0,
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": 16.0,
}


def write_openmetrics(path: Path, n_gpus: int, t0: int) -> tuple[int, int]:
    """The synthetic fleet as OpenMetrics; (series, samples)."""
    ts = list(range(t0 - BEFORE, t0 + AFTER + 1, STEP))
    labels = []
    for i in range(n_gpus):
        host, k = divmod(i, 8)
        labels.append(
            f'Hostname="node-{host:05d}",gpu="{k}",UUID="GPU-{host:08x}-{k:04x}-4e2b-9c1d-{i:012x}",'
            f'pci_bus_id="00000000:{0x18 + 0x11 * k:02X}:00.0",device="nvidia{k}",'
            f'modelName="NVIDIA H100 80GB HBM3",DCGM_FI_DRIVER_VERSION="535.183.01",'
            f'instance="10.{host // 256}.{host % 256}.1:9400",job="dcgm-exporter"'
        )
    metrics = sorted({q.metric for q in FLEET_QUERIES})
    series = samples = 0
    with path.open("w") as f:
        for m in metrics:
            counter = any(q.counter for q in FLEET_QUERIES if q.metric == m)
            f.write(f"# TYPE {m} {'counter' if counter else 'gauge'}\n")
            name = m + ("_total" if counter else "")
            for i, lab in enumerate(labels):
                if counter:
                    grow = 40 if (m == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER" and i in REPLAYING) else 0
                    f.writelines(f"{name}{{{lab}}} {grow * j} {t}\n" for j, t in enumerate(ts))
                else:
                    v = SICK.get(i, {}).get(m, GAUGE.get(m, 0.0))
                    f.writelines(f"{name}{{{lab}}} {v:g} {t}\n" for t in ts)
                series += 1
                samples += len(ts)
        f.write("# EOF\n")
    return series, samples


ANCHOR = r"""
import json, sys, urllib.parse, urllib.request
url, exprs = sys.argv[1], json.loads(sys.argv[2])
def get(path, **q):
    with urllib.request.urlopen(url + path + ("?" + urllib.parse.urlencode(q) if q else ""), timeout=60) as r:
        return json.loads(r.read())
t = get("/api/v1/query", query="time()")["data"]["result"][0]
get("/api/v1/label/__name__/values")
n = 0
for e in exprs:
    n += len(get("/api/v1/query", query=e, time=t)["data"]["result"])
print(n)
"""


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """(seconds, peak RSS MiB, exit status) of one process."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t, ru.ru_maxrss / 1024, p.returncode


def main() -> int:
    n_gpus = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    prom, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not (prom and promtool):
        print("skip: prometheus/promtool not installed (apt-get install prometheus)")
        return 0
    cli = str(Path(sys.executable).with_name("clusterdoctor"))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        t0 = int(time.time())
        om = tmp / "fleet.om"
        t = time.perf_counter()
        n_series, n_samples = write_openmetrics(om, n_gpus, t0)
        tsdb = tmp / "tsdb"
        backfill(promtool, om, tsdb)
        om.unlink()
        print(
            f"SYNTHETIC fleet: {n_gpus:,} GPUs, {n_series:,} series, {n_samples:,} samples, "
            f"backfilled in {time.perf_counter() - t:.1f} s"
        )
        with serving(prom, tsdb, tmp, ready_s=120, poll_s=0.3) as url:
            out = tmp / "report.json"
            ours = [cli, "gpu", "health", "--prometheus", url, "--format", "json", "-o", str(out)]
            timed(ours)  # warm-up: Prometheus loads the blocks lazily
            doc = json.loads(out.read_text())
            names = "|".join(sorted({q.metric for q in FLEET_QUERIES}))
            exprs = [q["expr"] for q in doc.get("queries", [])] + [_EXPORTED_QUERY.format(names=names)]
            anchor = [sys.executable, "-c", ANCHOR, url, json.dumps(exprs)]
            timed(anchor)
            print(
                f"report: {len(doc.get('gpus', [])):,} GPUs, {len(doc.get('findings', []))} findings, "
                f"{out.stat().st_size / 1e6:.1f} MB JSON; {len(exprs)} queries + time + names"
            )
            prof = os.environ.get("PROFILE")  # a path: one more run of ours under cProfile, top 25 printed
            if prof:
                subprocess.run(
                    [sys.executable, "-m", "cProfile", "-o", prof, "-m", "clusterdoctor.cli.main", *ours[1:]],
                    capture_output=True,
                )
                import pstats

                pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
                pstats.Stats(prof).sort_stats("tottime").print_stats(20)
            rows = []
            for r in range(rounds):
                pair = [("ours", ours), ("anchor", anchor)]
                if r % 2:
                    pair.reverse()
                got = {k: timed(c) for k, c in pair}
                rows.append(got)
                print(
                    f"round {r + 1}: ours {got['ours'][0]:.2f} s {got['ours'][1]:.0f} MiB (rc "
                    f"{got['ours'][2]}), anchor {got['anchor'][0]:.2f} s {got['anchor'][1]:.0f} MiB"
                )
            ratio = statistics.median(g["ours"][0] / g["anchor"][0] for g in rows)
            mem = statistics.median(g["ours"][1] / g["anchor"][1] for g in rows)
            med = {k: statistics.median(g[k][0] for g in rows) for k in ("ours", "anchor")}
            rss = {k: statistics.median(g[k][1] for g in rows) for k in ("ours", "anchor")}
            print(
                f"median: ours {med['ours']:.2f} s / {rss['ours']:.0f} MiB, anchor {med['anchor']:.2f} s / "
                f"{rss['anchor']:.0f} MiB; paired ratio time {ratio:.2f}x, peak RSS {mem:.2f}x"
            )
            print(f"target <= 3x anchor: {'met' if ratio <= 3 else 'NOT met'}")
            return 0


if __name__ == "__main__":
    sys.exit(main())
