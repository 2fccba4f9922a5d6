"""etcdctl endpoint status/health JSON captured here from real etcd 3.4.23 clusters."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.etcd import (
    parse_duration,
    parse_endpoint_health,
    parse_endpoint_status,
    parse_etcdctl_errors,
)
from tests.conftest import TEST_DATA

D = TEST_DATA / "ctrl"


def test_three_member_status_before_leader_stop():
    rows = parse_endpoint_status((D / "etcdctl_3.4.23_endpoint_status_3member.json").read_text())
    assert [r.endpoint for r in rows] == ["127.0.0.1:22379", "127.0.0.1:22479", "127.0.0.1:22579"]
    assert {r.leader for r in rows} == {13144645163086586166}
    assert [r.is_leader for r in rows] == [True, False, False]
    assert format(rows[0].member_id, "x") == "b66b2921ec552136"  # as `-w table` prints it
    assert rows[0].version == "3.4.23" and rows[0].db_size == 24576 and rows[0].db_size_in_use == 16384
    assert all(r.raft_term == 2 and r.raft_applied_index == 8 for r in rows)


def test_status_after_leader_stop_and_stderr():
    rows = parse_endpoint_status((D / "etcdctl_3.4.23_endpoint_status_leader_stopped.json").read_bytes())
    assert [r.endpoint for r in rows] == ["127.0.0.1:22479", "127.0.0.1:22579"]
    assert {r.leader for r in rows} == {16964322743624413642}  # member b took over
    assert all(r.raft_term == 3 for r in rows)
    errs = parse_etcdctl_errors((D / "etcdctl_3.4.23_endpoint_status_leader_stopped.stderr").read_text())
    assert [(e.endpoint, e.message) for e in errs] == [("127.0.0.1:22379", "context deadline exceeded")]


def test_health_after_leader_stop():
    rows = parse_endpoint_health((D / "etcdctl_3.4.23_endpoint_health_leader_stopped.json").read_text())
    bad = [r for r in rows if not r.healthy]
    assert [r.endpoint for r in bad] == ["127.0.0.1:22379"]
    assert bad[0].error == "context deadline exceeded"
    assert bad[0].took_seconds == pytest.approx(2.000903725)
    good = [r for r in rows if r.healthy]
    assert good[0].took_seconds == pytest.approx(0.001609758)


def test_single_member():
    (st1,) = parse_endpoint_status((D / "etcdctl_3.4.23_endpoint_status_1member.json").read_text())
    assert st1.is_leader
    (h,) = parse_endpoint_health((D / "etcdctl_3.4.23_endpoint_health_1member.json").read_text())
    assert h.healthy


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("868.135µs", 868.135e-6), ("2.000903725s", 2.000903725), ("1m30s", 90), ("5ms", 0.005), ("1h", 3600)],
)
def test_go_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "5", "5 s", "s5"])
def test_not_durations(text):
    assert parse_duration(text) is None


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"a": 1}', '[{"Status": {"leader": "x"}}]'])
def test_bad_status_input(text):
    with pytest.raises(InputError):
        parse_endpoint_status(text, "status.json")


def test_health_file_is_not_status():
    with pytest.raises(InputError):
        parse_endpoint_status((D / "etcdctl_3.4.23_endpoint_health_1member.json").read_text())
    with pytest.raises(InputError):
        parse_endpoint_health((D / "etcdctl_3.4.23_endpoint_status_1member.json").read_text())


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzz_mutated_real_status_only_input_error(data):
    base = (D / "etcdctl_3.4.23_endpoint_status_3member.json").read_bytes()
    buf = bytearray(base)
    for _ in range(data.draw(st.integers(1, 5))):
        pos = data.draw(st.integers(0, len(buf) - 1)) if buf else 0
        if data.draw(st.booleans()) and buf:
            del buf[pos : pos + data.draw(st.integers(1, 20))]
        else:
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=6))
    for fn in (parse_endpoint_status, parse_endpoint_health):
        try:
            fn(bytes(buf))
        except InputError:
            pass


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=8), c),
        max_leaves=10,
    )
)
def test_fuzz_json_shapes_only_input_error(doc):
    text = json.dumps(doc)
    for fn in (parse_endpoint_status, parse_endpoint_health):
        try:
            fn(text)
        except InputError:
            pass


def test_loader_hooks_sniff_and_load_captured_files():
    from clusterdoctor.observe.control.etcd import load_etcdctl_observations, sniff_etcdctl

    status = D / "etcdctl_3.4.23_endpoint_status_3member.json"
    health = D / "etcdctl_3.4.23_endpoint_health_leader_stopped.json"
    assert sniff_etcdctl(status.read_bytes()) and sniff_etcdctl(health.read_bytes())
    assert not sniff_etcdctl((D / "prometheus_2.42.0_query_up.json").read_bytes())
    assert not sniff_etcdctl((D / "node_exporter_1.5.0_metrics.prom").read_bytes()[:4096])
    merged = load_etcdctl_observations(str(status))["etcd_status"].merge(
        load_etcdctl_observations(str(health))["etcd_status"]
    )
    assert len(merged.statuses) == 3 and len(merged.health) == 3
    assert merged.leader_endpoints() == ["127.0.0.1:22379"]


@pytest.mark.parametrize("value", ["1e999", "-1e999", "NaN", "Infinity"])
def test_number_fields_out_of_range_are_input_errors(value):
    """Found by hypothesis: a status field of 1e999 (JSON reads it as infinity) raised OverflowError."""
    text = '[{"Endpoint":"x","Status":{"header":{"member_id":' + value + '},"leader":1}}]'
    with pytest.raises(InputError, match="member_id is not a number"):
        parse_endpoint_status(text, "status.json")
