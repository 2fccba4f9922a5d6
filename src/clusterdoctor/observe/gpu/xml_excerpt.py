"""An excerpt of ``nvidia-smi -q -x`` (the sections of one ``<gpu>`` pasted without the document around
them, often cut mid-section) made whole: the open elements closed, a cut tag at the end dropped, and
the sections wrapped in ``<nvidia_smi_log><gpu>``.

Only element names of NVIDIA's ``nvsmi_device_v*.dtd`` per-GPU sections open an excerpt (:data:`SECTIONS`),
so other XML is not taken for one. What the excerpt shows is all that is judged: the report names only
the sections present (``facts``), and the values cut off are not read as zero or absent.
"""

from __future__ import annotations

import re

__all__ = ["SECTIONS", "close_excerpt", "excerpt_sections", "is_excerpt"]

# per-GPU sections of nvsmi_device_v12.dtd -> the report facts they carry
SECTIONS: dict[str, str] = {
    "ecc_mode": "ecc",
    "ecc_errors": "ecc",
    "retired_pages": "retired_pages",
    "remapped_rows": "remap",
    "clocks_event_reasons": "clocks",
    "clocks_throttle_reasons": "clocks",
    "clocks": "clocks",
    "max_clocks": "clocks",
    "pci": "pcie",
    "temperature": "temperature",
    "gpu_power_readings": "power",
    "power_readings": "power",
    "utilization": "utilization",
    "fb_memory_usage": "memory",
    "performance_state": "identity",
    "product_name": "identity",
}

_TAG = re.compile(r"<(/?)([A-Za-z_][\w.\-]{0,80})(?:\s[^<>]{0,400})?(/?)>")
_MAX = 1 << 20


def is_excerpt(head: bytes) -> bool:
    """Whether ``head`` opens with a per-GPU section element of ``nvidia-smi -q -x`` (no XML declaration,
    no document root)."""
    text = head[:8192].decode("utf-8", "replace").lstrip()
    m = _TAG.match(text)
    return bool(m) and not m.group(1) and m.group(2) in SECTIONS


def excerpt_sections(text: str) -> set[str]:
    """The report facts the excerpt's top-level sections carry."""
    depth = 0
    out: set[str] = set()
    for m in _TAG.finditer(text[:_MAX]):
        closing, name, empty = m.group(1), m.group(2), m.group(3)
        if closing:
            depth = max(0, depth - 1)
            continue
        if depth == 0 and name in SECTIONS:
            out.add(SECTIONS[name])
        if not empty:
            depth += 1
    return out


def close_excerpt(text: str) -> str:
    """The excerpt as a whole ``<nvidia_smi_log><gpu>`` document: a cut tag at the end dropped, the
    elements left open closed in order."""
    body = text[:_MAX]
    cut = body.rfind("<")
    if cut >= 0 and ">" not in body[cut:]:
        body = body[:cut]
    stack: list[str] = []
    for m in _TAG.finditer(body):
        closing, name, empty = m.group(1), m.group(2), m.group(3)
        if empty:
            continue
        if closing:
            if name in stack:
                while stack and stack.pop() != name:
                    pass
            continue
        stack.append(name)
    tail = "".join(f"</{n}>" for n in reversed(stack))
    return f"<nvidia_smi_log><gpu>{body}{tail}</gpu></nvidia_smi_log>"
