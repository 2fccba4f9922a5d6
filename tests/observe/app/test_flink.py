"""Flink REST checkpoint statistics, job archive and metrics responses (real fixtures)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.app.flink import load_flink, parse_flink, sniff_flink
from tests.conftest import shared_fixture

D = "ctrl/app/flink/"


def test_115_layout_79_total_10_failed():
    p = shared_fixture(D + "flink_rest_checkpoints_1.15_79total_10failed_k8s_operator.json")
    fc = parse_flink(p.read_bytes(), str(p))
    assert (fc.total, fc.failed, fc.counts["completed"], fc.counts["restored"]) == (79, 10, 69, 1)
    e2e = fc.summary["end_to_end_duration"]
    assert (e2e["min"], e2e["avg"], e2e["p95"], e2e["max"]) == (14, 24, 40.5, 117)
    assert fc.summary["alignment_buffered"]["max"] == 0
    assert [c.id for c in fc.history] == list(range(96, 86, -1))
    assert all(c.status == "COMPLETED" for c in fc.history)
    assert fc.history[0].trigger_time == pytest.approx(1653212837.604)
    assert fc.history[0].duration_ms == 17
    assert fc.latest_failed is None


def test_114_layout():
    p = shared_fixture(D + "flink_rest_checkpoints_1.14_savepoint_k8s_operator.json")
    fc = parse_flink(p.read_text(), str(p))
    assert (fc.total, fc.failed) == (2, 0)
    assert [(c.id, c.checkpoint_type, c.duration_ms) for c in fc.history] == [
        (2, "SYNC_SAVEPOINT", 95),
        (1, "CHECKPOINT", 420),
    ]
    assert "p50" not in fc.summary["end_to_end_duration"]


def test_115_nine_failed_not_in_history():
    p = shared_fixture(D + "flink_rest_checkpoints_1.15_9failed_k8s_operator.json")
    fc = parse_flink(p.read_bytes(), str(p))
    assert (fc.total, fc.failed) == (12, 9)
    assert len(fc.history) == 3 and not [c for c in fc.history if c.status == "FAILED"]


def test_history_archive_with_nan_strings():
    p = shared_fixture(D + "flink_history_archive_failed_job_streampark.json")
    fc = parse_flink(p.read_bytes(), str(p))
    assert fc.job_state == "FAILED" and fc.job_id == "d933fa6c785f0db6dccc6cc05dd43bab"
    assert fc.total == 0 and fc.history == []
    assert fc.interval_ms is None  # 9223372036854775807: periodic checkpoints off
    assert fc.timeout_ms == 600000
    assert "p50" not in fc.summary["end_to_end_duration"]  # "NaN" strings dropped


def test_job_and_subtask_metrics():
    job = parse_flink(shared_fixture(D + "flink_rest_job_metrics_checkpoint_gauges_otel.json").read_bytes())
    assert job.end_to_end_ms == 7 and job.total == 6641 and job.failed == 0
    sub = parse_flink(shared_fixture(D + "flink_rest_subtask_metrics_otel.json").read_bytes())
    assert sub.start_delay_ms == pytest.approx(3.0)  # checkpointStartDelayNanos 3000000
    assert (
        sub.metrics["outPoolUsage"] == pytest.approx(0.1)
        if "outPoolUsage" in sub.metrics
        else sub.metrics["Shuffle.Netty.Output.Buffers.outPoolUsage"] == pytest.approx(0.1)
    )


def test_sniff_and_load():
    for name in (
        "flink_rest_checkpoints_1.15_79total_10failed_k8s_operator.json",
        "flink_history_archive_failed_job_streampark.json",
        "flink_rest_job_metrics_checkpoint_gauges_otel.json",
    ):
        p = shared_fixture(D + name)
        assert sniff_flink(p.read_bytes()[:65536])
        assert len(load_flink(p)["flink_checkpoints"]) == 1
    assert not sniff_flink(
        shared_fixture("ctrl/app/pods/pods_kubelet_podlist_k8s1.31_minikube.json").read_bytes()[:65536]
    )


@pytest.mark.parametrize("text", ["", "{", "[1,2]", '{"a": 1}', '"x"', "null"])
def test_not_flink(text):
    with pytest.raises(InputError):
        parse_flink(text, "x.json")


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz(data):
    base = shared_fixture(D + "flink_rest_checkpoints_1.15_79total_10failed_k8s_operator.json").read_text()
    if data.draw(st.booleans()):
        text = data.draw(st.text(max_size=300))
    else:
        cut = data.draw(st.integers(0, len(base)))
        text = base[:cut] + data.draw(st.text(max_size=20)) + base[cut + data.draw(st.integers(0, 50)) :]
    try:
        parse_flink(text, "fuzz")
    except InputError:
        pass
