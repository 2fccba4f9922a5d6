"""``clusterdoctor numa topology`` as text: nodes, distances, devices and the GPU×NIC path matrix.

The matrix reads like ``nvidia-smi topo -m``: one row per GPU, one column per NIC (``NIC0`` …, named
in a NIC legend as newer drivers do), the path class in each cell and a legend of the classes that
appear. Matrices wider than the terminal are split into column blocks that fit.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterdoctor.topology.cpuset import format_cpulist
from clusterdoctor.topology.model import Topology

# nvidia-smi topo -m legend (reference/numa.md section 4), shortened to fit 80 columns.
LEGEND = {
    "X": "self",
    "SYS": "PCIe and the SMP link between NUMA nodes (QPI/UPI/xGMI)",
    "SOC": "old drivers' name for SYS",
    "NODE": "PCIe and the link between PCIe host bridges within a NUMA node",
    "PHB": "PCIe and a PCIe host bridge (typically the CPU)",
    "PXB": "several PCIe bridges, without the PCIe host bridge",
    "PIX": "at most one PCIe bridge",
    "NV#": "a bonded set of # NVLinks",
}
DERIVED_MARK = "*"
UNKNOWN_CELL = "-"


def matrix_lines(
    rows: Sequence[str], cols: Sequence[str], cell: dict[tuple[str, str], str], width: int, sep: int = 2
) -> list[str]:
    """A labelled matrix, right-aligned cells ``sep`` apart, split into column blocks that each fit
    ``width`` (a block always holds at least one column)."""
    if not rows or not cols:
        return []
    label_w = max(len(r) for r in rows)
    col_w = {c: max(len(c), *(len(cell.get((r, c), UNKNOWN_CELL)) for r in rows)) for c in cols}
    blocks: list[list[str]] = [[]]
    used = label_w
    for c in cols:
        need = sep + col_w[c]
        if blocks[-1] and used + need > width:
            blocks.append([])
            used = label_w
        blocks[-1].append(c)
        used += need
    lines: list[str] = []
    for i, block in enumerate(blocks):
        if i:
            lines.append("")
        pad = " " * sep
        lines.append(" " * label_w + "".join(f"{pad}{c:>{col_w[c]}}" for c in block))
        for r in rows:
            lines.append(
                f"{r:<{label_w}}"
                + "".join(f"{pad}{cell.get((r, c), UNKNOWN_CELL):>{col_w[c]}}" for c in block)
            )
    return lines


def path_matrix_lines(topo: Topology, width: int = 80) -> list[str]:
    """The GPU×NIC path matrix with its NIC legend and path-class legend (empty without GPUs or NICs)."""
    from clusterdoctor.escape import shown

    if not topo.gpus or not topo.nics:
        return []
    nic_cols = {n.name: f"NIC{i}" for i, n in enumerate(topo.nics)}
    cell: dict[tuple[str, str], str] = {}
    seen: set[str] = set()
    derived = unknown = False
    for g in topo.gpus:
        for n in topo.nics:
            p = topo.path(g.name, n.name)
            if p is None:
                unknown = True
                continue
            kind = p.kind.upper()
            seen.add("NV#" if kind.startswith("NV") else kind)
            mark = DERIVED_MARK if p.source == "derived" else ""
            derived = derived or bool(mark)
            cell[(g.name, nic_cols[n.name])] = kind + mark
    lines = ["GPU to NIC paths (as nvidia-smi topo -m):"]
    lines += [
        "  " + ln if ln else ""
        for ln in matrix_lines([g.name for g in topo.gpus], list(nic_cols.values()), cell, width - 2)
    ]
    lines.append("")
    lines.append("NIC legend:")
    for n in topo.nics:
        node = n.numa_node if n.numa_node is not None else "unknown"
        lines.append(f"  {nic_cols[n.name]}: {shown(n.name)} (NUMA node {node})")
    lines.append("")
    lines.append("Legend:")
    key_w = max((len(k) for k in seen), default=3)
    for k, text in LEGEND.items():
        if k in seen:
            lines.append(f"  {k:<{key_w}} = {text}")
    for k in sorted(seen - set(LEGEND)):
        lines.append(f"  {k:<{key_w}} = (named by the source)")
    if derived:
        lines.append(f"  {DERIVED_MARK:<{key_w}} = derived from the PCI tree (the source does not state it)")
    if unknown:
        lines.append(f"  {UNKNOWN_CELL:<{key_w}} = not known (the source does not say)")
    lines.append("NCCL uses GPUDirect RDMA by default only at PXB or closer.")
    return lines


def render_topology_text(topo: Topology, width: int = 80) -> str:
    """The whole ``numa topology`` text report (warnings are not included: they go to stderr)."""
    from clusterdoctor.escape import shown
    from clusterdoctor.report.text import wrap

    lines = wrap(  # names, host names and models come from the source: shown safely
        f"source: {shown(topo.source)} ({topo.source_kind})"
        + (f", host {shown(topo.hostname)}" if topo.hostname else ""),
        width,
        rest="  ",
    )
    lines += wrap(
        f"cpu: {shown(topo.cpu.describe())} (from {topo.cpu.source})"
        if topo.cpu
        else "cpu: not stated by the source",
        width,
        rest="  ",
    )
    if not topo.nodes:
        lines.append("NUMA nodes: none stated")
    for n in topo.nodes:
        mem = f"{n.memory_bytes / (1 << 30):.1f} GiB" if n.memory_bytes is not None else "memory unknown"
        lines += wrap(f"node {n.id}: cpus {format_cpulist(n.cpus) or '(none)'}; {mem}", width, rest="  ")
    if topo.distances:
        ids = [str(i) for i in topo.node_ids]
        cell = {(r, c): str(v) for r, row in zip(ids, topo.distances) for c, v in zip(ids, row)}
        lines.append("distances:")
        lines += ["  " + ln if ln else "" for ln in matrix_lines(ids, ids, cell, width - 2)]
    else:
        lines.append("distances: not stated by the source")
    smt = topo.smt_info()
    if smt:
        lines.append(
            f"cpus: {smt['logical_cpus']} logical, {smt['physical_cores']} cores, {smt['l3_groups']} L3 groups"
        )
    for kind, devs in (("GPU", topo.gpus), ("NIC", topo.nics)):
        for d in devs:
            node = d.numa_node if d.numa_node is not None else "unknown"
            via = f" (via {d.numa_source})" if d.numa_source not in ("source", "numa_node", "unknown") else ""
            lines += wrap(
                f"{kind} {shown(d.name)}: pci {shown(d.pci or 'unknown')}, NUMA node {node}{via}"
                + (f", {shown(d.model)}" if d.model else ""),
                width,
                rest="  ",
            )
    if not topo.gpus:
        lines.append("GPUs: none")
    matrix = path_matrix_lines(topo, width)
    if matrix:
        lines.append("")
        lines += matrix
    return "\n".join(lines)
