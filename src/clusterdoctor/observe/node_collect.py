"""Collect this node's sources into a bundle (``clusterdoctor collect -o BUNDLE``).

Each source runs on its own with its own timeout and is recorded in the manifest as ok, skipped,
failed or timeout; a dead source never stops the others. Everything textual that may hold secrets
(logs, command lines, extra files) is redacted by :mod:`clusterdoctor.redact` before it is stored.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.observe.bundle import BundleWriter, run_source

__all__ = ["CollectOptions", "collect_bundle"]

_TOPO_GLOBS = (
    "sys/devices/system/node/node*/cpulist",
    "sys/devices/system/node/node*/distance",
    "sys/devices/system/node/node*/meminfo",
    "sys/devices/system/node/online",
    "sys/devices/system/node/possible",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/cpu*/topology/core_id",
    "sys/devices/system/cpu/cpu*/topology/physical_package_id",
    "sys/devices/system/cpu/cpu*/topology/thread_siblings_list",
    "sys/devices/system/cpu/cpu*/topology/die_id",
    "sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list",
    "sys/bus/pci/devices/*/class",
    "sys/bus/pci/devices/*/vendor",
    "sys/bus/pci/devices/*/device",
    "sys/bus/pci/devices/*/numa_node",
    "sys/bus/pci/devices/*/local_cpulist",
    "sys/bus/pci/devices/*/current_link_speed",
    "sys/bus/pci/devices/*/current_link_width",
    "sys/bus/pci/devices/*/max_link_speed",
    "sys/bus/pci/devices/*/max_link_width",
    "proc/cpuinfo",  # the CPU's vendor and model (topology.cpu); the first 64 KiB hold it
)
_LINK_GLOBS = ("sys/bus/pci/devices/*", "sys/class/net/*", "sys/class/infiniband/*")


@dataclass
class CollectOptions:
    """What to collect and how long each source may take."""

    sysfs_root: str = "/"
    proc_root: str = "/proc"
    scrape: list[str] = field(default_factory=list)
    scrape_interval_s: float = 5.0
    rdma_interval_s: float = 2.0
    journal_units: list[str] = field(
        default_factory=lambda: ["etcd", "kubelet", "containerd", "kube-apiserver"]
    )
    since: str = "-2h"
    files: list[str] = field(default_factory=list)
    timeout_s: float = 10.0


def _read(p: Path, limit: int = 1 << 20) -> bytes | None:
    """The first ``limit`` bytes of a sysfs attribute, or None (missing, unreadable, not a regular
    file: a FIFO or device under a given --sysfs-root is never opened)."""
    from clusterdoctor.errors import InputError
    from clusterdoctor.observe.limits import read_bounded

    try:
        return read_bounded(p, limit, prefix=True)
    except (OSError, InputError):
        return None


def _sysfs(w: BundleWriter, o: CollectOptions) -> list[str]:
    root = Path(o.sysfs_root)
    deadline = time.monotonic() + o.timeout_s
    names = []
    for g in _TOPO_GLOBS:
        for p in root.glob(g):
            if time.monotonic() > deadline:
                raise TimeoutError(f"sysfs walk exceeded {o.timeout_s:g} s")
            data = _read(p, 65536)
            if data is not None:
                names.append(w.add("sysfs/" + str(p.relative_to(root)), data))
    links = {}
    for g in _LINK_GLOBS:
        for p in root.glob(g):
            if p.is_symlink():
                links[str(p.relative_to(root))] = os.readlink(p)
    if links:
        names.append(w.add("sysfs/links.json", json.dumps(links, indent=1, sort_keys=True).encode()))
    return names


def _ib_files(root: Path) -> dict[str, bytes]:
    out = {}
    base = root / "sys" / "class" / "infiniband"
    for sub in ("counters", "counters_ext", "hw_counters"):
        for p in base.glob(f"*/ports/*/{sub}/*"):
            data = _read(p, 4096)
            if data is not None:
                out[str(p.relative_to(root))] = data
    for attr in ("state", "rate", "link_layer", "phys_state"):
        for p in base.glob(f"*/ports/*/{attr}"):
            data = _read(p, 4096)
            if data is not None:
                out[str(p.relative_to(root))] = data
    return out


def _rdma(w: BundleWriter, o: CollectOptions) -> list[str]:
    root = Path(o.sysfs_root)
    names = []
    t1 = time.time()
    r1 = _ib_files(root)
    if r1:
        time.sleep(min(o.rdma_interval_s, o.timeout_s))
        t2 = time.time()
        r2 = _ib_files(root)
        for k, v in r1.items():
            names.append(w.add(f"rdma/read1/{k}", v))
        for k, v in r2.items():
            names.append(w.add(f"rdma/read2/{k}", v))
        w.extra["rdma_read_times"] = [t1, t2]
    if shutil.which("rdma"):
        p = subprocess.run(
            ["rdma", "statistic", "show"], capture_output=True, timeout=o.timeout_s, check=False
        )
        if p.returncode == 0 and p.stdout.strip():
            names.append(w.add("rdma/statistic.txt", p.stdout))
    return names


def _placement(w: BundleWriter, o: CollectOptions) -> list[str]:
    """The real placement audit (Placement.as_dict() records, secrets redacted) of every process that
    uses a GPU or RDMA NIC, against this node's topology — what ``diagnose`` does live."""
    from clusterdoctor.diagnosis import audit_processes
    from clusterdoctor.topology.build import from_sysfs

    topo = from_sysfs(o.sysfs_root)
    rows = audit_processes(topo, proc_root=o.proc_root, sysfs_root=o.sysfs_root)
    return [w.add("proc/placement.json", json.dumps(rows, indent=1, default=str).encode())]


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_")[:80] or "x"


def _scrape(w: BundleWriter, o: CollectOptions, i: int, url: str) -> list[str]:
    names = []
    for k in (1, 2):
        if k == 2:
            time.sleep(o.scrape_interval_s)
        from clusterdoctor.observe.http_client import request

        r = request(
            url, headers={"Accept": "text/plain;version=0.0.4"}, connect_timeout=min(5.0, o.timeout_s),
            read_timeout=o.timeout_s, total_timeout=3 * o.timeout_s,
        )  # fmt: skip
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}")
        body = r.body
        host = _safe(url.split("://", 1)[-1].split("/", 1)[0].rpartition("@")[2])  # never the credentials
        names.append(w.add(f"metrics/{i}-{host}-{k}.prom", body))
    return names


def _journal(w: BundleWriter, o: CollectOptions, unit: str) -> list[str]:
    if not shutil.which("journalctl"):
        return []
    from clusterdoctor.observe.limits import run_bounded

    try:
        code, stdout, stderr = run_bounded(
            ["journalctl", "-u", unit, "--since", o.since, "-o", "short-iso", "--no-pager", "-q"], o.timeout_s
        )
    except TimeoutError:
        raise TimeoutError(f"journalctl -u {unit} exceeded {o.timeout_s:g} s") from None
    if code != 0:
        raise RuntimeError(stderr.decode("utf-8", "replace").strip()[:300] or f"journalctl exit {code}")
    lines = [ln for ln in stdout.splitlines() if ln.strip() and not ln.startswith(b"-- ")]
    if not lines:
        return []
    return [w.add(f"logs/{_safe(unit)}.log", b"\n".join(lines) + b"\n", redact=True)]


def _file(w: BundleWriter, o: CollectOptions, path: str) -> list[str]:
    from clusterdoctor.observe.limits import read_input

    p = Path(path)
    data = read_input(p)  # devices/FIFOs refused, the input limit applies: recorded as a failed source
    metrics = p.suffix == ".prom"
    return [w.add(f"files/{_safe(p.name)}", data, redact=not metrics)]


# GPU health sources gathered when their tool exists (read-only commands; dcgmi diag is not run: it
# loads the GPUs). Each lands under gpu/ and is read back by content like any other file.
GPU_COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nvidia-smi-q.xml", ("nvidia-smi", "-q", "-x")),
    ("nvidia-smi-nvlink-s.txt", ("nvidia-smi", "nvlink", "-s")),
    ("nvidia-smi-nvlink-e.txt", ("nvidia-smi", "nvlink", "-e")),
    ("lspci-vv-nvidia.txt", ("lspci", "-vv", "-D", "-d", "10de:")),
    ("dcgmi-discovery-l.txt", ("dcgmi", "discovery", "-l")),
    ("dcgmi-health-c.txt", ("dcgmi", "health", "-c")),
)


def _gpu_tool(w: BundleWriter, o: CollectOptions, name: str, args: tuple[str, ...]) -> list[str]:
    if not shutil.which(args[0]):
        return []
    try:
        p = subprocess.run(list(args), capture_output=True, timeout=o.timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{' '.join(args)} exceeded {o.timeout_s:g} s") from None
    if p.returncode != 0 or not p.stdout.strip():
        err = p.stderr.decode("utf-8", "replace").strip()[:300]
        if p.returncode != 0:
            raise RuntimeError(err or f"{args[0]} exit {p.returncode}")
        return []
    if name == "lspci-vv-nvidia.txt" and b"10de" not in p.stdout and b"NVIDIA" not in p.stdout:
        return []
    return [w.add(f"gpu/{name}", p.stdout, redact=True)]


def _gpu_kernel_log(w: BundleWriter, o: CollectOptions) -> list[str]:
    """The NVIDIA driver lines of the kernel log (dmesg, else journalctl -k), for Xid/SXid."""
    from clusterdoctor.observe.gpu.live import kernel_log_bytes

    data, how, why = kernel_log_bytes(o.timeout_s)
    if data is None:
        raise RuntimeError(why or "kernel log not readable")
    if b"NVRM" not in data and b"SXid" not in data:
        return []
    return [w.add("gpu/kernel-nvidia.log", data, redact=True)]


def collect_bundle(out: str | Path, opts: CollectOptions | None = None) -> dict:
    """Collect every source of ``opts`` into the bundle ``out``; returns the manifest."""
    o = opts or CollectOptions()
    w = BundleWriter()
    w.sources.append(run_source("sysfs-topology", lambda: _sysfs(w, o), o.timeout_s))
    w.sources.append(run_source("rdma-counters", lambda: _rdma(w, o), o.timeout_s))
    w.sources.append(run_source("proc-placement", lambda: _placement(w, o), o.timeout_s))
    for i, url in enumerate(o.scrape):
        w.sources.append(run_source(f"scrape {url}", lambda i=i, url=url: _scrape(w, o, i, url), o.timeout_s))
    for unit in o.journal_units:
        w.sources.append(run_source(f"journal {unit}", lambda unit=unit: _journal(w, o, unit), o.timeout_s))
    for f in o.files:
        w.sources.append(run_source(f"file {f}", lambda f=f: _file(w, o, f), o.timeout_s))
    for name, args in GPU_COMMANDS:
        w.sources.append(
            run_source(f"gpu {' '.join(args)}", lambda n=name, a=args: _gpu_tool(w, o, n, a), o.timeout_s)
        )
    w.sources.append(run_source("gpu kernel log (NVRM/SXid)", lambda: _gpu_kernel_log(w, o), o.timeout_s))
    return w.write(out)
