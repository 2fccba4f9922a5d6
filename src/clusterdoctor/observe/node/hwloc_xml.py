"""hwloc XML exports (``lstopo --of xml``) -> :class:`~clusterdoctor.topology.model.Topology`.

Reads all three generations of the format:

- v1 (hwloc 1.x, or ``--export-xml-flags 1``): ``<topology>`` without a version, ``Socket``/``Cache``
  types, NUMANode objects are *parents* of the cores they serve, the distance matrix is a
  ``<distances nbobjs latency_base><latency value/>...`` element inside an object;
- v2 (``<topology version="2.0">``) and v3 (``version="3.0"``): NUMANode objects are *memory children* of
  the object they are local to, distances are ``<distances2 type="NUMANode" name="NUMALatency">`` with
  ``<indexes>`` and ``<u64values>``, heterogeneous matrices (NVLink bandwidth) are ``<distances2hetero>``.
  ``osdev_type`` is an enum in v2 and a bit mask in v3.

Objects keep their place in the tree: a PCI device's NUMA node is that of its nearest non-I/O ancestor
(hwloc's own rule, the one ``hwloc-calc os=mlx5_0 -I numa`` uses); ``<pci_locality>`` is the fallback
and a disagreement between the two is reported as a warning. One exception: when the device's bus lies
outside the bus range of the host bridge it sits under (impossible on real PCIe, seen in hwloc's
test-assembled ``32em64t-2n8c2t-pci-normalio.xml``), the bus ranges and ``<pci_locality>`` win. GPUs are PCI display/3D/accelerator
devices of NVIDIA/AMD/Habana or any PCI device carrying a CUDA/NVML/RSMI/OpenCL/Level-Zero OS device (one
GPU per PCI device); NICs are PCI devices with an OpenFabrics OS device (``mlx5_0``), a network OS device
or a network/InfiniBand class. Paths between GPUs and NICs are derived from the PCI bridge chains.

This module builds the topology; reading the export's pieces (the object tree, attributes, cpusets,
distances, what a device is) is :mod:`clusterdoctor.observe.node.hwloc_objects`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.hwloc_objects import (  # the export's pieces: moved, still importable from here
    BRIDGE_PCI_RE,
    BUSID_RE,
    GPU_OSDEV_RE,
    GPU_OSDEV_SUBTYPES,  # noqa: F401 (re-exported)
    GPU_VENDORS,
    HCA_OSDEV_RE,  # noqa: F401 (re-exported)
    IO_TYPES,
    MAX_WORDS,  # noqa: F401 (re-exported)
    NIC_VENDORS,
    PACKAGE_TYPES,
    PCI_TYPE_RE,  # noqa: F401 (re-exported)
    SOURCE_KIND,
    V2_OSDEV,  # noqa: F401 (re-exported)
    V3_OSDEV_NETWORK,  # noqa: F401 (re-exported)
    V3_OSDEV_OPENFABRICS,  # noqa: F401 (re-exported)
    _busid,
    _descendant_pus,
    _distance_float,
    _gpu_by_class,
    _int_attr,
    _isnum,
    _major_version,
    _Obj,
    _osdev_role,
    _pci_fields,
    _slit_diagonal,
    _walk,
    parse_hwloc_bitmap,
)
from clusterdoctor.observe.safe_xml import parse_xml, xml_head_root
from clusterdoctor.topology.cpu import CpuId, normalise_vendor, vendor_from_model_name
from clusterdoctor.topology.cpuset import MAX_CPU_ID
from clusterdoctor.topology.model import CpuInfo, Device, NumaNode, PathInfo, Topology, classify_pci_path


def sniff_hwloc_xml(head: bytes) -> bool:
    """Whether ``head`` (a file's first KB) looks like an hwloc XML export."""
    if b"<topology" not in head:
        return False
    if xml_head_root(head) != "topology":
        return False
    return b"hwloc" in head or b"<object" in head


class _Builder:
    def __init__(self, root: ET.Element, path: str | None) -> None:
        self.root = root
        self.path = path
        self.major = _major_version(root, path)
        self.objs, self.v1_distances = _walk(root)
        if not self.objs:
            raise InputError("hwloc XML without any <object> (empty or truncated topology)", path)
        self.warnings: list[str] = []
        self.by_gp: dict[int, _Obj] = {}
        for o in self.objs:
            gp = o.get("gp_index")
            if gp and _isnum(gp) and len(gp) < 12:
                self.by_gp[int(gp)] = o

    # -- bitmaps --------------------------------------------------------------------------
    def bitmap(self, obj: _Obj, key: str) -> tuple[int, ...] | None:
        raw = obj.get(key)
        if raw is None:
            return None
        return parse_hwloc_bitmap(raw, self.path)

    # -- CPUs and nodes -------------------------------------------------------------------
    def build_cpus(self) -> tuple[dict[int, int], list[_Obj]]:
        pu_ids: dict[int, int] = {}  # object order -> os_index
        seen: set[int] = set()
        pus = [o for o in self.objs if o.type == "PU"]
        for o in pus:
            os_index = _int_attr(o, "os_index", self.path, required=True)
            assert os_index is not None
            if os_index > MAX_CPU_ID:
                raise InputError(f"PU os_index {os_index} out of range", self.path)
            if os_index in seen:
                raise InputError(f"two PU objects with os_index {os_index}", self.path)
            seen.add(os_index)
            pu_ids[o.order] = os_index
        return pu_ids, pus

    def build_nodes(self, pu_ids: dict[int, int]) -> tuple[list[NumaNode], list[_Obj]]:
        all_pus = set(pu_ids.values())
        nodes: list[NumaNode] = []
        node_objs: list[_Obj] = []
        seen: set[int] = set()
        for o in self.objs:
            if o.type != "NUMANode":
                continue
            nid = _int_attr(o, "os_index", self.path, required=True)
            assert nid is not None
            if nid > MAX_CPU_ID:
                raise InputError(f"NUMANode os_index {nid} out of range", self.path)
            if nid in seen:
                raise InputError(f"two NUMANode objects with os_index {nid}", self.path)
            seen.add(nid)
            cpuset = self.bitmap(o, "cpuset")
            if cpuset is not None:
                cpus = [c for c in cpuset if c in all_pus] if all_pus else list(cpuset)
            else:
                holder: _Obj | None = o
                cpus = []
                while holder is not None:
                    cpus = _descendant_pus(holder, pu_ids)
                    if cpus or holder.type not in ("NUMANode", "MemCache"):
                        break
                    holder = holder.parent
            mem = _int_attr(o, "local_memory", self.path)
            nodes.append(NumaNode(id=nid, cpus=tuple(sorted(set(cpus))), memory_bytes=mem))
            node_objs.append(o)
        return nodes, node_objs

    def cpu_infos(self, pus: list[_Obj], pu_ids: dict[int, int], nodes: list[NumaNode]) -> dict[int, CpuInfo]:
        node_of: dict[int, int] = {}
        for n in sorted(nodes, key=lambda n: n.id):
            for c in n.cpus:
                node_of.setdefault(c, n.id)
        group_cache: dict[int, tuple[int, ...]] = {}

        def group(obj: _Obj) -> tuple[int, ...]:
            if obj.order not in group_cache:
                group_cache[obj.order] = tuple(sorted(_descendant_pus(obj, pu_ids)))
            return group_cache[obj.order]

        cpus: dict[int, CpuInfo] = {}
        for pu in pus:
            cid = pu_ids[pu.order]
            package = core = None
            siblings: tuple[int, ...] = (cid,)
            l3: tuple[int, ...] = ()
            for a in pu.ancestors():
                if a.type == "Core" and core is None:
                    core = _int_attr(a, "os_index", self.path)
                    if core is None:
                        core = (1 << 24) + a.order  # no os_index: unique per Core object
                    siblings = group(a)
                elif a.type in PACKAGE_TYPES and package is None:
                    package = _int_attr(a, "os_index", self.path)
                elif not l3 and (a.type == "L3Cache" or (a.type == "Cache" and a.get("depth") == "3")):
                    l3 = group(a)
            cpus[cid] = CpuInfo(
                id=cid, node=node_of.get(cid), package=package, core=core, siblings=siblings, l3=l3
            )
        return cpus

    # -- distances ------------------------------------------------------------------------
    def distances(self, nodes: list[NumaNode], node_objs: list[_Obj]) -> list[list[int]] | None:
        """The NUMA latency matrix, in the order of ``nodes``.

        A file may hold several NUMA matrices (user-given ones, hwloc 1.x "distance groups"). The OS
        SLIT is preferred: named ``NUMALatency``; else (v1, unnamed v2.0) one at the NUMA depth whose
        diagonal is 10, as ACPI SLIT distances always are; document order breaks ties.
        """
        if not nodes:
            return None
        ids = [n.id for n in nodes]
        ranked: list[tuple[tuple[bool, bool, bool], int, list[list[int]]]] = []
        for k, el in enumerate(self.root.iter("distances2")):
            if (el.get("type") or "") != "NUMANode":
                continue
            kind = el.get("kind") or ""
            if _isnum(kind) and len(kind) < 10 and int(kind) & 8 and not int(kind) & 4:
                continue  # MEANS_BANDWIDTH
            idx, values = self._distances2_values(el)
            order = self._node_order(el, idx)
            if order is None:
                continue
            if sorted(order) != sorted(ids):
                self.warnings.append(
                    f"NUMA distance matrix covers nodes {sorted(order)}, not all of {sorted(ids)}; ignored"
                )
                continue
            n = len(order)
            pos = {nid: i for i, nid in enumerate(order)}
            matrix = [[values[pos[a] * n + pos[b]] for b in ids] for a in ids]
            ranked.append(((el.get("name") == "NUMALatency", True, _slit_diagonal(matrix)), k, matrix))
        numa_depths = {sum(1 for _ in o.ancestors()) for o in node_objs}
        doc_ids = [_int_attr(o, "os_index", self.path, required=True) for o in node_objs]
        for k, (el, container) in enumerate(self.v1_distances):
            under = sum(1 for o in node_objs if container is o or container in o.ancestors())
            if under != len(node_objs):
                continue  # a matrix local to a part of the machine
            m = self._v1_matrix(el, len(node_objs))
            if m is None:
                continue
            pos = {nid: i for i, nid in enumerate(doc_ids)}
            matrix = [[m[pos[a]][pos[b]] for b in ids] for a in ids]
            rel = el.get("relative_depth") or ""
            at_numa_depth = (
                _isnum(rel)
                and len(rel) < 6
                and {sum(1 for _ in container.ancestors()) + int(rel)} == numa_depths
            )
            ranked.append(((False, at_numa_depth, _slit_diagonal(matrix)), k, matrix))
        if not ranked:
            return None
        ranked.sort(key=lambda r: (not r[0][0], not r[0][1], not r[0][2], r[1]))
        return ranked[0][2]

    def _distances2_values(self, el: ET.Element) -> tuple[list[str], list[int]]:
        """``<indexes>`` and the nbobjs x nbobjs values of a ``distances2`` or ``distances2hetero`` element."""
        what = f"{el.tag} {el.get('name')!r}"
        nb_raw = el.get("nbobjs") or ""
        if not _isnum(nb_raw) or not 0 < int(nb_raw) <= 4096:
            raise InputError(f"{what}: bad nbobjs {nb_raw[:20]!r}", self.path)
        nb = int(nb_raw)
        idx: list[str] = []
        values: list[int] = []
        for child in el:
            if child.tag == "indexes":
                idx.extend((child.text or "").split())
            elif child.tag == "u64values":
                for tok in (child.text or "").split():
                    if not _isnum(tok) or len(tok) > 20:
                        raise InputError(f"{what}: bad value {tok[:20]!r}", self.path)
                    values.append(int(tok))
            elif child.tag == "floats":  # hwloc 2.0.x wrote float matrices
                for tok in (child.text or "").split():
                    values.append(_distance_float(tok, self.path))
        if len(idx) != nb or len(values) != nb * nb:
            raise InputError(
                f"{what}: {len(idx)} indexes and {len(values)} values for nbobjs={nb} "
                "(truncated or inconsistent matrix)",
                self.path,
            )
        return idx, values

    def _node_order(self, el: ET.Element, idx: list[str]) -> list[int] | None:
        indexing = el.get("indexing") or "os"
        out = []
        for tok in idx:
            if not _isnum(tok) or len(tok) > 12:
                raise InputError(f"distances2 {el.get('name')!r}: bad index {tok[:20]!r}", self.path)
            v = int(tok)
            if indexing == "gp":
                obj = self.by_gp.get(v)
                if obj is None or obj.type != "NUMANode":
                    return None
                nid = _int_attr(obj, "os_index", self.path, required=True)
                assert nid is not None
                out.append(nid)
            else:
                out.append(v)
        if len(set(out)) != len(out):
            raise InputError(f"distances2 {el.get('name')!r}: repeated node index", self.path)
        return out

    def _v1_matrix(self, el: ET.Element, n_nodes: int) -> list[list[int]] | None:
        nb_raw = el.get("nbobjs") or ""
        if not _isnum(nb_raw) or int(nb_raw) != n_nodes:
            return None
        base_raw = el.get("latency_base") or "1"
        vals = [child.get("value") or "" for child in el if child.tag == "latency"]
        if len(vals) != n_nodes * n_nodes:
            raise InputError(
                f"v1 <distances>: {len(vals)} latency values for nbobjs={n_nodes} (truncated or inconsistent)",
                self.path,
            )
        try:
            base = float(base_raw)
            out = [_distance_float(repr(float(v) * base), self.path) for v in vals]
        except ValueError:
            raise InputError("v1 <distances>: latency value is not a number", self.path) from None
        return [out[i * n_nodes : (i + 1) * n_nodes] for i in range(n_nodes)]

    # -- devices --------------------------------------------------------------------------
    def locality(self, dev: _Obj, nodes: list[NumaNode]) -> tuple[int | None, tuple[int, ...] | None]:
        """NUMA node and local CPUs from the nearest non-I/O ancestor (hwloc's attachment point)."""
        anc = next((a for a in dev.ancestors() if a.type not in IO_TYPES), None)
        if anc is None:
            return None, None
        known = {n.id: n for n in nodes}
        all_pus = {c for n in nodes for c in n.cpus}
        cpuset = self.bitmap(anc, "cpuset")
        local = tuple(c for c in cpuset if not all_pus or c in all_pus) if cpuset is not None else None
        if anc.type == "NUMANode":
            return _int_attr(anc, "os_index", self.path), local
        # v1: the I/O tree hangs below a NUMANode ancestor further up.
        for a in anc.ancestors():
            if a.type == "NUMANode":
                return _int_attr(a, "os_index", self.path), local
        nodeset = self.bitmap(anc, "nodeset")
        if nodeset is not None:
            owners = [n for n in nodeset if n in known]
        elif local:
            owners = [n.id for n in nodes if set(local) & set(n.cpus)]
        else:
            owners = []
        if len(owners) == 1:
            return owners[0], local
        return None, local

    def pci_locality(self, busid: str, nodes: list[NumaNode]) -> int | None:
        m = BUSID_RE.match(busid)
        if not m:
            return None
        domain, bus = int(m.group(1), 16), int(m.group(2), 16)
        for el in self.root.iter("pci_locality"):
            try:
                d = int(el.get("domain") or "", 0)
                lo = int(el.get("bus_min") or "", 0)
                hi = int(el.get("bus_max") or "", 0)
            except ValueError:
                raise InputError("pci_locality with a non-numeric domain/bus", self.path) from None
            if d == domain and lo <= bus <= hi:
                cpus = set(parse_hwloc_bitmap(el.get("cpuset") or "", self.path))
                owners = [n.id for n in nodes if n.cpus and cpus and cpus <= set(n.cpus)]
                return owners[0] if len(owners) == 1 else None
        return None

    def _host_bridge_range(self, dev: _Obj) -> tuple[int, int, int] | None:
        """(domain, first bus, last bus) of the outermost Bridge above ``dev`` (its host bridge)."""
        top = None
        for a in dev.ancestors():
            if a.type == "Bridge":
                top = a
        m = BRIDGE_PCI_RE.match((top.get("bridge_pci") or "").strip()) if top is not None else None
        if not m:
            return None
        return int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)

    def bus_outside_host_bridge(self, dev: _Obj, busid: str) -> bool:
        rng = self._host_bridge_range(dev)
        m = BUSID_RE.match(busid)
        if rng is None or not m:
            return False
        domain, bus = int(m.group(1), 16), int(m.group(2), 16)
        return domain != rng[0] or not rng[1] <= bus <= rng[2]

    def chain_by_bus(self, busid: str) -> tuple[str, ...]:
        """A chain (host bridge, device) from the host bridge whose bus range holds ``busid``."""
        m = BUSID_RE.match(busid)
        if not m:
            return ()
        domain, bus = int(m.group(1), 16), int(m.group(2), 16)
        for o in self.objs:
            if o.type != "Bridge" or any(a.type == "Bridge" for a in o.ancestors()):
                continue
            r = BRIDGE_PCI_RE.match((o.get("bridge_pci") or "").strip())
            if r and int(r.group(1), 16) == domain and int(r.group(2), 16) <= bus <= int(r.group(3), 16):
                return (f"pci{r.group(1).lower()}:{r.group(2).lower()}", busid)
        return ()

    def pci_chain(self, dev: _Obj, busid: str) -> tuple[str, ...]:
        chain = [busid]
        for a in dev.ancestors():
            if a.type not in ("Bridge", "PCIDev"):
                break
            b = _busid(a)
            if b:
                chain.append(b)
            elif a.type == "Bridge":
                m = BRIDGE_PCI_RE.match((a.get("bridge_pci") or "").strip())
                if m:
                    chain.append(f"pci{m.group(1).lower()}:{m.group(2).lower()}")
                else:
                    chain.append(f"hostbridge#{a.order}")
        if not chain[-1].startswith(("pci", "hostbridge#")):
            m = BUSID_RE.match(chain[-1])
            if m:
                chain.append(f"pci{m.group(1)}:{m.group(2)}")
        return tuple(reversed(chain))

    def devices(
        self, nodes: list[NumaNode]
    ) -> tuple[list[Device], list[Device], list[Device], dict[int, str]]:
        gpus: list[Device] = []
        nics: list[Device] = []
        others: list[Device] = []
        osdev_to_gpu: dict[int, Device] = {}
        gpu_osdev_gp: dict[int, str] = {}
        for o in self.objs:
            if o.type != "PCIDev":
                continue
            busid = _busid(o)
            if busid is None:
                self.warnings.append(
                    f"PCIDev without a valid pci_busid ({(o.get('pci_busid') or '')[:30]!r}) skipped"
                )
                continue
            cls, vendor, device_id = _pci_fields(o)
            osdevs = [c for c in o.children if c.type == "OSDev"]
            roles = {c.order: _osdev_role(c, self.major) for c in osdevs}
            gpu_osdevs = [c for c in osdevs if roles[c.order] == "gpu"]
            hcas = [c.get("name") or "" for c in osdevs if roles[c.order] == "openfabrics"]
            netdevs = [c.get("name") or "" for c in osdevs if roles[c.order] == "network"]
            is_gpu = bool(gpu_osdevs) or _gpu_by_class(cls, vendor)
            is_nic = not is_gpu and bool(hcas or netdevs or (cls and (cls[:2] == "02" or cls == "0c06")))
            is_nvme = not is_gpu and not is_nic and cls == "0108"
            if not (is_gpu or is_nic or is_nvme):
                continue
            node, local = self.locality(o, nodes)
            how = "source" if node is not None else "unknown"
            by_loc = self.pci_locality(busid, nodes)
            chain = self.pci_chain(o, busid)
            if node is None and by_loc is not None:
                node, how = by_loc, "local_cpulist"
            elif node is not None and by_loc is not None and by_loc != node:
                if self.bus_outside_host_bridge(o, busid):
                    # PCIe routes by bus number: a bus outside its host bridge's range cannot sit there, so
                    # the tree placement is wrong (a test-assembled file) and the bus ranges are believed.
                    self.warnings.append(
                        f"{busid}: placed under NUMA node {node} in the tree, but its bus lies outside that host "
                        f"bridge's range and pci_locality maps it to node {by_loc}; using node {by_loc}"
                    )
                    node, how, local = by_loc, "local_cpulist", None
                    chain = self.chain_by_bus(busid)
                else:
                    self.warnings.append(
                        f"{busid}: placed under NUMA node {node} in the tree but pci_locality maps its bus to node "
                        f"{by_loc}; using the tree (as hwloc does)"
                    )
            attrs: dict[str, object] = {"class": cls, "device_id": device_id}
            if osdevs:
                attrs["os_devices"] = [c.get("name") or "" for c in osdevs]
            dev = Device(
                name=busid,
                kind="gpu" if is_gpu else "nic" if is_nic else "nvme",
                pci=busid,
                numa_node=node,
                numa_source=how,
                local_cpus=local,
                vendor=(GPU_VENDORS if is_gpu else NIC_VENDORS).get(vendor or "", vendor),
                model=o.info("PCIDevice") or o.get("name"),
                pci_chain=chain,
                attrs=attrs,
            )
            if is_gpu:
                for c in gpu_osdevs:
                    gm = c.info("GPUModel")
                    if gm:
                        dev.model = gm
                        break
                index, basis = None, None
                for prefix in ("cuda", "nvml", "rsmi", "ze"):
                    for c in gpu_osdevs:
                        m = GPU_OSDEV_RE.match(c.get("name") or "")
                        if m and m.group(1) == prefix:
                            index, basis = int(m.group(2)), f"hwloc OS device {c.get('name')}"
                            break
                    if index is not None:
                        break
                dev.index = index
                if basis:
                    attrs["index_basis"] = basis
                gpus.append(dev)
                for c in gpu_osdevs:
                    gp = c.get("gp_index")
                    if gp and _isnum(gp) and len(gp) < 12:
                        osdev_to_gpu[int(gp)] = dev
            elif is_nic:
                if hcas:
                    dev.name = hcas[0]
                    if len(hcas) > 1:
                        attrs["hcas"] = hcas
                elif netdevs:
                    dev.name = netdevs[0]
                if netdevs:
                    attrs["netdevs"] = netdevs
                attrs["rdma"] = bool(hcas)
                nics.append(dev)
            else:
                blk = [c.get("name") or "" for c in osdevs]
                if blk and blk[0]:
                    dev.name = blk[0]
                others.append(dev)
        self._number_gpus(gpus)
        for gp, dev in osdev_to_gpu.items():
            gpu_osdev_gp[gp] = dev.name
        self._unique_names(nics)
        self._unique_names(others)
        return gpus, nics, others, gpu_osdev_gp

    def _number_gpus(self, gpus: list[Device]) -> None:
        used: set[int] = set()
        for g in gpus:
            if g.index is not None:
                if g.index in used or g.index > 65535:
                    self.warnings.append(f"{g.pci}: GPU index {g.index} repeated or out of range; renumbered")
                    g.index = None
                    g.attrs.pop("index_basis", None)
                else:
                    used.add(g.index)
        nxt = 0
        for g in sorted((g for g in gpus if g.index is None), key=lambda g: g.pci or ""):
            while nxt in used:
                nxt += 1
            g.index = nxt
            used.add(nxt)
            g.attrs["index_basis"] = "PCI bus order (no CUDA/NVML OS device in the file)"
        gpus.sort(key=lambda g: g.index if g.index is not None else 0)
        for g in gpus:
            g.attrs["pci_name"] = g.pci
            g.name = f"GPU{g.index}"

    @staticmethod
    def _unique_names(devs: list[Device]) -> None:
        seen: dict[str, int] = {}
        for d in devs:
            if d.name in seen:
                seen[d.name] += 1
                d.name = f"{d.name}@{d.pci}"
            else:
                seen[d.name] = 1

    # -- NVLink ---------------------------------------------------------------------------
    def nvlink_paths(self, gpu_osdev_gp: dict[int, str], gpus: list[Device]) -> list[PathInfo]:
        by_name = {g.name: g for g in gpus}
        out: dict[frozenset[str], PathInfo] = {}
        for el in self.root.iter("distances2hetero"):
            name = el.get("name") or ""
            if "NVLink" not in name:
                continue
            idx, values = self._distances2_values(el)
            nb = len(idx)
            names: list[str | None] = []
            for tok in idx:
                _t, _, gp = tok.partition(":")
                names.append(gpu_osdev_gp.get(int(gp)) if _isnum(gp) and len(gp) < 12 else None)
            for i, a in enumerate(names):
                for j, b in enumerate(names):
                    if a is None or b is None or a == b:
                        continue
                    bw = values[i * nb + j]
                    if bw <= 0:
                        continue
                    links = by_name[a].attrs.setdefault("nvlink_bandwidth_mbs", {})
                    assert isinstance(links, dict)
                    links[b] = bw
                    key = frozenset((a, b))
                    if key not in out:
                        first, second = sorted((a, b), key=lambda n: by_name[n].index or 0)
                        out[key] = PathInfo(first, second, "NV", "derived")
        return list(out.values())

    # -- all ------------------------------------------------------------------------------
    def build(self) -> Topology:
        pu_ids, pus = self.build_cpus()
        nodes, node_objs = self.build_nodes(pu_ids)
        if not nodes and not pus:
            raise InputError(
                "hwloc XML has neither NUMANode nor PU objects (not a machine topology)", self.path
            )
        if not nodes:
            self.warnings.append(
                "no NUMANode objects (hwloc 1.x omits them on single-node machines): NUMA layout unknown"
            )
        order = sorted(range(len(nodes)), key=lambda i: nodes[i].id)
        nodes = [nodes[i] for i in order]
        cpus = self.cpu_infos(pus, pu_ids, nodes)
        distances = self.distances(nodes, node_objs)
        gpus, nics, others, gpu_osdev_gp = self.devices(nodes)
        paths = self.nvlink_paths(gpu_osdev_gp, gpus)
        linked = {frozenset((p.a, p.b)) for p in paths}
        for i, g in enumerate(gpus):
            for n in nics:
                kind = classify_pci_path(g.pci_chain, n.pci_chain, g.numa_node, n.numa_node)
                if kind:
                    paths.append(PathInfo(g.name, n.name, kind, "derived"))
            for g2 in gpus[i + 1 :]:
                if frozenset((g.name, g2.name)) in linked:
                    continue
                kind = classify_pci_path(g.pci_chain, g2.pci_chain, g.numa_node, g2.numa_node)
                if kind:
                    paths.append(PathInfo(g.name, g2.name, kind, "derived"))
        machine = self.objs[0]
        hostname = machine.info("HostName")
        if hostname is None:
            for el in self.root:
                if el.tag == "info" and el.get("name") == "HostName":
                    hostname = el.get("value")
        cpu = self.cpu_id()
        allowed = self.bitmap(machine, "allowed_cpuset")
        if allowed is not None and pu_ids:
            pu_set = set(pu_ids.values())
            allowed = tuple(c for c in allowed if c in pu_set)
        return Topology(
            source=self.path or "<input>",
            source_kind=SOURCE_KIND,
            nodes=nodes,
            distances=distances,
            cpus=cpus,
            gpus=gpus,
            nics=nics,
            other_devices=others,
            paths=paths,
            hostname=hostname or None,
            allowed_cpus=allowed,
            warnings=self.warnings,
            cpu=cpu,
        )

    def cpu_id(self) -> CpuId | None:
        """CPUVendor/CPUModel/CPUFamilyNumber/CPUModelNumber of the first object that has them
        (hwloc puts them on each Package, older exports on the Machine)."""
        for o in self.objs:
            vendor, name = o.info("CPUVendor"), o.info("CPUModel")
            if vendor or name:
                fam, mod = o.info("CPUFamilyNumber"), o.info("CPUModelNumber")
                return CpuId(
                    normalise_vendor(vendor) or vendor_from_model_name(name),
                    name or None,
                    int(fam) if fam and fam.isdigit() else None,
                    int(mod) if mod and mod.isdigit() else None,
                    "hwloc XML",
                )
        return None


def parse_hwloc_xml(data: bytes | str, path: str | None = None) -> Topology:
    """Parse an hwloc XML export (v1, v2 or v3) into a :class:`Topology`.

    Raises :class:`InputError` for malformed XML, a root element other than ``<topology>``, entity
    declarations, objects with missing/invalid indexes, truncated distance matrices, or a file with
    neither NUMA nodes nor PUs.
    """
    root = parse_xml(data, path)
    if root.tag != "topology":
        raise InputError(
            f"not an hwloc XML export: root element is <{root.tag[:40]}>, expected <topology>", path
        )
    return _Builder(root, path).build()
