"""Latency split by topology: same-zone versus cross-zone, reported as a ratio.

Zones come from the ``topology.kubernetes.io/zone`` node label (the deprecated
``failure-domain.beta.kubernetes.io/zone`` as a fallback). :func:`zone_split` takes
``(source zone, destination zone, latency)`` observations; :func:`zone_split_by_node` maps node
names to zones first; :func:`zones_from_nodes` reads ``kubectl get nodes -o json``.
The ratio is cross-zone over same-zone at the chosen quantile (3.0 = cross-zone is 300% of
same-zone).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusterdoctor.errors import InputError

__all__ = [
    "NODE_LABEL_PAIRS",
    "ZONE_LABEL",
    "ZONE_LABEL_PAIRS",
    "is_latency_metric",
    "zones_of",
    "ZoneSplit",
    "quantile",
    "zone_split",
    "zone_split_by_node",
    "zones_from_nodes",
]

ZONE_LABEL = "topology.kubernetes.io/zone"
ZONE_LABEL_DEPRECATED = "failure-domain.beta.kubernetes.io/zone"

# Series labels that carry the zone of both ends of a request (set by relabelling from the node
# label above, or by a service mesh), and labels that carry node names to map through node zones.
ZONE_LABEL_PAIRS: tuple[tuple[str, str], ...] = (
    ("source_zone", "destination_zone"),
    ("src_zone", "dst_zone"),
    ("client_zone", "server_zone"),
    ("source_topology_kubernetes_io_zone", "destination_topology_kubernetes_io_zone"),
)
NODE_LABEL_PAIRS: tuple[tuple[str, str], ...] = (
    ("source_node", "destination_node"),
    ("src_node", "dst_node"),
    ("client_node", "server_node"),
)
# Latency metrics by Prometheus naming: a duration, latency or round-trip time in seconds or
# milliseconds (not timestamps such as node_boot_time_seconds, not counters of seconds).
_LATENCY_RE = re.compile(
    r"(?:duration|latency|handling|rtt|round_trip_time|response_time)(?:_[a-z]+)*_(?:seconds|milliseconds|ms)$"
)


def is_latency_metric(name: str) -> bool:
    """Whether a metric (or histogram base) name is a latency by Prometheus naming conventions."""
    return _LATENCY_RE.search(name) is not None


def zones_of(
    labels: Mapping[str, str], node_zones: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """``(source zone, destination zone)`` from a series' labels, or None when either is unknown."""
    for a, b in ZONE_LABEL_PAIRS:
        if labels.get(a) and labels.get(b):
            return labels[a], labels[b]
    nz = node_zones or {}
    for a, b in NODE_LABEL_PAIRS:
        za, zb = nz.get(labels.get(a, "")), nz.get(labels.get(b, ""))
        if za and zb:
            return za, zb
    return None


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (NaN when empty)."""
    xs = sorted(v for v in values if v == v)
    if not xs:
        return math.nan
    if len(xs) == 1:
        return xs[0]
    pos = min(max(q, 0.0), 1.0) * (len(xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class ZoneSplit:
    """Same-zone vs cross-zone latency at quantile ``q``; ``ratio`` = cross / same."""

    q: float
    same_count: int
    cross_count: int
    same_q: float
    cross_q: float
    same_median: float
    cross_median: float
    unknown: int = 0

    @property
    def ratio(self) -> float:
        if self.same_q != self.same_q or self.cross_q != self.cross_q or self.same_q <= 0:
            return math.nan
        return self.cross_q / self.same_q

    @property
    def median_ratio(self) -> float:
        if self.same_median != self.same_median or self.same_median <= 0:
            return math.nan
        return self.cross_median / self.same_median


def zone_split(observations: Iterable[tuple[str | None, str | None, float]], q: float = 0.99) -> ZoneSplit:
    """Split ``(src_zone, dst_zone, latency)`` into same- and cross-zone; unknown zones counted apart."""
    same: list[float] = []
    cross: list[float] = []
    unknown = 0
    for a, b, v in observations:
        if v != v:
            continue
        if not a or not b:
            unknown += 1
        elif a == b:
            same.append(float(v))
        else:
            cross.append(float(v))
    return ZoneSplit(
        q=q,
        same_count=len(same),
        cross_count=len(cross),
        same_q=quantile(same, q),
        cross_q=quantile(cross, q),
        same_median=quantile(same, 0.5),
        cross_median=quantile(cross, 0.5),
        unknown=unknown,
    )


def zone_split_by_node(
    observations: Iterable[tuple[str, str, float]], zones: Mapping[str, str], q: float = 0.99
) -> ZoneSplit:
    """Like :func:`zone_split` for ``(src_node, dst_node, latency)`` with ``zones[node]``."""
    return zone_split(((zones.get(a), zones.get(b), v) for a, b, v in observations), q)


def zones_from_nodes(data: str | bytes, path: str | None = None) -> dict[str, str]:
    """Node name -> zone from ``kubectl get nodes -o json`` (a List or a single Node)."""
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"not kubectl JSON: {e}", path) from None
    except RecursionError:
        raise InputError("kubectl JSON nested too deep to read", path) from None
    items = doc.get("items") if isinstance(doc, dict) and "items" in doc else [doc]
    if not isinstance(items, list):
        raise InputError("kubectl JSON has no items list", path)
    out: dict[str, str] = {}
    for it in items:
        if not isinstance(it, dict):
            continue
        meta = it.get("metadata") or {}
        if not isinstance(meta, dict):
            continue
        labels = meta.get("labels") or {}
        name = meta.get("name")
        zone = (
            labels.get(ZONE_LABEL) or labels.get(ZONE_LABEL_DEPRECATED) if isinstance(labels, dict) else None
        )
        if isinstance(name, str) and isinstance(zone, str):
            out[name] = zone
    return out
