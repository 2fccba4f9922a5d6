"""Prometheus text / OpenMetrics parser on real expositions (fixtures, captures, real client output)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary
from prometheus_client.exposition import generate_latest as text_latest
from prometheus_client.openmetrics.exposition import generate_latest as om_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.prom_text import MetricSet, parse_prom_text, sniff_prom_text
from clusterdoctor.testing import comparable_samples, prom_client_samples
from tests.conftest import TEST_DATA, shared_fixture

SCHED = "ctrl/kube-scheduler_v1.35.0_minikube_metrics.prom"
ETCD = "ctrl/etcd_v3.6.6_minikube_metrics.prom"
KUBELET_AFTER = "ctrl/kubelet_pod_start_sli_aks_after_110pods.prom"
KUBELET_BEFORE = "ctrl/kubelet_pod_start_sli_aks_before.prom"
CAPTURED = [
    "node_exporter_1.5.0_metrics.prom",
    "prometheus_2.42.0_federate_all.prom",
    "etcd_3.4.23_3member_after_leader_stop_metrics.prom",
]


def sample_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


@pytest.mark.parametrize("rel", [SCHED, ETCD, KUBELET_AFTER, KUBELET_BEFORE])
def test_fixture_samples_equal_prometheus_client(rel):
    text = shared_fixture(rel).read_text()
    ms = parse_prom_text(text, rel)
    assert ms.warnings == []
    assert len(ms.samples) == len(sample_lines(text))
    assert comparable_samples(ms) == prom_client_samples(text)


@pytest.mark.parametrize("name", CAPTURED)
def test_captured_scrapes_equal_prometheus_client(name):
    text = (TEST_DATA / "ctrl" / name).read_text()
    ms = parse_prom_text(text.encode(), name)
    assert ms.warnings == []
    assert len(ms.samples) == len(sample_lines(text))
    assert comparable_samples(ms) == prom_client_samples(text)


def test_scheduler_dump_values_read_from_file():
    ms = parse_prom_text(shared_fixture(SCHED).read_bytes())
    assert ms.value("scheduler_pending_pods", queue="unschedulable") == 1
    assert ms.value("scheduler_pending_pods", queue="active") == 0
    assert ms.value("scheduler_schedule_attempts_total", result="scheduled") == 20
    assert ms.value("scheduler_schedule_attempts_total", result="unschedulable") == 3
    fam = ms.families["scheduler_scheduling_attempt_duration_seconds"]
    assert fam.type == "histogram"
    assert fam.help.startswith("[STABLE] Scheduling attempt latency in seconds")
    (build,) = ms.get("kubernetes_build_info")
    assert dict(build.labels)["git_version"] == "v1.35.0"
    hs = {h.labels["result"]: h for h in ms.histograms("scheduler_scheduling_attempt_duration_seconds")}
    assert set(hs) == {"scheduled", "unschedulable"}
    assert hs["scheduled"].count == 20 and hs["unschedulable"].count == 3
    assert hs["scheduled"].buckets[1] == (0.002, 2)  # le="0.002" 2
    assert hs["scheduled"].buckets[-1] == (math.inf, 20)
    assert len(hs["scheduled"].buckets) == 16  # 0.001 x 2^k up to 16.384, plus +Inf
    assert not ms.has("scheduler_e2e_scheduling_duration_seconds")
    assert ms.has("scheduler_pod_scheduling_sli_duration_seconds")


def test_etcd_dump_values_read_from_file():
    ms = parse_prom_text(shared_fixture(ETCD).read_bytes())
    (ver,) = ms.get("etcd_server_version")
    assert dict(ver.labels) == {"server_version": "3.6.6"}
    (h,) = ms.histograms("etcd_disk_wal_fsync_duration_seconds")
    assert h.count == 855 and h.sum == pytest.approx(1.122373673)
    assert h.buckets[0] == (0.001, 705) and h.buckets[-2] == (8.192, 855) and h.buckets[-1][0] == math.inf
    assert ms.value("etcd_server_leader_changes_seen_total") == 1
    assert ms.value("etcd_server_has_leader") == 1
    assert ms.type_of("etcd_disk_wal_fsync_duration_seconds_bucket") == "histogram"
    assert ms.type_of("etcd_server_leader_changes_seen_total") == "counter"


def test_negative_sum_kept_as_is():
    ms = parse_prom_text(shared_fixture(KUBELET_AFTER).read_bytes())
    (h,) = ms.histograms("kubelet_pod_start_sli_duration_seconds")
    assert h.sum == -1.8446742887692856e10
    assert h.count == 110


def test_federate_millisecond_timestamps():
    text = (TEST_DATA / "ctrl" / "prometheus_2.42.0_federate_all.prom").read_text()
    second_line = text.splitlines()[1]  # etcd_cluster_version{...} 1 1796028696879
    ms = parse_prom_text(text)
    assert ms.samples[0].name == second_line.split("{")[0]
    assert ms.samples[0].timestamp == int(second_line.rsplit(" ", 1)[1]) / 1000


def _registry():
    r = CollectorRegistry()
    h = Histogram(
        "req_seconds", 'Latency \\ with "quotes"\nand newline', ["path"], registry=r, buckets=(0.1, 1)
    )
    h.labels(path='a\\b"c\nd').observe(0.05, exemplar={"trace_id": "abc"})
    h.labels(path="plain").observe(3)
    c = Counter("hits", "Hits", registry=r)
    c.inc(2)
    g = Gauge("temp", "A gauge", ["x"], registry=r)
    g.labels(x="}{,=").set(float("-inf"))
    g.labels(x="nan").set(float("nan"))
    s = Summary("sz", "A summary", registry=r)
    s.observe(4)
    return r


def test_real_client_text_exposition_with_escapes():
    text = text_latest(_registry()).decode()
    ms = parse_prom_text(text)
    assert comparable_samples(ms) == prom_client_samples(text)
    assert ms.families["req_seconds"].help == 'Latency \\ with "quotes"\nand newline'
    (h,) = [h for h in ms.histograms("req_seconds") if h.labels["path"] == 'a\\b"c\nd']
    assert h.count == 1 and h.buckets[0] == (0.1, 1)
    assert math.isinf(ms.value("temp", x="}{,=")) and ms.value("temp", x="}{,=") < 0
    assert math.isnan(ms.value("temp", x="nan"))


def test_real_client_openmetrics_with_exemplar_and_eof():
    text = om_latest(_registry()).decode()
    ms = parse_prom_text(text)
    assert ms.openmetrics
    assert not ms.warnings
    ref = []
    exemplars = []
    for fam in om_families(text):
        for s in fam.samples:
            v = "NaN" if s.value != s.value else float(s.value)
            ref.append((s.name, tuple(sorted(s.labels.items())), v, s.timestamp))
            if s.exemplar:
                ts = s.exemplar.timestamp
                exemplars.append(
                    (dict(s.exemplar.labels), s.exemplar.value, float(ts) if ts is not None else None)
                )
    assert ms.normalized() == ref
    got = [(dict(e.labels), e.value, e.timestamp) for e in ms.exemplars.values()]
    assert [(a, b) for a, b, _ in got] == [(a, b) for a, b, _ in exemplars]
    assert got[0][2] == pytest.approx(exemplars[0][2], abs=1e-6)  # seconds, not milliseconds
    assert ms.families["hits"].type == "counter"
    assert ms.value("hits_total") == 2


def test_openmetrics_without_eof_is_flagged_truncated():
    text = om_latest(_registry()).decode()
    cut = text[: text.rindex("# EOF")]
    ms = parse_prom_text(cut, openmetrics=True)
    assert any("EOF" in w for w in ms.warnings)
    assert len(ms.samples) == len(parse_prom_text(text).samples)


def test_content_after_eof_ignored_with_warning():
    text = om_latest(_registry()).decode() + "late_metric 1\n"
    ms = parse_prom_text(text)
    assert "late_metric" not in ms.names()
    assert any("after '# EOF'" in w for w in ms.warnings)


def test_truncated_scrape_keeps_complete_lines():
    text = shared_fixture(ETCD).read_text()
    cut = len(text) // 2
    while text[cut] == "\n":
        cut += 1
    part = text[:cut]
    ms = parse_prom_text(part)
    complete = part[: part.rindex("\n") + 1]
    n_complete = len(sample_lines(complete))
    assert any("no newline" in w for w in ms.warnings)
    assert n_complete <= len(ms.samples) <= n_complete + 1
    assert ms.samples[:n_complete] == parse_prom_text(complete).samples


def test_garbled_line_is_skipped_with_its_line_number():
    lines = shared_fixture(ETCD).read_text().splitlines(keepends=True)
    idx = next(i for i, ln in enumerate(lines) if ln.startswith("etcd_server_has_leader "))
    lines[idx] = 'etcd_server_has_leader{broken="x 1\n'
    ms = parse_prom_text("".join(lines))
    assert any(w.startswith(f"line {idx + 1}:") for w in ms.warnings)
    assert ms.value("etcd_server_has_leader") is None
    assert ms.value("etcd_server_leader_changes_seen_total") == 1


@pytest.mark.parametrize(
    "data",
    [b"", b"   \n\n", b'{"status": "success"}\n', b"\x00\x01\x02binary", b"hello world this is a log line\n"],
)
def test_not_exposition_raises_input_error(data):
    with pytest.raises(InputError):
        parse_prom_text(data, "x.prom")


def test_sniff():
    assert sniff_prom_text(shared_fixture(SCHED).read_bytes()[:1024])
    assert sniff_prom_text(shared_fixture(KUBELET_AFTER).read_bytes()[:1024])
    assert sniff_prom_text((TEST_DATA / "ctrl" / CAPTURED[1]).read_bytes()[:1024])
    assert not sniff_prom_text(
        shared_fixture("ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log").read_bytes()[:1024]
    )
    assert not sniff_prom_text(shared_fixture("ctrl/rdma_statistic_show_mlx5_4links.txt").read_bytes()[:1024])
    assert not sniff_prom_text(b"\x00\x01")


def test_utf8_quoted_metric_name():
    ms = parse_prom_text('{"my.dotted.metric", a="}"} 3\nplain 1\n')
    assert ms.value("my.dotted.metric", a="}") == 3
    assert ms.value("plain") == 1


def test_duplicate_label_is_a_warning():
    ms = parse_prom_text('x{a="1",a="2"} 1\ny 2\n')
    assert ms.value("y") == 2
    assert "x" not in ms.names()
    assert ms.warnings and ms.warnings[0].startswith("line 1:")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_fuzz_random_bytes_only_input_error(data):
    try:
        parse_prom_text(data)
    except InputError:
        pass


_SMALL = (
    "# HELP etcd_server_has_leader Whether or not a leader exists. 1 is existence, 0 is not.\n"
    "# TYPE etcd_server_has_leader gauge\n"
    "etcd_server_has_leader 1\n"
    'etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 705\n'
    'etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 855\n'
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_real_fixture_only_input_error(data):
    base = shared_fixture(ETCD).read_bytes()[:3000]
    buf = bytearray(base)
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["flip", "delete", "insert"]))
        pos = data.draw(st.integers(0, max(0, len(buf) - 1)))
        if op == "flip" and buf:
            buf[pos] = data.draw(st.integers(0, 255))
        elif op == "delete" and buf:
            del buf[pos : pos + data.draw(st.integers(1, 40))]
        else:
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=10))
    try:
        ms = parse_prom_text(bytes(buf))
    except InputError:
        return
    for s in ms.samples:
        assert isinstance(s.value, float)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in s.labels)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b_c", "x:y"]),
            st.dictionaries(st.sampled_from(["l1", "le", "k"]), st.text(max_size=8), max_size=3),
            st.floats(allow_nan=False),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_roundtrip_through_real_client_text_format(rows):
    """Expositions written by prometheus_client's own escaping read back to the same values."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.metrics_core import GaugeMetricFamily

    class C:
        def collect(self):
            by: dict[str, list] = {}
            for name, labels, v in rows:
                by.setdefault(name, []).append((labels, v))
            for name, items in by.items():
                keys = sorted({k for labels, _ in items for k in labels})
                g = GaugeMetricFamily(name, "h", labels=keys)
                seen = set()
                for labels, v in items:
                    vals = tuple(labels.get(k, "") for k in keys)
                    if vals in seen:
                        continue
                    seen.add(vals)
                    g.add_metric(list(vals), v)
                yield g

    r = CollectorRegistry()
    r.register(C())
    text = generate_latest(r).decode()
    assert comparable_samples(parse_prom_text(text)) == prom_client_samples(text)


def _careful(monkeypatch, data, **kw) -> MetricSet:
    """Parse with the plain-file pass and the careful loop's canonical label split turned off."""
    from clusterdoctor.observe.control import prom_careful, prom_fast

    with monkeypatch.context() as m:
        m.setattr(prom_fast, "parse_blocks", lambda *a: None)
        m.setattr(prom_careful, "canonical_pairs", lambda joined: None)
        return parse_prom_text(data, **kw)


def _same(a: MetricSet, b: MetricSet) -> None:
    assert a.normalized() == b.normalized()
    assert [(f.name, f.type, f.help, f.unit) for f in a.families.values()] == [
        (f.name, f.type, f.help, f.unit) for f in b.families.values()
    ]
    assert a.warnings == b.warnings


@pytest.mark.parametrize(
    "where,name", [("fixture", SCHED), ("fixture", ETCD)] + [("data", n) for n in CAPTURED]
)
def test_bulk_path_equals_careful_loop_on_real_files(monkeypatch, where, name):
    path = shared_fixture(name) if where == "fixture" else TEST_DATA / "ctrl" / name
    text = path.read_text()
    fast = parse_prom_text(text)
    assert len(fast.samples) == len(sample_lines(text))
    _same(fast, _careful(monkeypatch, text))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_bulk_path_equals_careful_loop_on_line_mutations(monkeypatch, data):
    """Line-level edits of a real dump (drop, duplicate, free-text or second-TYPE comments, odd
    label spacing, escapes, bad values, timestamps, indentation) give the same result on both paths."""
    lines = (TEST_DATA / "ctrl" / "node_exporter_1.5.0_metrics.prom").read_text().splitlines()[:120]
    for _ in range(data.draw(st.integers(0, 6))):
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(
            st.sampled_from(
                ["drop", "dup", "comment", "type", "space", "value", "ts", "quote", "blank", "indent"]
            )
        )
        ln = lines[i]
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, ln)
        elif op == "comment":
            lines.insert(i, "# free text " + data.draw(st.sampled_from(["", "HELP x y", "EOF", "UNIT"])))
        elif op == "type":
            lines.insert(
                i, "# TYPE go_goroutines " + data.draw(st.sampled_from(["counter", "gauge", "bogus"]))
            )
        elif op == "space" and '="' in ln:
            lines[i] = ln.replace('="', ' = "', 1)
        elif op == "value" and not ln.startswith("#"):
            lines[i] = (
                ln.rsplit(" ", 1)[0] + " " + data.draw(st.sampled_from(["1_0", "x", "+Inf", "NaN", "-0"]))
            )
        elif op == "ts" and not ln.startswith("#"):
            lines[i] = ln + " " + data.draw(st.sampled_from(["1700000000000", "1.5", "x", "-5"]))
        elif op == "quote" and '="' in ln:
            lines[i] = ln.replace('="', '="a\\"', 1)
        elif op == "blank":
            lines.insert(i, data.draw(st.sampled_from(["", "  "])))
        elif op == "indent":
            lines[i] = data.draw(st.sampled_from([" ", "\t"])) + ln
    text = "\n".join(lines) + "\n"
    try:
        fast = parse_prom_text(text)
    except InputError as e:
        with pytest.raises(InputError) as slow_e:
            _careful(monkeypatch, text)
        assert str(slow_e.value) == str(e)
        return
    _same(fast, _careful(monkeypatch, text))
