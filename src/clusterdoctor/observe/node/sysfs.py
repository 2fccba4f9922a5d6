"""Linux sysfs (and a little procfs) under a configurable root: the machine's topology.

Reads what ``hwloc`` reads on Linux, from ``ROOT/sys`` (``/`` live, or an extracted
``hwloc-gather-topology`` snapshot):

- NUMA nodes: ``sys/devices/system/node/node<N>/{cpulist,distance,meminfo}``;
- CPUs: ``sys/devices/system/cpu/cpu<N>/topology/{core_id,physical_package_id,thread_siblings_list}``
  and ``cache/index*/{level,shared_cpu_list}`` for L3 groups;
- PCI devices: ``sys/bus/pci/devices/<bdf>/{class,vendor,device,numa_node,local_cpulist}``; GPUs by
  class (03xx display, 12xx accelerator) and vendor, NICs by class 02xx plus ``sys/class/infiniband``
  (HCA names) and ``sys/class/net`` (netdev names), NVMe by class 0108.

A device's NUMA node comes from ``numa_node``; when that is -1 (firmware gave no proximity) it falls
back to ``local_cpulist`` — only when those CPUs lie within exactly one node. Otherwise the node is
``None`` ("unknown"), never node 0 (which is what torch's ``-1 -> 0`` mapping would guess).
"""

from __future__ import annotations

import os
import posixpath
import re
import socket
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.topology.cpu import read_cpuinfo
from clusterdoctor.topology.cpuset import parse_cpulist
from clusterdoctor.topology.model import CpuInfo, Device, NumaNode, PathInfo, Topology, classify_pci_path

BDF_RE = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
HOST_BRIDGE_RE = re.compile(r"^pci[0-9a-f]{4,}:[0-9a-f]{2}$")

GPU_VENDORS = {"0x10de": "NVIDIA", "0x1002": "AMD", "0x1da3": "Habana"}
NIC_VENDOR_NAMES = {"0x15b3": "Mellanox", "0x8086": "Intel", "0x14e4": "Broadcom", "0x1d0f": "Amazon"}


def _read(path: Path) -> str | None:
    """A sysfs attribute (at most 1 MiB; the largest, cpulist/cpumap of 8192 CPUs, are a few KiB), or
    None when missing, unreadable or not a regular file (a link to /dev/zero in a crafted tree)."""
    from clusterdoctor.observe.limits import read_bounded

    try:
        return read_bounded(path, 1 << 20).decode("utf-8", errors="replace").strip()
    except (OSError, InputError):
        return None


def _read_int(path: Path) -> int | None:
    s = _read(path)
    if s is None:
        return None
    try:
        return int(s, 0)
    except ValueError:
        return None


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _resolve_inside(root: Path, link: Path) -> str | None:
    """Resolve a sysfs symlink relative to ``root`` (never escaping it); return the path under root."""
    try:
        target = os.readlink(link)
    except OSError:
        return None
    rel_dir = posixpath.dirname(str(link.relative_to(root)))
    joined = posixpath.normpath(posixpath.join("/", rel_dir, target))
    return joined.lstrip("/")


def find_sysfs_root(path: Path) -> Path | None:
    """The directory under ``path`` that holds ``sys/devices/system`` (an hwloc snapshot has one level more)."""
    if (path / "sys" / "devices" / "system").is_dir():
        return path
    for child in _listdir(path):
        c = path / child
        if (c / "sys" / "devices" / "system").is_dir():
            return c
    return None


def _node_memory(node_dir: Path) -> tuple[int | None, int | None]:
    text = _read(node_dir / "meminfo")
    if not text:
        return None, None
    total = free = None
    for line in text.splitlines():
        parts = line.split()
        # "Node 0 MemTotal:       16747124 kB"
        if len(parts) >= 4 and parts[2] in ("MemTotal:", "MemFree:"):
            try:
                value = int(parts[3]) * (1024 if parts[-1].lower() == "kb" else 1)
            except ValueError:
                continue
            if parts[2] == "MemTotal:":
                total = value
            else:
                free = value
    return total, free


def _read_nodes(root: Path, warnings: list[str]) -> tuple[list[NumaNode], list[list[int]] | None]:
    base = root / "sys" / "devices" / "system" / "node"
    nodes: list[NumaNode] = []
    rows: dict[int, list[int]] = {}
    for name in _listdir(base):
        m = re.fullmatch(r"node(\d+)", name)
        if not m:
            continue
        nid = int(m.group(1))
        nd = base / name
        cpulist = _read(nd / "cpulist")
        try:
            cpus = parse_cpulist(cpulist or "", path=str(nd / "cpulist"))
        except InputError as e:
            warnings.append(e.one_line())
            cpus = ()
        total, free = _node_memory(nd)
        nodes.append(NumaNode(nid, cpus, total, free))
        dist = _read(nd / "distance")
        if dist:
            try:
                rows[nid] = [int(x) for x in dist.split()]
            except ValueError:
                warnings.append(f"{nd / 'distance'}: not a list of integers")
    nodes.sort(key=lambda n: n.id)
    distances = None
    if nodes and all(n.id in rows for n in nodes) and all(len(rows[n.id]) == len(nodes) for n in nodes):
        distances = [rows[n.id] for n in nodes]
    elif rows:
        warnings.append("NUMA distance rows missing or of the wrong length; distances left unknown")
    return nodes, distances


def _read_cpus(root: Path, nodes: list[NumaNode]) -> dict[int, CpuInfo]:
    base = root / "sys" / "devices" / "system" / "cpu"
    node_of = {c: n.id for n in nodes for c in n.cpus}
    cpus: dict[int, CpuInfo] = {}
    for name in _listdir(base):
        m = re.fullmatch(r"cpu(\d+)", name)
        if not m:
            continue
        cid = int(m.group(1))
        cd = base / name
        topo = cd / "topology"
        if not topo.is_dir():
            continue  # offline CPU
        try:
            siblings = parse_cpulist(_read(topo / "thread_siblings_list") or "")
        except InputError:
            siblings = ()
        l3: tuple[int, ...] = ()
        for idx in _listdir(cd / "cache"):
            if not idx.startswith("index"):
                continue
            if _read(cd / "cache" / idx / "level") == "3":
                try:
                    l3 = parse_cpulist(_read(cd / "cache" / idx / "shared_cpu_list") or "")
                except InputError:
                    l3 = ()
        cpus[cid] = CpuInfo(
            id=cid,
            node=node_of.get(cid),
            package=_read_int(topo / "physical_package_id"),
            core=_read_int(topo / "core_id"),
            siblings=siblings or (cid,),
            l3=l3,
        )
    return cpus


def device_node(
    numa_node: int | None, local_cpus: tuple[int, ...] | None, nodes: list[NumaNode]
) -> tuple[int | None, str]:
    """A device's NUMA node and how it was learnt: ``numa_node``, then ``local_cpulist``, else unknown."""
    known = {n.id for n in nodes}
    if numa_node is not None and numa_node >= 0 and (not known or numa_node in known):
        return numa_node, "numa_node"
    if local_cpus:
        owners = {n.id for n in nodes if n.cpus and set(local_cpus) <= set(n.cpus)}
        if len(owners) == 1:
            return owners.pop(), "local_cpulist"
    return None, "unknown"


def _classify(cls: str | None, vendor: str | None, driver: str | None = None) -> str | None:
    if not cls:
        return None
    try:
        code = int(cls, 16)
    except ValueError:
        return None
    base, sub = code >> 16, (code >> 8) & 0xFF
    if base in (0x03, 0x12) and vendor in GPU_VENDORS:
        # AMD VGA-class devices are often the BMC's display chip (ATI ES1000); Instinct/Radeon compute
        # GPUs are display-other/accelerator class or are driven by amdgpu.
        if vendor == "0x1002" and base == 0x03 and sub == 0x00 and driver != "amdgpu":
            return None
        return "gpu"
    if base == 0x02:
        return "nic"
    if base == 0x0C and sub == 0x06:  # InfiniBand controller (older class code)
        return "nic"
    if base == 0x01 and sub == 0x08:
        return "nvme"
    return None


def _links_to_devices(root: Path, class_dir: str) -> dict[str, list[str]]:
    """Map PCI address -> names under ``sys/class/<class_dir>`` (HCAs, netdevs)."""
    out: dict[str, list[str]] = {}
    base = root / "sys" / "class" / class_dir
    for name in _listdir(base):
        target = _resolve_inside(root, base / name)
        if not target:
            continue
        parts = target.split("/")
        bdfs = [p for p in parts if BDF_RE.match(p)]
        if bdfs:
            out.setdefault(bdfs[-1], []).append(name)
    return out


def _read_pci(root: Path, nodes: list[NumaNode], warnings: list[str]) -> list[Device]:
    base = root / "sys" / "bus" / "pci" / "devices"
    hcas = _links_to_devices(root, "infiniband")
    netdevs = _links_to_devices(root, "net")
    devices: list[Device] = []
    for bdf in _listdir(base):
        if not BDF_RE.match(bdf.lower()):
            continue
        d = base / bdf
        cls = _read(d / "class")
        vendor = (_read(d / "vendor") or "").lower() or None
        drv_link = _resolve_inside(root, d / "driver")
        kind = _classify(cls, vendor, drv_link.rsplit("/", 1)[-1] if drv_link else None)
        if bdf in hcas:
            kind = "nic"
        if kind is None:
            continue
        raw_node = _read_int(d / "numa_node")
        try:
            lc_text = _read(d / "local_cpulist")
            local = parse_cpulist(lc_text) if lc_text else None
        except InputError:
            local = None
        node, how = device_node(raw_node, local, nodes)
        if raw_node is not None and raw_node >= 0 and local and how == "numa_node":
            node_cpus = next((set(n.cpus) for n in nodes if n.id == raw_node), None)
            if node_cpus and not set(local) & node_cpus:
                warnings.append(
                    f"{bdf}: numa_node={raw_node} but local_cpulist is on other nodes (firmware inconsistency)"
                )
        target = _resolve_inside(root, d)
        chain: tuple[str, ...] = ()
        if target:
            parts = target.split("/")
            chain = tuple(p for p in parts if HOST_BRIDGE_RE.match(p) or BDF_RE.match(p))
        attrs: dict[str, object] = {"class": cls, "device_id": _read(d / "device")}
        if bdf in netdevs:
            attrs["netdevs"] = netdevs[bdf]
        if kind == "nic":
            attrs["rdma"] = bdf in hcas
        name = (hcas.get(bdf) or netdevs.get(bdf) or [bdf])[0]
        vname = GPU_VENDORS.get(vendor or "") if kind == "gpu" else NIC_VENDOR_NAMES.get(vendor or "")
        devices.append(
            Device(
                name=name,
                kind=kind,
                pci=bdf.lower(),
                numa_node=node,
                numa_source=how,
                local_cpus=local,
                vendor=vname or vendor,
                pci_chain=chain,
                attrs=attrs,
            )
        )
    return devices


def _cgroup_cpuset(root: Path, cgroup_text: str | None) -> tuple[int, ...] | None:
    """The effective cpuset of the cgroup named in a /proc/<pid>/cgroup text (v2, then v1)."""
    if not cgroup_text:
        return None
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, cg_path = parts
        if hid == "0" and controllers == "":
            base, fname = root / "sys/fs/cgroup", "cpuset.cpus.effective"
        elif "cpuset" in controllers.split(","):
            base, fname = root / "sys/fs/cgroup/cpuset", "cpuset.effective_cpus"
        else:
            continue
        rel = cg_path.strip("/")
        # walk up: a cgroup without the cpuset controller enabled inherits its parent's set
        while True:
            text = _read(base / rel / fname) if rel else _read(base / fname)
            if text:
                try:
                    return parse_cpulist(text)
                except InputError:
                    return None
            if not rel:
                break
            rel = rel.rpartition("/")[0]
    return None


def _allowed_cpus(root: Path, live: bool) -> tuple[int, ...] | None:
    """The CPUs this machine lets processes use: the cgroup cpuset (not this process's own affinity,
    which may be pinned narrower), for a dump only what it recorded."""
    cg = _cgroup_cpuset(root, _read(root / "proc/self/cgroup"))
    if cg:
        return cg
    if live:
        try:
            return tuple(sorted(os.sched_getaffinity(0)))
        except OSError:
            return None
    return None


def _nvidia_driver_info(root: Path, bdf: str) -> dict[str, str]:
    """``/proc/driver/nvidia/gpus/<bdf>/information``: Model, GPU UUID, Device Minor (when the driver is loaded)."""
    text = _read(root / "proc/driver/nvidia/gpus" / bdf / "information")
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def collect_sysfs_topology(root: str | os.PathLike[str] = "/") -> Topology:
    """Read the topology from a sysfs tree at ``root`` (``/`` for this machine).

    Raises InputError when ``root`` has no ``sys/devices/system`` at all. A tree from another machine
    is read confined to ``root`` (:func:`clusterdoctor.observe.confine.confined`): a link out of it
    (to ``/proc/self/environ``, say) is not read, and named in the warnings.
    """
    from clusterdoctor.observe.confine import confined

    given = Path(root)
    with confined("/" if given.resolve() == Path("/") else given) as escapes:
        topo = _collect(given)
    topo.warnings.extend(escapes)
    return topo


def _collect(given: Path) -> Topology:
    live = given.resolve() == Path("/")
    base = given if live else find_sysfs_root(given)
    if base is None or not (base / "sys" / "devices" / "system").is_dir():
        raise InputError("no sys/devices/system under this directory (not a sysfs root)", str(given))
    warnings: list[str] = []
    nodes, distances = _read_nodes(base, warnings)
    cpus = _read_cpus(base, nodes)
    if not nodes:
        warnings.append("no NUMA nodes in sys/devices/system/node (kernel without NUMA, or not exposed)")
    if not cpus and not any(n.cpus for n in nodes):
        warnings.append(
            "no CPU found under sys/devices/system/cpu or in the NUMA nodes' cpulists: the tree is "
            "incomplete (a truncated or partial snapshot?); CPU placement cannot be judged from it"
        )
    devices = _read_pci(base, nodes, warnings)
    gpus = sorted((d for d in devices if d.kind == "gpu"), key=lambda d: d.pci or "")
    for i, g in enumerate(gpus):
        info = _nvidia_driver_info(base, g.pci or "")
        if info.get("GPU UUID"):
            g.attrs["uuid"] = info["GPU UUID"]
        if info.get("Device Minor", "").isdigit():
            g.attrs["minor_number"] = int(info["Device Minor"])
        if info.get("Model"):
            g.model = info["Model"]
        g.index = i
        g.attrs["pci_name"] = g.name
        g.attrs["index_basis"] = "PCI bus order (nvidia-smi / CUDA_DEVICE_ORDER=PCI_BUS_ID)"
        g.name = f"GPU{i}"
    nics = [d for d in devices if d.kind == "nic"]
    others = [d for d in devices if d.kind not in ("gpu", "nic")]
    paths = []
    for g in gpus:
        for n in nics:
            kind = classify_pci_path(g.pci_chain, n.pci_chain, g.numa_node, n.numa_node)
            if kind:
                paths.append(PathInfo(g.name, n.name, kind, "derived"))
        for g2 in gpus:
            if g2.index is not None and g.index is not None and g2.index > g.index:
                kind = classify_pci_path(g.pci_chain, g2.pci_chain, g.numa_node, g2.numa_node)
                if kind:
                    paths.append(PathInfo(g.name, g2.name, kind, "derived"))
    hostname = (
        socket.gethostname() if live else (_read(base / "proc" / "sys" / "kernel" / "hostname") or None)
    )
    return Topology(
        source="this machine (/sys)" if live else str(given),
        source_kind="sysfs",
        nodes=nodes,
        distances=distances,
        cpus=cpus,
        gpus=gpus,
        nics=nics,
        other_devices=others,
        paths=paths,
        hostname=hostname,
        allowed_cpus=_allowed_cpus(base, live),
        warnings=warnings,
        cpu=read_cpuinfo(str(base)),  # proc/cpuinfo beside sys/ (live; hwloc-gather-topology trees)
    )
