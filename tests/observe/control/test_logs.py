"""etcd / kubelet / containerd log parsing on the real fixtures and on logs captured here."""

from __future__ import annotations

import calendar
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control.logs import load_logs, parse_duration, parse_logs, sniff_logs
from tests.conftest import TEST_DATA, shared_fixture

STALL = TEST_DATA / "etcd_stall"


def utc(y, mo, d, h, mi, s, frac=0.0):
    return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac


def attrs(ev):
    return dict(ev.attrs)


def test_zap_lost_leader_and_split_record_issue13352():
    p = shared_fixture("ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log")
    res = parse_logs(p.read_bytes(), str(p))
    kinds = [e.kind for e in res.events]
    # file: election start (line 1), became candidate, votes, lost leader (line 6), apply too long (7-8)
    assert kinds == ["etcd.election", "etcd.lost_leader", "etcd.slow_apply"]
    el, lost, slow = res.events
    assert el.time == pytest.approx(utc(2021, 9, 16, 5, 38, 0, 0.587))
    assert attrs(el)["term"] == "898" and attrs(el)["member"] == "2c93ddd62e188857"
    assert attrs(lost)["leader"] == "27ecc6d4a68d02f" and attrs(lost)["term"] == "899"
    assert slow.time == pytest.approx(utc(2021, 9, 16, 5, 38, 1, 0.650))
    a = attrs(slow)
    assert float(a["took_s"]) == pytest.approx(2.000055631)
    assert float(a["expected_s"]) == pytest.approx(0.1)
    assert a["error"] == "context deadline exceeded"
    assert a["line"] == "7"
    # the record split over lines 7 and 8 is joined, and said so
    assert any("lines 7-8" in w and "split" in w for w in res.warnings)


def test_zap_float_ts_heartbeat_pr9761():
    p = shared_fixture("ctrl/etcd_zap_json_heartbeat_slow_disk_pr9761.log")
    res = parse_logs(p.read_text(), str(p))
    assert [e.kind for e in res.events] == ["etcd.heartbeat_slow"] * 2
    assert res.events[0].time == pytest.approx(1527101858.4149103)
    assert float(attrs(res.events[0])["exceeded_s"]) == pytest.approx(0.025771662)
    assert float(attrs(res.events[1])["exceeded_s"]) == pytest.approx(0.034015766)
    assert float(attrs(res.events[0])["heartbeat_interval_s"]) == pytest.approx(0.1)
    assert res.warnings == []


def test_kubelet_startup_tracker_year_from_file():
    p = shared_fixture("ctrl/kubelet_pod_startup_latency_tracker_aks_eks.log")
    res = parse_logs(p.read_bytes(), str(p))
    assert len(res.events) == 8
    assert all(e.kind == "kubelet.pod_startup" for e in res.events)
    first = res.events[0]
    # syslog prefix has no year; podCreationTimestamp "2025-02-26 ..." gives it
    assert first.time == pytest.approx(utc(2025, 2, 26, 16, 14, 44, 0.120921))
    a = attrs(first)
    assert a["pod"] == "kube-system/csi-azuredisk-node-gkzz5"
    assert float(a["slo_s"]) == pytest.approx(46.120908806)
    assert float(a["created"]) == utc(2025, 2, 26, 16, 13, 58)
    eks = attrs(res.events[-1])
    assert eks["pod"] == "kube-system/aws-node-vw7c6"
    assert float(eks["slo_s"]) == pytest.approx(2.471963941)
    assert float(eks["e2e_s"]) == pytest.approx(13.230915126)
    assert eks["pulling"] == "yes"
    assert not any("assumed" in w for w in res.warnings)


def test_cni_sandbox_timeouts_mixed_describe_and_journald():
    p = shared_fixture("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt")
    res = parse_logs(p.read_bytes(), str(p), year=2019)
    kinds = [e.kind for e in res.events]
    assert kinds == [
        "sandbox.create_failed",
        "cni.timeout",
        "sandbox.stop_failed",
        "sandbox.stop_failed",
        "cni.timeout",
    ]
    describe = res.events[0]
    assert describe.time is None  # `kubectl describe` shows ages only
    assert attrs(describe)["age"] == "2m7s"
    assert "apiserver-timeout" in attrs(describe)["cause"]
    cni_del = res.events[1]
    assert cni_del.time == pytest.approx(utc(2019, 3, 2, 20, 0, 36, 0.150527))
    assert attrs(cni_del)["op"] == "DEL"
    assert attrs(res.events[-1])["op"] == "ADD"
    assert res.events[-1].time == pytest.approx(utc(2019, 7, 25, 15, 41, 3, 0.820790))
    # comment separators are not warnings; no line is unknown
    assert not [w for w in res.warnings if "not a log line" in w]


def test_cni_file_without_year_warns():
    p = shared_fixture("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt")
    res = parse_logs(p.read_bytes(), str(p))
    assert any("no year" in w for w in res.warnings)


@pytest.mark.parametrize("form", ["zap", "capnslog"])
def test_captured_stall_logs(form):
    d = STALL / form
    evs = {m: parse_logs((d / f"etcd-m{m}.log").read_bytes(), f"m{m}") for m in range(3)}
    for r in evs.values():
        assert not [w for w in r.warnings if "not a log line" in w], r.warnings
    all_ev = [e for r in evs.values() for e in r.events]
    hb = [e for e in all_ev if e.kind == "etcd.heartbeat_slow"]
    lost = [e for e in all_ev if e.kind == "etcd.lost_leader"]
    assert len(hb) == 2 and len(lost) == 2
    if form == "zap":
        # README: leader m2 dcdad8be1efaa5ca stalled; followers lose it at 08:51:05.158 term 3
        assert {attrs(e)["leader"] for e in lost} == {"dcdad8be1efaa5ca"}
        assert min(e.time for e in lost) == pytest.approx(utc(2026, 11, 30, 8, 51, 5, 0.158))
        assert max(float(attrs(e)["exceeded_s"]) for e in hb) == pytest.approx(2.371501477)
        assert {attrs(e)["to"] for e in hb} == {"c2203e7a65d1174e", "8b47054b12da0193"}
    else:
        assert {attrs(e)["leader"] for e in lost} == {"f79439440c78b929"}
        assert min(e.time for e in lost) == pytest.approx(utc(2026, 11, 30, 8, 51, 25))
        assert max(float(attrs(e)["exceeded_s"]) for e in hb) == pytest.approx(2.384917532)


def test_mixed_formats_truncated_and_garbage_lines_keep_valid_parts():
    zap = (STALL / "zap" / "etcd-m2.log").read_text().splitlines()
    capn = (STALL / "capnslog" / "etcd-m1.log").read_text().splitlines()
    hb_zap = next(ln for ln in zap if "failed to send out heartbeat" in ln)
    hb_capn = next(ln for ln in capn if "failed to send out heartbeat" in ln)
    lost_capn = next(
        ln for ln in (STALL / "capnslog" / "etcd-m0.log").read_text().splitlines() if "lost leader" in ln
    )
    text = "\n".join(
        [
            hb_zap,
            "%%% garbage here %%%",
            hb_capn,
            hb_zap[: len(hb_zap) // 2],  # truncated record
            lost_capn,
        ]
    )
    res = parse_logs(text, "mixed.log")
    assert [e.kind for e in res.events] == ["etcd.heartbeat_slow", "etcd.heartbeat_slow", "etcd.lost_leader"]
    bad_lines = sorted(int(w.split()[1].rstrip(":")) for w in res.warnings if "not a log line" in w)
    assert bad_lines == [2, 4]
    assert res.formats["zap-json"] == 1 and res.formats["capnslog"] == 1


def test_journald_prefixes_wrap_real_messages():
    # The envelopes below are journald's documented output forms (short-iso, -o json) built around
    # real message lines from the fixtures: they test the envelope handling, not a captured journal.
    p = shared_fixture("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt")
    klog = next(ln for ln in p.read_text().splitlines() if "cni.go:301" in ln).split("]: ", 1)[1]
    iso = f"2019-07-25T15:41:03+0200 k8s-node-003 kubelet[61508]: {klog}"
    js = json.dumps(
        {"__REALTIME_TIMESTAMP": "1564062063820790", "SYSLOG_IDENTIFIER": "kubelet", "MESSAGE": klog}
    )
    res = parse_logs(iso + "\n" + js + "\n", "journal")
    assert [e.kind for e in res.events] == ["cni.timeout", "cni.timeout"]
    assert res.events[0].time == pytest.approx(utc(2019, 7, 25, 13, 41, 3))  # +02:00 zone applied
    assert res.events[1].time == pytest.approx(1564062063.820790)


def test_load_logs_names_file_in_warnings():
    p = shared_fixture("ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log")
    out = load_logs(p)
    assert len(out["events"]) == 3
    assert all(w.startswith(str(p)) for w in out["warnings"])


@pytest.mark.parametrize(
    "data", [b"", b"   \n\n", b"\x00\x01\x02 binary \xff\xfe", b"hello world\nnot a log\n"]
)
def test_not_a_log_is_input_error(data):
    with pytest.raises(InputError):
        parse_logs(data, "x.log")


def test_sniff_on_fixtures_and_not_on_metrics():
    for rel in (
        "ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log",
        "ctrl/etcd_zap_json_heartbeat_slow_disk_pr9761.log",
        "ctrl/kubelet_pod_startup_latency_tracker_aks_eks.log",
        "ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt",
    ):
        assert sniff_logs(shared_fixture(rel).read_bytes()[:65536])
    assert sniff_logs((STALL / "capnslog" / "etcd-m0.log").read_bytes())
    assert not sniff_logs(shared_fixture("ctrl/kubelet_pod_start_sli_aks_before.prom").read_bytes())


@pytest.mark.parametrize(
    "text,secs",
    [
        ("2.000055631s", 2.000055631),
        ("176.5ms", 0.1765),
        ("1m2.5s", 62.5),
        ("100ms", 0.1),
        ("0.2", 0.2),
        ("850us", 0.00085),
    ],
)
def test_parse_duration(text, secs):
    assert parse_duration(text) == pytest.approx(secs)


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_parse_duration_roundtrip(x):
    assert parse_duration(f"{x:.6f}s") == pytest.approx(x, rel=1e-6, abs=1e-6)
    assert parse_duration(f"{x * 1000:.3f}ms") == pytest.approx(x, rel=1e-6, abs=1e-6)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000))
def test_fuzz_random_bytes(data):
    try:
        parse_logs(data, "fuzz")
    except InputError:
        pass


def _fixture_texts():
    out = [(STALL / "zap" / "etcd-m2.log").read_bytes(), (STALL / "capnslog" / "etcd-m1.log").read_bytes()]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_real_logs(data):
    base = data.draw(st.sampled_from(_fixture_texts()))
    cut = data.draw(st.integers(0, len(base)))
    pos = data.draw(st.integers(0, len(base)))
    junk = data.draw(st.binary(max_size=40))
    mutated = base[:pos] + junk + base[pos:cut] if cut > pos else base[:cut] + junk
    try:
        res = parse_logs(mutated, "fuzz")
    except InputError:
        return
    for e in res.events:
        assert e.time is None or e.time == e.time


@pytest.mark.parametrize(
    "line,kind",
    [
        # message texts as the components' source code writes them (client-go leaderelection.go,
        # etcd rpctypes, kube-scheduler), in klog form
        (
            "E0101 00:00:01.000000       1 leaderelection.go:330] error retrieving resource lock kube-system/kube-scheduler: context deadline exceeded",
            "k8s.lease_renew_failed",
        ),
        (
            "E0101 00:00:01.000000       1 leaderelection.go:367] failed to renew lease kube-system/kube-scheduler: timed out waiting for the condition",
            "k8s.lease_renew_failed",
        ),
        ('E0101 00:00:01.000000       1 server.go:233] "Leaderelection lost"', "k8s.leader_election_lost"),
        (
            "W0101 00:00:01.000000       1 x.go:1] etcdserver: requested lease not found",
            "etcd.lease_not_found",
        ),
        ("W0101 00:00:01.000000       1 x.go:1] etcdserver: request timed out", "etcd.request_timeout"),
    ],
)
def test_control_plane_message_kinds(line, kind):
    (ev,) = parse_logs(line, "x", year=2024).events
    assert ev.kind == kind


def test_journald_wrapped_zap_line():
    # a captured zap record behind a journald short prefix (the form `journalctl -u etcd` prints)
    rec = next(
        ln
        for ln in (STALL / "zap" / "etcd-m2.log").read_text().splitlines()
        if "failed to send out heartbeat" in ln
    )
    res = parse_logs(f"Nov 30 08:51:06 node1 etcd[2211]: {rec}\n", "j")
    (ev,) = res.events
    assert ev.kind == "etcd.heartbeat_slow"
    assert ev.time == pytest.approx(utc(2026, 11, 30, 8, 51, 6, 0.030))  # zap ts wins over the prefix


def test_containerd_logfmt_form():
    # the logrus form containerd writes (time="…" level=… msg="…" error="…"), behind a syslog prefix;
    # built from the real kubernetes#122938 message text in the fixtures, to test the form
    p = shared_fixture("ctrl/kubelet_cni_sandbox_timeouts_k8s122938_calico2463.txt")
    msg = next(ln for ln in p.read_text().splitlines() if "FailedCreatePodSandBox" in ln).split(
        "Failed to create pod sandbox: ", 1
    )[1]
    err = msg.replace('"', '\\"')
    line = (
        'Mar 02 20:00:35 node containerd[812]: time="2019-03-02T20:00:35.100000000+08:00" level=error '
        'msg="RunPodSandbox for &PodSandboxMetadata{Name:drone,Namespace:ci,Attempt:0,} failed, error" '
        f'error="{err}"'
    )
    (ev,) = parse_logs(line, "containerd.log").events
    assert ev.kind == "sandbox.create_failed"
    assert "apiserver-timeout" in attrs(ev)["cause"] and "cni" in attrs(ev)["cause"]
    assert ev.time == pytest.approx(utc(2019, 3, 2, 12, 0, 35, 0.1))  # +08:00 applied, logfmt time wins
