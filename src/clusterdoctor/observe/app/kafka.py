"""Kafka consumer lag: ``kafka-consumer-groups --describe`` text and kafka_exporter / KMinion metrics.

Both become a :class:`KafkaLagSnapshot` (per-partition lag, members per group, when known). Two or
more snapshots of the same group (two files, or a metrics dump with timestamps) let a rule see
whether lag is growing.

* CLI text: every layout seen across versions — with or without the ``GROUP`` column, LAG 11 or 16
  wide, ``-`` for a partition without an active consumer — and the ``--members`` table
  (``#PARTITIONS`` per member, 0 = idle member).
* Metrics: ``kafka_consumergroup_lag{consumergroup,topic,partition}`` and
  ``kafka_consumergroup_members`` (danielqsj/kafka_exporter), ``kminion_kafka_consumer_group_topic_partition_lag``
  and ``kminion_kafka_consumer_group_members`` (KMinion). kafka_exporter writes ``-1`` for a
  partition with no committed offset: that is "unknown", never a negative lag.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = [
    "KafkaLagSnapshot",
    "PartitionLag",
    "load_kafka",
    "parse_consumer_groups",
    "parse_kafka_metrics",
    "sniff_kafka",
    "snapshots_from_samples",
]


@dataclass(frozen=True)
class PartitionLag:
    """Lag of one group on one partition; ``consumer`` is None when no member owns it."""

    group: str | None
    topic: str
    partition: int
    lag: int | None
    current_offset: int | None = None
    log_end_offset: int | None = None
    consumer: str | None = None
    host: str | None = None


@dataclass
class KafkaLagSnapshot:
    """One reading of consumer lag (a file or a scrape)."""

    source: str
    time: float | None = None
    partitions: list[PartitionLag] = field(default_factory=list)
    members: dict[str, int] = field(default_factory=dict)  # group -> member count
    member_partitions: dict[str, int] = field(default_factory=dict)  # consumer id -> #partitions
    warnings: list[str] = field(default_factory=list)

    def total_lag(self, group: str | None = None) -> int:
        return sum(
            p.lag for p in self.partitions if p.lag is not None and (group is None or p.group == group)
        )

    def groups(self) -> list[str | None]:
        return sorted({p.group for p in self.partitions}, key=lambda g: g or "")

    def active_consumers(self, group: str | None = None) -> set[str]:
        return {p.consumer for p in self.partitions if p.consumer and (group is None or p.group == group)}


_HEADER = re.compile(r"^\s*(GROUP\s+)?TOPIC\s+PARTITION\s+CURRENT-OFFSET\s+LOG-END-OFFSET\s+LAG\b")
_MEMBERS = re.compile(r"^\s*(GROUP\s+)?CONSUMER-ID\s+HOST\s+CLIENT-ID\s+#PARTITIONS\b")
_REQUIRED = {
    "lag": {"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"},
    "members": {"CONSUMER-ID", "#PARTITIONS"},
}


def _int(tok: str) -> int | None:
    if tok == "-":
        return None
    try:
        return int(tok)
    except ValueError:
        return None


def parse_consumer_groups(data: str | bytes, path: str | None = None) -> KafkaLagSnapshot:
    """``kafka-consumer-groups.sh --describe [--members]`` output → a snapshot."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    snap = KafkaLagSnapshot(source=path or "<kafka-consumer-groups>")
    cols: list[str] | None = None
    mode = None
    seen = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        header = "lag" if _HEADER.match(line) else "members" if _MEMBERS.match(line) else None
        if header is not None:
            cols, mode = line.split(), header
            if not _REQUIRED[header] <= set(cols):  # e.g. "LAG" glued to a control character
                snap.warnings.append(f"line {lineno}: header without the columns {sorted(_REQUIRED[header])}")
                cols = None
            seen = True
            continue
        if cols is None:
            continue
        parts = line.split()
        if len(parts) != len(cols):
            snap.warnings.append(
                f"line {lineno}: {len(parts)} fields where the header has {len(cols)}; skipped"
            )
            continue
        row = dict(zip(cols, parts))
        if mode == "members":
            n = _int(row["#PARTITIONS"])
            if n is None:
                snap.warnings.append(f"line {lineno}: #PARTITIONS is not a number; skipped")
                continue
            snap.member_partitions[row["CONSUMER-ID"]] = n
            g = row.get("GROUP")
            snap.members[g or ""] = snap.members.get(g or "", 0) + 1
            continue
        part = _int(row["PARTITION"])
        if part is None:
            snap.warnings.append(f"line {lineno}: PARTITION is not a number; skipped")
            continue
        cid = row.get("CONSUMER-ID")
        snap.partitions.append(
            PartitionLag(
                group=row.get("GROUP"),
                topic=row["TOPIC"],
                partition=part,
                lag=_int(row["LAG"]),
                current_offset=_int(row["CURRENT-OFFSET"]),
                log_end_offset=_int(row["LOG-END-OFFSET"]),
                consumer=None if cid in (None, "-") else cid,
                host=None if row.get("HOST") in (None, "-") else row.get("HOST"),
            )
        )
    if not seen:
        raise InputError(
            "no kafka-consumer-groups header (TOPIC PARTITION CURRENT-OFFSET … or CONSUMER-ID … #PARTITIONS)",
            path,
            1,
        )
    if not snap.partitions and not snap.member_partitions:
        raise InputError("kafka-consumer-groups header without any row", path)
    return snap


_LAG_METRICS = {
    "kafka_consumergroup_lag": ("consumergroup", "topic", "partition"),
    "kminion_kafka_consumer_group_topic_partition_lag": ("group_id", "topic_name", "partition_id"),
}
_MEMBER_METRICS = {
    "kafka_consumergroup_members": "consumergroup",
    "kminion_kafka_consumer_group_members": "group_id",
}


def parse_kafka_metrics(data: str | bytes, path: str | None = None) -> list[KafkaLagSnapshot]:
    """kafka_exporter / KMinion exposition → one snapshot per sample timestamp (one when untimed).

    Uses :func:`clusterdoctor.observe.control.prom_text.parse_prom_text`. Raises InputError when the text
    holds no consumer-group lag or member metric.
    """
    from clusterdoctor.observe.control.prom_text import parse_prom_text

    ms = parse_prom_text(data, path)
    snaps = snapshots_from_samples(ms.samples, path)
    if not snaps:
        raise InputError("no Kafka consumer-group lag or member metrics (kafka_exporter / KMinion)", path)
    if ms.warnings:
        snaps[0].warnings.extend(ms.warnings)
    return snaps


def snapshots_from_samples(samples: Iterable[Any], source: str | None = None) -> list[KafkaLagSnapshot]:
    """Kafka lag snapshots from already-parsed samples (``name``, ``labels`` pairs, ``value``, ``timestamp``).

    For a metrics loader that parsed a dump itself; empty when no Kafka consumer-group family is there.
    """
    snaps: dict[float | None, KafkaLagSnapshot] = {}

    def snap_at(ts: float | None) -> KafkaLagSnapshot:
        if ts not in snaps:
            snaps[ts] = KafkaLagSnapshot(source=source or "<metrics>", time=ts)
        return snaps[ts]

    for s in samples:
        if s.name in _LAG_METRICS:
            g_l, t_l, p_l = _LAG_METRICS[s.name]
            lab = dict(s.labels)
            try:
                part = int(lab.get(p_l, ""))
            except ValueError:
                continue
            v = s.value
            lag = int(v) if v == v and 0 <= v != float("inf") else None
            snap_at(s.timestamp).partitions.append(PartitionLag(lab.get(g_l), lab.get(t_l, "?"), part, lag))
        elif s.name in _MEMBER_METRICS:
            lab = dict(s.labels)
            if s.value == s.value and 0 <= s.value != float("inf"):
                snap_at(s.timestamp).members[lab.get(_MEMBER_METRICS[s.name], "")] = int(s.value)
    return [snaps[k] for k in sorted(snaps, key=lambda t: -1.0 if t is None else t)]


def sniff_kafka(head: bytes, name: str = "") -> bool:
    """True for consumer-groups text or a metrics dump with Kafka consumer-group families."""
    if re.search(
        rb"^\s*(?:GROUP\s+)?(?:TOPIC\s+PARTITION\s+CURRENT-OFFSET|CONSUMER-ID\s+HOST\s+CLIENT-ID\s+#PARTITIONS)",
        head,
        re.M,
    ):
        return True
    return bool(
        re.search(rb"^(?:kafka_consumergroup_|kminion_kafka_consumer_group_)\w*[{ ]", head, re.M)
    ) or (b"kafka_consumergroup_lag" in head or b"kminion_kafka_consumer_group" in head)


def load_kafka(path: str | Path) -> dict[str, Any]:
    """Read consumer-groups text or a kafka metrics dump → ``{"kafka_lag": [KafkaLagSnapshot…]}``."""
    p = Path(path)
    from clusterdoctor.observe.limits import read_input

    data = read_input(p)  # size-limited, one-line errors
    if re.search(rb"^\s*(?:GROUP\s+)?(?:TOPIC\s+PARTITION|CONSUMER-ID\s+HOST)", data[:65536], re.M):
        snaps = [parse_consumer_groups(data, str(p))]
    else:
        snaps = parse_kafka_metrics(data, str(p))
    warnings = [f"{p}: {w}" for s in snaps for w in s.warnings]
    return {"kafka_lag": snaps, "warnings": warnings}
