"""Detect what a file or directory given to ``clusterdoctor diagnose`` is, by content, and load it.

Each loader is ``(name, sniff(head: bytes, name: str) -> bool, load(path) -> dict[kind, value])``;
the first loader whose sniff accepts the first 64 KiB wins. Loaders live in the observe module of
their source; this module only lists them, in order, and imports each lazily. A loader may say what
the file is in words (``"described_as": "etcd log (member m0 (8e9e05c52164694d))"``); that label,
not the loader's group name, is what the report's ``sources`` show.

A directory (an incident folder) is walked recursively by :func:`walk_sources`: every file is a
candidate, and a sysfs tree inside it (a folder holding ``sys/devices/system``) is one source. Three
kinds of names are skipped as noise, and listed in one warning: hidden files and folders (a name
starting with ``.``: ``.DS_Store``, ``.git``), editor backups and swap files (``name~``, ``#name#``,
``.name.swp``, ``*.swp``, ``*.swo``), a folder's own documentation (``README.md``, ``SOURCES.md``,
``LICENSE`` ...: :data:`_DOC_STEMS` with a text or Markdown suffix, whose quotes of error
lines would be read as the incident's log), folders reached through a symbolic link (never followed,
so no loops) and, beyond :data:`MAX_FOLDER_FILES` files, the rest. A documentation file given by its
own path is read as usual. A folder that cannot be listed (no
permission) is named in a warning too, never dropped silently.
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
    # the fail-slow probe's JSON lines (watch-rank<N>.jsonl), before the comm loader's JSON traces
    Loader(
        "fail-slow probe file",
        "clusterdoctor.observe.watch.records",
        "sniff_watch_file",
        "load_watch_observations",
    ),
    Loader(
        "communication input", "clusterdoctor.observe.comm.sources", "sniff_comm", "load_comm_observations"
    ),
    # nvidia-smi -q/-x/--query-gpu, nvidia-smi nvlink, dcgmi, lspci -vv, NVRM kernel logs (before the
    # generic log loader, which it calls itself for a kernel log that also holds control-plane lines)
    # /proc/driver/nvidia/version, dpkg -l and apt history of the driver packages (before the GPU health
    # loader, whose kernel-log reader would take the NVRM version line for a kernel log)
    Loader(
        "NVIDIA driver versions",
        "clusterdoctor.observe.gpu.driver_versions",
        "sniff_driver_versions",
        "load_driver_versions",
    ),
    # `lspci -vvv | grep ACSCtl` and setpci ACS reads (before GPU health: its lspci reader wants blocks)
    Loader("PCIe ACS listing", "clusterdoctor.observe.node.pcie_acs", "sniff_acs", "load_acs"),
    Loader("ubergemm output", "clusterdoctor.observe.gpu.ubergemm", "sniff_ubergemm", "load_ubergemm"),
    Loader("GPU health", "clusterdoctor.observe.gpu.load", "sniff_gpu", "load_gpu_observations"),
    Loader("crictl info", "clusterdoctor.observe.control.crictl", "sniff_crictl_info", "load_crictl_info"),
    # /livez, /readyz, /healthz ?verbose answers of Kubernetes components and etcd
    Loader("health checks", "clusterdoctor.observe.control.healthz", "sniff_healthz", "load_healthz"),
    Loader(
        "etcdctl output",
        "clusterdoctor.observe.control.etcd",
        "sniff_etcdctl",
        "load_etcdctl_observations",
    ),
    # kubectl get pods/nodes/events and describe pod/node text (before the log loader, which reads a
    # describe's Events table on its own)
    Loader(
        "kubectl output",
        "clusterdoctor.observe.control.kubectl_text",
        "sniff_kubectl_text",
        "load_kubectl_observations",
    ),
    # RDMA port/GID listings, perftest, ucx_info -d; ulimit -a and lsmod; df and quota tables: program
    # output whose lines a log or metrics reader would misread (an lsmod line is a valid Prometheus sample)
    Loader(
        "RDMA port listing",
        "clusterdoctor.observe.network.ibports",
        "sniff_ib_listing",
        "load_ib_listing",
    ),
    Loader(
        "ibv_devices output",
        "clusterdoctor.observe.network.ibv_devices",
        "sniff_ibv_devices",
        "load_ibv_devices",
    ),
    Loader("fi_info output", "clusterdoctor.observe.network.fi_info", "sniff_fi_info", "load_fi_info"),
    Loader(
        "RDMA device nodes",
        "clusterdoctor.observe.network.ib_devnodes",
        "sniff_ib_devnodes",
        "load_ib_devnodes",
    ),
    Loader("infiniband_mad map", "clusterdoctor.observe.network.umad_map", "sniff_umad_map", "load_umad_map"),
    Loader(
        "rdma system output",
        "clusterdoctor.observe.network.rdma_system",
        "sniff_rdma_system",
        "load_rdma_system",
    ),
    Loader("perftest output", "clusterdoctor.observe.network.perftest", "sniff_perftest", "load_perftest"),
    Loader("OSU benchmark output", "clusterdoctor.observe.network.osu", "sniff_osu", "load_osu"),
    Loader("IB fabric diagnostics", "clusterdoctor.observe.network.fabric", "sniff_fabric", "load_fabric"),
    Loader("ucx_info output", "clusterdoctor.observe.network.ucx_info", "sniff_ucx_info", "load_ucx_info"),
    Loader(
        "ulimit or lsmod output",
        "clusterdoctor.observe.node.limits_text",
        "sniff_limits_text",
        "load_limits_text",
    ),
    Loader("disk usage or quota", "clusterdoctor.observe.storage.usage", "sniff_usage", "load_usage"),
    # per-QP rdma output (statistic qp show, res show qp -j) before the RDMA counter reader, which would
    # take a QP counter line for a port's counters
    Loader("per-QP RDMA output", "clusterdoctor.observe.network.rdma_qp", "sniff_rdma_qp", "load_rdma_qp"),
    # logs and app data before metrics: the exposition sniffer also accepts some plain counter text
    Loader(
        "log, RDMA/NIC counters or application data",
        "clusterdoctor.observe.event_sources",
        "sniff_events",
        "load_event_observations",
    ),
    Loader(
        "Prometheus metrics dump",
        "clusterdoctor.observe.control.scrape",
        "sniff_metrics",
        "load_metrics_observations",
    ),
    # program version lines (k3s -v, kubectl version, nvcc --version ...): only a paste whose every line
    # is one, so after every other reader
    Loader(
        "program versions",
        "clusterdoctor.observe.node.version_banners",
        "sniff_version_banners",
        "load_version_banners",
    ),
    # what no reader claims but is recognisable: refused with what it looks like (a sinfo table, a bare
    # command line, an rxe_cfg table, a shell trace), its known messages still read
    Loader(
        "unlisted GPU-side paste",
        "clusterdoctor.observe.gpu.unlisted",
        "sniff_unlisted_gpu",
        "load_unlisted_gpu",
    ),
    Loader(
        "unlisted RDMA-side paste",
        "clusterdoctor.observe.network.unlisted",
        "sniff_unlisted_rdma",
        "load_unlisted_rdma",
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
    from clusterdoctor.observe.confine import confined
    from clusterdoctor.observe.gpu.sysfs_link import sysfs_gpu_report
    from clusterdoctor.observe.network.rdma import read_sysfs_infiniband
    from clusterdoctor.observe.node.sysfs import collect_sysfs_topology, find_sysfs_root

    base = find_sysfs_root(root) or root
    with confined(base) as escapes:  # links out of the tree are not followed (named in warnings)
        topo = collect_sysfs_topology(base)
        topo.source, topo.source_kind = source, kind
        out: dict[str, Any] = {"topology": topo}
        ports = read_sysfs_infiniband(base)
        if ports:
            out["rdma"] = ports
        gpu = sysfs_gpu_report(base, source)
        if gpu is not None:
            out["gpu_reports"] = [gpu]
    topo.warnings.extend(escapes)
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


# A folder holding more files than this is read up to here; the rest are named in a warning.
MAX_FOLDER_FILES = 20000
_BACKUP_SUFFIXES = ("~", ".swp", ".swo", ".swx")
# a folder's documentation, by name: a stem of these with no suffix or one of _DOC_SUFFIXES
_DOC_STEMS = frozenset({"readme", "sources", "license", "licence", "notice", "changelog", "contributing"})
_DOC_SUFFIXES = ("", ".md", ".markdown", ".rst", ".txt")
_UNREADABLE = "unreadable folder(s)"


def noise_reason(name: str) -> str | None:
    """Why a file or folder name inside an incident folder is skipped, or None (see the module doc)."""
    if name.startswith("."):
        return "hidden"
    if name.endswith(_BACKUP_SUFFIXES) or (name.startswith("#") and name.endswith("#")):
        return "editor backup"
    stem, dot, suffix = name.partition(".")
    if stem.lower() in _DOC_STEMS and (dot + suffix).lower() in _DOC_SUFFIXES:
        return "documentation"
    return None


@dataclass
class FolderWalk:
    """What :func:`walk_sources` found under a folder: sources in order, and what it skipped."""

    sources: list[Path]
    skipped: list[tuple[Path, str]]  # (path, reason): noise and files over MAX_FOLDER_FILES

    def warnings(self, root: Path) -> list[str]:
        if not self.skipped:
            return []
        by_reason: dict[str, list[str]] = {}
        for p, why in self.skipped:
            by_reason.setdefault(why, []).append(_rel(p, root))
        out = []
        for why, names in by_reason.items():
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            if why.startswith(_UNREADABLE):
                out.append(f"{root}: {len(names)} {why}, its files not read: {shown}")
            else:
                out.append(f"{root}: skipped {len(names)} {why} file(s): {shown}")
        return out


def _rel(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(p)


def walk_sources(root: str | Path, max_files: int = MAX_FOLDER_FILES) -> FolderWalk:
    """Every candidate source under ``root``, recursively, in sorted order: plain files, and each
    sysfs tree (a folder holding ``sys/devices/system``) as one source; folders reached through
    symbolic links are not followed (no loops). Noise is skipped (see the module docstring)."""
    import os

    base = Path(root)
    found: list[Path] = []
    skipped: list[tuple[Path, str]] = []

    def unreadable(e: OSError) -> None:  # a folder os.walk cannot list: named, never dropped silently
        why = e.strerror or type(e).__name__
        skipped.append((Path(e.filename) if e.filename else base, f"{_UNREADABLE} ({why})"))

    for dirpath, dirnames, filenames in os.walk(base, onerror=unreadable, followlinks=False):
        d = Path(dirpath)
        keep = []
        for name in sorted(dirnames):
            why = noise_reason(name)
            if why is None and (d / name).is_symlink():
                why = "symbolic link to a folder (not followed)"
            if why is not None:
                skipped.append((d / name, why))
            elif name == "sys" and (d / name / "devices" / "system").is_dir():
                found.append(d / name)  # a sysfs tree: one source, rooted at its parent
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            why = noise_reason(name)
            if why is not None:
                skipped.append((d / name, why))
            else:
                found.append(d / name)
    found.sort(key=lambda q: q.relative_to(base).parts)
    if len(found) > max_files:
        skipped += [(q, f"beyond the first {max_files}") for q in found[max_files:]]
        found = found[:max_files]
    return FolderWalk(found, skipped)


def load_path(path: str | Path) -> tuple[str, dict[str, Any]]:
    """Load one SOURCE file (or a sysfs tree): returns (what it is, in words; observations by kind).

    A folder that is not a sysfs tree is an incident folder: see :func:`walk_sources` and
    :func:`clusterdoctor.diagnosis.load_sources`.

    Budgets (:mod:`clusterdoctor.observe.limits`): devices, FIFOs and links to them are refused before
    anything is read; whatever a loader lets escape that is still a property of the input (a cut-off
    compressed stream, nesting too deep for the interpreter) becomes one InputError line."""
    from clusterdoctor.observe import limits

    p = Path(path)
    virtual = limits.virtual_input(p) is not None
    if not virtual and not p.exists() and not p.is_symlink():
        raise InputError("no such file or directory", str(p))
    if not virtual and p.is_dir():
        if p.name == "sys" and (p / "devices" / "system").is_dir():
            return "sysfs tree", _load_sysfs_tree(p.parent, str(p), "sysfs")
        if _is_sysfs_dir(p):
            return "sysfs tree", _load_sysfs_tree(p, str(p), "sysfs")
        raise InputError("a folder of inputs: read it with walk_sources (diagnose does)", str(p))
    head = limits.read_head(p, HEAD_BYTES)
    if not virtual:
        from clusterdoctor.observe.comm.sources import TOML_DOCUMENT, is_toml_document

        if is_toml_document(p):
            raise InputError(TOML_DOCUMENT, str(p))
    pasted = paste_of(p, head)
    try:
        if pasted is None:
            return _load_file(p, head)
        from clusterdoctor.observe.paste import pasted_commands

        clean = pasted.text.encode("utf-8", "surrogateescape")
        with limits.virtual_inputs({str(p): clean}), pasted_commands(pasted.commands, pasted.origin):
            what, data = _load_file(p, clean[:HEAD_BYTES], pasted.origin)
        _note_paste(p, pasted, data)
        return what, data
    except (EOFError, RecursionError, UnicodeError) as e:
        reason = "nested too deep to read" if isinstance(e, RecursionError) else f"truncated or damaged ({e})"
        raise InputError(reason, str(p)) from None


def paste_of(p: Path, head: bytes) -> Any:
    """The program output inside ``p`` when it is a paste (prompts, fences, quotes, ANSI, CRLF,
    elisions: :mod:`clusterdoctor.observe.paste`), or None when there is nothing to undo."""
    from clusterdoctor.observe import limits
    from clusterdoctor.observe.paste import MAX_PASTE_BYTES, clean, looks_pasted

    if b"\x00" in head[:4096] or limits.sniff_compression(head):
        return None
    text = head.decode("utf-8", "replace")
    if not looks_pasted(text):
        return None
    data = head if len(head) < HEAD_BYTES else limits.read_bounded(p, MAX_PASTE_BYTES, prefix=True)
    if len(data) >= MAX_PASTE_BYTES:
        return None  # a log a program wrote, not a paste: read as it is
    pasted = clean(data.decode("utf-8", "surrogateescape"))
    return pasted if pasted.changed and pasted.text.strip() else None


def _note_paste(p: Path, pasted: Any, data: dict[str, Any]) -> None:
    """What undoing the paste found, for the rules (``pastes``: elided lines are not judged) and the
    report (a warning naming the lines the user cut out)."""
    from clusterdoctor.observe.paste import PasteInfo

    data.setdefault("pastes", []).append(PasteInfo.of(str(p), pasted))
    if pasted.elided:
        spans = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in pasted.elided[:8])
        data.setdefault("warnings", []).append(
            f"{p}: lines were cut out of the paste at line(s) {spans} ('...'): what they held is not judged"
        )


def _load_file(p: Path, head: bytes, origin: list[int] | None = None) -> tuple[str, dict[str, Any]]:
    refused: InputError | None = None
    for loader in LOADERS:
        fns = loader.functions()
        if fns is None:
            continue
        sniff, load = fns
        if sniff(head, p.name):
            try:
                out = load(p)
            except InputError as e:
                from clusterdoctor.observe.limits import LimitExceeded

                if loader.name == "clusterdoctor bundle" or isinstance(e, LimitExceeded):
                    raise  # over a budget: reading it again for its messages would go over it too
                refused = e  # a half-recognised paste: its known messages may still be read
                break
            what = out.pop("described_as", None)
            if loader.name == "clusterdoctor bundle":
                return loader.name, out  # a container: what its members are is not what it is
            _add_messages(p, head, out, origin)
            return what or describe(loader.name, out), out
    if refused is None and _is_tar(p):
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
    if not codec and b"\x00" not in head[:4096]:
        from clusterdoctor.observe.messages import as_observations, scan_file, scan_text

        if origin is not None:
            from clusterdoctor.observe import limits

            hits = scan_text(limits.read_text(p), str(p), origin)
        else:
            hits = scan_file(p)
        if hits:
            out = as_observations(hits)
            if refused is not None:
                out["warnings"] = [f"{p}: {refused.reason}; read only its known messages"]
            return out.pop("described_as"), out
        kind = _plain_log(p, origin)
        if kind and refused is None:
            # a dmesg or journal excerpt without a known message: read (a program we read), nothing judged
            return f"{kind} (no known message in it)", {"messages": [], "warnings": []}
    if refused is not None:
        raise refused
    raise InputError(
        "unrecognised input: not a topology dump, sysfs tarball, clusterdoctor bundle, metrics dump, log, "
        "etcdctl output, NCCL log, nccl-tests output, trace or GPU tool output",
        str(p),
    )


def _plain_log(p: Path, origin: list[int] | None) -> str | None:
    """ "kernel log" / "system log" when the input's lines are dmesg or journal lines (observe.plain_log)."""
    from clusterdoctor.observe import limits
    from clusterdoctor.observe.plain_log import system_log_kind

    return system_log_kind(limits.read_head(p, HEAD_BYTES).decode("utf-8", "replace"))


# Inputs whose known messages are not looked for beside their own parser: containers and binary or
# structured formats that hold no program's log lines.
_NO_MESSAGE_SCAN = ("topology", "kineto", "flight_recorder", "ncu", "probe", "metrics", "watch_files")


def _add_messages(p: Path, head: bytes, out: dict[str, Any], origin: list[int] | None) -> None:
    """Known messages in a text input beside what its own parser read (an NCCL log's WARN lines, a
    kernel log's NVRM lines without an Xid)."""
    from clusterdoctor.observe import limits

    if b"\x00" in head[:4096] or limits.sniff_compression(head):
        return
    if _is_json(head) and "log_spans" not in out:
        return  # a JSON document (not a log of JSON lines, such as etcd's zap log)
    if "messages" in out:
        return  # the loader read the known messages itself (knowing what each line is about)
    if any(k in out for k in _NO_MESSAGE_SCAN) or any(k.endswith("_metrics") for k in out):
        return
    from clusterdoctor.observe.messages import scan_file, scan_text

    hits = scan_text(limits.read_text(p), str(p), origin) if origin is not None else scan_file(p)
    if hits:
        out.setdefault("messages", []).extend(hits)


def _is_json(head: bytes) -> bool:
    """A JSON document (no program's log lines in it); a log whose lines start with ``[`` (a timestamp,
    ``[rank0]:``) is not one."""
    if head.lstrip()[:1] not in (b"{", b"["):
        return False
    from clusterdoctor.observe.comm.sources import looks_like_json

    return looks_like_json(head)


# Labels of the observation kinds a loader filled, for loaders that do not say what a file is.
_KIND_LABELS = {
    "nccl_log": "NCCL log",
    "nccl_tests": "nccl-tests output",
    "kineto": "PyTorch profiler trace (Kineto)",
    "flight_recorder": "PyTorch Flight Recorder dump",
    "ncu": "Nsight Compute CSV",
    "probe": "numa probe result",
    "train_log": "training progress log",
    "py_traceback": "Python traceback",
    "python_packages": "pip package listing",
    "p2p_test": "GPU peer access (p2pBandwidthLatencyTest or nvidia-smi topo -p2p)",
    "launcher_log": "launcher console (torchrun, srun, DeepSpeed)",
    "torch_env": "PyTorch environment report (collect_env)",
    "net_ifaces": "network interfaces (ip addr / ifconfig)",
    "nccl_env": "NCCL settings (env, nccl.conf)",
}
_TOPOLOGY_LABELS = {
    "hwloc-xml": "topology (hwloc XML)",
    "numactl-hardware": "topology (numactl --hardware)",
    "nccl-topo-xml": "topology (NCCL topology XML)",
    "nvidia-smi-topo": "topology (nvidia-smi topo -m)",
    "sysfs": "sysfs tree",
    "sysfs-tarball": "sysfs tarball",
}


def describe(loader_name: str, data: dict[str, Any]) -> str:
    """What a loaded file is, in words, from what its loader filled (when the loader did not say)."""
    topo = data.get("topology")
    if topo is not None and getattr(topo, "source_kind", None) in _TOPOLOGY_LABELS:
        return _TOPOLOGY_LABELS[topo.source_kind]
    labels = [lbl for k, lbl in _KIND_LABELS.items() if data.get(k)]
    return " + ".join(labels) if labels else loader_name


def _is_tar(p: Path) -> bool:
    from clusterdoctor.observe.limits import is_tar

    return is_tar(p)
