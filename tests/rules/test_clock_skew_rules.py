"""CLOCK001 and the clock-aware cascade (CHAIN001) on the real 3-member etcd stall logs.

Skew is a transformation of the real logs, stated in each test: one member's event times (or its
log text's timestamps) moved by a fixed offset, as if its host's clock were off by that much.
"""

from __future__ import annotations

import dataclasses

from clusterdoctor.analyze.correlate import build_chain
from clusterdoctor.model import Event, Severity
from clusterdoctor.observe.bundle import BundleWriter, load_bundle_observations
from clusterdoctor.observe.control.logs import load_logs, parse_time
from clusterdoctor.rules import etcd_log
from clusterdoctor.rules.registry import REQUIRED_SECTIONS, Observations
from tests.conftest import TEST_DATA

STALL = TEST_DATA / "etcd_stall"
# From the files (README.md of tests/data/etcd_stall): in zap/, leader m2 stalls; its late-heartbeat
# warning at 08:51:06.030 carries exceeded-duration 2.371 s, so the stall began 08:51:03.658;
# followers log "lost leader" from 08:51:05.158.
STALL_ONSET = "2026-11-30T08:51:03.658Z"
LOSS = "2026-11-30T08:51:05.158Z"


def events(form: str, shift: dict[int, float] | None = None) -> list[Event]:
    out = []
    for m in range(3):
        evs = load_logs(STALL / form / f"etcd-m{m}.log")["events"]
        off = (shift or {}).get(m)
        if off:  # transformation of real data: this member's clock off by `off` seconds
            evs = [dataclasses.replace(e, time=e.time + off) if e.time is not None else e for e in evs]
        out += evs
    return out


def obs_of(evs: list[Event], **extra) -> Observations:
    obs = Observations()
    obs.put("events", evs)
    for k, v in extra.items():
        obs.put(k, v)
    return obs


def one(rule, obs):
    found = list(rule.fn(obs))
    assert len(found) == 1, [f.summary for f in found]
    return found[0]


def test_clock_rule_documented():
    r = etcd_log.clock_skew_between_sources
    assert set(REQUIRED_SECTIONS) <= set(r.sections())
    assert r.finding("x").verify
    assert all(t.source for t in r.thresholds)


def test_real_logs_no_skew_and_chain_unchanged():
    obs = obs_of(events("zap"))
    assert list(etcd_log.clock_skew_between_sources.fn(obs)) == []
    f = one(etcd_log.control_plane_cascade, obs)
    assert f.summary.startswith(f"Chain: etcd-stall ({STALL_ONSET}")
    assert f"etcd-leader-loss ({LOSS}" in f.summary
    assert f.confidence == 0.85
    assert not any("clock" in e.description for e in f.evidence)


def test_leader_clock_ahead_is_corrected_not_a_wrong_chain():
    evs = events("zap", {2: 30.0})
    # without the correction the stalled leader's warnings look 30 s late: the chain loses its cause
    naive = build_chain(evs)
    assert [lk.stage.name for lk in naive.links] != ["etcd-stall", "etcd-leader-loss"]
    obs = obs_of(evs)
    clock = one(etcd_log.clock_skew_between_sources, obs)
    assert clock.severity == Severity.WARNING
    assert "etcd-m2.log" in clock.summary and "~30 s ahead" in clock.summary
    assert clock.subject.endswith("etcd-m2.log")
    chain = one(etcd_log.control_plane_cascade, obs)
    assert chain.summary.startswith(f"Chain: etcd-stall ({STALL_ONSET}")
    assert f"etcd-leader-loss ({LOSS}" in chain.summary
    assert "corrected for clock skew" in chain.summary
    (fix,) = [e for e in chain.evidence if e.description.startswith("clock skew corrected")]
    assert "etcd-m2.log" in fix.description and abs(fix.value + 30.0) < 1.0
    assert chain.confidence < 0.85


def test_follower_clock_behind_by_hours_is_corrected():
    obs = obs_of(events("zap", {0: -3 * 3600.0}))
    clock = one(etcd_log.clock_skew_between_sources, obs)
    assert "etcd-m0.log" in clock.summary and "3.00 h behind" in clock.summary
    chain = one(etcd_log.control_plane_cascade, obs)
    assert f"etcd-stall ({STALL_ONSET}" in chain.summary and f"etcd-leader-loss ({LOSS}" in chain.summary


def test_subsecond_gap_after_correction_is_not_an_order():
    """capnslog/ stamps whole seconds: stall onset 08:51:24.605, loss 08:51:25 — 0.4 s apart.
    With member 0's clock 45 s behind, the corrected gap is below what the estimate can resolve."""
    obs = obs_of(events("capnslog", {0: -45.0}))
    chain = one(etcd_log.control_plane_cascade, obs)
    assert "not established" in chain.summary
    assert any(e.description.startswith("order of etcd-stall → etcd-leader-loss") for e in chain.evidence)
    assert chain.confidence <= 0.3
    # the same logs without skew keep their order and confidence
    plain = one(etcd_log.control_plane_cascade, obs_of(events("capnslog")))
    assert "not established" not in plain.summary and plain.confidence == 0.85


def test_future_source_later_in_chain_is_not_ordered():
    """m2's heartbeat warnings only (what `grep heartbeat` of the leader's log gives: no term events to
    align by) with member 0's log moved 2 min ahead, both collected when the capture ended."""
    end = parse_time((STALL / "zap" / "what_happened.txt").read_text().split()[-1])
    hb = [e for e in load_logs(STALL / "zap" / "etcd-m2.log")["events"] if e.kind == "etcd.heartbeat_slow"]
    m0 = [
        dataclasses.replace(e, time=e.time + 120.0)
        for e in load_logs(STALL / "zap" / "etcd-m0.log")["events"]
    ]
    srcs = {str(STALL / "zap" / "etcd-m0.log"), str(STALL / "zap" / "etcd-m2.log")}
    obs = obs_of(hb + m0, collection_times=[(s, end) for s in srcs])
    clock = one(etcd_log.clock_skew_between_sources, obs)
    assert "etcd-m0.log" in clock.summary and "at least" in clock.summary
    chain = one(etcd_log.control_plane_cascade, obs)
    assert "not established" in chain.summary and chain.confidence <= 0.3


def test_bundle_names_members_and_gives_collection_time(tmp_path):
    """A bundle holding m0's real log and m1's log with its dates moved a day ahead (text transformation),
    collected (the bundle's clock) when the capture ended — not whenever the suite runs."""
    end = parse_time((STALL / "zap" / "what_happened.txt").read_text().split()[-1])
    w = BundleWriter(clock=lambda: end)
    w.add("logs/etcd-m0.log", (STALL / "zap" / "etcd-m0.log").read_bytes())
    text = (STALL / "zap" / "etcd-m1.log").read_text().replace("2026-11-30T", "2026-12-01T")
    w.add("logs/etcd-m1.log", text.encode())
    out = tmp_path / "b.tar.zst"
    w.write(out)
    data = load_bundle_observations(out)
    locs = {e.source.location for e in data["events"]}
    assert locs == {f"{out}:logs/etcd-m0.log", f"{out}:logs/etcd-m1.log"}
    assert {s for s, _ in data["collection_times"]} == locs
    obs = obs_of(data["events"], collection_times=data["collection_times"])
    clock = one(etcd_log.clock_skew_between_sources, obs)
    assert "logs/etcd-m1.log" in clock.summary and "24.00 h ahead" in clock.summary
