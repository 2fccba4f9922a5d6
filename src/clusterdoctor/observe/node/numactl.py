"""``numactl --hardware`` text -> :class:`~clusterdoctor.topology.model.Topology`.

The format (numactl ``numactl.c``)::

    available: 2 nodes (0-1)
    node 0 cpus: 0 1 2 3
    node 0 size: 193129 MB
    node 0 free: 186031 MB
    ...
    node distances:
    node   0   1
      0:  10  32
      1:  32  10

A CPU-less node prints ``node N cpus:`` with nothing after it; a memory-less node ``size: 0 MB``.
Real output ends each distance cell with a blank; pasted copies often lose it. Sizes are MiB.
"""

from __future__ import annotations

import re

from clusterdoctor.errors import InputError
from clusterdoctor.topology.model import NumaNode, Topology

SOURCE_KIND = "numactl-hardware"

AVAILABLE_RE = re.compile(r"^available:\s*(\d+)\s+nodes?\s*\(([^)]*)\)\s*$")
NODE_LINE_RE = re.compile(r"^node\s+(\d+)\s+(cpus|size|free):\s*(.*?)\s*$")
SIZE_RE = re.compile(r"^(\d+)\s*(MB|KB|GB|kB)?$")
ROW_RE = re.compile(r"^\s*(\d+):((?:\s+\d+)*)\s*$")
MAX_NODE_ID = 1 << 16
MAX_CPU_ID = 1 << 20
UNIT = {"MB": 1 << 20, None: 1 << 20, "KB": 1 << 10, "kB": 1 << 10, "GB": 1 << 30}


def _isnum(s: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts "²", which ``int()`` then rejects."""
    return s.isascii() and s.isdigit()


def sniff_numactl_hardware(head: bytes) -> bool:
    """Whether ``head`` (a file's first KB) looks like ``numactl --hardware`` output."""
    text = head.decode("utf-8", errors="replace")
    for line in text.splitlines()[:10]:
        if AVAILABLE_RE.match(line.strip()):
            return True
    return bool(re.search(r"^node \d+ cpus:", text, re.M)) and "node distances:" in text


def _int(tok: str, what: str, limit: int, path: str | None, lineno: int) -> int:
    if not _isnum(tok) or len(tok) > 12 or int(tok) > limit:
        raise InputError(f"bad {what} {tok[:20]!r}", path, lineno)
    return int(tok)


def parse_numactl_hardware(text: str | bytes, path: str | None = None) -> Topology:
    """Parse ``numactl --hardware`` output into a :class:`Topology` (nodes, memory, distances).

    Raises :class:`InputError` for text without node lines ("No NUMA available on this system"
    included), a distance matrix that is not square or names other nodes, or malformed numbers.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = text.replace("\r\n", "\n").split("\n")
    warnings: list[str] = []
    declared: int | None = None
    cpus: dict[int, tuple[int, ...]] = {}
    size: dict[int, int] = {}
    free: dict[int, int] = {}
    order: list[int] = []
    header: list[int] | None = None
    rows: dict[int, list[int]] = {}
    in_matrix = False
    no_distance_info = False
    for i, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("No NUMA available"):
            raise InputError("numactl reports no NUMA support on this system (no node information)", path, i)
        m = AVAILABLE_RE.match(line)
        if m:
            declared = _int(m.group(1), "node count", MAX_NODE_ID, path, i)
            continue
        m = NODE_LINE_RE.match(line)
        if m:
            nid = _int(m.group(1), "node id", MAX_NODE_ID, path, i)
            if nid not in order:
                order.append(nid)
            key, value = m.group(2), m.group(3)
            if key == "cpus":
                if nid in cpus:
                    raise InputError(f"node {nid} cpus listed twice", path, i)
                cpus[nid] = tuple(sorted({_int(t, "cpu id", MAX_CPU_ID, path, i) for t in value.split()}))
            else:
                sm = SIZE_RE.match(value)
                if not sm:
                    raise InputError(f"node {nid} {key}: {value[:30]!r} is not a size", path, i)
                nbytes = _int(sm.group(1), f"node {nid} {key}", 1 << 40, path, i) * UNIT[sm.group(2)]
                (size if key == "size" else free)[nid] = nbytes
            continue
        if line.startswith("node distances:"):
            in_matrix = True
            continue
        if line.startswith("No distance information"):
            no_distance_info = True
            continue
        if in_matrix and line.startswith("node"):
            toks = line.split()[1:]
            header = [_int(t, "node id in the distance header", MAX_NODE_ID, path, i) for t in toks]
            continue
        m = ROW_RE.match(raw)
        if in_matrix and m:
            nid = _int(m.group(1), "node id", MAX_NODE_ID, path, i)
            if header is None:
                raise InputError("distance row before the `node  0  1 ...` header", path, i)
            vals = [_int(t, "distance", 1 << 16, path, i) for t in m.group(2).split()]
            if len(vals) != len(header):
                raise InputError(
                    f"distance row for node {nid} has {len(vals)} values, the header names {len(header)} nodes",
                    path,
                    i,
                )
            if nid in rows:
                raise InputError(f"distance row for node {nid} appears twice", path, i)
            rows[nid] = vals
            continue
        if len(warnings) < 10:
            warnings.append(f"line {i}: ignored {line[:60]!r}")

    if not order:
        raise InputError("no `node N cpus:` lines: not `numactl --hardware` output", path)
    nodes = [
        NumaNode(id=n, cpus=cpus.get(n, ()), memory_bytes=size.get(n), free_bytes=free.get(n))
        for n in sorted(order)
    ]
    missing_cpus = [n for n in order if n not in cpus]
    if missing_cpus:
        warnings.append(f"no `cpus:` line for node(s) {missing_cpus}: their CPUs are unknown")
    if declared is not None and declared != len(nodes):
        warnings.append(f"`available:` says {declared} nodes but {len(nodes)} are described")
    seen_cpus: dict[int, int] = {}
    for n in nodes:
        for c in n.cpus:
            if c in seen_cpus:
                raise InputError(f"cpu {c} is listed on node {seen_cpus[c]} and node {n.id}", path)
            seen_cpus[c] = n.id
    distances = None
    if header is not None:
        ids = [n.id for n in nodes]
        if sorted(header) != ids or len(set(header)) != len(header):
            raise InputError(f"distance header names nodes {header}, the node lines name {ids}", path)
        if sorted(rows) != ids:
            raise InputError(
                f"distance matrix has rows for nodes {sorted(rows)}, expected {ids} (truncated or inconsistent)",
                path,
            )
        pos = {nid: k for k, nid in enumerate(header)}
        distances = [[rows[a][pos[b]] for b in ids] for a in ids]
    elif not no_distance_info:
        warnings.append("no `node distances:` section (truncated output?): distances unknown")
    return Topology(
        source=path or "<input>",
        source_kind=SOURCE_KIND,
        nodes=nodes,
        distances=distances,
        warnings=warnings,
    )
