"""Detect and load the event-side sources of ``clusterdoctor diagnose FILE``.

One entry point for :mod:`clusterdoctor.observe.detect`: :func:`sniff_events` says whether a file is
a log, RDMA counters text, Flink REST JSON, Kafka lag (text or metrics), or a Pod list, and
:func:`load_event_observations` loads it into observation kinds:

========================== =======================================================================
kind                       value
========================== =======================================================================
``events``                 list of :class:`~clusterdoctor.model.Event` (logs)
``pod_starts``             list of :class:`~clusterdoctor.observe.control.kube.PodStart` (pods JSON, kubelet logs)
``node_zones``             dict node name → zone (``kubectl get nodes -o json``)
``rdma``                   list of :class:`~clusterdoctor.observe.network.rdma.RdmaPort` (RDMA and ethtool/DPDK ports)
``rdma_rates``             list of :class:`~clusterdoctor.observe.network.rdma.RdmaRate` (``mlnx_perf`` rates)
``rdma_qps``               list of :class:`~clusterdoctor.observe.network.rdma.QueuePair`
``flink_checkpoints``      list of :class:`~clusterdoctor.observe.app.flink.FlinkCheckpoints`
``kafka_lag``              list of :class:`~clusterdoctor.observe.app.kafka.KafkaLagSnapshot`
``warnings``               list of str
========================== =======================================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["load_event_observations", "sniff_events"]

HEAD = 65536


def _kind(head: bytes, name: str) -> str | None:
    from clusterdoctor.observe.app.flink import sniff_flink
    from clusterdoctor.observe.app.kafka import sniff_kafka
    from clusterdoctor.observe.control.kube import sniff_nodes, sniff_pods
    from clusterdoctor.observe.control.logs import sniff_logs
    from clusterdoctor.observe.network.nic_stats import sniff_nic_stats
    from clusterdoctor.observe.network.rdma import sniff_rdma

    if sniff_pods(head, name):
        return "pods"
    if sniff_nodes(head, name):
        return "nodes"
    if sniff_flink(head, name):
        return "flink"
    if sniff_kafka(head, name):
        return "kafka"
    if sniff_rdma(head, name):
        return "rdma"
    if sniff_nic_stats(head, name):
        return "nic"
    if sniff_logs(head, name):
        return "logs"
    return None


def sniff_events(head: bytes, name: str = "") -> bool:
    """True when ``head`` is a log, RDMA counters, Flink/Kafka data, a Pod list or a Node list."""
    return _kind(head, name) is not None


def load_event_observations(path: str | Path) -> dict[str, Any]:
    """Load one such file by content → observations by kind (see the module docstring)."""
    p = Path(path)
    if p.is_dir():
        from clusterdoctor.observe.network.rdma import load_rdma

        return load_rdma(p)
    from clusterdoctor.observe.limits import read_head

    head = read_head(p, HEAD)
    kind = _kind(head, p.name)
    if kind == "pods":
        from clusterdoctor.observe.control.kube import load_pods

        return load_pods(p)
    if kind == "nodes":
        from clusterdoctor.observe.control.kube import load_nodes

        return load_nodes(p)
    if kind == "flink":
        from clusterdoctor.observe.app.flink import load_flink

        return load_flink(p)
    if kind == "kafka":
        from clusterdoctor.observe.app.kafka import load_kafka

        out = load_kafka(p)
        _add_metrics(out, p, head)
        return out
    if kind == "rdma":
        from clusterdoctor.observe.network.rdma import load_rdma

        return load_rdma(p)
    if kind == "nic":
        from clusterdoctor.observe.network.nic_stats import load_nic_stats

        return load_nic_stats(p)
    if kind == "logs":
        from clusterdoctor.observe.control.kube import pod_starts_from_events
        from clusterdoctor.observe.control.logs import load_logs

        out = load_logs(p)
        starts = pod_starts_from_events(out["events"])
        if starts:
            out["pod_starts"] = starts
        return out
    raise InputError("not a log, RDMA counters, Flink/Kafka data, Pod or Node list", str(p))


def _add_metrics(out: dict[str, Any], p: Path, head: bytes) -> None:
    """A kafka_exporter/KMinion dump is also a metrics exposition: keep its generic metrics too."""
    import re

    if not re.search(rb"^# (?:HELP|TYPE) ", head, re.M):
        return  # consumer-groups CLI text
    try:
        from clusterdoctor.observe.control.scrape import load_metrics_observations
    except ModuleNotFoundError as e:
        if e.name != "clusterdoctor.observe.control.scrape":
            raise
        return
    for k, v in load_metrics_observations(p).items():
        out.setdefault(k, v)
