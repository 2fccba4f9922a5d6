"""The agent's incremental readers and windowed event sources: only new lines are read (rotation,
truncation, partial and over-long lines handled), /dev/kmsg records are read one by one from where
the reader stopped, and events older than the window stop raising findings."""

from __future__ import annotations

import os
import socket
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.serve.agent_events import KernelLogSource, LogFileSource, line_time
from clusterdoctor.serve.agent_tail import FileTail, KmsgReader, kmsg_record_line, open_kernel_log
from tests.conftest import TEST_DATA

XID = b"NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."


def test_tail_reads_only_new_lines(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"one\ntwo\npart")
    t = FileTail(str(p))
    assert t.read() == [b"one", b"two"]
    assert t.read() == []
    with open(p, "ab") as f:
        f.write(b"ial\nthree\n")
    assert t.read() == [b"partial", b"three"]


def test_tail_follows_rotation_and_truncation(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"old-1\n")
    t = FileTail(str(p))
    assert t.read() == [b"old-1"]
    with open(p, "ab") as f:
        f.write(b"old-2\n")  # written just before the rotation: still read
    os.rename(p, tmp_path / "a.log.1")
    p.write_bytes(b"new-1\n")
    assert t.read() == [b"old-2", b"new-1"] and t.rotations == 1
    # copytruncate: the same inode, shorter than the offset
    with open(p, "r+b") as f:
        f.truncate(0)
        f.write(b"x\n")
    assert t.read() == [b"x"]
    # removed and not yet recreated: nothing new, no error
    os.unlink(p)
    assert t.read() == []


def test_tail_cuts_long_lines(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"a" * 100 + b"\nshort\n" + b"b" * 250)
    t = FileTail(str(p), max_line=64)
    assert t.read() == [b"a" * 64, b"short", b"b" * 64]
    with open(p, "ab") as f:
        f.write(b"b" * 100 + b"\nafter\n")  # the rest of the cut line is dropped
    assert t.read() == [b"after"] and t.truncated_lines == 2


def test_tail_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        FileTail(str(tmp_path / "none")).read()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=12), st.data())
def test_tail_property_chunks_give_the_lines_written(tmp_path_factory, chunks, data):
    """However the bytes arrive, the lines read are the lines written (no newline inside, each cut
    at max_line)."""
    p = tmp_path_factory.mktemp("tail") / "f.log"
    p.write_bytes(b"")
    t = FileTail(str(p), max_line=16)
    got = []
    for c in chunks:
        with open(p, "ab") as f:
            f.write(c)
        if data.draw(st.booleans()):
            got += t.read()
    got += t.read()
    *complete, tail = b"".join(chunks).split(b"\n")
    # a line still without its newline comes out (cut) once it is longer than the limit
    assert got == [ln[:16].rstrip(b"\r") for ln in complete + ([tail] if len(tail) > 16 else [])]


def test_kmsg_record_line():
    boot = 1_700_000_000.0
    line = kmsg_record_line(
        b"3,1234,5000000,-;" + XID + b"\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n", boot
    )
    assert line == b"2023-11-14T22:13:25+00:00 " + XID
    assert kmsg_record_line(b"not a record", boot) is None


def test_kmsg_reader_one_record_per_read_until_empty():
    """SOCK_SEQPACKET has /dev/kmsg's read semantics: one record per read, EAGAIN when none."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    b.setblocking(False)
    r = KmsgReader("/dev/kmsg", clock=lambda: 1_700_000_000.0 + time.clock_gettime(time.CLOCK_MONOTONIC))
    r.fd = b.fileno()
    try:
        a.send(b"6,1,1000,-;first\n")
        a.send(b"3,2,2000000,-;" + XID + b"\n")
        lines = r.read()
        assert [ln.split(b" ", 1)[1] for ln in lines] == [b"first", XID]
        assert abs(line_time(lines[1], 2e9) - (1_700_000_000.0 + 2.0)) < 0.01  # boot clock + 2 s
        assert r.read() == []
        a.send(b"6,3,3000000,-;third\n")
        assert [ln.split(b" ", 1)[1] for ln in r.read()] == [b"third"]
    finally:
        r.fd = None
        a.close()
        b.close()


def test_real_dev_kmsg_reads_from_where_it_stopped():
    try:
        r = KmsgReader("/dev/kmsg")
        first = r.read()
    except OSError as e:
        pytest.skip(f"/dev/kmsg not readable here: {e.strerror}")
    try:
        assert first and all(b"T" in ln[:20] for ln in first)  # every record with an ISO time
        again = r.read()
        assert len(again) < len(first)  # only what the kernel logged since (usually nothing)
    finally:
        r.close()


def test_open_kernel_log_falls_back_and_says_why(tmp_path):
    kern = tmp_path / "kern.log"
    kern.write_bytes(b"2026-12-02T05:00:00+00:00 host kernel: " + XID + b"\n")
    reader, lines, why = open_kernel_log([str(tmp_path / "kmsg-missing"), str(tmp_path), str(kern)])
    assert reader is not None and lines and lines[0].endswith(XID)
    assert len(why) == 2 and "kmsg-missing" in why[0]
    none, _, why = open_kernel_log([str(tmp_path / "x")])
    assert none is None and "x" in why[0]


def test_line_time():
    now = 1_796_100_000.0  # 2026-12-01
    assert line_time(b"2026-11-30T08:51:07.5Z etcd", now) == 1_796_028_667.5
    assert line_time(b"2026-11-30T09:51:07+0100 x", now) == 1_796_028_667.0
    assert line_time(b"Nov 30 08:51:07 host kernel: x", now) == 1_796_028_667.0
    assert line_time(b"Dec 31 08:51:07 host kernel: x", now) < now  # last year's, not next month's
    assert line_time(b"[ 12.5] kernel", now) is None


def _gpu_findings(src_out, now):
    from clusterdoctor.rules.registry import Observations, run_rules

    obs = Observations()
    obs.put("now", now)
    obs.put("gpu_reports", src_out["gpu_reports"])
    return [f for f in run_rules(obs)[0] if f.layer == "gpu"]


def test_kernel_log_event_expires_after_the_window(tmp_path):
    now = [1_796_100_000.0]
    kern = tmp_path / "kmsg"
    kern.write_bytes(b"")
    src = KernelLogSource([str(kern)], window_s=60, clock=lambda: now[0])
    assert _gpu_findings(src(), now[0]) == []
    with open(kern, "ab") as f:
        f.write(b"2026-12-01T06:40:00+00:00 kernel: " + XID + b"\n")
    now[0] = 1_796_107_210.0  # 10 s after the line
    out = src()
    assert out["event_counts"] == {"gpu.xid": 1}
    assert [f.rule for f in _gpu_findings(out, now[0])] == ["GPU001"]
    now[0] += 30
    out = src()
    assert out["event_counts"] == {} and [f.rule for f in _gpu_findings(out, now[0])] == ["GPU001"]
    now[0] += 60  # past the window: the finding goes, the alert resolves
    out = src()
    assert _gpu_findings(out, now[0]) == []
    assert "kernel_log" in out["gpu_reports"][0].facts  # read and empty: not "not checked"


def test_kernel_log_unreadable_raises_for_source_up_0(tmp_path):
    src = KernelLogSource([str(tmp_path / "none")])
    with pytest.raises(OSError, match="no kernel log could be read"):
        src()


def test_log_file_parses_only_new_lines_and_expires(tmp_path):
    lines = (TEST_DATA / "etcd_stall" / "zap" / "etcd-m0.log").read_bytes().splitlines(keepends=True)
    p = tmp_path / "etcd.log"
    half = len(lines) // 2
    p.write_bytes(b"".join(lines[:half]))
    end = 1_796_028_667.0  # the last line's time
    now = [end + 60]
    src = LogFileSource(str(p), window_s=3600, clock=lambda: now[0])
    first = src()
    n1 = sum(first["event_counts"].values())
    with open(p, "ab") as f:
        f.write(b"".join(lines[half:]))
    second = src()
    n2 = sum(second["event_counts"].values())
    assert n1 + n2 == len(second["events"]) > 0  # each event counted once: nothing re-read
    assert second["event_counts"].get("etcd.lost_leader") == 1
    assert src()["event_counts"] == {}
    now[0] = end + 2 * 3600  # every event older than the window
    assert src()["events"] == []


def test_snapshot_files_are_reread():
    """A file that is state, not a stream (Flink's checkpoint REST answer), is read whole every round."""
    src = LogFileSource(str(TEST_DATA / "app" / "flink_backpressure_pyflink" / "checkpoints.json"))
    a, b = src(), src()
    assert src.snapshot is True and a and a.keys() == b.keys() and "event_counts" not in a


def test_unreadable_kernel_log_is_source_up_0_and_a_warning_then_recovers(tmp_path):
    """Issue 21's bad input: no kernel log readable is ``clusterdoctor_source_up{source="kernel-log"} 0``
    and one warning line naming the paths, never a crash or a healthy-looking GPU report; once a path
    becomes readable the next round reads it (source up, logged once)."""
    import io

    from clusterdoctor.serve.agent import Agent, default_sources
    from clusterdoctor.serve.agent_log import Logger

    (tmp_path / "sys").mkdir()
    kmsg = tmp_path / "kmsg"
    buf = io.StringIO()
    agent = Agent(
        default_sources(str(tmp_path), kernel_logs=[str(tmp_path / "no-journal"), str(kmsg)]),
        interval_s=3600,
        log=Logger("info", "logfmt", buf, lambda: 0.0),
    )
    try:
        text = agent.render()
        assert 'clusterdoctor_source_up{source="kernel-log"} 0' in text
        assert 'clusterdoctor_rule_skipped{rule="GPU001"} 1' in text  # not judged: not "healthy"
        down = [ln for ln in buf.getvalue().splitlines() if "source down" in ln]
        assert len(down) == 1 and "kernel-log" in down[0] and "no-journal" in down[0], buf.getvalue()
        agent.render()  # still down: no second warning line
        assert sum("source down" in ln for ln in buf.getvalue().splitlines()) == 1
        kmsg.write_bytes(b"6,1,1000,-;Linux version 6.1\n")
        text = agent.render()
        assert 'clusterdoctor_source_up{source="kernel-log"} 1' in text
        assert any("source up" in ln and "kernel-log" in ln for ln in buf.getvalue().splitlines())
    finally:
        agent.close()
