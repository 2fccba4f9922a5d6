"""Input budgets: every reader of untrusted input goes through this module.

clusterdoctor reads files from machines that are already misbehaving and bundles sent by other people.
No file, archive or stream may exhaust memory or hang the tool, so every reader draws on a budget
defined here, checked *as it reads* (never after), and a refusal is one line naming the file, the
limit and how to raise it::

    big.json.gz: inflates to more than 8 GiB (limit 'inflated'; raise it with --limit inflated=SIZE or CLUSTERDOCTOR_MAX_INFLATED_BYTES)

The budgets (``clusterdoctor --limit NAME=VALUE COMMAND ...`` or the environment variable; sizes take
K/M/G suffixes, powers of 1024):

============  ==================================  ===========  ====================================================
name          environment variable                default      what it bounds
============  ==================================  ===========  ====================================================
``input``     ``CLUSTERDOCTOR_MAX_INPUT_BYTES``   256 MiB      bytes of one file a parser holds whole
``inflated``  ``CLUSTERDOCTOR_MAX_INFLATED_BYTES`` 8 GiB       bytes inflated from one gzip/zstd/xz/bzip2 stream
``members``   ``CLUSTERDOCTOR_MAX_ARCHIVE_MEMBERS`` 100000     members of one archive, nested archives included
``archive``   ``CLUSTERDOCTOR_MAX_ARCHIVE_BYTES`` 1 GiB        total size of one archive's members, nested included
``nesting``   ``CLUSTERDOCTOR_MAX_NESTING``       2            archives inside archives (a bundle holding a tarball)
``depth``     ``CLUSTERDOCTOR_MAX_DEPTH``         100          nesting of JSON/pickle/XML values
``records``   ``CLUSTERDOCTOR_MAX_RECORDS``       10000000     records (values) a streaming reader keeps of one input
``seconds``   ``CLUSTERDOCTOR_MAX_SECONDS``       300          wall time reading one input
============  ==================================  ===========  ====================================================

Memory follows from them: a parser holding a file whole takes a few times ``input``; a streaming reader
holds a read buffer plus at most ``records`` compact values (about 40 bytes each): measured on gzip
traces inflating to 2 GiB, the reader peaks at 0.41-0.49 GB when the default refuses them, and a trace
of 11.3 M kernels read to the end (``records`` raised) peaks at 1.47 GB with its analysis
(``bench/hostile_inputs.py``) — memory follows the records kept, never the bytes inflated. JSON deeper than the interpreter's recursion
guard (about 1,000 levels) is refused as too deep whatever ``depth`` says.

Besides: anything that is not a regular file (a device such as ``/dev/zero``, a FIFO, a socket, a
symlink to one of them) is refused before it is read, and a parser never allocates in proportion to a
number found in the input without a bound (:func:`bounded`).

How a reader adopts it — one call wraps a reader::

    from clusterdoctor.observe import limits

    with limits.open_input(path) as f:       # regular files only; gzip/zstd/xz/bzip2 inflated on the fly;
        for line in f:                       # bytes, inflation and wall time checked at every read
            ...
    data = limits.read_input(path)           # a whole file (at most ``input`` bytes), raw
    text = limits.read_text(path)            # the same, inflated and decoded (UTF-8, errors replaced)
    doc = limits.load_json(data, path)       # JSON with the depth guard, errors as InputError
    n = limits.bounded(count, 4096, "GPU count", path)   # a number from the input, before allocating by it

A streaming reader that keeps records calls ``budget.add_records(n)`` on the :class:`Budget` it gets
from :func:`open_input` (``f.budget``) or makes with ``Budget(path)``.

This module holds the readers; the budgets themselves (:data:`LIMITS`, :class:`Limits`,
:class:`Budget`, :class:`LimitExceeded`, ``--limit``) are :mod:`clusterdoctor.observe.budgets`,
re-exported here.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import stat
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.observe.budgets import (  # the budgets: moved, still importable from here
    DEFAULT_MAX_INPUT_BYTES,
    LIMITS,
    MAX_INPUT_ENV,
    Budget,
    LimitExceeded,
    Limits,
    bounded,
    current,
    human_size,
    limit_help,
    max_input_bytes,
    parse_size,
    set_limit,
)
from clusterdoctor.observe.confine import check as _check_confined
from clusterdoctor.observe.warning_list import WarningList  # moved; still importable from here

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "LIMITS",
    "MAX_INPUT_ENV",
    "Budget",
    "LimitExceeded",
    "Limits",
    "WarningList",
    "archive_scope",
    "bounded",
    "check_regular",
    "current",
    "human_size",
    "limit_help",
    "load_json",
    "max_input_bytes",
    "open_input",
    "open_regular",
    "read_bounded",
    "read_head",
    "inflated_head",
    "is_tar",
    "parse_size",
    "read_input",
    "read_text",
    "set_limit",
    "sniff_compression",
]


# --- non-regular files --------------------------------------------------------------------------------

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _kind(mode: int) -> str:
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def _not_regular(p: str, mode: int) -> InputError:
    target = ""
    with contextlib.suppress(OSError):
        if os.path.islink(p):
            target = f" (a link to {os.path.realpath(p)})"
    return InputError(f"is {_kind(mode)}{target}, not a regular file; refused before reading", p)


# --- virtual inputs ----------------------------------------------------------------------------------
# An input whose bytes are not (only) on disk: a paste cleaned of prompts and fences (observe/paste),
# standard input (``-``). Every reader goes through check_regular/open_regular/read_bounded, so while
# :func:`virtual_inputs` is active they read these bytes under the name the user gave.
_VIRTUAL: contextvars.ContextVar[dict[str, bytes] | None] = contextvars.ContextVar(
    "virtual_inputs", default=None
)


@contextlib.contextmanager
def virtual_inputs(mapping: dict[str, bytes]) -> Iterator[None]:
    """Readers see ``mapping[name]`` as the content of the input ``name`` inside the block."""
    outer = _VIRTUAL.get()
    token = _VIRTUAL.set({**(outer or {}), **{os.fspath(k): v for k, v in mapping.items()}})
    try:
        yield
    finally:
        _VIRTUAL.reset(token)


def virtual_input(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes :func:`virtual_inputs` gives ``path``, or None for a real file."""
    v = _VIRTUAL.get()
    return None if v is None else v.get(os.fspath(path))


def _virtual_stat(data: bytes) -> os.stat_result:
    return os.stat_result((stat.S_IFREG | 0o444, 0, 0, 1, 0, 0, len(data), 0, 0, 0))


def check_regular(path: str | os.PathLike[str]) -> os.stat_result:
    """``stat`` of ``path`` (links followed), or InputError when it is missing, unreadable or not a
    regular file (devices like ``/dev/zero``, FIFOs, sockets, links to them): never opened."""
    p = os.fspath(path)
    v = virtual_input(p)
    if v is not None:
        return _virtual_stat(v)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError("no such file or directory", p) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", p) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(p, st.st_mode)
    return st


def open_regular(p: str) -> BinaryIO:
    """Open a regular file for reading without ever blocking on a FIFO or touching a device: opened
    non-blocking, checked with ``fstat`` (no race with a swap after :func:`check_regular`)."""
    v = virtual_input(p)
    if v is not None:
        return io.BytesIO(v)
    check_regular(p)
    _check_confined(p)
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(p, flags)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", p) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(p, st.st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


# --- compressed streams -------------------------------------------------------------------------------

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
)


def sniff_compression(head: bytes) -> str | None:
    """``gzip``, ``zstd``, ``xz``, ``bzip2`` from the first bytes, else None."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


class _Inflater:
    """One decompressor whose every call returns a bounded amount: gzip/xz/bzip2 take an output cap;
    zstandard's has none, so it is fed 512 input bytes at a time (at most about 16 MB out, the ratio
    of zstd's RLE blocks). Follows concatenated members (gzip members, zstd frames, xz streams);
    ``eof`` once the last member ended cleanly."""

    _ZSTD_PIECE = 512

    def __init__(self, codec: str) -> None:
        self.codec = codec
        self.eof = False
        self.started = False
        self._new()

    def _new(self) -> None:
        if self.codec == "gzip":
            import zlib

            self.d: Any = zlib.decompressobj(31)
        elif self.codec == "zstd":
            import zstandard

            self.d = zstandard.ZstdDecompressor().decompressobj()
        elif self.codec == "xz":
            import lzma

            self.d = lzma.LZMADecompressor()
        else:
            import bz2

            self.d = bz2.BZ2Decompressor()
        self.eof = False

    def decompress(self, data: bytes, max_out: int) -> tuple[bytes, bytes]:
        """(some output, bounded; the input not consumed yet, to pass again)."""
        if data:
            self.started = True
        if self.codec == "gzip":
            out = self.d.decompress(data, max_out)
            rest = self.d.unconsumed_tail
            if self.d.eof:  # what follows the member is in unused_data (unconsumed_tail repeats it)
                rest = self.d.unused_data
                self._member_end(rest)
            return out, rest
        if self.codec == "zstd":
            piece, rest = data[: self._ZSTD_PIECE], data[self._ZSTD_PIECE :]
            out = self.d.decompress(piece) if piece else b""
            if self.d.eof:
                rest = self.d.unused_data + rest
                self._member_end(rest)
            return out, rest
        # lzma/bz2 keep unconsumed input inside; call again with b"" while not needs_input
        out = self.d.decompress(data, max_out)
        rest = b""
        if self.d.eof:
            rest = self.d.unused_data
            self._member_end(rest)
        return out, rest

    def _member_end(self, rest: bytes) -> None:
        if rest.strip(b"\x00"):
            self._new()  # another member/frame/stream follows
        else:
            self.eof = True

    def holds_input(self) -> bool:
        """lzma/bz2: input taken but not inflated yet (call again with b"")."""
        return self.codec in ("xz", "bzip2") and not self.eof and self.started and not self.d.needs_input


class InputStream(io.RawIOBase):
    """A file's bytes, inflated when compressed, with every read counted against a :class:`Budget`.

    ``truncated`` says why the data ended early (a cut-off or damaged gzip/zstd/xz/bzip2 stream): the
    bytes before the cut are returned; readers that accept partial input turn it into a warning, the
    others refuse."""

    _RAW_READ = 256 << 10

    def __init__(self, raw: BinaryIO, path: str, budget: Budget, codec: str | None) -> None:
        super().__init__()
        self.raw = raw
        self.path = path
        self.budget = budget
        self.codec = codec
        self.inflater = _Inflater(codec) if codec else None
        self.carry = b""  # compressed input not consumed yet
        self.out = b""  # inflated output, handed out from out_pos on
        self.out_pos = 0
        self.truncated: str | None = None
        self.raw_bytes = 0
        self._done = False

    def readable(self) -> bool:
        return True

    def _read_raw(self, n: int) -> bytes:
        self.budget.check_time()
        try:
            data = self.raw.read(n)
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror or e}", self.path) from None
        self.raw_bytes += len(data)
        return data

    def readinto(self, b: Any) -> int:
        n = len(b)
        if n == 0:
            return 0
        if self.inflater is None:
            data = self._read_raw(n)
            b[: len(data)] = data
            return len(data)
        if self.out_pos >= len(self.out):
            self.out, self.out_pos = self._inflate(n), 0
        k = min(n, len(self.out) - self.out_pos)
        b[:k] = memoryview(self.out)[self.out_pos : self.out_pos + k]
        self.out_pos += k
        return k

    def _inflate(self, n: int) -> bytes:
        inf = self.inflater
        assert inf is not None
        while not self._done:
            if self.carry or inf.holds_input():
                data, self.carry = self.carry, b""
            else:
                data = self._read_raw(self._RAW_READ)
                if not data:
                    if not inf.eof:
                        self.truncated = (
                            f"the {inf.codec} stream ends early (truncated file)"
                            if inf.started
                            else f"empty {inf.codec} stream"
                        )
                    self._done = True
                    return b""
            try:
                out, self.carry = inf.decompress(data, n)
            except Exception as e:  # zlib.error, lzma.LZMAError, OSError, zstandard.ZstdError, EOFError
                self.truncated = f"damaged {inf.codec} data ({str(e)[:120]})"
                self._done = True
                return b""
            if out:
                self.budget.add_inflated(len(out))
                return out
        return b""


@contextlib.contextmanager
def open_input(
    path: str | os.PathLike[str], *, inflate: bool = True, budget: Budget | None = None
) -> Iterator[io.BufferedReader]:
    """Open an input for reading (see the module docstring). The result is a buffered binary stream
    (``read``, ``readline``, iteration); ``f.raw`` is the :class:`InputStream` (``budget``,
    ``truncated``, ``codec``). Not a regular file, unreadable or over a budget: InputError."""
    p = os.fspath(path)
    raw = open_regular(p)
    try:
        codec = None
        if inflate:
            head = raw.read(6)
            raw.seek(0)
            codec = sniff_compression(head)
        stream = InputStream(raw, p, budget or Budget(p), codec)
        with io.BufferedReader(stream, buffer_size=256 << 10) as f:
            yield f
    finally:
        raw.close()


def read_input(path: str | Path, limit: int | None = None, *, inflate: bool = False) -> bytes:
    """The bytes of an input file, or :class:`InputError` (one line naming the file) when it is not a
    regular file, cannot be read, is larger than ``limit`` (default: the ``input`` limit) or does not
    fit in memory. Read in chunks with the limit checked as it goes (a file that grows while being read
    is caught). ``inflate=True`` inflates gzip/zstd/xz/bzip2 first (the limit then applies to the
    inflated bytes; a truncated stream is refused)."""
    p = os.fspath(path)
    cap = max_input_bytes() if limit is None else limit
    st = check_regular(p)
    if not inflate and st.st_size > cap:
        raise LimitExceeded(
            f"file is {human_size(st.st_size)}, larger than the input limit of {human_size(cap)}", p, "input"
        )
    chunks: list[bytes] = []
    total = 0
    try:
        with open_input(p, inflate=inflate) as f:
            while True:
                chunk = f.read(min(1 << 20, cap + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > cap:
                    what = "inflates past" if f.raw.codec else "grew past"  # type: ignore[attr-defined]
                    raise LimitExceeded(
                        f"file {what} the input limit of {human_size(cap)} while being read", p, "input"
                    )
            if f.raw.truncated:  # type: ignore[attr-defined]
                raise InputError(f.raw.truncated, p)  # type: ignore[attr-defined]
        return b"".join(chunks)
    except MemoryError:
        raise InputError(f"not enough memory to read it (limit {human_size(cap)})", p) from None


def read_text(path: str | Path, limit: int | None = None) -> str:
    """:func:`read_input` inflated and decoded as UTF-8 (undecodable bytes replaced)."""
    return read_input(path, limit, inflate=True).decode("utf-8", "replace")


MAX_LINE_BYTES = 1 << 20  # a longer line is cut here (its rest skipped), with a counted warning
_LINE_BLOCK = 1 << 20


class LineReader:
    """A text input's lines, streamed (issue 26): read in blocks (1 MiB), each run of whole lines
    decoded and split as ``str.splitlines`` splits (line numbers match reading the file whole), so
    memory is bounded by the block and the longest line, never by the file. :attr:`head` is the start
    of the decoded text (the first block) for what looks at it (a year, a format). Budgets as
    :func:`open_input` (inflated, ``inflated``, ``seconds``); a file over the ``input`` limit is
    refused before it is read, as by every reader (its memory no longer grows with it: raising the
    limit is safe). A line over ``max_line`` bytes is cut there (the rest of it skipped):
    :attr:`long_lines` counts them and :attr:`warnings` says so in one line, as it names a truncated
    compressed stream (the lines before the cut are read).

    ``with LineReader(path) as r: for line in r: ...``"""

    def __init__(self, path: str | os.PathLike[str], *, max_line: int = MAX_LINE_BYTES) -> None:
        self.path = os.fspath(path)
        self.max_line = max(1, max_line)
        self.block = min(_LINE_BLOCK, self.max_line)
        self.long_lines = 0
        self.bytes_read = 0
        self.warnings: list[str] = []
        self.head = ""
        self._cm: Any = None
        self._f: Any = None
        self._pending = b""

    def __enter__(self) -> LineReader:
        size, cap = check_regular(self.path).st_size, max_input_bytes()
        if size > cap:
            raise LimitExceeded(
                f"file is {human_size(size)}, larger than the input limit of {human_size(cap)}",
                self.path,
                "input",
            )
        self._cm = open_input(self.path)
        self._f = self._cm.__enter__()
        self._pending = self._f.read(self.block)
        self.bytes_read = len(self._pending)
        self.head = self._pending.decode("utf-8", "replace")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)

    def _cut(self, line: bytes) -> Iterator[str]:
        self.long_lines += 1
        yield from line[: self.max_line].decode("utf-8", "replace").splitlines()

    def __iter__(self) -> Iterator[str]:
        # At the top of each round ``pending`` is a partial line (at most max_line bytes, no line end)
        # followed by one block (at most max_line bytes): only its first line can be over the cap.
        f, cap = self._f, self.max_line
        pending, self._pending = self._pending, b""
        skipping = False  # inside a line already cut: its bytes up to its end are dropped
        while True:
            cut = pending.rfind(b"\n") + 1
            if cut:
                chunk, pending = pending[:cut], pending[cut:]
                nl = chunk.find(b"\n")
                if nl > cap:
                    yield from self._cut(chunk[:nl])
                    chunk = chunk[nl + 1 :]
                yield from chunk.decode("utf-8", "replace").splitlines()
            if len(pending) > cap:  # a line longer than the cap whose end is not read yet
                yield from self._cut(pending)
                pending, skipping = b"", True
            block = f.read(self.block)
            if not block:
                break
            self.bytes_read += len(block)
            if skipping:
                nl = block.find(b"\n")
                if nl < 0:
                    continue
                block, skipping = block[nl + 1 :], False
            pending += block
        if pending:
            yield from pending.decode("utf-8", "replace").splitlines()
        if self.long_lines:
            self.warnings.append(
                f"{self.long_lines:,} line(s) longer than {human_size(cap)}: each cut at {human_size(cap)}"
            )
        truncated = getattr(getattr(f, "raw", None), "truncated", None)
        if truncated:
            self.warnings.append(f"{truncated}: the lines before the cut were read")


def load_json(data: bytes | str, path: str | None = None, what: str = "JSON") -> Any:
    """``json.loads`` with errors as one-line InputError and the depth guard (no RecursionError)."""
    import json  # here: the readers that import this module for its budgets do not all need it

    try:
        return json.loads(data)
    except RecursionError:
        raise LimitExceeded(f"{what} nested too deep to read", path, "depth") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"not valid {what}: {e}", path) from None


# --- archives -----------------------------------------------------------------------------------------


class _ArchiveState:
    def __init__(self, root: str, limits: Limits, level: int, path: str) -> None:
        self.root, self.limits, self.level, self.path = root, limits, level, path
        self.members = 0
        self.total = 0


_ARCHIVE: contextvars.ContextVar[_ArchiveState | None] = contextvars.ContextVar("cd_archive", default=None)


class ArchiveBudget:
    """The budget of one archive being read; archives read while it is open (a bundle inside a bundle,
    a tarball inside a bundle) share its member and size counts and add one level of nesting."""

    def __init__(self, state: _ArchiveState, path: str) -> None:
        self.state = state
        self.path = path

    @property
    def level(self) -> int:
        return self.state.level

    def member(self, name: str, size: int) -> None:
        """Count one member of ``size`` bytes (from its header, before it is read)."""
        s, lim = self.state, self.state.limits
        s.members += 1
        if s.members > lim.members:
            raise LimitExceeded(
                f"archive holds more than {lim.members:,} members{self._within()}", self.path, "members"
            )
        s.total += max(0, size)
        if s.total > lim.archive:
            raise LimitExceeded(
                f"archive expands to more than {human_size(lim.archive)} (at member {name[:80]!r}){self._within()}",
                self.path,
                "archive",
            )

    def _within(self) -> str:
        return (
            "" if self.state.root == self.path else f", counting the archive {self.state.root} it is inside"
        )


@contextlib.contextmanager
def archive_scope(path: str | os.PathLike[str]) -> Iterator[ArchiveBudget]:
    """Enter an archive: nested scopes share the outermost archive's counts; deeper than ``nesting``
    levels is refused."""
    p = os.fspath(path)
    outer = _ARCHIVE.get()
    if outer is not None and outer.path == p:  # the same archive, read again (a second pass)
        yield ArchiveBudget(outer, p)
        return
    if outer is None:
        state = _ArchiveState(p, current(), 1, p)
    else:
        if outer.level + 1 > outer.limits.nesting:
            raise LimitExceeded(
                f"archive inside {outer.level} archive(s) ({outer.root}); nested deeper than "
                f"{outer.limits.nesting} levels",
                p,
                "nesting",
            )
        state = _ArchiveState(outer.root, outer.limits, outer.level + 1, p)
        state.members, state.total = outer.members, outer.total
    token = _ARCHIVE.set(state)
    try:
        yield ArchiveBudget(state, p)
    finally:
        _ARCHIVE.reset(token)
        if outer is not None:
            outer.members, outer.total = state.members, state.total


def is_tar(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a tar archive (plain or gzip/zstd/xz/bzip2), from its first 512 inflated
    bytes: the ustar magic or a valid header checksum. Reads at most a few KiB; never raises for
    content (unlike :func:`tarfile.is_tarfile`, which reads a device forever or raises EOFError)."""
    try:
        with open_input(path) as f:
            head = f.read(512)
    except InputError:
        return False
    return _tar_header_ok(head)


def _tar_header_ok(h: bytes) -> bool:
    if len(h) < 512 or not h.strip(b"\x00"):
        return False
    if h[257:262] == b"ustar":
        return True
    field = h[148:156].split(b"\x00", 1)[0].strip()
    try:
        want = int(field, 8)
    except ValueError:
        return False
    return want == sum(h[:148]) + 8 * 32 + sum(h[156:512])


def read_head(path: str | os.PathLike[str], n: int = 64 << 10) -> bytes:
    """The first ``n`` raw bytes of a regular file (for sniffing), or InputError."""
    p = os.fspath(path)
    raw = open_regular(p)
    try:
        return raw.read(n)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", p) from None
    finally:
        raw.close()


def inflated_head(path: str | os.PathLike[str], n: int = 64 << 10) -> tuple[bytes, str | None]:
    """The first ``n`` bytes of a file after inflation, and why the stream ended early (or None)."""
    with open_input(path) as f:
        data = f.read(n)
        return data, f.raw.truncated  # type: ignore[attr-defined]


def read_bounded(path: str | os.PathLike[str], cap: int, *, prefix: bool = False) -> bytes:
    """A small file read whole (sysfs/procfs attributes, counters): at most ``cap`` bytes, or
    :class:`LimitExceeded` past it (``prefix=True``: the first ``cap`` bytes, no error). Not a regular
    file: InputError before reading. OS errors (missing, permission) are raised as OSError, unchanged,
    for readers of live trees that skip what vanished."""
    p = os.fspath(path)
    v = virtual_input(p)
    if v is not None:
        if len(v) > cap and not prefix:
            raise LimitExceeded(f"file is larger than the input limit of {human_size(cap)}", p, "input")
        return v[:cap]
    st = os.stat(p)  # OSError as is
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(p, st.st_mode)
    _check_confined(p)
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    fd = os.open(p, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(p, st.st_mode)
        chunks, total = [], 0
        while total <= cap:
            b = os.read(fd, min(1 << 20, cap + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > cap:
        if prefix:
            return data[:cap]
        raise LimitExceeded(f"file is larger than the input limit of {human_size(cap)}", p, "input")
    return data


def run_bounded(
    cmd: list[str], timeout: float, max_output: int | None = None, env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """Run a collector command (etcdctl, journalctl …): (exit code, stdout, stderr), its output read
    as it comes and capped at ``max_output`` bytes (default: the ``input`` budget) per stream, the
    whole run within ``timeout`` seconds. Over either: the command is killed and
    :class:`LimitExceeded` (``input``) or :class:`TimeoutError` is raised."""
    import selectors
    import subprocess

    cap = max_input_bytes() if max_output is None else max_output
    deadline = time.monotonic() + timeout
    p = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    out: dict[int, list[bytes]] = {1: [], 2: []}
    size = {1: 0, 2: 0}
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, 1)  # type: ignore[arg-type]
    sel.register(p.stderr, selectors.EVENT_READ, 2)  # type: ignore[arg-type]
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{os.path.basename(cmd[0])} did not finish within {timeout:g} s")
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                out[key.data].append(chunk)
                size[key.data] += len(chunk)
                if size[key.data] > cap:
                    raise LimitExceeded(
                        f"{os.path.basename(cmd[0])} printed more than {human_size(cap)}", cmd[0], "input"
                    )
        code = p.wait(timeout=max(0.1, deadline - time.monotonic()))
    except BaseException:
        p.kill()
        p.wait()
        raise
    finally:
        sel.close()
        for f in (p.stdout, p.stderr):
            if f is not None:
                f.close()
    return code, b"".join(out[1]), b"".join(out[2])
