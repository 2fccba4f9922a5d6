"""Every GPU-dependent check of clusterdoctor in one run (`make gpu-check`): at most ~8 minutes on one GPU.

Writes a results folder (default ``out/gpu-check-<UTC time>``; ``--out DIR``) holding:

* ``results.json`` — one entry per check: ran / skipped (with the reason) / failed, its numbers;
* ``summary.md`` — the same as a table, for bench/RESULTS.md;
* the raw captures (``nvidia-smi-q.txt``, ``nvidia-smi-q.xml``, ``nvidia-smi-topo-m.txt``,
  ``nvidia-smi-nvlink-s.txt``, ``nvidia-smi-query.csv``, ``numa-probe.json``, the fail-slow probe's
  ``watch/`` files and ``diagnose-*.json``), so they can become test data (tests/data/gpu/).

The checks, each isolated (a failure is recorded, the next one runs; each has a time limit):

1. ``nvidia-smi`` captures: ``-q``, ``-q -x``, ``topo -m``, ``nvlink -s``, ``--query-gpu`` CSV,
   each parsed by ``clusterdoctor diagnose`` (recognised? what it found);
2. NVML live: ``clusterdoctor gpu health`` on this node (NVML, nvidia-smi, kernel log, sysfs);
3. the NUMA latency probe: ``clusterdoctor numa probe --json`` (host buffer on each node; pages
   checked with move_pages);
4. the fail-slow probe on CUDA: 2 ranks on one GPU (gloo carries the collectives: NCCL refuses two
   ranks on one GPU), 60 steps of a GPU matmul, the probe's overhead per step (with vs without, same
   run), then an injected fault (rank 1 does 3x the GPU work from step 30) and whether
   ``clusterdoctor watch --from`` names rank 1, and the onset;
5. gradient-sync hooks on CUDA (int8 + error feedback, the ZeRO-style ShardedOptimizer) on the same
   2-rank group, against plain DDP.

On a machine without a GPU (no nvidia-smi, no CUDA in torch) every check is "skipped" with its reason,
the folder says so, and the exit code is 0: nothing ran, nothing failed. Exit 1 only when a check that
could run failed.

    python tools/gpu_check.py [--out DIR] [--steps 60] [--budget-s 480]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NVSMI = {
    "nvidia-smi-q.txt": ["nvidia-smi", "-q"],
    "nvidia-smi-q.xml": ["nvidia-smi", "-q", "-x"],
    "nvidia-smi-topo-m.txt": ["nvidia-smi", "topo", "-m"],
    "nvidia-smi-nvlink-s.txt": ["nvidia-smi", "nvlink", "-s"],
    "nvidia-smi-query.csv": [
        "nvidia-smi",
        "--query-gpu=index,pci.bus_id,name,temperature.gpu,power.draw,clocks.sm,clocks.max.sm,"
        "utilization.gpu,ecc.errors.uncorrected.volatile.total,clocks_event_reasons.active",
        "--format=csv",
    ],
}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clusterdoctor.cli.main", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )  # fmt: skip


def cuda_status() -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        return False, "torch is not installed (pip install 'clusterdoctor[training]')"
    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__} sees no CUDA GPU"
    return True, f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}"


# -- the checks ------------------------------------------------------------------------------------
def check_nvidia_smi(out: Path) -> dict[str, Any]:
    if shutil.which("nvidia-smi") is None:
        return {"status": "skipped", "reason": "nvidia-smi is not on PATH"}
    files: dict[str, Any] = {}
    for name, cmd in NVSMI.items():
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            files[name] = {"captured": False, "reason": "timed out after 60 s"}
            continue
        (out / name).write_text(p.stdout)
        entry: dict[str, Any] = {"captured": p.returncode == 0, "rc": p.returncode, "bytes": len(p.stdout)}
        if p.returncode == 0 and p.stdout.strip():
            d = cli("diagnose", str(out / name), "--format", "json", "--fail-on", "critical")
            (out / f"diagnose-{name}.json").write_text(d.stdout)
            try:
                doc = json.loads(d.stdout)
                entry["read_as"] = [s["kind"] for s in doc.get("sources", [])]
                entry["findings"] = [f"{f['rule']} {f.get('subject') or ''}".strip() for f in doc["findings"]]
                entry["not_used"] = [w for w in doc.get("warnings", []) if w.startswith("not used")]
            except (json.JSONDecodeError, KeyError):
                entry["read_as"] = None
                entry["diagnose_error"] = (d.stderr or d.stdout).strip().splitlines()[-1:]  # one line
        files[name] = entry
    unread = [n for n, e in files.items() if e.get("captured") and not e.get("read_as")]
    return {"status": "failed" if unread else "ran", "files": files, "unread": unread}


def check_gpu_health(out: Path) -> dict[str, Any]:
    if shutil.which("nvidia-smi") is None and not _has_nvml():
        return {"status": "skipped", "reason": "neither NVML (pynvml) nor nvidia-smi is here"}
    p = cli("gpu", "health", "--format", "json", timeout=180)
    (out / "gpu-health.json").write_text(p.stdout)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"status": "failed", "rc": p.returncode, "error": (p.stderr or "").strip()[-300:]}
    return {
        "status": "ran",
        "rc": p.returncode,
        "sources": [s.get("kind") for s in doc.get("sources", [])],
        "gpus": len(doc.get("gpu_health", [])),
        "findings": [f"{f['rule']} {f.get('subject') or ''}".strip() for f in doc.get("findings", [])],
    }


def _has_nvml() -> bool:
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return False
    return True


def check_numa_probe(out: Path) -> dict[str, Any]:
    ok, why = cuda_status()
    if not ok:
        return {"status": "skipped", "reason": why}
    p = cli("numa", "probe", "--json", timeout=300)
    (out / "numa-probe.json").write_text(p.stdout)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"status": "failed", "rc": p.returncode, "error": (p.stderr or "").strip()[-300:]}
    if not doc.get("ran"):
        return {"status": "failed", "reason": doc.get("reason")}
    gpus = [
        {
            k: g.get(k)
            for k in (
                "name",
                "numa_node",
                "local_h2d_gbps",
                "local_latency_us",
                "remote_local_ratio",
                "remote_local_latency_ratio",
            )
        }
        | {"page_nodes": {n: v.get("page_nodes") for n, v in g.get("per_node", {}).items()}}
        for g in doc["gpus"]
    ]
    return {"status": "ran", "gpus": gpus, "warnings": doc.get("warnings", [])}


def check_training(out: Path, steps: int) -> dict[str, Any]:
    ok, why = cuda_status()
    if not ok:
        return {"status": "skipped", "reason": why}
    wdir = out / "watch"
    wdir.mkdir(exist_ok=True)
    res = out / "training.json"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parent / "gpu_check_worker.py"), str(port), str(wdir),
         str(res), str(steps)],
        capture_output=True, text=True, timeout=360, cwd=ROOT,
    )  # fmt: skip
    (out / "training.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0 or not res.is_file():
        return {"status": "failed", "rc": p.returncode, "error": (p.stderr or "").strip()[-500:]}
    doc = json.loads(res.read_text())
    w = cli("watch", "--from", str(wdir / "fault"), "--once", "--format", "json", timeout=120)
    (out / "watch-fault.json").write_text(w.stdout)
    named = None
    try:
        wd = json.loads(w.stdout)
        fs = wd.get("findings", [])
        named = [
            {"rule": f["rule"], "subject": f.get("subject"), "summary": f.get("summary", "")[:200]}
            for f in fs[:3]
        ]
    except json.JSONDecodeError:
        named = [{"error": (w.stderr or w.stdout).strip()[-200:]}]
    doc["fault_findings"] = named
    doc["fault_rank_named"] = bool(
        named and "rank 1" in (named[0].get("subject") or "") + (named[0].get("summary") or "")
    )
    failed = not doc["fault_rank_named"] or not doc.get("sync", {}).get("ok", False)
    return {"status": "failed" if failed else "ran", **doc}


CHECKS = [
    ("nvidia-smi captures, parsed", check_nvidia_smi),
    ("gpu health live (NVML / nvidia-smi / kernel log)", check_gpu_health),
    ("NUMA host<->device latency probe", check_numa_probe),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--budget-s", type=float, default=480, help="stop starting new checks after this")
    a = ap.parse_args(argv)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = a.out or ROOT / "out" / f"gpu-check-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    ok, cuda = cuda_status()
    t0 = time.monotonic()
    results: dict[str, Any] = {
        "started": stamp,
        "host": socket.gethostname(),
        "cuda": cuda,
        "nvidia_smi": shutil.which("nvidia-smi"),
        "checks": {},
    }
    checks = [
        *CHECKS,
        ("fail-slow probe + sync hooks on CUDA, one injected fault", lambda o: check_training(o, a.steps)),
    ]
    for name, fn in checks:
        if time.monotonic() - t0 > a.budget_s:
            results["checks"][name] = {
                "status": "skipped",
                "reason": f"time budget of {a.budget_s:g} s spent",
            }
            continue
        c0 = time.monotonic()
        try:
            r = fn(out)
        except subprocess.TimeoutExpired as e:
            r = {"status": "failed", "reason": f"timed out after {e.timeout:g} s"}
        except Exception as e:  # a check's own bug must not hide the others
            r = {"status": "failed", "reason": f"{type(e).__name__}: {e}"}
        r["seconds"] = round(time.monotonic() - c0, 1)
        results["checks"][name] = r
        print(
            f"{r['status']:>7}  {name}  ({r['seconds']} s){'  — ' + r['reason'] if r.get('reason') else ''}"
        )
    results["seconds"] = round(time.monotonic() - t0, 1)
    ran = [n for n, r in results["checks"].items() if r["status"] == "ran"]
    failed = [n for n, r in results["checks"].items() if r["status"] == "failed"]
    results["summary"] = {
        "ran": len(ran),
        "failed": len(failed),
        "skipped": len(results["checks"]) - len(ran) - len(failed),
    }
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    lines = [
        f"# gpu-check {stamp} on {results['host']}",
        "",
        f"CUDA: {cuda}",
        "",
        "| check | status | seconds | note |",
        "|---|---|---:|---|",
    ]
    for n, r in results["checks"].items():
        lines.append(f"| {n} | {r['status']} | {r['seconds']} | {r.get('reason') or ''} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    if not ran and not failed:
        print(f"gpu-check: no GPU here ({cuda}); ran nothing. Results: {out}")
        return 0
    print(f"gpu-check: {len(ran)} ran, {len(failed)} failed, {results['summary']['skipped']} skipped in "
          f"{results['seconds']} s. Results: {out}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
