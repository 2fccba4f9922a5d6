"""Bus bandwidth: nccl-tests' factors that turn a collective's algorithm bandwidth into bus bandwidth,
and which link class (NVSwitch, NVLink, host memory, fabric, sockets) a measured busbw matches.

algbw = size / time; busbw = algbw * factor(collective, n ranks), so that busbw is comparable with the
hardware's link bandwidth whatever the collective and rank count (NVIDIA/nccl-tests
doc/PERFORMANCE.md): all-reduce 2(n-1)/n; reduce-scatter, all-gather and all-to-all (n-1)/n on the
total size; broadcast, reduce and send/recv 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import msgspec

BUSBW_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def busbw_factor(collective: str, nranks: int) -> float:
    """nccl-tests' algbw -> busbw factor for ``collective`` over ``nranks`` ranks (1.0 if unknown)."""
    f = BUSBW_FACTOR.get(collective)
    if f is None or nranks < 1:
        return 1.0
    return f(nranks)


# -- link classes ------------------------------------------------------------------------------------
# Which path a measured all_reduce busbw matches, from per-class reference values (the rules hold the
# numbers, each a Threshold with its source). Within a node a collective runs over NVSwitch, direct
# NVLink, or through host memory when P2P is off or unavailable (same socket, or across sockets);
# between nodes over an RDMA fabric (IB, EFA) or TCP sockets.

INTRA_NODE = ("nvswitch", "nvlink", "pcie", "pcie_sys")
INTER_NODE = ("efa", "ib", "socket")
DEGRADED = {
    "pcie": "GPU-to-GPU traffic goes through host memory within one socket (NCCL_P2P_DISABLE=1, or P2P "
    "unavailable)",
    "pcie_sys": "GPU-to-GPU traffic goes through host memory across CPU sockets (P2P disabled across the "
    "socket interconnect)",
    "socket": "inter-node traffic goes over TCP sockets instead of an RDMA fabric",
}
CLASS_NAMES = {
    "nvswitch": "NVSwitch",
    "nvlink": "NVLink",
    "pcie": "host memory, one socket (P2P off)",
    "pcie_sys": "host memory across sockets (P2P off)",
    "efa": "EFA",
    "ib": "InfiniBand",
    "socket": "TCP sockets",
}

# Parts whose name says how their GPUs are linked. SXM/HBM (baseboard) parts sit on NVLink, on
# NVSwitch from A100 on (HGX/DGX boards); PCIe cards talk over PCIe (P2P where the platform allows).
_NVSWITCH_PARTS = re.compile(
    r"\b(?:[AH]100|[AH]800|H20|H200|B100|B200|B300|GB200|GB300)\b.*(?:SXM|HBM)|"
    r"\b(?:H200|B200|B300|GB200|GB300)\b(?!.*\b(?:NVL|PCIe)\b)",
    re.IGNORECASE,
)
_NVLINK_PARTS = re.compile(r"\b[PV]100\b.*SXM", re.IGNORECASE)
_PCIE_PARTS = re.compile(
    r"PCIe|\bNVL\b|\b(?:T4|A2|A10G?|A16|A30|A40|A4000|A4500|A5000|A6000|L4|L40S?|RTX|GeForce|Quadro|TITAN)\b",
    re.IGNORECASE,
)


def expected_link_for_gpu(name: str) -> tuple[str, str] | None:
    """The link class a GPU model's peers are expected to use within a node, and why (None: not known).

    ``NVIDIA H100 80GB HBM3`` → nvswitch (SXM5 part), ``NVIDIA A100-SXM4-40GB`` → nvswitch,
    ``Tesla V100-SXM2-32GB`` → nvlink, ``NVIDIA A100-PCIE-40GB`` / ``Tesla T4`` / ``NVIDIA A40`` → pcie.
    """
    if _NVLINK_PARTS.search(name):
        return "nvlink", f"{name} is an SXM2 part: NVLink between GPUs"
    if _NVSWITCH_PARTS.search(name):
        return "nvswitch", f"{name} is an SXM/HBM baseboard part: NVLink through NVSwitch"
    if _PCIE_PARTS.search(name):
        return "pcie", f"{name} is a PCIe card: GPU peers over PCIe"
    return None


class LinkMatch(msgspec.Struct):
    """The link class a busbw matches: ``cls`` (None: none within ``factor``), how far (natural log of
    the ratio to the class's range), and the runner-up when it is nearly as close (ambiguous)."""

    cls: str | None
    distance: float
    ambiguous_with: str | None = None


def match_link_class(busbw: float, ranges: dict[str, tuple[float, float]], factor: float) -> LinkMatch:
    """The class whose busbw range is nearest to ``busbw`` on a log scale, if within ``factor`` of it.

    ``ranges`` maps each candidate class to (low, high) GB/s (low == high for a single reference). A
    match is ambiguous when the second-nearest class is within ``factor`` too and less than twice as
    far: the measurement cannot tell them apart.
    """
    if busbw <= 0 or not ranges:
        return LinkMatch(None, math.inf)
    dist = []
    for cls, (lo, hi) in ranges.items():
        d = 0.0 if lo <= busbw <= hi else min(abs(math.log(busbw / lo)), abs(math.log(busbw / hi)))
        dist.append((d, cls))
    dist.sort()
    limit = math.log(factor)
    d0, c0 = dist[0]
    if d0 > limit:
        return LinkMatch(None, d0)
    amb = None
    if len(dist) > 1:
        d1, c1 = dist[1]
        if d1 <= limit and d1 < 2 * d0 + 1e-9:
            amb = c1
    return LinkMatch(c0, d0, amb)
