"""PCIe traffic per GPU, joined to the topology: which GPUs share a switch or host bridge, and how full it is.

Rates come from dcgm-exporter's profiling fields ``DCGM_FI_PROF_PCIE_TX_BYTES`` / ``..._RX_BYTES``
(bytes per second, "including both protocol headers and data payloads", as their HELP text says), the
latest value of each GPU's series in the metrics window (a dump, two scrapes, or Prometheus). A GPU is
named by its host (``Hostname``), index (``gpu``) and PCI bus id (``pci_bus_id``).

Shared paths come from the topology: GPUs (and NICs) whose ``pci_chain`` has a common bridge below the
host bridge sit under one PCIe switch; GPUs whose only common ancestor is the host bridge share the
root port's host bridge. From ``nvidia-smi topo -m`` (no chain), ``PIX``/``PXB`` between two GPUs means
one switch and ``PHB`` one host bridge.

A path's capacity is the raw rate of the members' own link (PCI-SIG: 8/16/32/64 GT/s per lane for
Gen3/4/5/6, 128b/130b encoding from Gen3, 1b/1b FLIT from Gen6 — ``gen_gbps``), as known from
``nvidia-smi -q``, lspci or DCGM's link fields; a switch uplink is assumed as wide and fast as the
widest member link (the usual x16 uplink of a PCIe switch on GPU servers), and the finding says so.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.topology.gpu import gen_speed_gts

__all__ = ["GpuRate", "SharedPath", "gen_gbps", "gpu_rates", "shared_paths"]

TX, RX = "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"


def gen_gbps(gen: int | None, width: int | None) -> float | None:
    """Raw per-direction bandwidth of a PCIe link in GB/s (decimal): GT/s x lanes x encoding / 8."""
    gts = gen_speed_gts(gen)
    if gts is None or not width:
        return None
    encoding = 0.8 if gen is not None and gen <= 2 else (128 / 130 if gen is not None and gen <= 5 else 1.0)
    return gts * width * encoding / 8.0


def _bus(v: str | None) -> str | None:
    """``00000000:3B:00.0`` (DCGM, nvidia-smi) -> ``0000:3b:00.0`` (sysfs)."""
    if not v:
        return None
    v = v.strip().lower()
    if v.count(":") == 2 and len(v.split(":", 1)[0]) > 4:
        v = v.split(":", 1)[0][-4:] + ":" + v.split(":", 1)[1]
    return v


@dataclass
class GpuRate:
    """The latest PCIe TX/RX rate of one GPU (bytes per second)."""

    host: str
    index: int | None
    bus_id: str | None
    tx: float | None = None
    rx: float | None = None
    time: float | None = None

    def label(self) -> str:
        return f"GPU{self.index}" if self.index is not None else (self.bus_id or "GPU?")


def gpu_rates(window: Any) -> list[GpuRate]:
    """One :class:`GpuRate` per GPU that has either series; [] when the window has neither."""
    if window is None or not hasattr(window, "latest"):
        return []
    out: dict[tuple[str, str], GpuRate] = {}
    for name, attr in ((TX, "tx"), (RX, "rx")):
        if not window.has(name):
            continue
        for labels, value, t in window.latest(name):
            host = labels.get("Hostname") or labels.get("instance") or ""
            idx = labels.get("gpu")
            bus = _bus(labels.get("pci_bus_id"))
            key = (host, bus or idx or "")
            r = out.get(key)
            if r is None:
                r = out[key] = GpuRate(host, int(idx) if idx and idx.isdigit() else None, bus)
            setattr(r, attr, float(value))
            r.time = t if r.time is None else max(r.time, t)
    return sorted(out.values(), key=lambda r: (r.host, r.index if r.index is not None else 1 << 30))


@dataclass
class SharedPath:
    """Devices behind one PCIe switch or host bridge."""

    kind: str  # "switch" | "host bridge"
    name: str  # the bridge's PCI address, or "GPU0+GPU1" when the topology states only path classes
    gpus: list[str] = field(default_factory=list)  # GPU names as the topology has them (GPU0, ...)
    nics: list[str] = field(default_factory=list)
    source: str = ""


def shared_paths(topo: Any) -> list[SharedPath]:
    """The switches and host bridges that two or more GPUs share, largest first."""
    if topo is None:
        return []
    gpus = list(getattr(topo, "gpus", []) or [])
    nics = list(getattr(topo, "nics", []) or [])
    out: list[SharedPath] = []
    chained = [d for d in gpus + nics if d.pci_chain and len(d.pci_chain) >= 2]
    if len([d for d in chained if d.kind == "gpu"]) >= 2:
        groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
        for d in chained:
            host_bridge = d.pci_chain[0]
            below = d.pci_chain[1:-1]  # bridges between the root and the device
            # the top-most switch port under the root port: the switch the device hangs from
            if len(below) >= 2:
                groups[("switch", below[1])].append(d)
            groups[("host bridge", host_bridge)].append(d)
        for (kind, name), ds in groups.items():
            g = [d.name for d in ds if d.kind == "gpu"]
            if len(g) >= 2:
                out.append(SharedPath(kind, name, g, [d.name for d in ds if d.kind == "nic"], topo.source))
    else:
        # path classes only (nvidia-smi topo -m): two devices PIX/PXB apart sit under one switch, PHB
        # under one host bridge. Between GPUs NVLink (NV#) hides the PCIe relation, so NICs join the
        # graph: GPU0 and GPU1 both PXB to mlx5_0 are behind the same switch.
        gnames = {g.name for g in gpus}
        nnames = {n.name for n in nics}
        for kind, classes in (("switch", ("PIX", "PXB")), ("host bridge", ("PIX", "PXB", "PHB"))):
            adj: dict[str, set[str]] = defaultdict(set)
            for p in getattr(topo, "paths", []):
                if p.kind.upper() in classes and {p.a, p.b} <= gnames | nnames:
                    adj[p.a].add(p.b)
                    adj[p.b].add(p.a)
            seen: set[str] = set()
            for start in sorted(adj):  # connected groups: the devices behind one switch / host bridge
                if start in seen:
                    continue
                comp: set[str] = set()
                stack = [start]
                while stack:
                    n = stack.pop()
                    if n not in comp:
                        comp.add(n)
                        stack.extend(adj[n] - comp)
                seen |= comp
                g = sorted(comp & gnames)
                if len(g) >= 2:
                    out.append(SharedPath(kind, "+".join(g), g, sorted(comp & nnames), topo.source))
    switch_sets = {frozenset(p.gpus) for p in out if p.kind == "switch"}
    out = [p for p in out if p.kind == "switch" or frozenset(p.gpus) not in switch_sets]  # no echo
    out.sort(key=lambda s: (-len(s.gpus), s.kind != "switch", s.name))
    return out
