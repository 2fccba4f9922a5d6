"""Tiered checkpoint store: atomic saves, spill to a compressed slow tier, checksums, and kill -9 in the
middle of a write (a real child process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.ckptstore import MAGIC, ChecksumError, TieredCheckpointStore


def test_save_load_and_spill(tmp_path):
    s = TieredCheckpointStore(tmp_path / "fast", tmp_path / "slow", keep_fast=2)
    blobs = {f"step-{i}": os.urandom(1000) + b"\0" * 50_000 for i in range(4)}
    for k, v in blobs.items():
        s.save(k, v)
    assert [i.name for i in s.list()] == list(blobs)
    assert s.latest() == "step-3"
    fast = sorted(p.name for p in (tmp_path / "fast").glob("*.ckpt"))  # beside them: SEQ and .lock
    slow = sorted(p.name for p in (tmp_path / "slow").glob("*.ckpt"))
    assert len(fast) == 2 and len(slow) == 2 and all("step-2" in f or "step-3" in f for f in fast)
    for k, v in blobs.items():
        assert s.load(k) == v
    # the slow copies are zstd frames, smaller than the payload (it is mostly zeros)
    info = {i.name: i for i in s.list()}["step-0"]
    raw = info.path.read_bytes()
    assert raw.startswith(MAGIC) and info.codec == "zstd" and len(raw) < 20_000
    frame = raw[raw.index(b"}") + 1 :]
    assert zstandard.ZstdDecompressor().decompress(frame, max_output_size=10**6) == blobs["step-0"]


def test_zstd_level_is_configurable(tmp_path):
    data = bytes(range(256)) * 4000
    sizes = []
    for level in (1, 19):
        s = TieredCheckpointStore(
            tmp_path / f"f{level}", tmp_path / f"s{level}", keep_fast=1, zstd_level=level
        )
        s.save("a", data)
        s.save("b", b"x")
        sizes.append({i.name: i for i in s.list()}["a"].path.stat().st_size)
        assert s.load("a") == data
    assert sizes[1] <= sizes[0]
    with pytest.raises(ValueError):
        TieredCheckpointStore(tmp_path / "x", zstd_level=23)


def test_corruption_is_detected(tmp_path):
    s = TieredCheckpointStore(tmp_path / "fast", tmp_path / "slow", keep_fast=1)
    s.save("a", b"A" * 10_000)
    s.save("b", b"B" * 10_000)
    fast_file = next((tmp_path / "fast").glob("*.ckpt"))
    raw = bytearray(fast_file.read_bytes())
    raw[-10] ^= 0xFF
    fast_file.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError):
        s.load("b")
    assert s.load_latest_valid() == ("a", b"A" * 10_000)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(max_size=3000), min_size=1, max_size=6), st.integers(1, 3))
def test_round_trip_property(tmp_path_factory, blobs, keep):
    d = tmp_path_factory.mktemp("ck")
    s = TieredCheckpointStore(d / "fast", d / "slow", keep_fast=keep)
    for i, b in enumerate(blobs):
        s.save(f"c{i}", b)
    assert [s.load(f"c{i}") for i in range(len(blobs))] == blobs
    assert len(list((d / "fast").glob("*.ckpt"))) == min(keep, len(blobs))


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from clusterdoctor.ckptstore import TieredCheckpointStore
    fast, slow, marker = sys.argv[1:4]
    s = TieredCheckpointStore(fast, slow, keep_fast=1)
    def chunks():
        for i in range(10_000):
            yield bytes([i % 251]) * (1 << 20)
            if i == 3:
                Path(marker).write_text("mid-write")
            time.sleep(0.01)
    s.save_stream("second", chunks())
    """
)


def test_kill_9_mid_write_leaves_previous_checkpoint_readable(tmp_path):
    fast, slow, marker = tmp_path / "fast", tmp_path / "slow", tmp_path / "marker"
    s = TieredCheckpointStore(fast, slow, keep_fast=1)
    first = os.urandom(200_000)
    s.save("first", first)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(fast), str(slow), str(marker)])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "child exited before writing"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    assert any(
        p.name.endswith(".tmp") for p in fast.iterdir()
    )  # the interrupted write was really in progress
    s2 = TieredCheckpointStore(fast, slow, keep_fast=1)  # reopening cleans the leftovers
    assert [i.name for i in s2.list()] == ["first"]
    assert s2.load() == first
    assert not any(p.name.endswith(".tmp") for p in fast.iterdir())


def test_keep_total_prunes_oldest_and_no_slow_dir_deletes(tmp_path):
    s = TieredCheckpointStore(tmp_path / "fast", tmp_path / "slow", keep_fast=1, keep_total=2)
    for i in range(4):
        s.save(f"c{i}", bytes([i]) * 100)
    assert [i.name for i in s.list()] == ["c2", "c3"]
    t = TieredCheckpointStore(tmp_path / "only-fast", keep_fast=2)
    for i in range(3):
        t.save(f"d{i}", b"x")
    assert [i.name for i in t.list()] == ["d1", "d2"]
    with pytest.raises(KeyError):
        t.load("d0")
    with pytest.raises(ValueError):
        t.save("../escape", b"x")
