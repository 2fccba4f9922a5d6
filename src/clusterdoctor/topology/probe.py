"""GPU placement probe: pinned host<->device copy bandwidth and small-copy latency per GPU, with the
host buffer placed on each NUMA node in turn (the gearshifft / nvbandwidth style check of
reference/numa.md section 5), so a placement warning carries a measured cost.

Needs torch with CUDA; without it the probe says it cannot run (and the CLI exits 0).
"""

from __future__ import annotations

import datetime as _dt
import platform
import time
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.topology.model import Topology


def cannot_run(reason: str) -> dict[str, Any]:
    return {"schema": "clusterdoctor.numa-probe/1", "ran": False, "reason": reason, "gpus": []}


def run_probe(
    topo: Topology, *, size_bytes: int = 256 << 20, repeats: int = 10, small_iters: int = 200
) -> dict[str, Any]:
    """Measure every visible CUDA GPU; returns a JSON-ready dict (``ran`` False with a reason otherwise)."""
    try:
        import torch
    except ImportError:
        return cannot_run("torch is not installed (pip install 'clusterdoctor[training]'); nothing measured")
    if not torch.cuda.is_available():
        return cannot_run("no CUDA GPU is available to torch on this machine; nothing measured")
    from clusterdoctor.topology.cpu import read_cpuinfo

    nodes = [n.id for n in topo.nodes if n.memory_bytes is None or n.memory_bytes > 0] or [None]
    cpu = topo.cpu or read_cpuinfo("/")
    result: dict[str, Any] = {
        "schema": "clusterdoctor.numa-probe/1",
        "ran": True,
        "host": platform.node(),
        "cpu_model": cpu.model_name if cpu else None,
        "cpu": cpu.as_dict() if cpu else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "size_bytes": size_bytes,
        "repeats": repeats,
        "gpus": [],
        "warnings": [],
    }
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        pci = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        dev = next((g for g in topo.gpus if g.pci and g.pci.lower() == pci), None)
        entry: dict[str, Any] = {
            "name": f"GPU{i}",
            "model": props.name,
            "pci": pci,
            "numa_node": dev.numa_node if dev else None,
            "per_node": {},
        }
        device = torch.device("cuda", i)
        gpu_buf = torch.empty(size_bytes, dtype=torch.uint8, device=device)
        buffers = node_buffers(torch, nodes, size_bytes, result["warnings"])
        try:
            for b in buffers:
                _register(torch, b.tensor)
                try:
                    stats = _measure(torch, b.tensor, gpu_buf, device, repeats, small_iters)
                finally:
                    _unregister(torch, b.tensor)
                stats["placed"] = b.placed
                stats["page_nodes"] = b.page_nodes
                stats["address"] = hex(b.tensor.data_ptr())
                entry["per_node"][str(b.node)] = stats
        finally:
            del buffers
        local = entry["per_node"].get(str(entry["numa_node"])) if entry["numa_node"] is not None else None
        others = [v for k, v in entry["per_node"].items() if k != str(entry["numa_node"])]
        if local:
            entry["local_h2d_gbps"] = local["h2d_gbps"]
            entry["local_d2h_gbps"] = local["d2h_gbps"]
            entry["local_latency_us"] = local["small_copy_latency_us"]
        if local and others:
            worst = min(o["h2d_gbps"] for o in others)
            entry["remote_local_ratio"] = worst / local["h2d_gbps"] if local["h2d_gbps"] else None
            slowest = max(o["small_copy_latency_us"] for o in others)
            entry["remote_latency_us"] = slowest
            if local["small_copy_latency_us"]:
                entry["remote_local_latency_ratio"] = slowest / local["small_copy_latency_us"]
        result["gpus"].append(entry)
        del gpu_buf
        torch.cuda.empty_cache()
    return result


@dataclass
class HostBuffer:
    """A host buffer meant for one NUMA node, and where the kernel says its pages are."""

    node: int | None
    tensor: Any
    placed: bool  # the memory policy was applied while its pages were first touched
    page_nodes: list[int] = field(default_factory=list)  # sampled pages' nodes (move_pages query)


def node_buffers(
    torch: Any, nodes: list[int | None], size_bytes: int, warnings: list[str]
) -> list[HostBuffer]:
    """One pageable host buffer per node, all alive at once (so no allocator can hand one node's pages
    to the next), each first touched under ``MPOL_BIND`` to its node, then checked with ``move_pages``.

    Pinned memory from torch (``pin_memory()``) comes from its caching host allocator, which hands a
    freed block back to the next request of that size: every "remote" buffer would then be the first
    node's. Here the pages are placed by first touch and pinned afterwards in place
    (``cudaHostRegister``, :func:`_register`), which keeps them where they are."""
    from clusterdoctor.topology.bind import MPOL_BIND, MPOL_DEFAULT, page_nodes, set_mempolicy

    out: list[HostBuffer] = []
    for node in nodes:
        placed = False
        if node is not None:
            try:
                set_mempolicy(MPOL_BIND, [node])
                placed = True
            except OSError as e:
                warnings.append(f"cannot place host buffer on node {node}: {e.strerror}")
        try:
            t = torch.empty(size_bytes, dtype=torch.uint8)
            t.fill_(1)  # first touch: the pages are allocated now, under the policy
        finally:
            if placed:
                set_mempolicy(MPOL_DEFAULT, [])
        try:
            where = page_nodes(t.data_ptr(), size_bytes)
        except OSError as e:
            where = []
            warnings.append(f"cannot check where node {node}'s buffer lies: {e.strerror}")
        if node is not None and where and any(w != node for w in where):
            warnings.append(
                f"host buffer for node {node} lies on node(s) {sorted(set(where))}: not measured as local"
            )
        out.append(HostBuffer(node, t, placed, where))
    return out


def _register(torch: Any, t: Any) -> None:
    """Pin a host tensor in place (``cudaHostRegister``: its pages stay on their node)."""
    rc = torch.cuda.cudart().cudaHostRegister(t.data_ptr(), t.numel() * t.element_size(), 0)
    if int(rc) != 0:
        raise RuntimeError(f"cudaHostRegister failed ({rc})")


def _unregister(torch: Any, t: Any) -> None:
    torch.cuda.cudart().cudaHostUnregister(t.data_ptr())


def _measure(
    torch: Any, host: Any, gpu_buf: Any, device: Any, repeats: int, small_iters: int
) -> dict[str, float]:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = host.numel()
    with torch.cuda.device(device):
        gpu_buf.copy_(host, non_blocking=True)  # warm-up
        torch.cuda.synchronize()
        start.record()
        for _ in range(repeats):
            gpu_buf.copy_(host, non_blocking=True)
        end.record()
        torch.cuda.synchronize()
        h2d = n * repeats / (start.elapsed_time(end) / 1e3) / 1e9
        start.record()
        for _ in range(repeats):
            host.copy_(gpu_buf, non_blocking=True)
        end.record()
        torch.cuda.synchronize()
        d2h = n * repeats / (start.elapsed_time(end) / 1e3) / 1e9
        small_h, small_d = host[:4], gpu_buf[:4]
        for _ in range(20):
            small_d.copy_(small_h, non_blocking=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(small_iters):
            small_d.copy_(small_h, non_blocking=True)
            torch.cuda.synchronize()
        lat = (time.perf_counter() - t0) / small_iters * 1e6
    return {"h2d_gbps": round(h2d, 3), "d2h_gbps": round(d2h, 3), "small_copy_latency_us": round(lat, 3)}


def format_probe(result: dict[str, Any]) -> str:
    if not result.get("ran"):
        return f"numa probe: cannot run — {result.get('reason')}"
    lines = [
        f"numa probe on {result.get('host')} ({result.get('cpu_model')}), {result['size_bytes'] >> 20} MiB copies"
    ]
    for g in result["gpus"]:
        lines.append(f"{g['name']} {g['model']} pci {g['pci']} node {g['numa_node']}")
        for node, s in g["per_node"].items():
            lines.append(
                f"  host buffer on node {node}: H2D {s['h2d_gbps']:.1f} GB/s, D2H {s['d2h_gbps']:.1f} GB/s, "
                f"small copy {s['small_copy_latency_us']:.2f} µs"
            )
        if g.get("remote_local_ratio") is not None:
            lines.append(f"  remote/local H2D ratio {g['remote_local_ratio']:.2f}")
        if g.get("remote_local_latency_ratio") is not None:
            lines.append(f"  remote/local small-copy latency ratio {g['remote_local_latency_ratio']:.2f}")
    return "\n".join(lines)


def sniff_probe(head: bytes, name: str = "") -> bool:
    """A saved ``clusterdoctor numa probe --json`` result."""
    return b'"clusterdoctor.numa-probe/1"' in head[:4096]


def load_probe(path: Any) -> dict[str, Any]:
    """Loader hook for ``diagnose FILE``: ``{"probe": result}`` (only results that ran count)."""
    from pathlib import Path

    from clusterdoctor.errors import InputError
    from clusterdoctor.observe.limits import load_json, read_input

    p = Path(path)
    try:
        doc = load_json(read_input(p), str(p), "probe result JSON")
    except InputError as e:
        raise InputError(f"not a readable probe result: {e.reason}", str(p)) from None
    if not isinstance(doc, dict) or doc.get("schema") != "clusterdoctor.numa-probe/1":
        raise InputError("not a clusterdoctor numa probe result", str(p))
    if not doc.get("ran"):
        return {"warnings": [f"{p}: the probe did not run ({doc.get('reason', 'no reason given')})"]}
    if not isinstance(doc.get("gpus"), list):
        raise InputError("probe result without a gpus list", str(p))
    return {"probe": doc}
