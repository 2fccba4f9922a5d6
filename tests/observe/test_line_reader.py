"""The shared line reader (issue 26): lines as ``str.splitlines`` gives them, whatever the blocks;
a line over the cap cut there and counted; logs streamed through it with warnings capped."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.control.logs import load_logs
from clusterdoctor.observe.limits import LineReader
from clusterdoctor.testing import fixture_path

LINE_BYTES = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))


def _lines(path: Path, cap: int) -> tuple[list[str], LineReader]:
    r = LineReader(path, max_line=cap)
    with r:
        return list(r), r


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(LINE_BYTES, st.sampled_from([b"\r", b"\r\n", b"\xe2\x82", b"\x85", b""])), max_size=60
    ),
    st.sampled_from([b"\n", b""]),
    st.integers(min_value=41, max_value=200),
)
def test_lines_match_splitlines_of_the_whole_text(
    tmp_path: Path, parts: list[bytes], end: bytes, cap: int
) -> None:
    data = b"log\n" + b"\n".join(parts) + end  # (a file starting with a gzip/zstd magic is inflated)
    p = tmp_path / "x.log"
    p.write_bytes(data)
    # blocks of `cap` bytes (tiny here) and every line shorter than the cap: nothing is cut
    if all(len(ln) <= cap for ln in data.split(b"\n")):
        got, r = _lines(p, cap)
        assert got == data.decode("utf-8", "replace").splitlines()
        assert r.long_lines == 0 and r.warnings == []


def test_a_line_over_the_cap_is_cut_and_counted(tmp_path: Path) -> None:
    p = tmp_path / "long.log"
    p.write_bytes(b"first\n" + b"x" * 5000 + b"\nmiddle\n" + b"y" * 300 + b"\nlast")
    got, r = _lines(p, 100)
    assert got == ["first", "x" * 100, "middle", "y" * 100, "last"]
    assert r.long_lines == 2
    assert len(r.warnings) == 1 and "2 line(s) longer than 100 bytes" in r.warnings[0]


def test_compressed_input_is_inflated_and_a_cut_stream_named(tmp_path: Path) -> None:
    body = b"".join(b"line %d\n" % i for i in range(20000))
    p = tmp_path / "x.log.gz"
    p.write_bytes(gzip.compress(body))
    got, r = _lines(p, 1 << 20)
    assert got == body.decode().splitlines()
    p.write_bytes(gzip.compress(body)[:-2000])
    got, r = _lines(p, 1 << 20)
    assert 0 < len(got) < 20000 and any("truncated" in w for w in r.warnings)


def test_etcd_log_streamed_with_warnings_capped_and_counted(tmp_path: Path) -> None:
    f1 = fixture_path("ctrl/etcd_zap_json_lost_leader_slow_apply_issue13352.log")
    f2 = fixture_path("ctrl/etcd_zap_json_heartbeat_slow_disk_pr9761.log")
    if f1 is None or f2 is None:
        pytest.skip("shared etcd log fixtures absent (set CLUSTERDOCTOR_FIXTURES)")
    unit = f1.read_bytes() + f2.read_bytes()  # the first holds one JSON record split over two lines
    one = load_logs(f1)
    p = tmp_path / "etcd.log"
    p.write_bytes(unit * 300)
    many = load_logs(p)
    # events bounded per kind (observe/control/event_store.py), the rest counted
    n = len(many["events"]) + sum(x.count for x in many.get("events_dropped", []))
    assert n == 300 * (len(one["events"]) + len(load_logs(f2)["events"]))
    split = [w for w in many["warnings"] if "split over 2 lines" in w]
    assert len(split) == 100  # kept word for word
    assert many["warnings"][-1].endswith("... and 200 more warnings of the same file")
    # the same events as the file read whole, line numbers included
    from clusterdoctor.observe.control.logs import parse_logs

    whole = parse_logs(p.read_bytes(), str(p))
    assert whole.events == many["events"]
