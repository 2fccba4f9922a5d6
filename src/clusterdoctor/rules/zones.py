"""Topology-sensitive latency: cross-zone versus same-zone, from metrics labelled with both zones.

Inputs: ``metrics`` (a :class:`~clusterdoctor.analyze.metric_window.MetricWindow` from a dump,
scrapes or Prometheus range queries). A latency series qualifies when it carries the zone of both
ends: a label pair such as ``source_zone``/``destination_zone`` (set by relabelling from the
``topology.kubernetes.io/zone`` node label, or by a mesh), or node names on both ends
(``source_node``/``destination_node``) joined with ``node_zones`` from ``kubectl get nodes -o json``.
Gauge-like latencies (``scrape_duration_seconds``, ``probe_duration_seconds``) contribute every
point of the window; histograms contribute their bucket increases, merged per side.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from clusterdoctor.analyze.topology_split import is_latency_metric, zones_of
from clusterdoctor.model import Evidence, Finding, Severity, Threshold
from clusterdoctor.rules.registry import Observations, register_input, rule

CROSS_ZONE_P99_RATIO = Threshold(
    "cross_zone_p99_ratio",
    3.0,
    "x same-zone p99",
    "issue 3 (Why): in these clusters the P99 latency of cross-zone work climbs past 300% of normal while "
    "same-zone work looks fine",
    "cross-zone p99 latency as a multiple of same-zone p99 at which the topology is the cause",
)
MIN_OBSERVATIONS = Threshold(
    "zone_split_min_observations",
    20,
    "observations per side",
    "clusterdoctor default: a p99 from fewer than 20 points is the maximum, not a tail estimate",
    "points (or histogram observations) needed on each side before comparing",
)
QUANTILE = 0.99

register_input(
    "node_zones",
    "no node → zone map (pass `kubectl get nodes -o json`; zones from topology.kubernetes.io/zone)",
)


@dataclass
class _Side:
    values: list[float]
    hist: list  # Histogram
    zones: set[tuple[str, str]]
    series: int = 0

    def count(self) -> float:
        return len(self.values) + sum((h.count if h.count is not None else _top(h)) for h in self.hist)


def _top(h) -> float:
    return h.buckets[-1][1] if h.buckets else 0.0


def _quantile(side: _Side, q: float) -> float:
    from clusterdoctor.analyze.quantile import histogram_quantile, merge_histograms
    from clusterdoctor.analyze.topology_split import quantile

    if side.hist:
        m = merge_histograms(side.hist)
        return histogram_quantile(q, m) if m is not None else math.nan
    return quantile(side.values, q)


def _unit_scale(name: str) -> float:
    return 0.001 if name.endswith(("_milliseconds", "_ms")) else 1.0


def zone_latency_splits(window, node_zones: dict[str, str] | None = None) -> list[dict]:
    """Per latency metric with zone-labelled ends: same/cross p99 and median (seconds), counts, ratio.

    Histograms (``<name>_bucket``) are compared through their merged bucket increases; other
    series through all their points in the window.
    """
    nz = node_zones or {}
    out = []
    names = sorted(window.names())
    hist_bases = {n[: -len("_bucket")] for n in names if n.endswith("_bucket")}
    candidates = [n for n in names if is_latency_metric(n) and not n.endswith(("_sum", "_count"))]
    candidates += [b for b in sorted(hist_bases) if is_latency_metric(b)]
    for name in dict.fromkeys(candidates):
        same, cross = _Side([], [], set()), _Side([], [], set())
        is_hist = name in hist_bases
        if is_hist:
            for h in window.histograms(name):
                z = zones_of(h.labels, nz)
                if z is None:
                    continue
                side = same if z[0] == z[1] else cross
                side.hist.append(h)
                side.zones.add(z)
                side.series += 1
        else:
            for s in window.select(name):
                z = zones_of(s.labels, nz)
                if z is None or "quantile" in s.labels:  # a summary's quantiles are not observations
                    continue
                side = same if z[0] == z[1] else cross
                side.values.extend(v for _, v in s.points if v == v)
                side.zones.add(z)
                side.series += 1
        if not same.series or not cross.series:
            continue
        k = _unit_scale(name)
        sq, cq = _quantile(same, QUANTILE) * k, _quantile(cross, QUANTILE) * k
        sm, cm = _quantile(same, 0.5) * k, _quantile(cross, 0.5) * k
        out.append(
            {
                "metric": name,
                "histogram": is_hist,
                "same_p99": sq,
                "cross_p99": cq,
                "same_median": sm,
                "cross_median": cm,
                "ratio": cq / sq if sq > 0 and cq == cq else math.nan,
                "median_ratio": cm / sm if sm > 0 and cm == cm else math.nan,
                "same_n": same.count(),
                "cross_n": cross.count(),
                "same_series": same.series,
                "cross_series": cross.series,
                "same_zones": sorted(same.zones),
                "cross_zones": sorted(cross.zones),
            }
        )
    return out


def _ms(v: float) -> float:
    return round(v * 1000, 3)


@rule(
    id="ZONE001",
    name="cross-zone-latency",
    layer="network",
    title="Cross-zone latency tail is several times the same-zone tail",
    requires=("metrics",),
    thresholds=(CROSS_ZONE_P99_RATIO, MIN_OBSERVATIONS),
    severity=Severity.WARNING,
)
def cross_zone_latency(obs: Observations) -> Iterator[Finding]:
    """Requests that cross a zone boundary have a p99 latency several times that of same-zone requests.

    **Symptom**: tail latency, timeouts or slow collectives only for some pairs of pods/nodes; averages
    look fine; the same service is fast from one zone and slow from another.
    **Why**: traffic between zones crosses a slower, shared and often metered path (inter-zone links,
    NAT/load balancers, encryption), and congestion there hits only the cross-zone share. Comparing the
    same metric split by the zones of both ends isolates the topology from the service itself.
    **Fix**: keep chatty traffic inside a zone — topology-aware routing (`service.kubernetes.io/topology-mode:
    Auto`, `trafficDistribution: PreferClose`), zone-spread replicas with `topologySpreadConstraints`,
    node/pod affinity for tightly coupled jobs; then look for congestion on the inter-zone path.
    **Verify**: `kubectl get nodes -L topology.kubernetes.io/zone`; re-run
    `clusterdoctor diagnose --prometheus URL --since 1h` and compare the cross/same-zone p99 ratio.
    """
    window = obs.get("metrics")
    if window is None or not hasattr(window, "select"):
        return
    nz = obs.get("node_zones") or {}
    for sp in zone_latency_splits(window, nz if isinstance(nz, dict) else {}):
        if min(sp["same_n"], sp["cross_n"]) < MIN_OBSERVATIONS.value:
            continue
        ratio = sp["ratio"]
        if not ratio == ratio or ratio < CROSS_ZONE_P99_RATIO.value:
            continue
        worst_pair = " / ".join(f"{a}→{b}" for a, b in sp["cross_zones"])
        ev = [
            Evidence(
                f"{sp['metric']}: same-zone p99 ({sp['same_series']} series, {sp['same_n']:g} observations, "
                + ", ".join(f"{a}→{b}" for a, b in sp["same_zones"])
                + ")",
                _ms(sp["same_p99"]),
                unit="ms",
                source=getattr(window, "source", None) or None,
            ),
            Evidence(
                f"{sp['metric']}: cross-zone p99 ({sp['cross_series']} series, {sp['cross_n']:g} observations, "
                f"{worst_pair})",
                _ms(sp["cross_p99"]),
                unit="ms",
                source=getattr(window, "source", None) or None,
            ),
            Evidence("cross-zone / same-zone p99", round(ratio, 2), CROSS_ZONE_P99_RATIO.value, "x"),
            Evidence("cross-zone / same-zone median", round(sp["median_ratio"], 2), unit="x"),
        ]
        yield cross_zone_latency.finding(
            f"{sp['metric']}: cross-zone p99 {_ms(sp['cross_p99']):g} ms is {ratio:.1f}× the same-zone p99 "
            f"{_ms(sp['same_p99']):g} ms ({worst_pair}); the zone boundary, not the service, drives the tail.",
            evidence=ev,
            severity=Severity.WARNING,
            confidence=0.8 if min(sp["same_n"], sp["cross_n"]) >= 100 else 0.65,
            subject=worst_pair,
        )
