"""Direct scrapes of ``/metrics`` endpoints and saved ``/metrics`` files.

:func:`scrape` reads one endpoint (with a timeout) into a :class:`~.prom_text.MetricSet`.
:func:`scrape_window` scrapes every URL twice, ``interval`` seconds apart, so counters and
histograms have a rate; each sample gets an ``instance`` label (``host:port``, as Prometheus
would add) and one dead endpoint never blocks the others — it becomes a warning.
:func:`load_metrics_file` reads a saved ``kubectl get --raw /metrics`` (or ``curl``) dump.
"""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from clusterdoctor.analyze.metric_window import MetricWindow
from clusterdoctor.errors import CollectError, InputError
from clusterdoctor.observe.control.prom_text import MetricSet, PromSample, parse_prom_text, sniff_prom_text

if TYPE_CHECKING:
    from clusterdoctor.observe.http_client import Deadline

__all__ = [
    "load_metrics_file",
    "load_metrics_observations",
    "scrape",
    "scrape_once",
    "scrape_window",
    "sniff_metrics",
]

ACCEPT = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"


def _instance(url: str) -> str:
    p = urllib.parse.urlparse(url)
    return p.netloc or url


def scrape(
    url: str,
    timeout: float = 5.0,
    headers: dict[str, str] | None = None,
    insecure: bool = False,
    run: Deadline | None = None,
) -> MetricSet:
    """GET ``url`` and parse the exposition. CollectError on connection problems, timeouts (connect,
    read, total, the run's ``run`` deadline) or an answer over the ``input`` budget
    (:mod:`clusterdoctor.observe.http_client`)."""
    p = urllib.parse.urlparse(url)
    if p.scheme not in ("http", "https") or not p.netloc:
        raise InputError("not an http(s) URL", url)
    from clusterdoctor.observe.http_client import request

    resp = request(
        url, headers={"Accept": ACCEPT, **(headers or {})}, connect_timeout=min(5.0, timeout),
        read_timeout=timeout, total_timeout=max(3 * timeout, 10.0), run=run, insecure=insecure,
    )  # fmt: skip
    if resp.status != 200:
        detail = resp.body[:200].decode("utf-8", "replace").strip().replace("\n", " ")
        raise CollectError(f"{url}: HTTP {resp.status} {detail}".rstrip())
    ctype, data = resp.headers.get("content-type", ""), resp.body
    om = True if "openmetrics" in ctype else None
    return parse_prom_text(data, url, openmetrics=om)


def _with_instance(ms: MetricSet, instance: str) -> MetricSet:
    new = tuple.__new__
    out = []
    for s in ms.samples:
        if any(k == "instance" for k, _ in s.labels):
            out.append(s)
        else:
            out.append(new(PromSample, (s.name, (*s.labels, ("instance", instance)), s.value, s.timestamp)))
    ms.samples = out
    ms._by_name = None
    return ms


def scrape_once(
    urls: list[str],
    timeout: float = 5.0,
    headers: dict[str, str] | None = None,
    insecure: bool = False,
    run: Deadline | None = None,
) -> tuple[list[tuple[float, MetricSet]], list[str]]:
    """Scrape every URL once, in parallel: ``([(time, MetricSet with instance label)], errors)``."""

    def one(u: str) -> tuple[float, MetricSet | None, str | None]:
        t = time.time()
        try:
            return t, _with_instance(scrape(u, timeout, headers, insecure, run), _instance(u)), None
        except (CollectError, InputError) as e:
            return t, None, str(e)

    timed: list[tuple[float, MetricSet]] = []
    errors: list[str] = []
    if not urls:
        return timed, errors
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(urls))) as ex:
        for t, ms, err in ex.map(one, urls):
            if ms is None:
                errors.append(err or "scrape failed")
            else:
                timed.append((t, ms))
    return timed, errors


def scrape_window(
    urls: list[str],
    interval: float = 5.0,
    timeout: float = 5.0,
    headers: dict[str, str] | None = None,
    insecure: bool = False,
) -> MetricWindow:
    """Scrape every URL twice, ``interval`` s apart (0: once), into one window.

    Failures become warnings on the window; CollectError only when no URL answered at all.
    """
    if not urls:
        raise InputError("no URL to scrape")
    from clusterdoctor.observe.http_client import Deadline
    from clusterdoctor.observe.limits import current

    run = Deadline(current().seconds)  # both rounds of every URL within the run's budget
    timed, errors = scrape_once(urls, timeout, headers, insecure, run)
    if interval > 0:
        time.sleep(interval)
        more, errors2 = scrape_once(urls, timeout, headers, insecure, run)
        timed += more
        errors += [e for e in errors2 if e not in errors]
    if not timed:
        raise CollectError("no /metrics endpoint answered: " + "; ".join(errors))
    w = MetricWindow.from_metricsets(timed, source="scrape " + ", ".join(urls))
    w.warnings.extend(errors)
    return w


def load_metrics_file(path: str | Path) -> MetricSet:
    """A saved ``/metrics`` exposition (``kubectl get --raw /metrics > file``)."""
    p = Path(path)
    from clusterdoctor.observe.limits import read_input

    data = read_input(p)  # size-limited, one-line errors
    try:
        return parse_prom_text(data, str(p))
    except MemoryError:
        raise InputError(
            f"not enough memory to parse {len(data) >> 20} MiB of metrics (cut the dump, e.g. with grep)",
            str(p),
        ) from None


def _sniff_api_answer(head: bytes) -> bool:
    """A saved Prometheus HTTP API answer (``curl …/api/v1/query_range``): JSON with a resultType."""
    h = head.lstrip()[:4096].replace(b" ", b"")
    return h.startswith(b"{") and b'"status":"success"' in h and b'"resultType":' in h


def sniff_metrics(head: bytes, name: str = "") -> bool:
    """Loader hook for ``observe.detect``: a saved /metrics exposition or Prometheus API answer."""
    return sniff_prom_text(head[:8192]) or _sniff_api_answer(head)


# Series a dump names its own target by: (metric, label, identity prefix).
_SELF_NAMES = (
    ("etcd_server_id", "server_id", "etcd"),
    ("node_uname_info", "nodename", "node"),
    ("kubelet_node_name", "node", "kubelet"),
)
# Components a dump is from, by metric name prefix, for the source label.
_COMPONENT_LABELS = (
    ("etcd_server_", "etcd"),
    ("scheduler_", "kube-scheduler"),
    ("apiserver_request_", "kube-apiserver"),
    ("kubelet_", "kubelet"),
    ("node_uname_info", "node exporter"),
    ("kafka_consumergroup_", "kafka exporter"),
    ("kminion_", "KMinion"),
    ("DCGM_", "dcgm-exporter"),
    ("prometheus_tsdb_", "Prometheus"),
)


def dump_identity(ms: MetricSet) -> str | None:
    """What target a saved ``/metrics`` dump is, from its own series: ``etcd:<member hex ID>``
    (``etcd_server_id``), ``node:<nodename>`` (``node_uname_info``), ``kubelet:<node>``
    (``kubelet_node_name``); None when it does not say (kube-scheduler, kube-apiserver)."""
    return _identity([(s.name, s.labels) for s in ms.samples])


def _identity(keys: list[tuple[str, tuple[tuple[str, str], ...]]]) -> str | None:
    """:func:`dump_identity` from the ``(name, labels)`` of the samples (or of the series)."""
    for metric, label, prefix in _SELF_NAMES:
        values = {dict(labels).get(label) for name, labels in keys if name == metric}
        values.discard(None)
        values.discard("")
        if len(values) == 1:
            return f"{prefix}:{values.pop()}"
    return None


def components_of(names: set[str]) -> list[str]:
    """The components whose metrics are among ``names``, for a source label."""
    out = []
    for prefix, label in _COMPONENT_LABELS:
        if label not in out and any(n.startswith(prefix) for n in names):
            out.append(label)
    return out


def load_metrics_observations(path: str | Path) -> dict[str, object]:
    """Loader hook for ``observe.detect``: ``{"metrics": window, "<component>_metrics": window}``.

    A dump without timestamps and without ``instance`` labels (``curl …/metrics > file``) gets
    ``instance=<its path>`` on every series, so dumps of several targets — or of one target at two
    times — never mix their series; what the dump says it is (:func:`dump_identity`) and its path
    are kept on the window (see :meth:`MetricWindow.canonical`)."""
    from clusterdoctor.analyze.metric_window import MetricWindow, observations_from_metrics

    p = Path(path)
    if _is_api_answer_file(p):
        from clusterdoctor.observe.control.prom_api import series_from_response
        from clusterdoctor.observe.limits import read_input

        series = series_from_response(read_input(p), str(p))
        times = [t for s in series for t, _ in s.points]
        window = MetricWindow.from_series(
            series, min(times, default=None), max(times, default=None), source=str(p)
        )
        names = sorted({s.name for s in series})
        window.name_sources = {n: str(p) for n in names}
        out = dict(observations_from_metrics(window, source=str(p)))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out["described_as"] = f"Prometheus query answer ({shown or 'empty'})"
        return out
    insts: set[str] = set()
    streamed = _window_streamed(p)
    if streamed is not None:
        ms, window, timed, has_instance, identity, insts = streamed
    else:
        ms = load_metrics_file(path)
        timed = any(s.timestamp is not None for s in ms.samples)
        has_instance = any(k == "instance" for s in ms.samples[:2000] for k, _ in s.labels)
        identity = None if timed else dump_identity(ms)
        if not timed and not has_instance:
            _with_instance(ms, str(p))
        window = MetricWindow.from_metricset(ms, source=str(p))
        if not timed and has_instance:
            insts = {dict(s.labels).get("instance", "") for s in ms.samples}
    if not timed:
        insts = {str(p)} if not has_instance else insts
        window.snapshot_instances = insts
        window.instance_sources = {i: str(p) for i in insts}
        if identity and not has_instance:
            window.instance_identity = {str(p): identity}
    before = len(window.warnings)
    window.canonical("")  # group this file's dumps now, so that a grouping cut short is said with it
    grouping = window.warnings[before:]
    out = dict(observations_from_metrics(window, source=str(p)))
    comps = components_of(window.names())
    what = "Prometheus federate dump" if timed else "Prometheus metrics dump"
    out["described_as"] = f"{what} ({', '.join(comps)})" if comps else what
    # lines the parser skipped reach the report's warnings (never silently dropped)
    warns = ms.warnings.summary() if hasattr(ms.warnings, "summary") else list(ms.warnings)
    if warns or grouping:
        out["warnings"] = [f"{path}: {w}" for w in warns] + grouping
    if not out.get("metrics") and not warns:
        out["warnings"] = [f"{path}: no samples in the metrics dump"]
    if not out.get("metrics") or any("truncated" in w for w in warns):
        out["incomplete_inputs"] = [f"{path}: " + ("truncated" if out.get("metrics") else "no samples")]
    return out


def _window_streamed(
    p: Path,
) -> tuple[MetricSet, MetricWindow, bool, bool, str | None, set[str]] | None:
    """What :func:`load_metrics_observations` reads of a plain dump, streamed (issue 26): the file in
    blocks, each series' points kept compact (``prom_stream.Points``), no sample kept. ``(families
    and warnings, window, timed, has_instance, identity, instances)``, as the whole-file path finds
    them; None when the plain pass refuses the file or two of its series become one in the window (the
    same labels in another order): then the file is read whole."""
    from clusterdoctor.model import Series
    from clusterdoctor.observe.control.prom_series import read_series

    got = read_series(str(p))
    if got is None:
        return None
    ms, sink = got
    keys = sink.index.keys
    timed = sink.timed
    has_instance = any(k == "instance" for sid in sink.first for k, _ in keys[sid][1])
    identity = None if timed else _identity(keys)
    if not timed and not has_instance:
        inst = ("instance", str(p))
        keys = [
            (n, labels if any(k == "instance" for k, _ in labels) else (*labels, inst)) for n, labels in keys
        ]
    window = MetricWindow(source=str(p))
    for fam in ms.families.values():
        window.types.setdefault(fam.name, fam.type)
    window.warnings.extend(ms.warnings)
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    add = window.series.setdefault
    for (name, labels), points in zip(keys, sink.points):
        k = (name, tuple(sorted(labels)))
        if k in seen:
            return None  # one series in the window from two in the file: their points interleave
        seen.add(k)
        add(name, []).append(Series(name, dict(labels), points))  # type: ignore[arg-type]
    insts: set[str] = set()
    if not timed and has_instance:
        insts = {dict(labels).get("instance", "") for _, labels in keys}
    return ms, window, timed, has_instance, identity, insts


def _is_api_answer_file(p: Path) -> bool:
    from clusterdoctor.observe.limits import read_head

    try:
        return _sniff_api_answer(read_head(p, 4096))
    except InputError:
        return False
