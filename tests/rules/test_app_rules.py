"""Application rules (Flink, Kafka) on the real fixtures, and checkpoint/etcd correlation."""

from __future__ import annotations

from dataclasses import replace

from clusterdoctor.model import Event, Severity
from clusterdoctor.observe.app.flink import Checkpoint, parse_flink
from clusterdoctor.observe.app.kafka import KafkaLagSnapshot, PartitionLag
from clusterdoctor.rules import app
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, Observations
from tests.conftest import shared_fixture
from tests.rules.test_etcd_log_rules import obs_of

F = "ctrl/app/flink/"
K = "ctrl/app/kafka/"
ALL = (
    app.flink_alignment_dominates,
    app.flink_checkpoint_failures,
    app.checkpoint_after_control_plane,
    app.flink_checkpointing_disabled,
    app.kafka_lag_with_consumers_up,
)


def found(obs):
    return sorted(
        (f.rule, str(f.severity))
        for r in ALL
        for f in (r.fn(obs) if all(obs.has(k) for k in r.requires) else [])
    )


def test_sections():
    for r in ALL:
        assert set(REQUIRED_SECTIONS) <= set(r.sections())


def test_flink_fixtures():
    assert found(
        obs_of(shared_fixture(F + "flink_rest_checkpoints_1.15_79total_10failed_k8s_operator.json"))
    ) == [("APP002", "warning")]
    assert found(obs_of(shared_fixture(F + "flink_rest_checkpoints_1.15_9failed_k8s_operator.json"))) == [
        ("APP002", "critical")
    ]
    assert found(obs_of(shared_fixture(F + "flink_rest_checkpoints_1.14_savepoint_k8s_operator.json"))) == []
    assert found(obs_of(shared_fixture(F + "flink_history_archive_failed_job_streampark.json"))) == [
        ("APP004", "info")
    ]
    assert found(obs_of(shared_fixture(F + "flink_rest_job_metrics_checkpoint_gauges_otel.json"))) == []
    # start delay 3 ms but no checkpoint duration in that response: nothing to compare
    assert found(obs_of(shared_fixture(F + "flink_rest_subtask_metrics_otel.json"))) == []


def test_nine_failed_says_history_lacks_failures():
    (f,) = app.flink_checkpoint_failures.fn(
        obs_of(shared_fixture(F + "flink_rest_checkpoints_1.15_9failed_k8s_operator.json"))
    )
    assert "9 of 12" in f.summary and "history lists no failed checkpoint" in f.summary


def test_alignment_share():
    fc = parse_flink(shared_fixture(F + "flink_rest_job_metrics_checkpoint_gauges_otel.json").read_bytes())
    obs = Observations()
    fc.alignment_ms = 6.0  # of the real 7 ms lastCheckpointDuration
    obs.put("flink_checkpoints", [fc])
    (f,) = app.flink_alignment_dominates.fn(obs)
    assert f.severity == Severity.WARNING and "86%" in f.summary
    fc.alignment_ms = 3.0
    assert list(app.flink_alignment_dominates.fn(obs)) == []


def test_checkpoint_failures_after_leader_change_rank():
    fc = parse_flink(shared_fixture(F + "flink_rest_checkpoints_1.15_9failed_k8s_operator.json").read_bytes())
    t0 = fc.history[0].trigger_time
    fc.history.append(Checkpoint(99, "FAILED", t0 + 100, None, None, failure_time=t0 + 160))
    obs = Observations()
    obs.put("flink_checkpoints", [fc])
    obs.put("events", [Event(t0 + 30, "etcd.lost_leader", "lost leader")])
    (f,) = app.checkpoint_after_control_plane.fn(obs)
    assert "100%" in f.summary
    # the same leader loss after the failure is not a cause
    obs.put("events", [Event(t0 + 400, "etcd.lost_leader", "lost leader")])
    assert list(app.checkpoint_after_control_plane.fn(obs)) == []


def test_kafka_fixtures():
    assert found(
        obs_of(shared_fixture(K + "kafka_consumer_groups_describe_lagging_apache_kafka_docs.txt"))
    ) == [("APP005", "warning")]
    assert found(
        obs_of(shared_fixture(K + "kafka_consumer_groups_describe_members_apache_kafka_docs.txt"))
    ) == [("APP005", "info")]
    assert found(obs_of(shared_fixture(K + "kminion_consumer_group_metrics_docs.prom"))) == [
        ("APP005", "warning")
    ]
    for quiet in (
        "kafka_consumer_groups_describe_my_topic_apache_kafka_docs.txt",
        "kafka_consumer_groups_describe_active_kafkanotes.txt",
        "kafka_consumer_groups_describe_no_active_members_kafkanotes.txt",
        "kafka_exporter_readme_consumergroup_metrics.prom",
        "kafka_exporter_v1.3.1_metrics_scrape.prom",
    ):
        assert found(obs_of(shared_fixture(K + quiet))) == [], quiet


def test_kafka_growth_between_two_readings():
    s = obs_of(shared_fixture(K + "kafka_consumer_groups_describe_lagging_apache_kafka_docs.txt")).get(
        "kafka_lag"
    )[0]
    later = KafkaLagSnapshot(s.source, 160.0, [replace(p, lag=(p.lag or 0) + 1000) for p in s.partitions])
    obs = Observations()
    obs.put("kafka_lag", [replace(s, time=100.0), later])
    (f,) = app.kafka_lag_with_consumers_up.fn(obs)
    assert f.severity == Severity.CRITICAL and "grew by 6000" in f.summary
    shrink = KafkaLagSnapshot(s.source, 160.0, [replace(p, lag=0) for p in s.partitions])
    obs.put("kafka_lag", [replace(s, time=100.0), shrink])
    assert list(app.kafka_lag_with_consumers_up.fn(obs)) == []


def test_lag_without_consumers_is_not_this_rule():
    obs = Observations()
    obs.put("kafka_lag", [KafkaLagSnapshot("x", None, [PartitionLag("g", "t", 0, 50000)])])
    assert list(app.kafka_lag_with_consumers_up.fn(obs)) == []


def test_kafka_describe_files_without_a_group_are_judged_apart_never_pooled():
    """Two `--describe --group X` outputs (no GROUP column) of different groups, read as a folder: each is
    judged, the 1,094,273-message lag of one is not lost behind the other (issue 23)."""
    from clusterdoctor import diagnosis
    from tests.conftest import shared_fixture

    lagging = shared_fixture("ctrl/app/kafka/kafka_consumer_groups_describe_lagging_apache_kafka_docs.txt")
    small = shared_fixture("ctrl/app/kafka/kafka_consumer_groups_describe_my_topic_apache_kafka_docs.txt")
    obs = diagnosis.new_observations(lambda: 0.0)
    diagnosis.load_sources(obs, [lagging, small])
    found = [f for f in diagnosis.run(obs, []).findings if f.rule == "APP005"]
    big = [f for f in found if "1094273" in f.summary]
    assert big and "topic1, topic2, topic3" in big[0].summary
    assert found[0] is big[0]  # the larger lag ranks first


# A real Flink 2.3 job under backpressure, captured here with PyFlink (tests/data/app/flink_backpressure_pyflink)
FLINK_BP = (
    __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "app" / "flink_backpressure_pyflink"
)


def _diagnose(*names):
    from clusterdoctor import diagnosis

    obs = diagnosis.new_observations(lambda: 0.0)
    refs = diagnosis.load_sources(obs, [FLINK_BP / n for n in names])
    return diagnosis.run(obs, refs)


def test_job_and_subtask_metrics_in_separate_files_are_joined_for_app001():
    d = _diagnose("job-metrics.json", "vertex1-subtask-metrics.json")
    (f,) = [x for x in d.findings if x.rule == "APP001"]
    assert "start delay 26847 ms of a 26853 ms checkpoint" in f.summary
    assert any("joined from 2 files" in e.description for e in f.evidence)


def test_checkpoint_details_name_the_subtask_that_waited():
    d = _diagnose("vertex1-checkpoint-4-details.json")
    (f,) = [x for x in d.findings if x.rule == "APP001"]
    assert "checkpoint 4, subtask 0 waited longest" in f.summary
    assert not d.warnings


def test_the_whole_real_capture_is_read_and_its_cause_leads():
    d = _diagnose(*sorted(p.name for p in FLINK_BP.glob("*.json")))
    assert d.findings[0].rule == "APP001"
    assert d.findings[0].subject == "de1f880de42605bd56e743ce6f922a53"  # the job, from job.json
    assert [w for w in d.warnings if "not used" in w] == [
        f"not used: {FLINK_BP / 'vertex0-subtask-metrics.json'}: unrecognised input: not a topology dump, "
        "sysfs tarball, clusterdoctor bundle, metrics dump, log, etcdctl output, NCCL log, nccl-tests output, "
        "trace or GPU tool output"
    ]  # `[]`: the source vertex has none of the metrics asked for
