"""Clock skew between sources, on the real 3-member etcd stall logs in tests/data/etcd_stall.

The logs are real (see tests/data/etcd_stall/README.md). Skew is made by a transformation of that
real data, stated in each test: one member's event times moved by a fixed offset, as if its host's
clock were off by that much.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.clock_skew import (
    SAME_EVENT_TOLERANCE,
    align_events,
    detect_skews,
    disjoint_skews,
    event_source,
    future_skews,
    same_event_skews,
)
from clusterdoctor.model import Event
from clusterdoctor.observe.control.logs import load_logs, parse_time
from tests.conftest import TEST_DATA

STALL = TEST_DATA / "etcd_stall"


def member_events(form: str, m: int) -> list[Event]:
    return load_logs(STALL / form / f"etcd-m{m}.log")["events"]


def shifted(evs: list[Event], offset: float) -> list[Event]:
    """Transformation of real data: the events as a clock ``offset`` s ahead would have stamped them."""
    return [dataclasses.replace(e, time=e.time + offset) if e.time is not None else e for e in evs]


def cluster(form: str, shift_member: int | None = None, offset: float = 0.0) -> list[Event]:
    out = []
    for m in range(3):
        evs = member_events(form, m)
        out += shifted(evs, offset) if m == shift_member else evs
    return out


def src(form: str, m: int) -> str:
    return str(STALL / form / f"etcd-m{m}.log")


def capture_end(form: str) -> float:
    """The capture's own record of when the stall ended (what_happened.txt, written by capture.sh)."""
    line = (STALL / form / "what_happened.txt").read_text().splitlines()[2]
    t = parse_time(line.split()[-1])
    assert t is not None
    return t


@pytest.mark.parametrize("form", ["zap", "capnslog"])
def test_real_members_agree(form):
    evs = cluster(form)
    assert same_event_skews(evs) == []
    # every member's last event lies before the end of the capture, and the logs overlap
    assert detect_skews(evs, capture_end(form) + 5) == []


@pytest.mark.parametrize(
    "form,member,offset",
    [("zap", 2, 30.0), ("zap", 0, -45.0), ("capnslog", 1, 7200.0), ("capnslog", 2, -600.0)],
)
def test_shifted_member_is_named_with_its_offset(form, member, offset):
    evs = cluster(form, member, offset)
    skews = same_event_skews(evs)
    # the shifted member disagrees with both others; the two others agree with each other
    assert len(skews) == 2
    for s in skews:
        assert src(form, member) in (s.reference, s.other)
        signed = s.offset_s if s.other == src(form, member) else -s.offset_s
        assert signed == pytest.approx(offset, abs=1.0)  # members log one term change < 1 s apart
        assert s.n == 2  # terms 2 and 3 are in all three logs
        assert "term change" in s.describe()


def test_clusters_are_not_compared_by_term_number_alone():
    """zap/ and capnslog/ are two different clusters, both with terms 2 and 3, 20 s apart."""
    evs = cluster("zap") + cluster("capnslog")
    assert same_event_skews(evs) == []


@settings(max_examples=40, deadline=None)
@given(st.floats(min_value=-2e5, max_value=2e5, allow_nan=False), st.integers(0, 2))
def test_offset_estimate_and_correction_property(offset, member):
    """Any shift beyond the tolerance is found to within 1 s and undone by align_events; smaller
    shifts (below the members' natural spread plus margin) are left alone."""
    evs = cluster("zap", member, offset)
    skews = same_event_skews(evs)
    tol = float(SAME_EVENT_TOLERANCE.value)
    if abs(offset) <= tol - 1.0:
        assert skews == []
        return
    if abs(offset) <= tol + 1.0:
        return  # at the tolerance edge either answer is right
    assert skews
    aligned, shifts = align_events(evs, skews)
    assert set(shifts) == {src("zap", member)}
    assert shifts[src("zap", member)] == pytest.approx(offset, abs=1.0)
    original = cluster("zap")
    for a, b in zip(aligned, original):
        assert a.kind == b.kind and event_source(a) == event_source(b)
        assert a.time == pytest.approx(b.time, abs=1.0)


def test_future_events_against_collection_time():
    """Transformation: member 0's log moved 2 minutes ahead; it was collected when the capture ended."""
    evs = shifted(member_events("zap", 0), 120.0)
    (s,) = future_skews(evs, {src("zap", 0): capture_end("zap")})
    assert s.other == src("zap", 0) and s.basis == "future"
    # last real event 08:51:05.467 (its prober losing the stalled leader), capture end 08:51:09.339:
    # 120 - 3.872 s past the collection time
    assert s.offset_s == pytest.approx(120.0 - 3.872, abs=0.01)
    assert future_skews(member_events("zap", 0), {src("zap", 0): capture_end("zap")}) == []


def test_disjoint_sources_whole_hours_look_like_a_time_zone():
    """Transformation: the capnslog cluster's logs moved 3 h later (a log in UTC+3 read as UTC)."""
    evs = cluster("zap") + shifted(cluster("capnslog"), 3 * 3600.0)
    skews = disjoint_skews(evs)
    assert skews and all(s.basis == "disjoint" for s in skews)
    pairs = {frozenset((s.reference, s.other)) for s in skews}
    assert frozenset((src("zap", 0), src("capnslog", 0))) in pairs
    assert all("whole hour" in s.detail for s in skews)
    # the real, unshifted pair (20 s apart) is not disjoint
    assert disjoint_skews(cluster("zap") + cluster("capnslog")) == []


def test_detect_runs_future_check_after_correction():
    """A member shifted a day ahead is corrected by the same-event check, not also reported as future."""
    evs = cluster("zap", 2, 86400.0)
    skews = detect_skews(evs, capture_end("zap") + 5)
    assert {s.basis for s in skews} == {"same-event"}
