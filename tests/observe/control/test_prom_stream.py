"""Prometheus text files read in blocks (issue 26, sixth round: prom_stream, prom_series).

* Every real dump, streamed, parses to the digest the previous parsers recorded (test_prom_fast's
  PREVIOUS, from commit 0d9bf96), and so do the four dumps concatenated three times in small blocks.
* ``diagnose``'s reading of a dump (``load_metrics_observations``: window, series, points, instances,
  identity, warnings) is the same streamed as read whole, on every real dump and on dumps put together.
* Hypothesis: block sizes that cut sample lines anywhere, CRLF line ends, no final newline, invalid
  UTF-8 and multi-byte characters give what the whole-text parser gives.
* Memory is bounded by what the file holds, not its length: on a dump repeated 2 or 8 times the
  series store keeps the same series and runs (counted objects), and the retained bytes (tracemalloc)
  do not grow with the copies; the column sink keeps at most 24 bytes per sample.
"""

from __future__ import annotations

import io
import math
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.control import prom_stream, scrape
from clusterdoctor.observe.control.prom_series import Points, read_series
from clusterdoctor.observe.control.prom_stream import parse_prom_stream
from clusterdoctor.observe.control.prom_text import parse_prom_text
from tests.conftest import TEST_DATA
from tests.observe.control.test_prom_fast import FOUR, FOUR_X3, PREVIOUS, _path, digest

NODE = TEST_DATA / "ctrl" / "node_exporter_1.5.0_metrics.prom"
FEDERATE = TEST_DATA / "ctrl" / "prometheus_2.42.0_federate_all.prom"


@pytest.fixture(autouse=True)
def _always_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """parse_prom_stream reads files up to WHOLE (4 MiB) whole: here every file is streamed."""
    monkeypatch.setattr(prom_stream, "WHOLE", 0)


def test_a_short_file_is_read_whole_with_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prom_stream, "WHOLE", prom_stream.prom_fast.REMEMBER_ABOVE)
    with FEDERATE.open("rb") as f:
        ms = parse_prom_stream(f)
    assert ms.columns is None and digest(ms) == digest(parse_prom_text(FEDERATE.read_bytes()))


def _stream(data: bytes) -> object:
    try:
        return digest(parse_prom_stream(io.BytesIO(data)))
    except InputError as e:
        return f"InputError: {e}"


def _whole(data: bytes) -> object:
    try:
        return digest(parse_prom_text(data))
    except InputError as e:
        return f"InputError: {e}"


@pytest.mark.parametrize("rel,want,n", PREVIOUS, ids=[p[0].split("/")[-1] for p in PREVIOUS])
def test_real_dumps_streamed_parse_as_the_previous_parser(rel: str, want: str, n: int) -> None:
    p = _path(rel)
    with p.open("rb") as f:
        ms = parse_prom_stream(f, p.name)
    assert len(ms) == n
    assert digest(ms) == (want, n)


@pytest.mark.parametrize("read", [prom_stream.READ, 4096, 333])
def test_concatenated_dumps_streamed_in_blocks(monkeypatch: pytest.MonkeyPatch, read: int) -> None:
    data = b"".join(_path(rel).read_bytes() for rel in FOUR) * 3
    monkeypatch.setattr(prom_stream, "READ", read)
    ms = parse_prom_stream(io.BytesIO(data))
    assert ms.columns is not None  # streamed, not read whole
    assert digest(ms) == FOUR_X3


def _view(obs: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in obs.items():
        if hasattr(v, "series"):
            w = v
            out[k] = (
                {n: [(s.name, s.labels, list(s.points)) for s in lst] for n, lst in w.series.items()},
                w.types, w.start, w.end, w.source, list(w.warnings), w.snapshot_instances,
                w.instance_sources, w.instance_identity, w.name_sources, w._canon,
            )  # fmt: skip
        else:
            out[k] = repr(v)
    return out


def _both(monkeypatch: pytest.MonkeyPatch, p: Path) -> tuple[object, object, bool]:
    streamed = scrape._window_streamed(p) is not None
    a = _view(scrape.load_metrics_observations(p))
    with monkeypatch.context() as m:
        m.setattr(scrape, "_window_streamed", lambda p: None)
        b = _view(scrape.load_metrics_observations(p))
    return repr(a), repr(b), streamed  # repr: NaN values compare equal


WINDOW_DUMPS = [rel for rel, _, _ in PREVIOUS] + [
    "data:../etcd_dead_member/zap/metrics_before_m0.prom",
    "data:../etcd_dead_member/zap/metrics_after_m1.prom",
    "data:../storage/node_exporter_1.5.0_filesystem_dev_shm_full.prom",
    "data:../zones/throttled_1mbit/prometheus_2.42.0_federate_scrape_duration_zones.prom",
]


@pytest.mark.parametrize("rel", WINDOW_DUMPS, ids=[r.split("/")[-1] for r in WINDOW_DUMPS])
def test_diagnose_reads_each_real_dump_as_read_whole(monkeypatch: pytest.MonkeyPatch, rel: str) -> None:
    a, b, streamed = _both(monkeypatch, _path(rel))
    assert streamed and a == b


def test_diagnose_reads_dumps_put_together_as_read_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The four dumps concatenated three times (timed federate series and untimed ones, every series
    three times), in small blocks with the series cache on and bounded."""
    p = tmp_path / "four-x3.prom"
    p.write_bytes(b"".join(_path(rel).read_bytes() for rel in FOUR) * 3)
    monkeypatch.setattr(prom_stream, "READ", 5000)
    monkeypatch.setattr(prom_stream.prom_fast, "REMEMBER_ABOVE", 0)
    monkeypatch.setattr(prom_stream.prom_fast, "CACHE", 500)
    a, b, streamed = _both(monkeypatch, p)
    assert streamed and a == b


def test_series_in_another_label_order_are_read_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two lines of one series with their labels in two orders are one window series whose points
    interleave in file order: the streamed reader gives the file to the whole-file one."""
    p = tmp_path / "orders.prom"
    p.write_text('m{a="1",b="2"} 1\nm{b="2",a="1"} 2\nm{a="1",b="2"} 3\n')
    a, b, streamed = _both(monkeypatch, p)
    assert not streamed and a == b


def test_refused_and_empty_files_say_what_the_whole_reader_says(tmp_path: Path) -> None:
    for text in ("", "  \n\n", "# EOF\n", "m 1\n# EOF\n", "# UNIT m seconds\nm 1\n", 'm{a="x}y"} 1\n'):
        data = text.encode()
        assert _stream(data) == _whole(data), text
    p = tmp_path / "empty.prom"
    p.write_bytes(b"")
    assert read_series(str(p)) is None


_CUTS = st.integers(min_value=1, max_value=600)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    read=_CUTS,
    start=st.integers(min_value=0, max_value=2000),
    length=st.integers(min_value=1, max_value=6000),
    crlf=st.booleans(),
    final_newline=st.booleans(),
    insert=st.sampled_from([b"", b"\xff", b"\xe2\x82", "é€𝄞".encode(), b"\r", b"\n\n"]),
    where=st.integers(min_value=0, max_value=6000),
)
def test_block_boundaries_anywhere(
    read: int, start: int, length: int, crlf: bool, final_newline: bool, insert: bytes, where: int
) -> None:
    """A piece of a real dump (whole lines), cut into blocks of ``read`` bytes (sample lines split
    across blocks, a block without a newline), CRLF or LF, with or without its final newline, with
    bytes inserted (invalid UTF-8, a multi-byte character, a lone CR, blank lines)."""
    lines = FEDERATE.read_bytes().splitlines(keepends=True)
    data = b"".join(lines[start % len(lines) :][: max(1, length // 100)])
    if insert:
        i = where % (len(data) + 1)
        data = data[:i] + insert + data[i:]
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    if not final_newline:
        data = data.rstrip(b"\r\n")
    old = prom_stream.READ, prom_stream.WHOLE
    prom_stream.READ, prom_stream.WHOLE = read, 0
    try:
        assert _stream(data) == _whole(data)
    finally:
        prom_stream.READ, prom_stream.WHOLE = old


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 1.5, 1700000000.123]),
            st.sampled_from([0.0, -0.0, 1.0, 2.5, math.inf, math.nan]),
        ),
        max_size=30,
    ),
    st.integers(min_value=-40, max_value=40),
)
def test_points_read_as_the_list(points: list[tuple[float, float]], i: int) -> None:
    """Runs of equal points (``-0.0`` is not ``0.0``, NaN never repeats) read back as the list."""
    p = Points(points)
    assert len(p) == len(points) and bool(p) == bool(points)
    assert repr(p) == repr(points) and repr(list(reversed(p))) == repr(points[::-1])
    assert repr(p[i : i + 7]) == repr(points[i : i + 7])
    if -len(points) <= i < len(points):
        assert repr(p[i]) == repr(points[i])
    else:
        with pytest.raises(IndexError):
            p[i]
    if not any(v != v for _, v in points):
        assert p == points and points == p
    assert p.runs() <= len(points)


def _repeated(tmp_path: Path, copies: int) -> Path:
    p = tmp_path / f"node-x{copies}.prom"
    p.write_bytes(NODE.read_bytes() * copies)
    return p


def test_series_store_does_not_grow_with_the_copies(tmp_path: Path) -> None:
    """Counted, not timed: the same series and runs for 2 and 8 copies of a dump, and the bytes the
    store keeps (tracemalloc, after the parse) within 2% of each other."""
    kept = {}
    for copies in (2, 8):
        path = str(_repeated(tmp_path, copies))
        tracemalloc.start()
        got = read_series(path)
        retained = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert got is not None
        ms, sink = got
        assert sink.n == 1814 * copies
        kept[copies] = (len(sink.index.keys), sum(p.runs() for p in sink.points), retained)
    (s2, r2, b2), (s8, r8, b8) = kept[2], kept[8]
    assert (s2, r2) == (s8, r8) == (1814, 1814)
    assert b8 < b2 * 1.02


def test_column_sink_keeps_about_20_bytes_a_sample(tmp_path: Path) -> None:
    sizes = {}
    for copies in (2, 8):
        path = _repeated(tmp_path, copies)
        tracemalloc.start()
        with path.open("rb") as f:
            ms = parse_prom_stream(f)
        retained = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(ms) == 1814 * copies and ms.columns is not None
        sizes[copies] = retained
    per_sample = (sizes[8] - sizes[2]) / (1814 * 6)
    assert per_sample <= 24
