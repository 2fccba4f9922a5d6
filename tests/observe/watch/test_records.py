"""The probe's JSON-lines files read back: real files from the fault lab, and damaged copies of them."""

from __future__ import annotations

import json
import os
import shutil

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.watch.records import (
    WatchFileReader,
    load_watch_dir,
    parse_watch_lines,
    sniff_watch,
)
from tests.conftest import TEST_DATA

DATA = TEST_DATA / "failslow"


def test_real_files_read_completely():
    wf = load_watch_dir(str(DATA / "quota-rank2"))
    assert sorted(wf.identities) == [0, 1, 2, 3]
    ident = wf.identity(2)
    assert (
        ident.world_size == 4 and ident.gpu == "cpu" and ident.nic == "eth0" and ident.job.startswith("lab-")
    )
    assert len(wf.steps) == 4 * 70
    assert {r.step for r in wf.steps if r.rank == 2} == set(range(1, 71))
    assert all(r.wall >= r.own >= 0 and r.stall >= 0 for r in wf.steps)
    assert wf.links and all(lk.nbytes == 64 << 10 for lk in wf.links)  # the link test size when captured
    assert not wf.warnings


def test_sniff():
    head = (DATA / "clean" / "watch-rank0.jsonl").read_bytes()[:4096]
    assert sniff_watch(head, "watch-rank0.jsonl")
    assert not sniff_watch(b'{"traceEvents": []}', "trace.json")
    assert sniff_watch(b"[rank3]: " + head.splitlines()[0], "x.log")


def test_truncated_garbled_and_prefixed_lines_are_warnings(tmp_path):
    lines = (DATA / "clean" / "watch-rank1.jsonl").read_text().splitlines()
    lines[5] = lines[5][:30]  # cut in the middle
    lines[9] = "[rank1]: " + lines[9]  # launcher prefix: still read
    lines.insert(12, "not json at all")
    lines.append(lines[-1][:17])  # the writer died mid-line
    got, ident = parse_watch_lines(lines, "watch-rank1.jsonl")
    assert ident.rank == 1
    assert len(got.steps) == 70 - 1
    (w,) = got.warnings
    assert "watch-rank1.jsonl:6" in w and "and 2 more" in w


def test_no_header_rank_from_file_name():
    lines = (DATA / "clean" / "watch-rank3.jsonl").read_text().splitlines()[1:]
    got, ident = parse_watch_lines(lines, "/x/watch-rank3.jsonl")
    assert ident.rank == 3 and len(got.steps) == 70
    assert any("no header line" in w for w in got.warnings)
    got, ident = parse_watch_lines(lines, "/x/steps.jsonl")
    assert not got.steps and "no rank" in got.warnings[0]


def test_reader_is_incremental_and_waits_for_whole_lines(tmp_path):
    src = (DATA / "clean" / "watch-rank0.jsonl").read_bytes()
    dst = tmp_path / "watch-rank0.jsonl"
    cut = src.index(b"\n", len(src) // 2) + 20  # mid-line
    dst.write_bytes(src[:cut])
    reader = WatchFileReader(str(tmp_path))
    first = reader.poll()
    n1 = len(first.steps)
    assert 20 < n1 < 70 and not first.warnings
    with dst.open("ab") as f:
        f.write(src[cut:])
    second = reader.poll()
    assert n1 + len(second.steps) == 70 and not second.warnings
    assert reader.poll().steps == []
    dst.write_bytes(src[:100])  # rewritten (rotated): read again from the start
    third = reader.poll()
    assert any("shrank" in w for w in third.warnings)


def test_missing_or_empty_directory(tmp_path):
    import pytest

    from clusterdoctor.errors import InputError

    with pytest.raises(InputError, match="no such file"):
        load_watch_dir(str(tmp_path / "nope"))
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="no fail-slow probe file"):
        load_watch_dir(str(tmp_path))


def test_rotated_piece_read_before_current(tmp_path):
    lines = (DATA / "clean" / "watch-rank2.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "watch-rank2.1.jsonl").write_text("".join(lines[:40]))
    (tmp_path / "watch-rank2.jsonl").write_text(lines[0] + "".join(lines[40:]))
    wf = load_watch_dir(str(tmp_path))
    steps = [r.step for r in wf.steps]
    assert steps == sorted(steps) and len(steps) == 70


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=80),
            st.sampled_from((DATA / "clean" / "watch-rank0.jsonl").read_text().splitlines()[:8]),
        ),
        max_size=30,
    )
)
def test_any_lines_never_raise(lines):
    got, _ = parse_watch_lines(lines, "watch-rank0.jsonl")
    assert all(r.wall >= 0 for r in got.steps)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["kind", "step", "t", "wall", "own", "coll", "wait", "data", "stall", "rank"]),
        st.one_of(
            st.integers(-5, 5),
            st.floats(allow_nan=True),
            st.text(max_size=5),
            st.none(),
            st.sampled_from(["start", "step", "link"]),
        ),
    )
)
def test_any_object_never_raises(obj):
    got, _ = parse_watch_lines([json.dumps(obj)], "watch-rank0.jsonl")
    assert len(got.steps) <= 1


def test_fixture_folder_intact():
    # the captured data the other tests and the README rely on
    for d in (
        "clean",
        "quota-rank2",
        "slowlink-rank3",
        "slowloader-rank1",
        "stopcont-rank1",
        "periodic-quota-rank2",
        "jobwide-quota",
    ):
        assert sorted(os.listdir(DATA / d)) == [f"watch-rank{r}.jsonl" for r in range(4)], d
    assert shutil.which  # keep the import used
