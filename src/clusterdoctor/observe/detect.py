"""Detect what a file or directory given to ``clusterdoctor diagnose`` is, by content, and load it.

Each loader is ``(name, sniff(head: bytes, name: str) -> bool, load(path) -> dict[kind, value])``;
the first loader whose sniff accepts the first 64 KiB wins. Loaders live in the observe module of
their source; this module only lists them, in order, and imports each lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

HEAD_BYTES = 64 << 10


@dataclass(frozen=True)
class Loader:
    name: str
    module: str
    sniff: str
    load: str

    def functions(self) -> tuple[Callable[[bytes, str], bool], Callable[[Path], dict[str, Any]]] | None:
        try:
            mod = importlib.import_module(self.module)
        except ModuleNotFoundError as e:
            if e.name == self.module:
                return None
            raise
        s, ld = getattr(mod, self.sniff, None), getattr(mod, self.load, None)
        if s is None or ld is None:
            return None
        return s, ld


# Order matters: specific formats before generic ones.
LOADERS: list[Loader] = [
    Loader(
        "clusterdoctor bundle", "clusterdoctor.observe.bundle", "sniff_bundle", "load_bundle_observations"
    ),
    Loader("topology dump", "clusterdoctor.observe.detect", "_sniff_topology", "_load_topology"),
    Loader("numa probe result", "clusterdoctor.topology.probe", "sniff_probe", "load_probe"),
    Loader("comm", "clusterdoctor.observe.comm.sources", "sniff_comm", "load_comm_observations"),
    # nvidia-smi -q/-x/--query-gpu, nvidia-smi nvlink, dcgmi, lspci -vv, NVRM kernel logs (before the
    # generic log loader, which it calls itself for a kernel log that also holds control-plane lines)
    Loader("GPU health", "clusterdoctor.observe.gpu.load", "sniff_gpu", "load_gpu_observations"),
    Loader(
        "etcdctl status/health",
        "clusterdoctor.observe.control.etcd",
        "sniff_etcdctl",
        "load_etcdctl_observations",
    ),
    # logs and app data before metrics: the exposition sniffer also accepts some plain counter text
    Loader(
        "logs, RDMA/NIC counters, app data",
        "clusterdoctor.observe.event_sources",
        "sniff_events",
        "load_event_observations",
    ),
    Loader(
        "Prometheus metrics",
        "clusterdoctor.observe.control.scrape",
        "sniff_metrics",
        "load_metrics_observations",
    ),
]


def _sniff_topology(head: bytes, name: str) -> bool:
    from clusterdoctor.topology.build import sniff_topology

    return sniff_topology(head)


def _load_topology(path: Path) -> dict[str, Any]:
    from clusterdoctor.topology.build import load_topology

    return {"topology": load_topology(path)}


def _load_sysfs_tree(root: Path, source: str, kind: str) -> dict[str, Any]:
    """Topology and RDMA port counters from one sysfs tree (a directory or an extracted tarball)."""
    from clusterdoctor.observe.network.rdma import read_sysfs_infiniband
    from clusterdoctor.observe.node.sysfs import collect_sysfs_topology, find_sysfs_root

    base = find_sysfs_root(root) or root
    topo = collect_sysfs_topology(base)
    topo.source, topo.source_kind = source, kind
    out: dict[str, Any] = {"topology": topo}
    ports = read_sysfs_infiniband(base)
    if ports:
        out["rdma"] = ports
    from clusterdoctor.observe.gpu.sysfs_link import sysfs_gpu_report

    gpu = sysfs_gpu_report(base, source)
    if gpu is not None:
        out["gpu_reports"] = [gpu]
    return out


def _load_sysfs_tarball(p: Path) -> dict[str, Any]:
    from clusterdoctor.topology.build import extracted_sysfs

    with extracted_sysfs(p) as (root, warnings):
        out = _load_sysfs_tree(root, str(p), "sysfs-tarball")
    out["topology"].warnings.extend(warnings)
    return out


def _is_sysfs_dir(p: Path) -> bool:
    from clusterdoctor.observe.node.sysfs import find_sysfs_root

    return find_sysfs_root(p) is not None


def load_path(path: str | Path) -> tuple[str, dict[str, Any]]:
    """Load one SOURCE: returns (what it was detected as, observations by kind).

    Budgets (:mod:`clusterdoctor.observe.limits`): devices, FIFOs and links to them are refused before
    anything is read; whatever a loader lets escape that is still a property of the input (a cut-off
    compressed stream, nesting too deep for the interpreter) becomes one InputError line."""
    from clusterdoctor.observe import limits

    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise InputError("no such file or directory", str(p))
    if p.is_dir():
        if _is_sysfs_dir(p):
            return "sysfs tree", _load_sysfs_tree(p, str(p), "sysfs")
        raise InputError(
            "directory is not a sysfs tree (no sys/devices/system); pass its files instead", str(p)
        )
    head = limits.read_head(p, HEAD_BYTES)
    try:
        return _load_file(p, head)
    except (EOFError, RecursionError, UnicodeError) as e:
        reason = "nested too deep to read" if isinstance(e, RecursionError) else f"truncated or damaged ({e})"
        raise InputError(reason, str(p)) from None


def _load_file(p: Path, head: bytes) -> tuple[str, dict[str, Any]]:
    for loader in LOADERS:
        fns = loader.functions()
        if fns is None:
            continue
        sniff, load = fns
        if sniff(head, p.name):
            out = load(p)
            return loader.name, out
    if _is_tar(p):
        return "sysfs tarball", _load_sysfs_tarball(p)
    from clusterdoctor.observe.limits import inflated_head, sniff_compression

    codec = sniff_compression(head)
    if codec:
        data, truncated = inflated_head(p)
        if truncated and not data.strip():
            raise InputError(f"{truncated}; nothing could be read", str(p))
        if not data.strip():
            raise InputError(f"empty {codec} stream", str(p))
    elif not head.strip():
        raise InputError("empty file" if not head else "file holds only whitespace", str(p))
    raise InputError(
        "unrecognised input: not a topology dump, sysfs tarball, clusterdoctor bundle, metrics dump, log, "
        "NCCL log, nccl-tests output, trace or GPU tool output",
        str(p),
    )


def _is_tar(p: Path) -> bool:
    from clusterdoctor.observe.limits import is_tar

    return is_tar(p)
