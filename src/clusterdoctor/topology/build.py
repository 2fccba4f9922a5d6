"""Build a :class:`Topology` from any source: a sysfs root, a sysfs tarball or a dump file.

Files are detected by content, not by name: hwloc XML, NCCL topology XML, ``nvidia-smi topo -m``
text and ``numactl --hardware`` text; directories and tar archives are read as sysfs trees (the
layout ``hwloc-gather-topology`` writes).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.topology.model import Topology

MAX_TOPOLOGY_FILE = 64 << 20  # a 4-socket hwloc XML is ~350 KB; anything this big is not a topology
MAX_TAR_MEMBER = 16 << 20
MAX_TAR_TOTAL = 512 << 20

# (module, sniff function, parse function, human name) in the order they are tried.
FILE_PARSERS: tuple[tuple[str, str, str, str], ...] = (
    ("clusterdoctor.observe.node.nccl_topo", "sniff_nccl_topo", "parse_nccl_topo_xml", "NCCL topology XML"),
    ("clusterdoctor.observe.node.hwloc_xml", "sniff_hwloc_xml", "parse_hwloc_xml", "hwloc XML"),
    (
        "clusterdoctor.observe.node.nvidia_smi",
        "sniff_nvidia_smi_topo",
        "parse_nvidia_smi_topo",
        "nvidia-smi topo -m",
    ),
    (
        "clusterdoctor.observe.node.numactl",
        "sniff_numactl_hardware",
        "parse_numactl_hardware",
        "numactl --hardware",
    ),
)

EXPECTED = (
    "expected a sysfs directory or tarball, hwloc XML (lstopo --of xml), NCCL topology XML, "
    "`nvidia-smi topo -m` or `numactl --hardware` output"
)


def from_sysfs(root: str | os.PathLike[str] = "/") -> Topology:
    """This machine's topology (``root="/"``) or that of a sysfs tree at ``root``."""
    from clusterdoctor.observe.node.sysfs import collect_sysfs_topology

    return collect_sysfs_topology(root)


def _parser_for(head: bytes) -> tuple[Callable[..., Topology], str] | None:
    for mod_name, sniff_name, parse_name, label in FILE_PARSERS:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError:
            continue
        sniff = getattr(mod, sniff_name, None)
        if sniff is not None and sniff(head):
            return getattr(mod, parse_name), label
    return None


def sniff_topology(head: bytes) -> bool:
    """Whether ``head`` (the first KB of a file) looks like a topology dump we can read."""
    return _parser_for(head) is not None


def safe_extract(archive: Path, dest: Path) -> list[str]:
    """Extract a tar archive into ``dest`` refusing members that escape it; returns warnings."""
    warnings: list[str] = []
    total = 0
    try:
        with tarfile.open(archive, "r:*") as tf:
            for member in tf:
                if member.size > MAX_TAR_MEMBER:
                    warnings.append(f"{member.name}: skipped, {member.size} bytes is too large for sysfs")
                    continue
                total += member.size
                if total > MAX_TAR_TOTAL:
                    raise InputError(f"archive expands past {MAX_TAR_TOTAL >> 20} MiB", str(archive))
                try:
                    safe = tarfile.data_filter(member, str(dest))
                except tarfile.FilterError as e:
                    warnings.append(f"{member.name}: skipped ({e})")
                    continue
                try:
                    tf.extract(safe, dest, set_attrs=False, filter="fully_trusted")
                except (OSError, tarfile.TarError) as e:
                    warnings.append(f"{member.name}: not extracted ({e})")
    except (tarfile.TarError, EOFError, OSError) as e:
        raise InputError(f"cannot read tar archive: {e}", str(archive)) from None
    return warnings


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Read a topology from ``path`` (directory, tarball or dump file), detected by content."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or directory", str(p))
    if p.is_dir():
        return from_sysfs(p)
    try:
        if p.stat().st_size > MAX_TOPOLOGY_FILE and not tarfile.is_tarfile(p):
            raise InputError(
                f"file is {p.stat().st_size >> 20} MiB, too large for a topology dump; {EXPECTED}", str(p)
            )
        if tarfile.is_tarfile(p):
            return _load_tarball(p)
        data = p.read_bytes()
    except PermissionError:
        raise InputError("permission denied", str(p)) from None
    except IsADirectoryError:
        return from_sysfs(p)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", str(p)) from None
    return parse_topology_bytes(data, str(p))


def parse_topology_bytes(data: bytes, path: str | None = None) -> Topology:
    """Parse a topology dump already in memory, detecting its format from its content."""
    if not data.strip():
        raise InputError(f"empty file; {EXPECTED}", path)
    found = _parser_for(data[:4096])
    if found is None:
        raise InputError(f"unrecognised topology format; {EXPECTED}", path)
    parse, _label = found
    try:
        return parse(data, path)
    except InputError as e:
        raise (e.with_path(path) if path else e) from None


@contextlib.contextmanager
def extracted_sysfs(archive: Path) -> Iterator[tuple[Path, list[str]]]:
    """Extract a sysfs snapshot tarball safely into a temporary directory; yields (sysfs root,
    extraction warnings) and removes the directory afterwards."""
    from clusterdoctor.observe.node.sysfs import find_sysfs_root

    tmp = Path(tempfile.mkdtemp(prefix="clusterdoctor-sysfs-"))
    try:
        warnings = safe_extract(archive, tmp)
        root = find_sysfs_root(tmp)
        if root is None:
            raise InputError(
                "tar archive holds no sys/devices/system tree (not a sysfs snapshot)", str(archive)
            )
        yield root, warnings
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_tarball(p: Path) -> Topology:
    from clusterdoctor.observe.node.sysfs import collect_sysfs_topology

    with extracted_sysfs(p) as (root, warnings):
        topo = collect_sysfs_topology(root)
    topo.source = str(p)
    topo.source_kind = "sysfs-tarball"
    topo.warnings.extend(warnings)
    return topo


def load_any(from_file: str | None, sysfs_root: str | None) -> Topology:
    """The topology the ``--from FILE`` / ``--sysfs-root DIR`` options select (default: this machine)."""
    if from_file and sysfs_root:
        from clusterdoctor.errors import UsageError

        raise UsageError("give either --from FILE or --sysfs-root DIR, not both")
    if from_file:
        return load_topology(from_file)
    if sysfs_root:
        return from_sysfs(sysfs_root)
    return from_sysfs("/")
