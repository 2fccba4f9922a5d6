"""The agent's readers of growing logs: each returns only the lines written since its last read.

- :class:`FileTail` — a text file (a service log, ``kern.log``): keeps the byte offset and the
  inode; a rotated file (another inode at the path) is drained to its end and then the new one read
  from its start; a truncated file (shorter than the offset, ``copytruncate``) is read from its start.
  A partial last line waits for its newline. Lines longer than ``max_line`` bytes are cut there and
  counted (issue 25: one long line must not cost a parser minutes).
- :class:`KmsgReader` — ``/dev/kmsg``: opened non-blocking, one record per ``read()``, from the record
  where it stopped; ``EPIPE`` (records overwritten in the ring buffer since) is counted and reading
  goes on. Each record becomes ``<ISO time> <message>`` (its time from the boot clock). A regular file
  of records in the same format (a test standing in for the device) is tailed as a file.
- :class:`JournalReader` — a journal directory (the host's ``/var/log/journal`` mounted read-only) via
  ``journalctl -D DIR -k --after-cursor``, when ``journalctl`` is on PATH.

:func:`open_kernel_log` opens the first of several paths that can be read, and says why the others
could not.
"""

from __future__ import annotations

import datetime as _dt
import errno
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Callable

__all__ = ["FileTail", "JournalReader", "KmsgReader", "kmsg_record_line", "open_kernel_log"]

MAX_LINE = (
    8 << 10
)  # bytes; longer lines are cut (a kmsg record is at most 1 KiB, rsyslog's default maxMessageSize 8 KiB)
MAX_READ = 8 << 20  # bytes read from one file per call; the rest waits for the next call
_KMSG = re.compile(rb"^(\d+),(\d+),(\d+),[^;]*;(.*)$", re.S)


def kmsg_record_line(record: bytes, boot_time: float) -> bytes | None:
    """One ``/dev/kmsg`` record (``prio,seq,usec,flags;message\\n KEY=v…``) as ``<ISO time> message``;
    None when it is not such a record."""
    m = _KMSG.match(record.rstrip(b"\n"))
    if not m:
        return None
    msg = m.group(4).split(b"\n", 1)[0]  # continuation lines are KEY=value properties
    t = _dt.datetime.fromtimestamp(boot_time, _dt.timezone.utc) + _dt.timedelta(microseconds=int(m.group(3)))
    return t.isoformat().encode() + b" " + msg


def boot_time(clock: Callable[[], float] = time.time) -> float:
    """Wall time of the boot (what kmsg timestamps count from)."""
    return clock() - time.clock_gettime(time.CLOCK_MONOTONIC)


class FileTail:
    """New complete lines of a text file since the last :meth:`read` (see the module docstring)."""

    def __init__(self, path: str, max_line: int = MAX_LINE, max_read: int = MAX_READ) -> None:
        self.path = path
        self.max_line = max_line
        self.max_read = max_read
        self.fd: int | None = None
        self.inode: tuple[int, int] | None = None
        self.offset = 0
        self.partial = b""
        self.truncated_lines = 0  # lines cut at max_line
        self.rotations = 0
        self._skipping = False  # inside a line already cut: drop up to its newline

    def _open(self) -> None:
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise IsADirectoryError(errno.EISDIR, "is a directory", self.path)
        self.fd, self.inode, self.offset, self.partial, self._skipping = (
            fd,
            (st.st_dev, st.st_ino),
            0,
            b"",
            False,
        )

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _drain(self, budget: int) -> bytes:
        assert self.fd is not None
        chunks = []
        while budget > 0:
            b = os.pread(self.fd, min(budget, 1 << 20), self.offset)
            if not b:
                break
            self.offset += len(b)
            budget -= len(b)
            chunks.append(b)
        return b"".join(chunks)

    def read(self) -> list[bytes]:
        """The complete lines written since the last call (without their newlines). OSError when the
        file cannot be opened (the caller reports the source as down)."""
        if self.fd is None:
            self._open()
        assert self.fd is not None
        data = b""
        try:
            st = os.stat(self.path)
            moved = (st.st_dev, st.st_ino) != self.inode
        except FileNotFoundError:
            st, moved = None, False  # rotated away and not yet recreated: finish the old one
        if not moved and st is not None and st.st_size < self.offset:
            self.offset, self.partial, self._skipping = 0, b"", False  # truncated in place
            self.rotations += 1
        data = self._drain(self.max_read)
        lines = self._split(data)
        if moved and len(data) < self.max_read:
            # the old file is read to its end; the new one from its start
            if self.partial and not self._skipping:
                lines.append(self.partial[: self.max_line].rstrip(b"\r"))
            self.close()
            self.rotations += 1
            self._open()
            lines += self._split(self._drain(self.max_read))
        return lines

    def _split(self, data: bytes) -> list[bytes]:
        if not data:
            return []
        buf = self.partial + data
        parts = buf.split(b"\n")
        self.partial = parts.pop()
        out = []
        for ln in parts:
            if self._skipping:
                self._skipping = False  # the rest of a cut line
                continue
            if len(ln) > self.max_line:
                ln = ln[: self.max_line]
                self.truncated_lines += 1
            out.append(ln.rstrip(b"\r"))
        if len(self.partial) > self.max_line:
            if not self._skipping:
                out.append(self.partial[: self.max_line].rstrip(b"\r"))
                self.truncated_lines += 1
            self._skipping = True
            self.partial = b""
        return out


class KmsgReader:
    """``/dev/kmsg`` records since the last :meth:`read`, as ``<ISO time> message`` lines."""

    def __init__(self, path: str = "/dev/kmsg", clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self.fd: int | None = None
        self.overwritten = 0  # EPIPE: records lost to the ring buffer between two reads
        self.truncated_lines = 0
        self.rotations = 0

    def read(self) -> list[bytes]:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        boot = boot_time(self.clock)
        out: list[bytes] = []
        while len(out) < 100_000:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break  # no more records now
            except BrokenPipeError:
                self.overwritten += 1
                continue
            if not rec:
                break
            line = kmsg_record_line(rec, boot)
            if line is not None:
                out.append(line)
        return out

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class KmsgFile(FileTail):
    """A regular file of kmsg records (a stand-in for the device): tailed, each record converted."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(path)
        self.clock = clock

    def read(self) -> list[bytes]:
        boot = boot_time(self.clock)
        out = []
        for ln in super().read():
            conv = kmsg_record_line(ln, boot)
            out.append(conv if conv is not None else ln)
        return out


class JournalReader:
    """Kernel messages of a journal directory since the last read, through ``journalctl``."""

    def __init__(self, directory: str, timeout_s: float = 10.0) -> None:
        exe = shutil.which("journalctl")
        if exe is None:
            raise OSError(
                errno.ENOENT, "a journal directory needs journalctl, which is not on PATH", directory
            )
        self.exe = exe
        self.directory = directory
        self.timeout_s = timeout_s
        self.cursor: str | None = None
        self.truncated_lines = 0
        self.rotations = 0

    def read(self) -> list[bytes]:
        args = [self.exe, "-D", self.directory, "-k", "-o", "short-iso", "--no-pager", "-q", "--show-cursor"]
        args += ["--after-cursor", self.cursor] if self.cursor else ["--since", "-1h"]
        p = subprocess.run(args, capture_output=True, timeout=self.timeout_s, check=False)
        if p.returncode != 0:
            err = p.stderr.decode("utf-8", "replace").strip().splitlines()
            raise OSError(
                errno.EIO, f"journalctl exited {p.returncode}: {err[-1] if err else ''}", self.directory
            )
        out = []
        for ln in p.stdout.splitlines():
            if ln.startswith(b"-- cursor: "):
                self.cursor = ln[len(b"-- cursor: ") :].decode("utf-8", "replace")
            else:
                if len(ln) > MAX_LINE:
                    ln = ln[:MAX_LINE]
                    self.truncated_lines += 1
                out.append(ln)
        return out

    def close(self) -> None:
        pass


Reader = FileTail | KmsgReader | JournalReader


def open_kernel_log(
    paths: list[str], clock: Callable[[], float] = time.time
) -> tuple[Reader | None, list[bytes], list[str]]:
    """The reader of the first path that opens and reads, its first lines, and why each path before
    it did not."""
    why = []
    for p in paths:
        try:
            st = os.stat(p)
            if stat.S_ISCHR(st.st_mode):
                r: Reader = KmsgReader(p, clock)
            elif stat.S_ISDIR(st.st_mode):
                r = JournalReader(p)
            else:
                r = KmsgFile(p, clock)
            return r, r.read(), why  # the open and the first read must work
        except (OSError, subprocess.SubprocessError) as e:
            why.append(f"{os.fsdecode(p)}: {getattr(e, 'strerror', None) or e}")
    return None, [], why
