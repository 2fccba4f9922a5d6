"""Build a :class:`Topology` from any source: a sysfs root, a sysfs tarball or a dump file.

Files are detected by content, not by name: hwloc XML, NCCL topology XML, ``nvidia-smi topo -m``
text and ``numactl --hardware`` text; directories and tar archives are read as sysfs trees (the
layout ``hwloc-gather-topology`` writes).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.topology.model import Topology

MAX_TOPOLOGY_FILE = 64 << 20  # a 4-socket hwloc XML is ~350 KB; anything this big is not a topology
MAX_TAR_MEMBER = 16 << 20

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

    return _checked(collect_sysfs_topology(root))


def _checked(topo: Topology) -> Topology:
    """The topology with the warnings of its distance matrix (an impossible SLIT) added once."""
    for w in topo.distance_warnings():
        if w not in topo.warnings:
            topo.warnings.append(w)
    return topo


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
    """Extract a sysfs snapshot tarball into ``dest`` within the archive budgets
    (:mod:`clusterdoctor.observe.archive`): members that would escape it or are not regular files,
    directories or links inside it are left out; returns the warnings."""
    from clusterdoctor.observe.archive import extract

    _, warnings = extract(archive, dest, what="sysfs tarball", skip_over=MAX_TAR_MEMBER, strict=False)
    return warnings


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Read a topology from ``path`` (directory, tarball or dump file), detected by content."""
    from clusterdoctor.observe.limits import check_regular, is_tar, read_input

    p = Path(path)
    if p.is_dir():
        return from_sysfs(p)
    check_regular(p)  # missing, a device or a FIFO: refused before reading
    if is_tar(p):
        return _load_tarball(p)
    from clusterdoctor.observe.limits import inflated_head, read_head, sniff_compression

    if sniff_compression(read_head(p, 8)):  # a compressed dump (topo.xml.gz) or a cut-off tarball
        _, truncated = inflated_head(p, 4096)
        if truncated:
            raise InputError(f"{truncated}; not a readable topology dump or sysfs tarball", str(p))
        return parse_topology_bytes(read_input(p, MAX_TOPOLOGY_FILE, inflate=True), str(p))
    size = p.stat().st_size
    if size > MAX_TOPOLOGY_FILE:
        raise InputError(f"file is {size >> 20} MiB, too large for a topology dump; {EXPECTED}", str(p))
    return parse_topology_bytes(read_input(p), str(p))


def parse_topology_bytes(data: bytes, path: str | None = None) -> Topology:
    """Parse a topology dump already in memory, detecting its format from its content."""
    if not data.strip():
        raise InputError(f"empty file; {EXPECTED}", path)
    found = _parser_for(data[:4096])
    if found is None:
        raise InputError(f"unrecognised topology format; {EXPECTED}", path)
    parse, _label = found
    try:
        return _checked(parse(data, path))
    except InputError as e:
        raise (e.with_path(path) if path else e) from None


@contextlib.contextmanager
def extracted_sysfs(archive: Path) -> Iterator[tuple[Path, list[str]]]:
    """Extract a sysfs snapshot tarball safely into a private temporary directory; yields (sysfs root,
    extraction warnings) and removes the directory afterwards (or the next run does, after a kill)."""
    from clusterdoctor.observe.archive import private_tempdir
    from clusterdoctor.observe.node.sysfs import find_sysfs_root

    with private_tempdir("sysfs") as tmp:
        warnings = safe_extract(archive, tmp)
        root = find_sysfs_root(tmp)
        if root is None:
            cut = next((w for w in warnings if "ends early" in w or "damaged" in w), None)
            raise InputError(
                "tar archive holds no sys/devices/system tree (not a sysfs snapshot)"
                + (f"; {cut.split(': ', 1)[-1]}" if cut else ""),
                str(archive),
            )
        yield root, warnings


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
