"""Checkpoint store correctness under interleavings (issue 15): the newest save always wins, sequence
numbers are never reused, opening a store never touches a live writer's temporary files, a failed
save cleans up, and two writing processes are serialised. Writers that are killed or paused are real
child processes (``kill -9`` and a pipe that holds one mid-save), not mocks."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from clusterdoctor.ckptstore import StoreBusy, TieredCheckpointStore

NAMES = ("last", "best", "step")

# A writer in its own process: saves NAME=DATA as a stream of chunks; after the first chunk it
# announces itself on stdout ("mid-save <pid>") and, when told to, waits for a line on stdin before
# finishing (a live writer held in the middle of its save).
WRITER = textwrap.dedent(
    """
    import sys, time
    from clusterdoctor.ckptstore import TieredCheckpointStore
    fast, slow, name, data, hold, pause = sys.argv[1:7]
    s = TieredCheckpointStore(fast, slow, keep_fast=1)
    def chunks():
        blob = data.encode()
        yield blob[: len(blob) // 2]
        print("mid-save", flush=True)
        if hold == "1":
            sys.stdin.readline()
        time.sleep(float(pause))
        yield blob[len(blob) // 2 :]
    path = s.save_stream(name, chunks())
    print("saved", path, flush=True)
    """
)


def _writer(d: Path, name: str, data: str, hold: bool, pause: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(d / "fast"), str(d / "slow"), name, data, "1" if hold else "0",
         str(pause)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def _seq(path: str | Path) -> int:
    return int(re.match(r"(\d{12})-", Path(path).name).group(1))


def _tmp_files(d: Path) -> list[Path]:
    return [p for sub in ("fast", "slow") for p in (d / sub).glob(".*.tmp")]


def test_issue_reproducer_newest_save_wins_every_time(tmp_path):
    for i in range(20):
        s = TieredCheckpointStore(tmp_path / f"f{i}", tmp_path / f"s{i}", keep_fast=2)
        for step in (100, 200, 300):
            s.save("last", f"state@{step}".encode())
        assert s.load() == b"state@300" and s.load("last") == b"state@300"
        assert [c.name for c in s.list()] == ["last"]  # one entry per name


def test_sequence_never_reused_after_the_newest_file_is_lost(tmp_path):
    s = TieredCheckpointStore(tmp_path / "fast", keep_fast=5)
    p1 = s.save("a", b"1")
    p2 = s.save("b", b"2")
    p2.unlink()  # the newest checkpoint disappears (deleted by hand, lost on a crash)
    p3 = s.save("c", b"3")
    assert _seq(p3) > _seq(p2) > _seq(p1)
    (tmp_path / "fast" / "SEQ").unlink()  # and the counter too: the files on disk still bound it
    p4 = s.save("d", b"4")
    assert _seq(p4) > _seq(p3)


def test_opening_never_touches_a_live_writers_temp_files(tmp_path):
    s = TieredCheckpointStore(tmp_path / "fast", tmp_path / "slow", keep_fast=1)
    s.save("last", b"old")
    w = _writer(tmp_path, "last", "new" * 1000, hold=True)
    try:
        assert w.stdout.readline().startswith("mid-save")
        live = _tmp_files(tmp_path)
        assert live, "the writer has a temporary file while it is mid-save"
        for _ in range(5):  # open the store again and again while it writes (the issue: 5/5 killed it)
            TieredCheckpointStore(tmp_path / "fast", tmp_path / "slow", keep_fast=1)
        assert all(p.exists() for p in live)
        w.stdin.write("go\n")
        w.stdin.flush()
        assert w.stdout.readline().startswith("saved")
        assert w.wait(timeout=60) == 0
    finally:
        if w.poll() is None:
            w.kill()
    assert s.load("last") == b"new" * 1000
    assert not _tmp_files(tmp_path)


def test_failed_save_removes_its_temp_files_disk_full(tmp_path):
    """A real write failure: the writer's file size limit (RLIMIT_FSIZE) stops the write with EFBIG,
    as a full disk stops it with ENOSPC."""
    s = TieredCheckpointStore(tmp_path / "fast", keep_fast=2)
    s.save("last", b"small")
    code = textwrap.dedent(
        """
        import resource, signal, sys
        from clusterdoctor.ckptstore import TieredCheckpointStore
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        s = TieredCheckpointStore(sys.argv[1], keep_fast=2)
        try:
            s.save("last", b"x" * (4 << 20))
        except OSError as e:
            print("failed", e.errno)
        """
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "fast")], capture_output=True, text=True)
    assert out.stdout.startswith("failed"), out.stderr
    assert not list((tmp_path / "fast").glob(".*.tmp"))
    assert s.load("last") == b"small"


def test_a_second_writer_waits_then_is_refused_clearly(tmp_path):
    s = TieredCheckpointStore(tmp_path / "fast", keep_fast=2, lock_timeout=0.3)
    fd = os.open(tmp_path / "fast" / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another writer holds the store
    try:
        t0 = time.monotonic()
        with pytest.raises(StoreBusy, match="another writer"):
            s.save("a", b"x")
        assert time.monotonic() - t0 >= 0.25
    finally:
        os.close(fd)
    s.save("a", b"x")
    assert s.load("a") == b"x"


CONCURRENT = textwrap.dedent(
    """
    import json, sys
    from clusterdoctor.ckptstore import TieredCheckpointStore
    s = TieredCheckpointStore(sys.argv[1], sys.argv[2], keep_fast=2)
    seqs = []
    for i in range(25):
        p = s.save(sys.argv[3] if i % 2 else "shared", f"{sys.argv[3]}:{i}".encode())
        seqs.append(int(p.name[:12]))
    print(json.dumps(seqs))
    """
)


def test_two_writing_processes_are_serialised(tmp_path):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, str(tmp_path / "f"), str(tmp_path / "s"), who],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for who in ("A", "B")
    ]
    seqs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    everything = seqs[0] + seqs[1]
    assert len(set(everything)) == len(everything) == 50  # no number used twice
    assert all(a < b for s in seqs for a, b in zip(s, s[1:]))  # each writer's numbers increase
    s = TieredCheckpointStore(tmp_path / "f", tmp_path / "s", keep_fast=2)
    assert {c.name for c in s.list()} == {"shared", "A", "B"}
    assert s.load("A") == b"A:23" and s.load("B") == b"B:23"
    newest = max(s.list(), key=lambda c: c.seq)
    assert newest.seq == max(everything) and s.load() == s.load(newest.name)
    assert not [p for sub in ("f", "s") for p in (tmp_path / sub).glob(".*.tmp")]


class StoreMachine(RuleBasedStateMachine):
    """Random interleavings of save, load, open and kill -9 against a model: name -> newest data."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="ckpt-props-"))
        (self.dir / "fast").mkdir()
        (self.dir / "slow").mkdir()
        self.store = self._open()
        self.model: dict[str, bytes] = {}
        self.order: list[str] = []  # names by their latest save, oldest first
        self.last_seq = 0

    def _open(self) -> TieredCheckpointStore:
        return TieredCheckpointStore(self.dir / "fast", self.dir / "slow", keep_fast=1)

    def _saved(self, name: str, data: bytes, seq: int) -> None:
        assert seq > self.last_seq, "a save got a number not above every earlier one"
        self.last_seq = seq
        self.model[name] = data
        if name in self.order:
            self.order.remove(name)
        self.order.append(name)

    @rule(name=st.sampled_from(NAMES), data=st.binary(max_size=2000))
    def save(self, name: str, data: bytes) -> None:
        self._saved(name, data, _seq(self.store.save(name, data)))

    @rule()
    def reopen(self) -> None:
        self.store = self._open()

    @rule(name=st.sampled_from(NAMES), data=st.text(alphabet="xyz", min_size=1, max_size=3000),
          pause=st.sampled_from([0.0, 0.005, 0.05]))  # fmt: skip
    def kill_a_writer(self, name: str, data: str, pause: float) -> None:
        w = _writer(self.dir, name, data, hold=False, pause=pause)
        line = w.stdout.readline()  # "mid-save", or "" if it died before
        if pause:
            time.sleep(pause / 2)
        os.kill(w.pid, signal.SIGKILL)
        w.wait(timeout=30)
        rest = w.stdout.read()
        w.stdout.close()
        w.stdin.close()
        # the kill came before or after the save's last rename: the store says which, by sequence
        mine = [c for c in self.store.list() if c.name == name]
        if mine and mine[0].seq > self.last_seq:  # it landed: it is the newest save of all
            assert self.store.load(name) == data.encode()
            self._saved(name, data.encode(), mine[0].seq)
        else:  # it did not: the previous checkpoint of that name (if any) is intact
            assert "saved" not in rest
            if name in self.model:
                assert self.store.load(name) == self.model[name]
        assert line in ("", "mid-save\n")

    @invariant()
    def newest_save_wins(self) -> None:
        for name, data in self.model.items():
            assert self.store.load(name) == data
        if self.order:
            assert self.store.latest() == self.order[-1]
            assert self.store.load() == self.model[self.order[-1]]

    @invariant()
    def one_entry_per_name(self) -> None:
        assert sorted(c.name for c in self.store.list()) == sorted(self.model)

    @invariant()
    def no_temp_files_once_reopened_without_live_writers(self) -> None:
        TieredCheckpointStore(self.dir / "fast", self.dir / "slow", keep_fast=1)
        assert not _tmp_files(self.dir)

    def teardown(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


TestStoreInterleavings = StoreMachine.TestCase
TestStoreInterleavings.settings = settings(max_examples=12, stateful_step_count=8, deadline=None)
