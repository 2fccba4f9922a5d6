"""NCCL topology XML -> :class:`~clusterdoctor.topology.model.Topology`.

Reads what ``NCCL_TOPO_DUMP_FILE`` writes and what clouds ship as ``NCCL_TOPO_FILE``
(nccl ``src/graph/xml.cc``): ``<system version>`` -> ``<cpu numaid affinity ...>`` -> nested
``<pci busid class ...>`` -> ``<gpu dev ...>`` (with ``<nvlink target count tclass>``) and
``<nic><net name ...>``. A ``<pci>`` of a GPU/NIC class without a ``<gpu>``/``<nic>`` child (vendor
files such as Azure's) is still a GPU/NIC.

``numaid="-1"`` (NCCL found no NUMA information) is unknown, never node 0. The affinity masks give the
CPUs of each node. Path classes are derived from the nesting: devices below the same ``<pci>`` switch
element are PIX (one bridge) or PXB (several); devices below different top-level bridges of one
``<cpu>`` are NODE (NCCL itself calls this PHB: it cannot tell host bridges apart); devices below
``<cpu>`` elements of different NUMA nodes are SYS. ``<nvlink>`` elements give NV# between GPUs: direct
links count as stated; through NVSwitches, the links the two GPUs have into shared switches.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from clusterdoctor.errors import InputError
from clusterdoctor.observe.safe_xml import parse_xml, xml_head_root
from clusterdoctor.topology.cpu import CpuId, normalise_vendor
from clusterdoctor.topology.cpuset import parse_hexmask
from clusterdoctor.topology.model import Device, NumaNode, PathInfo, Topology

SOURCE_KIND = "nccl-topo-xml"

BUSID_RE = re.compile(r"^([0-9a-f]{4,16}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
GPU_VENDORS = {"0x10de": "NVIDIA", "0x1002": "AMD"}
NIC_VENDORS = {"0x15b3": "Mellanox", "0x8086": "Intel", "0x14e4": "Broadcom", "0x1d0f": "Amazon"}
NVSWITCH_CLASS_PREFIX = "0x0680"  # "other bridge": NCCL's tclass for NVSwitch targets
MAX_NUMA_ID = 1 << 16
MAX_AFFINITY_CHARS = 8192  # 8192 CPUs (Linux NR_CPUS max) is 2048 hex digits plus commas


def _isnum(s: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts "²", which ``int()`` then rejects."""
    return s.isascii() and s.isdigit()


def sniff_nccl_topo(head: bytes) -> bool:
    """Whether ``head`` (a file's first KB) looks like an NCCL topology XML."""
    return b"<system" in head and xml_head_root(head) == "system"


def _busid(raw: str | None, path: str | None) -> str | None:
    """A lower-case ``dddd:bb:dd.f`` address (NCCL may print a 16-digit domain), or None when absent."""
    if raw is None:
        return None
    b = raw.strip().lower()
    m = BUSID_RE.match(b)
    if not m:
        raise InputError(f"busid {raw[:30]!r} is not a PCI address", path)
    domain = m.group(1)[-4:] if len(m.group(1)) > 4 and set(m.group(1)[:-4]) <= {"0"} else m.group(1)
    return f"{domain}:{m.group(2)}:{m.group(3)}.{m.group(4)}"


def _class(el: ET.Element, path: str | None) -> int | None:
    raw = el.get("class")
    if raw is None or not raw.strip():
        return None
    try:
        v = int(raw.strip(), 16)
    except ValueError:
        raise InputError(f"<pci class={raw[:30]!r}> is not a hex class code", path) from None
    if not 0 <= v <= 0xFFFFFF:
        raise InputError(f"<pci class={raw[:30]!r}> out of range", path)
    return v


class _Found:
    """A GPU or NIC with its place: the <cpu> index and the chain of <pci> busids above it."""

    def __init__(self, dev: Device, cpu_idx: int, chain: list[str]) -> None:
        self.dev = dev
        self.cpu_idx = cpu_idx
        self.chain = chain  # ancestor <pci> busids, top first, excluding the device itself


def _classify(a: _Found, b: _Found, cpu_nodes: list[int | None]) -> str | None:
    if a.cpu_idx != b.cpu_idx:
        na, nb = cpu_nodes[a.cpu_idx], cpu_nodes[b.cpu_idx]
        if na is None or nb is None:
            return None
        return "NODE" if na == nb else "SYS"
    k = 0
    for x, y in zip(a.chain, b.chain):
        if x != y:
            break
        k += 1
    if k == 0:
        return "NODE"
    bridges = (len(a.chain) - k) + (len(b.chain) - k) + 1
    return "PIX" if bridges <= 1 else "PXB"


def parse_nccl_topo_xml(data: bytes | str, path: str | None = None) -> Topology:
    """Parse an NCCL topology XML (dump or ``NCCL_TOPO_FILE``) into a :class:`Topology`.

    Raises :class:`InputError` for malformed XML, a root other than ``<system>``, no ``<cpu>``
    elements, or bad numaid/affinity/busid/class values.
    """
    root = parse_xml(data, path)
    if root.tag != "system":
        raise InputError(f"not an NCCL topology: root element is <{root.tag[:40]}>, expected <system>", path)
    cpus_el = [el for el in root if el.tag == "cpu"]
    if not cpus_el:
        raise InputError("NCCL topology without any <cpu> element", path)
    warnings: list[str] = []
    node_cpus: dict[int, set[int]] = {}
    cpu_nodes: list[int | None] = []
    gpus: list[_Found] = []
    nics: list[_Found] = []
    nvlinks: dict[str, list[tuple[str, int, str]]] = {}  # gpu busid -> (target, count, tclass)
    for ci, cpu in enumerate(cpus_el):
        raw = (cpu.get("numaid") or "").strip()
        node: int | None
        if raw == "" or raw == "-1":
            node = None
        elif _isnum(raw) and int(raw) <= MAX_NUMA_ID:
            node = int(raw)
        else:
            raise InputError(f"<cpu numaid={raw[:20]!r}> is not a NUMA node id", path)
        aff_raw = cpu.get("affinity")
        if aff_raw and len(aff_raw) > MAX_AFFINITY_CHARS:
            raise InputError(f"<cpu affinity> mask of {len(aff_raw)} characters is implausibly long", path)
        affinity = parse_hexmask(aff_raw, path=path) if aff_raw else None
        cpu_nodes.append(node)
        if node is not None:
            node_cpus.setdefault(node, set()).update(affinity or ())
        elif affinity:
            warnings.append(
                f'<cpu numaid="-1"> with {len(affinity)} CPUs: devices below it have no known NUMA node'
            )
        # Depth-first over nested <pci>, keeping the busid chain.
        stack: list[tuple[ET.Element, list[str]]] = [(child, []) for child in reversed(list(cpu))]
        while stack:
            el, chain = stack.pop()
            if el.tag == "nic":  # a <nic> straight below <cpu> (no PCI device: virtual / socket)
                for f in _nics_of(el, None, None, node, affinity):
                    nics.append(_Found(f, ci, chain))
                continue
            if el.tag != "pci":
                continue
            busid = _busid(el.get("busid"), path)
            cls = _class(el, path)
            kids = list(el)
            gpu_el = next((k for k in kids if k.tag == "gpu"), None)
            nic_els = [k for k in kids if k.tag == "nic"]
            base = cls >> 16 if cls is not None else None
            vendor = (el.get("vendor") or "").lower() or None
            if gpu_el is not None or (base in (0x03, 0x12) and (vendor in (None, *GPU_VENDORS))):
                dev = Device(
                    name="",
                    kind="gpu",
                    pci=busid,
                    numa_node=node,
                    numa_source="source" if node is not None else "unknown",
                    local_cpus=affinity,
                    vendor=GPU_VENDORS.get(vendor or "", vendor),
                    attrs={"class": el.get("class")},
                )
                if gpu_el is not None:
                    dev_raw = (gpu_el.get("dev") or "").strip()
                    if dev_raw:
                        if not _isnum(dev_raw) or int(dev_raw) > 65535:
                            raise InputError(f"<gpu dev={dev_raw[:20]!r}> is not a device index", path)
                        dev.index = int(dev_raw)
                        dev.attrs["index_basis"] = "NCCL <gpu dev>"
                    for attr in ("sm", "rank", "gdr"):
                        if gpu_el.get(attr) is not None:
                            dev.attrs[attr] = gpu_el.get(attr)
                    links = []
                    for nv in gpu_el:
                        if nv.tag != "nvlink":
                            continue
                        target = _busid(nv.get("target"), path)
                        cnt = (nv.get("count") or "1").strip()
                        if not _isnum(cnt) or int(cnt) > 1024:
                            raise InputError(f"<nvlink count={cnt[:20]!r}> is not a link count", path)
                        if target:
                            links.append((target, int(cnt), (nv.get("tclass") or "").lower()))
                    if busid:
                        nvlinks[busid] = links
                gpus.append(_Found(dev, ci, chain))
            elif nic_els or base == 0x02 or cls is not None and cls >> 8 == 0x0C06:
                found = []
                for nic_el in nic_els:
                    found.extend(_nics_of(nic_el, busid, el, node, affinity))
                if not found:
                    found.append(
                        Device(
                            name="",
                            kind="nic",
                            pci=busid,
                            numa_node=node,
                            numa_source="source" if node is not None else "unknown",
                            local_cpus=affinity,
                            vendor=NIC_VENDORS.get(vendor or "", vendor),
                            attrs={"class": el.get("class"), **_rdma_by_class(cls)},
                        )
                    )
                for f in found:
                    nics.append(_Found(f, ci, chain))
            sub_chain = [*chain, busid or f"pci#{id(el)}"]
            stack.extend((k, sub_chain) for k in reversed(kids) if k.tag == "pci")
    _name_gpus(gpus, warnings)
    _name_nics(nics)
    nics.sort(key=lambda f: (f.dev.pci or "~", f.dev.name))
    gpu_by_bus = {f.dev.pci: f for f in gpus if f.dev.pci}
    for f in [*gpus, *nics]:
        top = f"cpu{f.cpu_idx}"
        f.dev.pci_chain = (top, *f.chain, f.dev.pci or f.dev.name)
    paths: list[PathInfo] = []
    for i, g in enumerate(gpus):
        for n in nics:
            kind = _classify(g, n, cpu_nodes)
            if kind:
                paths.append(PathInfo(g.dev.name, n.dev.name, kind, "derived"))
        for g2 in gpus[i + 1 :]:
            nv = _nvlink_kind(g, g2, nvlinks, gpu_by_bus)
            if nv:
                paths.append(PathInfo(g.dev.name, g2.dev.name, nv[0], nv[1]))
                continue
            kind = _classify(g, g2, cpu_nodes)
            if kind:
                paths.append(PathInfo(g.dev.name, g2.dev.name, kind, "derived"))
    nodes = [NumaNode(id=n, cpus=tuple(sorted(c))) for n, c in sorted(node_cpus.items())]
    if not nodes:
        warnings.append('every <cpu> has numaid="-1" or none: NUMA layout unknown')
    return Topology(
        source=path or "<input>",
        source_kind=SOURCE_KIND,
        nodes=nodes,
        distances=None,
        gpus=[f.dev for f in gpus],
        nics=[f.dev for f in nics],
        paths=paths,
        hostname=None,
        warnings=warnings,
        cpu=_cpu_id(cpus_el[0]),
    )


def _cpu_id(cpu: ET.Element) -> CpuId | None:
    """``<cpu arch vendor familyid modelid>`` as NCCL writes it (vendor is the CPUID string)."""
    vendor = normalise_vendor(cpu.get("vendor"))
    fam, mod = (cpu.get("familyid") or "").strip(), (cpu.get("modelid") or "").strip()
    if vendor is None:
        return None
    return CpuId(
        vendor,
        None,
        int(fam) if fam.isdigit() else None,
        int(mod) if mod.isdigit() else None,
        "NCCL topology XML",
    )


def _nics_of(
    nic_el: ET.Element,
    busid: str | None,
    pci_el: ET.Element | None,
    node: int | None,
    affinity: tuple[int, ...] | None,
) -> list[Device]:
    out = []
    vendor = ((pci_el.get("vendor") if pci_el is not None else None) or "").lower() or None
    for net in nic_el:
        if net.tag != "net":
            continue
        attrs: dict[str, object] = {
            k: v for k, v in net.attrib.items() if k in ("dev", "speed", "port", "gdr", "guid")
        }
        if pci_el is not None:
            attrs["class"] = pci_el.get("class")
            attrs.update(_rdma_by_class(_class(pci_el, None)))
        out.append(
            Device(
                name=(net.get("name") or "").strip(),
                kind="nic",
                pci=busid,
                numa_node=node,
                numa_source="source" if node is not None else "unknown",
                local_cpus=affinity,
                vendor=NIC_VENDORS.get(vendor or "", vendor),
                attrs=attrs,
            )
        )
    return out


def _rdma_by_class(cls: int | None) -> dict[str, object]:
    """``{"rdma": True}`` for InfiniBand controllers (class 0x0207xx, old 0x0c06xx), else nothing (name decides)."""
    if cls is not None and (cls >> 8 == 0x0207 or cls >> 8 == 0x0C06):
        return {"rdma": True}
    return {}


def _name_gpus(gpus: list[_Found], warnings: list[str]) -> None:
    used: set[int] = set()
    for f in gpus:
        if f.dev.index is not None:
            if f.dev.index in used:
                warnings.append(f"two <gpu> elements with dev={f.dev.index}; renumbered by PCI order")
                f.dev.index = None
            else:
                used.add(f.dev.index)
    nxt = 0
    for f in sorted((f for f in gpus if f.dev.index is None), key=lambda f: f.dev.pci or ""):
        while nxt in used:
            nxt += 1
        f.dev.index = nxt
        used.add(nxt)
        f.dev.attrs["index_basis"] = "PCI bus order (no <gpu dev> in the file)"
    gpus.sort(key=lambda f: f.dev.index or 0)
    for f in gpus:
        f.dev.name = f"GPU{f.dev.index}"


def _name_nics(nics: list[_Found]) -> None:
    unnamed = sorted((f for f in nics if not f.dev.name), key=lambda f: f.dev.pci or "")
    taken = {f.dev.name for f in nics if f.dev.name}
    i = 0
    for f in unnamed:
        while f"NIC{i}" in taken:
            i += 1
        f.dev.name = f"NIC{i}"
        f.dev.attrs["name_basis"] = "PCI bus order (the file names no net device)"
        taken.add(f.dev.name)
    seen: dict[str, int] = {}
    for f in nics:
        if f.dev.name in seen:
            port = f.dev.attrs.get("port")
            f.dev.name = (
                f"{f.dev.name}:{port}"
                if port and f"{f.dev.name}:{port}" not in seen
                else f"{f.dev.name}@{f.dev.pci}"
            )
        seen[f.dev.name] = 1


def _nvlink_kind(
    a: _Found, b: _Found, nvlinks: dict[str, list[tuple[str, int, str]]], gpu_by_bus: dict[str | None, _Found]
) -> tuple[str, str] | None:
    la = nvlinks.get(a.dev.pci or "", [])
    lb = nvlinks.get(b.dev.pci or "", [])
    direct = sum(c for t, c, _ in la if t == b.dev.pci) or sum(c for t, c, _ in lb if t == a.dev.pci)
    if direct:
        return f"NV{direct}", "source"
    sw_a = {t: 0 for t, _, cls in la if t not in gpu_by_bus and cls.startswith(NVSWITCH_CLASS_PREFIX)}
    sw_b = {t: 0 for t, _, cls in lb if t not in gpu_by_bus and cls.startswith(NVSWITCH_CLASS_PREFIX)}
    shared = set(sw_a) & set(sw_b)
    if not shared:
        return None
    ca = sum(c for t, c, _ in la if t in shared)
    cb = sum(c for t, c, _ in lb if t in shared)
    return f"NV{min(ca, cb)}", "derived"
