"""Kafka consumer lag: kafka-consumer-groups text layouts and kafka_exporter / KMinion metrics."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.app.kafka import (
    load_kafka,
    parse_consumer_groups,
    parse_kafka_metrics,
    sniff_kafka,
)
from tests.conftest import shared_fixture

D = "ctrl/app/kafka/"


def test_lagging_group_newer_layout():
    s = parse_consumer_groups(
        shared_fixture(D + "kafka_consumer_groups_describe_lagging_apache_kafka_docs.txt").read_text()
    )
    assert len(s.partitions) == 6
    assert s.total_lag() == 154289 + 282610 + 157799 + 1665 + 342753 + 155157
    t2p0 = next(p for p in s.partitions if p.topic == "topic2" and p.partition == 0)
    assert (t2p0.current_offset, t2p0.log_end_offset, t2p0.lag) == (460537, 803290, 342753)
    assert len(s.active_consumers()) == 3 and all(p.group is None for p in s.partitions)


def test_old_wide_layout_and_full_layout():
    s = parse_consumer_groups(
        shared_fixture(D + "kafka_consumer_groups_describe_my_topic_apache_kafka_docs.txt").read_text()
    )
    assert [p.lag for p in s.partitions] == [2, 1, 1]
    a = parse_consumer_groups(
        shared_fixture(D + "kafka_consumer_groups_describe_active_kafkanotes.txt").read_text()
    )
    assert {p.group for p in a.partitions} == {"first_group"} and a.total_lag() == 0
    assert a.partitions[0].host == "/192.168.0.13"


def test_no_active_members_dash_fields():
    s = parse_consumer_groups(
        shared_fixture(D + "kafka_consumer_groups_describe_no_active_members_kafkanotes.txt").read_text()
    )
    assert len(s.partitions) == 3 and all(p.consumer is None and p.host is None for p in s.partitions)
    assert s.active_consumers() == set()


def test_members_table():
    s = parse_consumer_groups(
        shared_fixture(D + "kafka_consumer_groups_describe_members_apache_kafka_docs.txt").read_text()
    )
    assert sorted(s.member_partitions.values()) == [0, 1, 2, 3]
    assert s.member_partitions["consumer3-ecea43e4-1f01-479f-8349-f9130b75d8ee"] == 0


def test_exporter_metrics_minus_one_is_not_negative_lag():
    (s,) = parse_kafka_metrics(
        shared_fixture(D + "kafka_exporter_readme_consumergroup_metrics.prom").read_bytes()
    )
    assert s.total_lag() == 1  # kafka_consumergroup_lag 1; current_offset -1 is ignored
    assert s.members == {"KMOffsetCache-kafka-manager-3806276532-ml44w": 1}
    (full,) = parse_kafka_metrics(
        shared_fixture(D + "kafka_exporter_v1.3.1_metrics_scrape.prom").read_bytes()
    )
    assert full.members == {"G1": 1} and full.total_lag("G1") == 0
    (km,) = parse_kafka_metrics(shared_fixture(D + "kminion_consumer_group_metrics_docs.prom").read_bytes())
    assert km.total_lag("bigquery-sink") == 147481 and km.members["bigquery-sink"] == 2


def test_load_and_sniff():
    for name in (
        "kafka_consumer_groups_describe_lagging_apache_kafka_docs.txt",
        "kafka_consumer_groups_describe_members_apache_kafka_docs.txt",
        "kminion_consumer_group_metrics_docs.prom",
    ):
        p = shared_fixture(D + name)
        assert sniff_kafka(p.read_bytes()[:65536])
        assert load_kafka(p)["kafka_lag"]
    assert not sniff_kafka(shared_fixture("ctrl/etcd_v3.6.6_minikube_metrics.prom").read_bytes()[:65536])


def test_not_kafka():
    with pytest.raises(InputError):
        parse_consumer_groups("TOPIC foo\n1 2 3\n")
    with pytest.raises(InputError):
        parse_kafka_metrics(shared_fixture("ctrl/kubelet_pod_start_sli_aks_before.prom").read_bytes())


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz(data):
    base = shared_fixture(D + "kafka_consumer_groups_describe_lagging_apache_kafka_docs.txt").read_text()
    if data.draw(st.booleans()):
        text = data.draw(st.text(max_size=300))
    else:
        cut = data.draw(st.integers(0, len(base)))
        text = base[:cut] + data.draw(st.text(max_size=20)) + base[cut + data.draw(st.integers(0, 80)) :]
    try:
        s = parse_consumer_groups(text)
    except InputError:
        return
    assert all(p.lag is None or p.lag >= 0 or "-" in text for p in s.partitions)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_metrics(data):
    try:
        parse_kafka_metrics(data)
    except InputError:
        pass


def test_snapshots_from_parsed_samples():
    from clusterdoctor.observe.app.kafka import snapshots_from_samples
    from clusterdoctor.observe.control.prom_text import parse_prom_text

    ms = parse_prom_text(shared_fixture(D + "kminion_consumer_group_metrics_docs.prom").read_bytes())
    (s,) = snapshots_from_samples(ms.samples, "x")
    assert s.total_lag("bigquery-sink") == 147481
    assert (
        snapshots_from_samples(
            parse_prom_text(shared_fixture("ctrl/kubelet_pod_start_sli_aks_before.prom").read_bytes()).samples
        )
        == []
    )
