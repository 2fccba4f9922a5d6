"""The pieces of an hwloc XML export (``lstopo --of xml``) before they are a topology: the object
tree walked in document order (:class:`_Obj`, :func:`_walk`), typed attributes read with the file's
errors named, cpusets (:func:`parse_hwloc_bitmap`), distance values, the format generation
(v1/v2/v3), and what a PCI or OS device is (GPU, NIC, by class, vendor and OS device name).

:mod:`clusterdoctor.observe.node.hwloc_xml` builds the
:class:`~clusterdoctor.topology.model.Topology` from these (and re-exports the public names here).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from clusterdoctor.errors import InputError
from clusterdoctor.topology.cpuset import MAX_CPU_ID

SOURCE_KIND = "hwloc-xml"

IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev", "Misc"})
PACKAGE_TYPES = frozenset({"Package", "Socket"})
GPU_VENDORS = {"10de": "NVIDIA", "1002": "AMD", "1da3": "Habana"}
NIC_VENDORS = {"15b3": "Mellanox", "8086": "Intel", "14e4": "Broadcom", "1d0f": "Amazon"}

# OS device names (hwloc doc "OS devices"): compute-capable GPUs and OpenFabrics HCAs.
GPU_OSDEV_RE = re.compile(r"^(?:(cuda|nvml|rsmi|ze)(\d+)|opencl\d+d\d+)$")
HCA_OSDEV_RE = re.compile(
    r"^(?:mlx\d+_\d+|mlx5_bond_\d+|hfi\d+_\d+|qib\d+|usnic_\d+|bnxt_re\d+|irdma\d+|i40iw\d+|efa_\d+|"
    r"erdma_\d+|mana_\d+|ionic_\d+|cxgb\d+_\d+|qedr\d+|ocrdma\d+|hns_\d+|rxe\d+|siw\d+|vmw_pvrdma\d+)$"
)
GPU_OSDEV_SUBTYPES = frozenset({"CUDA", "NVML", "RSMI", "OpenCL", "LevelZero"})
# osdev_type: an enum up to hwloc 2.x, a bit mask in 3.x (hwloc/include/hwloc.h of each version).
V2_OSDEV = {0: "block", 1: "gpu", 2: "network", 3: "openfabrics", 4: "dma", 5: "coproc"}
V3_OSDEV_NETWORK, V3_OSDEV_OPENFABRICS = 1 << 4, 1 << 5

PCI_TYPE_RE = re.compile(r"^\s*([0-9a-fA-F]{4})\s*\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
BUSID_RE = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
BRIDGE_PCI_RE = re.compile(r"^([0-9a-fA-F]{4,8}):\[([0-9a-fA-F]{2})-([0-9a-fA-F]{2})\]$")
MAX_WORDS = MAX_CPU_ID // 32


def _isnum(s: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts "²", which ``int()`` then rejects."""
    return s.isascii() and s.isdigit()


def parse_hwloc_bitmap(text: str, path: str | None = None) -> tuple[int, ...]:
    """Parse an hwloc bitmap string (``0x00000303,0x03030000,,0x0``) into sorted bit indexes.

    Words are 32-bit, most significant first; an empty word is zero; a leading ``0xf...f`` (an
    infinite set) is ignored, keeping the finite part.
    """
    s = text.strip()
    if not s:
        return ()
    words = s.split(",")
    if words and words[0].strip().lower() == "0xf...f":
        words = words[1:]
    if len(words) > MAX_WORDS:
        raise InputError(f"hwloc bitmap too long ({len(words)} words)", path)
    value = 0
    for w in words:
        w = w.strip().lower()
        if w.startswith("0x"):
            w = w[2:]
        if not w:
            w = "0"
        if len(w) > 8 or any(c not in "0123456789abcdef" for c in w):
            raise InputError(f"bad hwloc bitmap {text.strip()[:60]!r}", path)
        value = (value << 32) | int(w, 16)
    bits = bin(value)[2:][::-1]
    return tuple(i for i, b in enumerate(bits) if b == "1")


def _distance_float(tok: str, path: str | None) -> int:
    """A distance written as a float (hwloc 1.x latency * base, 2.0 ``<floats>``), rounded."""
    try:
        d = float(tok)
    except ValueError:
        raise InputError(f"distance {tok[:20]!r} is not a number", path) from None
    if d != d or d < 0 or d > 1e6:  # NaN, negative or absurd
        raise InputError(f"bad distance {tok[:20]!r}", path)
    return round(d)


def _slit_diagonal(matrix: list[list[int]]) -> bool:
    """ACPI SLIT matrices have 10 on the diagonal (local); user/relative matrices often have 1 or 0."""
    return all(row[i] == 10 for i, row in enumerate(matrix))


class _Obj:
    """One ``<object>`` with its parent and children (objects only), in document order."""

    __slots__ = ("children", "el", "order", "parent", "type")

    def __init__(self, el: ET.Element, parent: _Obj | None, order: int) -> None:
        self.el = el
        self.type = el.get("type", "")
        self.parent = parent
        self.children: list[_Obj] = []
        self.order = order

    def get(self, key: str) -> str | None:
        return self.el.get(key)

    def ancestors(self) -> Iterable[_Obj]:
        p = self.parent
        while p is not None:
            yield p
            p = p.parent

    def info(self, name: str) -> str | None:
        for child in self.el:
            if child.tag == "info" and child.get("name") == name:
                return child.get("value")
        return None


def _int_attr(obj: _Obj, key: str, path: str | None, *, required: bool = False) -> int | None:
    raw = obj.get(key)
    if raw is None or raw.strip() == "":
        if required:
            raise InputError(f"{obj.type} object without {key}", path)
        return None
    try:
        value = int(raw.strip(), 0)
    except ValueError:
        raise InputError(f"{obj.type} {key}={raw[:40]!r} is not an integer", path) from None
    if value < 0:
        raise InputError(f"{obj.type} {key}={raw[:40]!r} is negative", path)
    return value


def _major_version(root: ET.Element, path: str | None) -> int:
    raw = root.get("version")
    if raw is None:
        return 1
    m = re.match(r"^\s*(\d+)(?:\.\d+)*\s*$", raw)
    if not m:
        raise InputError(f"bad hwloc XML version {raw[:20]!r}", path)
    major = int(m.group(1))
    if major not in (1, 2, 3):
        raise InputError(f"unsupported hwloc XML version {raw[:20]!r} (expected 1.x, 2.x or 3.x)", path)
    return major


def _walk(root: ET.Element) -> tuple[list[_Obj], list[tuple[ET.Element, _Obj]]]:
    """All objects in document order, and every v1 ``<distances>`` element with the object holding it."""
    objs: list[_Obj] = []
    v1_distances: list[tuple[ET.Element, _Obj]] = []
    stack: list[tuple[ET.Element, _Obj | None]] = [
        (el, None) for el in reversed(list(root)) if el.tag == "object"
    ]
    while stack:
        el, parent = stack.pop()
        obj = _Obj(el, parent, len(objs))
        objs.append(obj)
        if parent is not None:
            parent.children.append(obj)
        kids = []
        for child in el:
            if child.tag == "object":
                kids.append((child, obj))
            elif child.tag == "distances":
                v1_distances.append((child, obj))
        stack.extend(reversed(kids))
    return objs, v1_distances


def _descendant_pus(obj: _Obj, pu_ids: dict[int, int]) -> list[int]:
    out = []
    stack = [obj]
    while stack:
        o = stack.pop()
        if o.type == "PU":
            out.append(pu_ids[o.order])
        stack.extend(o.children)
    return out


def _pci_fields(obj: _Obj) -> tuple[str | None, str | None, str | None]:
    """(class "0302", vendor "10de", device id) from ``pci_type``."""
    m = PCI_TYPE_RE.match(obj.get("pci_type") or "")
    if not m:
        return None, None, None
    return m.group(1).lower(), m.group(2).lower(), m.group(3).lower()


def _busid(obj: _Obj) -> str | None:
    raw = (obj.get("pci_busid") or "").strip().lower()
    return raw if BUSID_RE.match(raw) else None


def _gpu_by_class(cls: str | None, vendor: str | None) -> bool:
    """A compute GPU by PCI class and vendor alone (no CUDA/RSMI OS device in the file).

    NVIDIA: any display (03xx) or accelerator (12xx) class -- RTX/Ada boards are VGA (0300). AMD/ATI
    VGA (0300) is excluded: without an RSMI/OpenCL OS device it is as likely a server's 2D BMC chip
    (ATI ES1000 in the HP SL390s fixture) as a Radeon; Instinct boards are 0302/0380/12xx.
    """
    if cls is None or vendor not in GPU_VENDORS or cls[:2] not in ("03", "12"):
        return False
    return not (vendor == "1002" and cls == "0300")


def _osdev_role(obj: _Obj, major: int) -> str:
    """'gpu', 'openfabrics', 'network' or 'other' for an OSDev object."""
    name = obj.get("name") or ""
    subtype = obj.get("subtype") or ""
    if GPU_OSDEV_RE.match(name) or subtype in GPU_OSDEV_SUBTYPES:
        return "gpu"
    if HCA_OSDEV_RE.match(name):
        return "openfabrics"
    raw = (obj.get("osdev_type") or "").strip()
    code = int(raw) if _isnum(raw) and len(raw) < 10 else None
    if code is not None:
        if major >= 3:
            if code & V3_OSDEV_OPENFABRICS:
                return "openfabrics"
            if code & V3_OSDEV_NETWORK:
                return "network"
        else:
            role = V2_OSDEV.get(code)
            if role in ("openfabrics", "network"):
                return role
    return "other"
