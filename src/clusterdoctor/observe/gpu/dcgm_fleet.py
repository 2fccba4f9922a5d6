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

import msgspec

from clusterdoctor.errors import CollectError, InputError
from clusterdoctor.model import Series
from clusterdoctor.topology.gpu import GpuReport

__all__ = ["FLEET_QUERIES", "FleetResult", "collect_fleet", "decode_answer", "fleet_reports"]


@dataclass(frozen=True)
class FleetQuery:
    rule: str  # the rule the query serves ("context" for every-GPU series)
    metric: str  # the DCGM field its series stand for
    expr: str  # PromQL ({w} = the window)
    counter: bool = False  # an increase over the window
    keep: tuple[str, ...] | None = (
        None  # context queries: the labels kept (``max by``), to keep answers small
    )


# the labels that identify a GPU (dcgm-exporter's, and Prometheus' instance when Hostname is absent)
ID_LABELS = ("Hostname", "instance", "gpu", "UUID", "pci_bus_id")
# the labels that attribute it (model, driver, Kubernetes pod), asked once
WHO_LABELS = (
    *ID_LABELS,
    "modelName",
    "DCGM_FI_DRIVER_VERSION",
    "pod",
    "namespace",
    "container",
    "exported_pod",
    "exported_namespace",
    "exported_container",
)


def _ctx(metric: str, keep: tuple[str, ...] = ID_LABELS) -> FleetQuery:
    return FleetQuery("context", metric, f"max by ({', '.join(keep)}) ({metric})", keep=keep)


FLEET_QUERIES: tuple[FleetQuery, ...] = (
    _ctx("DCGM_FI_DEV_GPU_UTIL", WHO_LABELS),
    _ctx("DCGM_FI_DEV_SM_CLOCK"),
    _ctx("DCGM_FI_DEV_MAX_SM_CLOCK"),
    _ctx("DCGM_FI_DEV_PCIE_LINK_GEN"),
    _ctx("DCGM_FI_DEV_PCIE_MAX_LINK_GEN"),
    _ctx("DCGM_FI_DEV_PCIE_LINK_WIDTH"),
    _ctx("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH"),
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


_NO_REASONS: dict[str, bool] | None = None


def _clean_values() -> list[tuple[str, str, object]]:
    """(field, GpuState attribute, healthy value) for the fields of :data:`_CLEAN`."""
    global _NO_REASONS
    from clusterdoctor.observe.gpu.dcgm_exporter import _BOOL_ATTRS, DCGM_FIELDS
    from clusterdoctor.observe.gpu.nvidia_smi_q import reason_bits

    if _NO_REASONS is None:
        _NO_REASONS = reason_bits(0)
    out: list[tuple[str, str, object]] = []
    for metric in _CLEAN:
        attr = DCGM_FIELDS[metric][0]
        if attr == "clock_reasons":
            out.append((metric, attr, _NO_REASONS))  # shared, never mutated
        elif attr in _BOOL_ATTRS:
            out.append((metric, attr, False))
        else:
            out.append((metric, attr, 0))
    return out


@dataclass
class FleetResult:
    reports: list[GpuReport]
    queries: list[tuple[str, str, int]] = field(default_factory=list)  # (rule, expr, series returned)
    errors: list[str] = field(default_factory=list)
    url: str = ""
    time: float | None = None


class _Res(msgspec.Struct):
    metric: dict[str, str]
    value: tuple[float, str]


class _Data(msgspec.Struct):
    resultType: str
    result: list[_Res]


class _Doc(msgspec.Struct):
    status: str
    data: _Data | None = None


_DECODER: Any = None


def decode_answer(raw: bytes, where: str = "<answer>") -> list[tuple[dict[str, str], float, float]]:
    """An instant-query answer (Prometheus API JSON) -> ``(labels, time, value)`` per series, labels
    without ``__name__``. Decoded by a typed msgspec decoder (a 10,000-GPU answer is megabytes);
    anything but a successful vector answer is an InputError naming ``where``."""
    global _DECODER
    if _DECODER is None:
        _DECODER = msgspec.json.Decoder(_Doc)
    import gc

    paused = gc.isenabled()
    gc.disable()
    try:
        doc = _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
        raise InputError(f"not a Prometheus instant-query answer ({e})", where) from None
    finally:
        if paused:
            gc.enable()
    if doc.status != "success" or doc.data is None or doc.data.resultType != "vector":
        raise InputError("not a successful instant-vector answer", where)
    out = []
    for r in doc.data.result:
        m = r.metric
        m.pop("__name__", None)
        try:
            v = float(r.value[1])
        except ValueError:
            raise InputError(f"bad sample value {r.value[1]!r}", where) from None
        out.append((m, r.value[0], v))
    return out


def series_rows(series: list[Series]) -> list[tuple[dict[str, str], float, float]]:
    """PromClient.query's Series as the ``(labels, time, value)`` rows :func:`fleet_reports` takes."""
    return [(s.labels, s.points[-1][0], s.points[-1][1]) for s in series if s.points]


def _node(labels: dict[str, str]) -> str:
    return labels.get("Hostname") or labels.get("instance") or ""


def fleet_reports(*args: Any, **kwargs: Any) -> list[GpuReport]:
    """Reports per node from the queries' answers (see :func:`_fleet_reports`). The cyclic garbage
    collector is paused while the model is built: ~10 objects per GPU, none of them cyclic garbage,
    would otherwise trigger full collections over everything the process holds."""
    import gc

    if not gc.isenabled():
        return _fleet_reports(*args, **kwargs)
    gc.disable()
    try:
        return _fleet_reports(*args, **kwargs)
    finally:
        gc.enable()


def _fleet_reports(
    answers: list[tuple[FleetQuery, list[tuple[dict[str, str], float, float]]]],
    exported: dict[str, set[str]],
    end: float,
    window_s: float,
    source: str,
) -> list[GpuReport]:
    """Reports per node from the queries' answers, ``(labels, time, value)`` rows per query (pure:
    what the tests and the benchmark drive). GPU states are built directly from the rows."""
    from clusterdoctor.observe.gpu.dcgm_exporter import (
        COUNTER_FIELDS,
        DCGM_FIELDS,
        _apply,
        _gpu_key,
        _identity,
    )
    from clusterdoctor.topology.gpu import GpuState, PcieLink, Reading

    reports: dict[str, GpuReport] = {}
    gpus: dict[tuple[str, str], GpuState] = {}
    present: dict[tuple[str, str], set[str]] = {}
    plain = {"util_pct", "sm_clock_mhz", "sm_max_mhz", "temp_c", "power_w"}
    for q, rows in answers:
        spec = DCGM_FIELDS.get(q.metric)
        attr = spec[0] if spec else None
        counter = COUNTER_FIELDS.get(q.metric) if q.counter else None
        fast = attr in plain and counter is None
        for labels, t, v in rows:
            key = _gpu_key(labels)
            g = gpus.get(key)
            if g is None:
                node = key[0]
                rep = reports.get(node)
                if rep is None:
                    rep = reports[node] = GpuReport("dcgm-exporter", source, node=node or None)
                g = gpus[key] = GpuState(node=node or None)
                g.sources.append(source)
                rep.gpus.append(g)
                _identity(g, labels, source)
                present[key] = set()
            elif (g.model is None and "modelName" in labels) or (g.pod is None and "pod" in labels):
                _identity(g, labels, source)
            present[key].add(q.metric)
            if v != v or attr is None:
                continue
            if fast:
                setattr(g, attr, v)
                g.field_sources[attr] = source
                continue
            if counter is not None:
                g.readings.append(Reading(counter, 0.0, t - window_s, source))
                g.readings.append(Reading(counter, float(v), t, source))
                if q.metric == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER":
                    if g.pcie is None:
                        g.pcie = PcieLink(source=source)  # the link is known to exist and to replay
                    continue  # an increase, not the counter's value
            _apply(g, attr, v, source, labels)
    # clean values: a field the node exports that its rule query did not return for this GPU
    clean = _clean_values()
    for key, g in gpus.items():
        node_fields = exported.get(key[0])
        if not node_fields:
            continue
        pres = present[key]
        fs = g.field_sources
        for metric, attr, value in clean:
            if metric in node_fields and metric not in pres and getattr(g, attr) is None:
                setattr(g, attr, value)
                fs[attr] = source
    out = list(reports.values())
    for rep in out:
        fields = sorted(exported.get(rep.node or "", set()))
        rep.attrs["exported"] = fields
        rep.attrs["fields"] = fields
        rep.facts.update(DCGM_FIELDS[f][1] for f in fields if f in DCGM_FIELDS)
        rep.time = end
    return out


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
    raw_query = getattr(c, "query_raw", None)  # PromClient: the answer's bytes, msgspec-decoded here
    for q in FLEET_QUERIES:
        expr = q.expr.replace("{w}", w)
        if progress:
            progress(f"{q.rule}: {expr}")
        try:
            if raw_query is not None:
                rows = decode_answer(raw_query(expr, at=end), f"{c.url} query {expr!r}")
            else:
                rows = series_rows(c.query(expr, at=end))
        except (CollectError, InputError) as e:
            res.errors.append(f"{q.rule} {expr}: {e}")
            continue
        res.queries.append((q.rule, expr, len(rows)))
        answers.append((q, rows))
    res.reports = fleet_reports(answers, exported, end, window_s, f"prometheus {c.url}")
    return res
