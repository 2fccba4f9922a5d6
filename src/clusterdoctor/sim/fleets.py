"""Node-list loaders for real fleets other than openb: Alibaba PAI 2020 machine spec, Alibaba spot-GPU
(2026) node list, Tiresias cluster specs. All return a :class:`~clusterdoctor.sim.cluster.Cluster`;
parsers raise only :class:`~clusterdoctor.errors.InputError`.
"""

from __future__ import annotations

from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.sim.cluster import Cluster, GpuNode
from clusterdoctor.sim.traces import _int, _read, _rows, _text

PAI_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
SPOT_COLUMNS = ("gpu_model", "gpu_capacity_num", "cpu_num", "node_name")
TIRESIAS_COLUMNS = ("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node")
UNKNOWN_MEMORY_MIB = 1 << 31  # the spot node list has no memory column: treat memory as unconstrained


def parse_pai_machine_spec(data: str | bytes, path: str = "<pai_machine_spec.csv>",
                           header: str = ",".join(PAI_COLUMNS)) -> Cluster:  # fmt: skip
    """Alibaba PAI (NSDI'22) ``pai_machine_spec.csv`` (no header row; columns from
    ``pai_machine_spec.header``: machine,gpu_type,cap_cpu (cores),cap_mem (GB),cap_gpu)."""
    text = _text(data, path)
    cols = [c.strip() for c in header.strip().split(",")]
    if tuple(cols) != PAI_COLUMNS:
        raise InputError(
            f"unexpected header {header.strip()[:80]!r} (expected {','.join(PAI_COLUMNS)})", path, 1
        )
    _, rows = _rows(",".join(cols) + "\n" + text, path, PAI_COLUMNS)
    nodes = []
    for line, r in rows:
        gpus = _int(r, "cap_gpu", path, line - 1)
        model = r["gpu_type"].strip()
        nodes.append(GpuNode(r["machine"].strip(), 1000 * _int(r, "cap_cpu", path, line - 1),
                             1024 * _int(r, "cap_mem", path, line - 1), gpus, model if gpus else ""))  # fmt: skip
    if not nodes:
        raise InputError("no machines", path)
    return Cluster(nodes, source=path)


def parse_spot_nodes(data: str | bytes, path: str = "<node_info_df.csv>") -> Cluster:
    """Alibaba spot-GPU trace (GFS, ASPLOS'26) ``node_info_df.csv``: gpu_model,gpu_capacity_num,cpu_num,
    node_name. Memory is not in the trace (set unconstrained, and noted)."""
    text = _text(data, path)
    _, rows = _rows(text, path, SPOT_COLUMNS)
    nodes = []
    for line, r in rows:
        gpus = _int(r, "gpu_capacity_num", path, line)
        nodes.append(GpuNode(f"spot-{r['node_name'].strip()}", 1000 * _int(r, "cpu_num", path, line),
                             UNKNOWN_MEMORY_MIB, gpus, r["gpu_model"].strip()))  # fmt: skip
    if not nodes:
        raise InputError("no nodes", path)
    return Cluster(nodes, source=path, notes=["node memory not in the trace: unconstrained"])


def parse_tiresias_spec(data: str | bytes, path: str = "<cluster_spec.csv>", model: str = "P100") -> Cluster:
    """Tiresias (NSDI'19) cluster spec: switches x nodes per switch x GPUs per node (GPU model not in
    the file; ``model`` names it)."""
    text = _text(data, path)
    _, rows = _rows(text, path, TIRESIAS_COLUMNS)
    if len(rows) != 1:
        raise InputError(f"expected one spec row, got {len(rows)}", path)
    line, r = rows[0]
    sw, per, g, cpu, mem = (_int(r, c, path, line) for c in TIRESIAS_COLUMNS)
    if sw * per > 100_000:
        raise InputError("implausible cluster size", path, line)
    nodes = [GpuNode(f"sw{s}-n{i}", cpu * 1000, mem * 1024, g, model) for s in range(sw) for i in range(per)]
    return Cluster(nodes, source=path, notes=[f"GPU model not in the spec: assumed {model}"])


def load_pai_machine_spec(path: str | Path, header_path: str | Path | None = None) -> Cluster:
    header = ",".join(PAI_COLUMNS)
    if header_path is not None:
        header = _text(_read(header_path), str(header_path))
    return parse_pai_machine_spec(_read(path), str(path), header)


def load_spot_nodes(path: str | Path) -> Cluster:
    return parse_spot_nodes(_read(path), str(path))


def load_tiresias_spec(path: str | Path, model: str = "P100") -> Cluster:
    return parse_tiresias_spec(_read(path), str(path), model)
