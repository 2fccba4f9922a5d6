"""The whole fleet's GPU health from Prometheus: one query per rule over dcgm-exporter series.

Each rule's PromQL selects only the GPUs that may be sick (``DCGM_FI_DEV_ROW_REMAP_FAILURE > 0``,
``increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[10m]) > 0`` …), so a 10,000-GPU fleet answers with a
handful of series; a few context queries (utilisation, SM clocks, PCIe generation and width) cover
every GPU, and one ``count by (__name__, Hostname)`` says which fields each node exports at all. A
GPU that a rule's query did not return, on a node that exports the field, is clean for that field;
on a node that does not export it, the field stays unknown ("not exported").

Counters are asked as ``increase(...[window])`` and turned into two readings (start: 0, end: the
increase) so the rules compute the same per-minute rates as from two scrapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.errors import CollectError, InputError
from clusterdoctor.model import Series
from clusterdoctor.topology.gpu import GpuReport

__all__ = ["FLEET_QUERIES", "FleetResult", "collect_fleet", "fleet_reports"]


@dataclass(frozen=True)
class FleetQuery:
    rule: str  # the rule the query serves ("context" for every-GPU series)
    metric: str  # the DCGM field its series stand for
    expr: str  # PromQL ({w} = the window)
    counter: bool = False  # an increase over the window


FLEET_QUERIES: tuple[FleetQuery, ...] = (
    FleetQuery("context", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL"),
    FleetQuery("context", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK"),
    FleetQuery("context", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_MAX_SM_CLOCK"),
    FleetQuery("context", "DCGM_FI_DEV_PCIE_LINK_GEN", "DCGM_FI_DEV_PCIE_LINK_GEN"),
    FleetQuery("context", "DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "DCGM_FI_DEV_PCIE_MAX_LINK_GEN"),
    FleetQuery("context", "DCGM_FI_DEV_PCIE_LINK_WIDTH", "DCGM_FI_DEV_PCIE_LINK_WIDTH"),
    FleetQuery("context", "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH"),
    FleetQuery("GPU001", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERRORS != 0"),
    FleetQuery("GPU004", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0"),
    FleetQuery("GPU004", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL > 0"),
    FleetQuery("GPU005", "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_ROW_REMAP_PENDING > 0"),
    FleetQuery("GPU006", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0"),
    FleetQuery(
        "GPU006", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS > 0"
    ),
    FleetQuery("GPU007", "DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_SBE > 0"),
    FleetQuery("GPU007", "DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_RETIRED_DBE > 0"),
    FleetQuery("GPU007", "DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_RETIRED_PENDING > 0"),
    FleetQuery(
        "GPU008", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[{w}]) > 0", True
    ),
    FleetQuery("GPU009", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS > 1"),
    FleetQuery("GPU009", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS > 1"),
    FleetQuery(
        "GPU012",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "increase(DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL[{w}]) > 0",
        True,
    ),
    FleetQuery(
        "GPU012",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL[{w}]) > 0",
        True,
    ),
    FleetQuery(
        "GPU012",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[{w}]) > 0",
        True,
    ),
    FleetQuery(
        "GPU014",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[{w}]) > 0",
        True,
    ),
)
_EXPORTED_QUERY = 'count by (__name__, Hostname) ({{__name__=~"{names}"}})'

# the healthy value of a field a rule query filtered out (its filter is "> 0" / "!= 0")
_CLEAN = {
    "DCGM_FI_DEV_XID_ERRORS": 0.0,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0.0,
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": 0.0,
    "DCGM_FI_DEV_ROW_REMAP_PENDING": 0.0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0.0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0.0,
    "DCGM_FI_DEV_RETIRED_SBE": 0.0,
    "DCGM_FI_DEV_RETIRED_DBE": 0.0,
    "DCGM_FI_DEV_RETIRED_PENDING": 0.0,
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 0.0,
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0.0,
}


@dataclass
class FleetResult:
    reports: list[GpuReport]
    queries: list[tuple[str, str, int]] = field(default_factory=list)  # (rule, expr, series returned)
    errors: list[str] = field(default_factory=list)
    url: str = ""
    time: float | None = None


def _node(labels: dict[str, str]) -> str:
    return labels.get("Hostname") or labels.get("instance") or ""


def fleet_reports(
    answers: list[tuple[FleetQuery, list[Series]]],
    exported: dict[str, set[str]],
    end: float,
    window_s: float,
    source: str,
) -> list[GpuReport]:
    """Reports per node from the queries' answers (pure: what the tests and the benchmark drive)."""
    from clusterdoctor.analyze.metric_window import MetricWindow
    from clusterdoctor.observe.gpu.dcgm_exporter import gpus_from_window

    series: list[Series] = []
    gpu_keys: dict[tuple[str, ...], dict[str, str]] = {}
    present: dict[tuple[str, ...], set[str]] = {}
    for q, res in answers:
        for s in res:
            labels = {k: v for k, v in s.labels.items() if k != "__name__"}
            key = (_node(labels), labels.get("UUID") or labels.get("pci_bus_id") or labels.get("gpu", ""))
            gpu_keys.setdefault(key, labels)
            present.setdefault(key, set()).add(q.metric)
            if q.counter and s.points:
                t, inc = s.points[-1]
                series.append(Series(q.metric, labels, [(t - window_s, 0.0), (t, inc)]))
            else:
                series.append(Series(q.metric, labels, list(s.points)))
    # clean values: a field the node exports that its rule query did not return for this GPU
    for key, labels in gpu_keys.items():
        node_fields = exported.get(key[0], set())
        for metric, clean in _CLEAN.items():
            if metric in node_fields and metric not in present.get(key, set()):
                series.append(Series(metric, labels, [(end, clean)]))
    window = MetricWindow.from_series(series, end - window_s, end, source=source)
    reports = gpus_from_window(window, source)
    for rep in reports:
        rep.attrs["exported"] = sorted(exported.get(rep.node or "", set()))
    return reports


def collect_fleet(
    url: str,
    window_s: float = 600.0,
    *,
    timeout: float = 10.0,
    client: Any = None,
    progress: Callable[[str], None] | None = None,
) -> FleetResult:
    """Run :data:`FLEET_QUERIES` against the Prometheus at ``url`` (instant queries at the server's now)."""
    from clusterdoctor.observe.control.prom_api import PromClient

    c = client or PromClient(url, timeout=timeout)
    end = c.server_time()
    names = "|".join(sorted({q.metric for q in FLEET_QUERIES}))
    exported: dict[str, set[str]] = {}
    res = FleetResult([], url=c.url, time=end)
    try:
        for s in c.query(_EXPORTED_QUERY.format(names=names), at=end):
            exported.setdefault(s.labels.get("Hostname", ""), set()).add(s.labels.get("__name__", s.name))
    except (CollectError, InputError) as e:
        res.errors.append(f"exported fields: {e}")
    w = f"{int(window_s)}s"
    answers = []
    for q in FLEET_QUERIES:
        expr = q.expr.replace("{w}", w)
        if progress:
            progress(f"{q.rule}: {expr}")
        try:
            out = c.query(expr, at=end)
        except (CollectError, InputError) as e:
            res.errors.append(f"{q.rule} {expr}: {e}")
            continue
        res.queries.append((q.rule, expr, len(out)))
        answers.append((q, out))
    # series named only by their labels: the exporter's Hostname, else Prometheus' instance
    for _, out in answers:
        for s in out:
            s.labels.pop("__name__", None)
    res.reports = fleet_reports(answers, exported, end, window_s, f"prometheus {c.url}")
    return res
