"""Issue 25, deliver 6: the checkpoint store's header is checksummed (one flipped bit in an older
checkpoint's sequence digit made it "the newest"); a temporary file belongs to the writer holding its
lock, not to a PID (a writer in another PID namespace with the same host name kept losing its file);
a FIFO named ``*.ckpt`` never blocks listing or loading. Writers and openers that could hang run in
capped child processes with a time limit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clusterdoctor.ckptstore import ChecksumError, TieredCheckpointStore
from tests.hostile.r25_inputs import run_py_capped

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]


def _flip(path: Path, offset: int, bit: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 1 << bit
    path.write_bytes(bytes(raw))


def _file_of(store: TieredCheckpointStore, name: str) -> Path:
    return next(i.path for i in store.list() if i.name == name)


@pytest.mark.parametrize("tier", ["fast", "slow"])
def test_r25_one_bit_flip_in_an_older_sequence_digit_is_not_the_newest(tmp_path, tier):
    """The issue: seq 1 -> 9 is one bit (0x31 ^ 0x08). The damaged file is left out and named; the
    real newest stays the newest and loads; the previous good one is served when the newest breaks."""
    s = TieredCheckpointStore(tmp_path / "fast", tmp_path / "slow", keep_fast=1 if tier == "slow" else 5)
    s.save("older", b"O" * 5000)
    s.save("newer", b"N" * 5000)
    f = _file_of(s, "older")
    assert f.parent.name == tier
    raw = f.read_bytes()
    at = raw.index(b'"seq": 1') + len(b'"seq": ')
    _flip(f, at, 3)
    assert f.read_bytes()[at : at + 1] == b"9"
    assert s.latest() == "newer" and s.load() == b"N" * 5000
    assert [c.name for c in s.list()] == ["newer"]
    assert f in s.problems and "checksum" in s.problems[f]
    # now the newest's payload breaks too: named on load, and load_latest_valid serves nothing
    # broken (the older one is damaged), then the older one once it is saved again
    n = _file_of(s, "newer")
    _flip(n, n.stat().st_size - 10, 0)
    with pytest.raises(ChecksumError):
        s.load("newer")
    assert s.load_latest_valid() is None and n in s.problems


def test_r25_every_single_bit_flip_of_a_header_is_caught(tmp_path):
    """Each of the header's bits flipped in turn: the file is never listed with a sequence number,
    name, size or digest other than the ones saved — it is listed unchanged or left out and named."""
    s = TieredCheckpointStore(tmp_path / "fast", keep_fast=5)
    path = s.save("ckpt", b"payload" * 100)
    good = path.read_bytes()
    info = s.list()[0]
    hlen = 12 + int.from_bytes(good[8:12], "big")
    for off in range(hlen):
        for bit in range(8):
            raw = bytearray(good)
            raw[off] ^= 1 << bit
            path.write_bytes(bytes(raw))
            listed = s.list()
            assert not listed or (listed[0].seq, listed[0].name, listed[0].size, listed[0].sha256) == (
                info.seq, info.name, info.size, info.sha256,
            ), (off, bit)  # fmt: skip
            if not listed:
                assert path in s.problems, (off, bit)
    path.write_bytes(good)
    assert s.load() == b"payload" * 100


WRITER = textwrap.dedent(
    """
    import os, sys
    fast, fake_pid = sys.argv[1], int(sys.argv[2])
    if fake_pid:
        os.getpid = lambda: fake_pid  # a PID this namespace does not have (another namespace's)
    from clusterdoctor.ckptstore import TieredCheckpointStore
    s = TieredCheckpointStore(fast, keep_fast=2)
    def chunks():
        yield b"first half "
        print("mid-save", flush=True)
        sys.stdin.readline()
        yield b"second half"
    print("saved", s.save_stream("last", chunks()), flush=True)
    """
)
OPENER = textwrap.dedent(
    """
    import json, sys
    from clusterdoctor.ckptstore import TieredCheckpointStore
    s = TieredCheckpointStore(sys.argv[1], keep_fast=2)
    print(json.dumps([str(p) for p in s.remove_stale_temp_files()]))
    """
)


def _pid_namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return (
            subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=20).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.parametrize("how", ["foreign-pid", "unshare"])
def test_r25_a_writer_in_another_pid_namespace_keeps_its_temp_file(tmp_path, how):
    """Same host name, PIDs not visible to each other: opening the store (five times) while the
    writer is mid-save leaves its temporary files alone, and its save completes. ``unshare``: the
    opener really runs in a new PID namespace (root only); ``foreign-pid``: the writer's files carry
    a PID above the kernel's pid_max (what an opener in another namespace sees)."""
    if how == "unshare" and not _pid_namespaces():
        pytest.skip("unshare --pid needs root (or user namespaces)")
    fast = tmp_path / "fast"
    TieredCheckpointStore(fast).save("last", b"old")
    fake = "0" if how == "unshare" else str((1 << 22) + 4321)
    w = subprocess.Popen([sys.executable, "-c", WRITER, str(fast), fake], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert w.stdout.readline().startswith("mid-save")
        live = sorted(fast.glob(".*.tmp"))
        assert live
        prefix = ("unshare", "--pid", "--fork") if how == "unshare" else ()
        for _ in range(5):
            code, out, err = run_py_capped(OPENER, str(fast), prefix=prefix, timeout=60)
            assert code == 0, err
            assert json.loads(out) == []
        assert all(p.exists() for p in live)
        w.stdin.write("go\n")
        w.stdin.flush()
        assert w.stdout.readline().startswith("saved")
        assert w.wait(timeout=60) == 0
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    assert TieredCheckpointStore(fast).load("last") == b"first half second half"
    assert not list(fast.glob(".*.tmp"))


FIFO = textwrap.dedent(
    """
    import json, os, sys
    from clusterdoctor.ckptstore import TieredCheckpointStore
    fast = sys.argv[1]
    s = TieredCheckpointStore(fast, keep_fast=2)
    s.save("good", b"good data")
    os.mkfifo(os.path.join(fast, "000000000099-fifo.ckpt"))
    os.mkfifo(os.path.join(fast, "zzz.ckpt"))
    s = TieredCheckpointStore(fast, keep_fast=2)
    names = [c.name for c in s.list()]
    print(json.dumps({"names": names, "latest": s.latest(), "load": s.load().decode(),
                      "valid": s.load_latest_valid()[0], "problems": sorted(map(str, s.problems))}))
    s.save("after", b"after")
    print(json.dumps([c.name for c in s.list()]))
    """
)


def test_r25_fifo_named_ckpt_never_blocks(tmp_path):
    code, out, err = run_py_capped(FIFO, str(tmp_path / "fast"), timeout=60)
    assert code == 0, err
    first, second = (json.loads(x) for x in out.splitlines())
    assert first["names"] == ["good"] and first["latest"] == "good" and first["load"] == "good data"
    assert first["valid"] == "good"
    assert any(p.endswith("000000000099-fifo.ckpt") for p in first["problems"])
    assert second == ["good", "after"]
