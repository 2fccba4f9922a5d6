"""``nvidia-smi topo -m`` text -> :class:`~clusterdoctor.topology.model.Topology`.

Both layouts are read:

- old drivers: NIC columns named after the HCA (``mlx5_0``), trailing ``CPU Affinity`` and
  ``NUMA Affinity`` columns;
- newer drivers: ``NIC0``.. columns, a ``NIC Legend:`` block (``  NIC0: mlx5_0``) and a ``GPU NUMA ID``
  column (``N/A`` unless GPU memory is itself a NUMA node).

Cells are tab-separated as printed, or tab-expanded to spaces (8-column stops) as most pasted copies
are; header cells may be wrapped in ANSI underline escapes. Cells never contain blanks (``" X "`` is
one token), so rows are split on whitespace; the header's multi-word titles are recognised by name.

What the text states: the path class between every pair of devices, each GPU's CPU affinity and NUMA
affinity. What it does not: a NIC's NUMA node. That is derived only from a GPU with a known node that
the NIC reaches by PIX/PXB/PHB/NODE (all of which stay inside one NUMA node); otherwise it is unknown.
"""

from __future__ import annotations

import re

from clusterdoctor.errors import InputError
from clusterdoctor.topology.cpuset import parse_cpulist
from clusterdoctor.topology.model import Device, NumaNode, PathInfo, Topology

SOURCE_KIND = "nvidia-smi-topo"

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
GPU_RE = re.compile(r"^GPU(\d+)$")
NIC_ALIAS_RE = re.compile(r"^NIC(\d+)$")
CELL_RE = re.compile(r"^(X|SYS|SOC|NODE|PHB|PXB|PIX|PSB|NV\d+|NVB|C2C)$")
LEGEND_ENTRY_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# Titles of the trailing per-GPU columns, as nvidia-smi prints them (older drivers: fewer of them).
TRAILING_TITLES = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
SAME_NODE_PATHS = frozenset({"PIX", "PXB", "PHB", "NODE"})
P2P_CELLS = frozenset({"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"})  # nvidia-smi topo -p2p, not -m
MAX_NUMA_ID = 1 << 16


def _isnum(s: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts "²", which ``int()`` then rejects."""
    return s.isascii() and s.isdigit()


def _cpulist(raw: str, path: str | None) -> tuple[int, ...]:
    """``parse_cpulist`` on ASCII text only (non-ASCII digits would pass its isdigit() and break int())."""
    if not raw.isascii():
        raise InputError(f"bad cpu list {raw[:30]!r}", path)
    return parse_cpulist(raw, path=path)


def _clean_lines(text: str) -> list[str]:
    text = ANSI_RE.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return [line.expandtabs(8) for line in text.split("\n")]


def _is_header(tokens: list[str]) -> bool:
    return (
        "GPU0" in tokens
        and "X" not in tokens
        and (tokens[0] != "GPU0" or "GPU1" in tokens or "CPU" in tokens)
    )


def sniff_nvidia_smi_topo(head: bytes) -> bool:
    """Whether ``head`` (a file's first KB) looks like ``nvidia-smi topo -m`` output."""
    text = head.decode("utf-8", errors="replace")
    lines = _clean_lines(text)
    for i, line in enumerate(lines[:40]):
        tokens = line.split()
        if tokens and _is_header(tokens):
            rest = "\n".join(lines[i + 1 : i + 4])
            row = re.search(r"^\s*GPU0\s+X\b(?P<after>[^\n]*)", rest, re.M)
            # `nvidia-smi topo -p2p` prints the same shape with peer-access cells (OK, CNS, GNS, ...):
            # observe/comm/p2p_test.py reads it
            return row is not None and (row.group("after").split() or ["-"])[0] not in P2P_CELLS
    return False


def _split_header(tokens: list[str], path: str | None, lineno: int) -> tuple[list[str], list[str]]:
    """Device column names and the trailing titles (``CPU Affinity``, ...), in order."""
    devices: list[str] = []
    i = 0
    while i < len(tokens):
        for title in TRAILING_TITLES:
            words = title.split()
            if tokens[i : i + len(words)] == words:
                break
        else:
            devices.append(tokens[i])
            i += 1
            continue
        break
    titles: list[str] = []
    while i < len(tokens):
        for title in TRAILING_TITLES:
            words = title.split()
            if tokens[i : i + len(words)] == words:
                titles.append(title)
                i += len(words)
                break
        else:
            raise InputError(
                f"unexpected header cell {tokens[i][:30]!r} after the device columns", path, lineno
            )
    if len(set(devices)) != len(devices):
        raise InputError("a device appears twice in the header", path, lineno)
    return devices, titles


def _numa_value(raw: str | None, what: str, path: str | None, lineno: int) -> tuple[int | None, str | None]:
    """(node, note): a single node, or None with a note for N/A / ranges."""
    if raw is None or raw.upper() in ("N/A", "NA", "-"):
        return None, None
    if _isnum(raw) and len(raw) < 8:
        v = int(raw)
        if v > MAX_NUMA_ID:
            raise InputError(f"{what} {raw!r} out of range", path, lineno)
        return v, None
    try:
        _cpulist(raw, path)
    except InputError:
        raise InputError(f"bad {what} {raw[:30]!r}", path, lineno) from None
    return None, f"{what} {raw} spans several nodes"


def parse_nvidia_smi_topo(text: str | bytes, path: str | None = None) -> Topology:
    """Parse ``nvidia-smi topo -m`` output into a :class:`Topology` (paths with ``source="source"``).

    Raises :class:`InputError` when no matrix header is found, a row has the wrong number of cells,
    a cell is not a path class, or the diagonal is not ``X``.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = _clean_lines(text)
    header_at = None
    for i, line in enumerate(lines):
        tokens = line.split()
        if tokens and _is_header(tokens):
            header_at = i
            break
    if header_at is None:
        raise InputError("no `nvidia-smi topo -m` matrix header (a line naming GPU0 ...) found", path)
    columns, titles = _split_header(lines[header_at].split(), path, header_at + 1)
    ncol = len(columns)
    rows: dict[str, tuple[list[str], list[str], int]] = {}
    legend: dict[str, str] = {}
    in_matrix = True
    for i in range(header_at + 1, len(lines)):
        line = lines[i]
        tokens = line.split()
        m = LEGEND_ENTRY_RE.match(line)
        if m:
            legend[m.group(1)] = m.group(2)
            continue
        if not tokens:
            if rows:
                in_matrix = False
            continue
        if not in_matrix or tokens[0] not in columns:
            if rows:
                in_matrix = False
            continue
        name = tokens[0]
        if name in rows:
            raise InputError(f"row {name} appears twice", path, i + 1)
        cells, extra = tokens[1 : 1 + ncol], tokens[1 + ncol :]
        if len(cells) < ncol:
            raise InputError(
                f"row {name} has {len(cells)} cells, the header names {ncol} devices", path, i + 1
            )
        for c in cells:
            if not CELL_RE.match(c):
                raise InputError(
                    f"row {name}: {c[:20]!r} is not a path class (X, NV#, PIX, PXB, ...)", path, i + 1
                )
        if cells[columns.index(name)] != "X":
            raise InputError(
                f"row {name}: the diagonal cell is {cells[columns.index(name)]!r}, not X", path, i + 1
            )
        if len(extra) > len(titles):
            raise InputError(
                f"row {name} has {len(extra)} cells after the matrix, expected at most {len(titles)}",
                path,
                i + 1,
            )
        rows[name] = (cells, extra, i + 1)
    if not rows:
        raise InputError("matrix header without any rows (truncated output)", path, header_at + 1)
    missing = [c for c in columns if c not in rows]
    warnings: list[str] = []
    gpu_cols = [c for c in columns if GPU_RE.match(c)]
    if not gpu_cols:
        raise InputError("no GPU columns in the matrix", path, header_at + 1)
    if missing:
        # a paste cut inside the matrix: the rows present state every path to the devices whose rows
        # are missing (the matrix is symmetric); what only those rows state (CPU/NUMA affinity) is unknown
        if not any(c in rows for c in gpu_cols):
            raise InputError(f"matrix has no row for {', '.join(missing[:5])} (truncated output)", path)
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        warnings.append(
            f"matrix cut short: no row for {shown}; their paths are read from the other rows"
            + (", their CPU/NUMA affinity is unknown" if any(c in gpu_cols for c in missing) else "")
        )
    # NIC display names: the legend's HCA name for NIC#, else the column title.
    names = {c: (legend.get(c, c) if NIC_ALIAS_RE.match(c) else c) for c in columns}
    if len(set(names.values())) != len(names):
        names = {c: c for c in columns}
        warnings.append("NIC legend maps two columns to one name; column titles kept")

    gpus: list[Device] = []
    node_cpus: dict[int, set[int]] = {}
    for c in gpu_cols:
        cells, extra, lineno = rows.get(c, ([], [], 0))
        values = dict(zip(titles, extra))
        cpu_raw = values.get("CPU Affinity")
        local = None
        if cpu_raw is not None and cpu_raw.upper() not in ("N/A", "NA"):
            try:
                local = _cpulist(cpu_raw, path)
            except InputError:
                raise InputError(f"row {c}: bad CPU Affinity {cpu_raw[:30]!r}", path, lineno) from None
        node, note = _numa_value(values.get("NUMA Affinity"), "NUMA Affinity", path, lineno)
        if note:
            warnings.append(f"{c}: {note}; its NUMA node is unknown")
        attrs: dict[str, object] = {"index_basis": "nvidia-smi index"}
        if c not in rows:
            attrs["row_missing"] = True
        gpu_numa, _ = _numa_value(values.get("GPU NUMA ID"), "GPU NUMA ID", path, lineno)
        if gpu_numa is not None:
            attrs["gpu_numa_id"] = gpu_numa
        m = GPU_RE.match(c)
        assert m is not None
        gpus.append(
            Device(
                name=c,
                kind="gpu",
                numa_node=node,
                numa_source="source" if node is not None else "unknown",
                local_cpus=local,
                index=int(m.group(1)),
                attrs=attrs,
            )
        )
        if node is not None:
            node_cpus.setdefault(node, set()).update(local or ())
        if gpu_numa is not None:
            node_cpus.setdefault(gpu_numa, set())

    def cell(a: str, b: str) -> str | None:
        if a in rows:
            return rows[a][0][columns.index(b)]
        return rows[b][0][columns.index(a)] if b in rows else None

    paths: list[PathInfo] = []
    for i, a in enumerate(columns):
        for b in columns[i + 1 :]:
            x, y = cell(a, b), cell(b, a)
            if x is None or y is None:
                continue  # neither row is in the (cut) matrix
            if x != y:
                warnings.append(f"matrix not symmetric: {a}->{b} is {x}, {b}->{a} is {y}")
            if a in gpu_cols or b in gpu_cols:
                kind = "SYS" if x == "SOC" else x
                ga, gb = (a, b) if a in gpu_cols else (b, a)
                paths.append(PathInfo(names[ga], names[gb], kind, "source"))

    gpu_by_col = {g.name: g for g in gpus}
    nics: list[Device] = []
    for c in columns:
        if c in gpu_cols:
            continue
        near = {
            gpu_by_col[g].numa_node
            for g in gpu_cols
            if cell(g, c) in SAME_NODE_PATHS and gpu_by_col[g].numa_node is not None
        }
        node = near.pop() if len(near) == 1 else None
        if len(near) > 0:
            warnings.append(f"{names[c]}: close (PIX..NODE) to GPUs on different NUMA nodes; node unknown")
        # topo -m lists the RDMA devices (/sys/class/infiniband): mlx5_*, or NIC# mapped to them.
        nic_attrs: dict[str, object] = {"rdma": True}
        if names[c] != c:
            nic_attrs["column"] = c
        nics.append(
            Device(
                name=names[c],
                kind="nic",
                numa_node=node,
                numa_source="derived" if node is not None else "unknown",
                attrs=nic_attrs,
            )
        )
    nodes = [NumaNode(id=n, cpus=tuple(sorted(cpus))) for n, cpus in sorted(node_cpus.items())]
    if not nodes:
        warnings.append("no GPU states a single NUMA node (NUMA Affinity N/A): NUMA layout unknown")
    else:
        warnings.append(
            "nvidia-smi topo -m names only the NUMA nodes that hold GPUs; other nodes, memory sizes and "
            "distances are not in this file"
        )
    return Topology(
        source=path or "<input>",
        source_kind=SOURCE_KIND,
        nodes=nodes,
        distances=None,
        gpus=gpus,
        nics=nics,
        paths=paths,
        warnings=warnings,
    )
