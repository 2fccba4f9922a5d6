"""Prometheus text files read as a stream (issue 26, sixth round): blocks from the file, never the
whole text, and the samples kept compact.

:func:`stream_file` reads a saved exposition in blocks of :data:`READ` bytes, each cut after its last
newline (a UTF-8 sequence never spans a newline, nor does ``\\r\\n``, so each block decodes and has
its ``\\r\\n`` replaced exactly as the whole text would), and hands each block to the plain-file pass
(:func:`~clusterdoctor.observe.control.prom_fast.parse_block_columns`) with one ``Seen`` for the
whole file. The samples of each block go to a sink as columns, never as one tuple per sample:

* :class:`ColumnSink` (:func:`parse_prom_stream`): every sample in file order, packed (series
  number, value, timestamp: 20 bytes a sample) beside one ``(name, labels)`` per distinct series; a
  :class:`~clusterdoctor.observe.control.prom_metrics.MetricSet` whose ``samples`` are built from
  them when first read. A file up to :data:`WHOLE` bytes (4 MiB: one dump) is read whole instead,
  with the same result.
* ``prom_series.SeriesSink`` (``prom_series.read_series``, what ``diagnose`` reads a dump with): per
  distinct series its points, consecutive equal points stored once; nothing per sample.

A file the plain pass refuses (escapes, OpenMetrics, exemplars, odd spacing: see
:mod:`~clusterdoctor.observe.control.prom_text`) returns None from :func:`stream_file`, and the
callers read it whole with the careful loop, within the ``input`` budget as before. Budgets
(:func:`open_file`): a file over ``input`` is refused before it is read and one that grows past it
while read is refused then (docs/limits.md); ``seconds`` as every input.
"""

from __future__ import annotations

import gc
from itertools import compress, repeat
from operator import is_

from clusterdoctor.observe.control import prom_fast
from clusterdoctor.observe.control.prom_metrics import Family, MetricSet, PromSample

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any, BinaryIO

    from clusterdoctor.observe.control.prom_metrics import Labels

# Bytes read at a time: the block the plain pass reads at once (its lists are bounded by it).
READ = prom_fast.BLOCK
# A file up to this size is read whole by parse_prom_stream (the same result; faster on one dump: no
# series numbering, and its memory is bounded by this): the size above which the plain pass remembers
# series across blocks, which the column sink's numbering relies on to be cheap.
WHOLE = prom_fast.REMEMBER_ABOVE
_NAN = float("nan")


def text_blocks(f: BinaryIO, warnings: list[str], size: int | None = None) -> Iterator[str]:
    """The decoded text of ``f`` in blocks of about ``size`` bytes, each ending after a newline but
    the last; ``\\r\\n`` as ``\\n``. Invalid UTF-8 is replaced and named once, at its byte offset in
    the file, as :func:`~clusterdoctor.observe.control.prom_text.parse_prom_text` names it."""
    size = size or READ
    pending = b""
    offset = 0  # bytes of the file before ``pending``
    warned = False
    while True:
        data = f.read(size)
        if not data:
            break
        buf = pending + data if pending else data
        cut = buf.rfind(b"\n") + 1
        if not cut:
            pending = buf
            continue
        chunk, pending = (buf, b"") if cut == len(buf) else (buf[:cut], buf[cut:])
        text, warned = _decode(chunk, offset, warned, warnings)
        offset += cut
        yield text
    if pending:
        yield _decode(pending, offset, warned, warnings)[0]


def _decode(chunk: bytes, offset: int, warned: bool, warnings: list[str]) -> tuple[str, bool]:
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError as e:
        if not warned:
            warnings.append(f"invalid UTF-8 at byte {offset + e.start}; undecodable bytes replaced")
        text, warned = chunk.decode("utf-8", errors="replace"), True
    if "\r" in text and "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return text, warned


class Index:
    """Series number of each ``(name, labels)``: the first tuple of each series is kept (so its
    ``id`` is never reused) and looked up by identity, which the plain pass's series cache makes
    the common case in a long file; other tuples by value."""

    __slots__ = ("keys", "by_id", "by_value")

    def __init__(self) -> None:
        self.keys: list[tuple[str, Labels]] = []
        self.by_id: dict[int, int] = {}
        self.by_value: dict[tuple[str, Labels], int] = {}

    def numbers(self, keys: list[tuple[str, Labels]]) -> list[int]:
        """The series number of each key, new ones numbered in order of first appearance."""
        by_id = self.by_id
        sids = list(map(by_id.get, map(id, keys)))
        if None not in sids:
            return sids  # type: ignore[return-value]
        by_value, kept = self.by_value, self.keys
        sids = list(map(by_value.get, keys))
        if None in sids:
            new = list(dict.fromkeys(compress(keys, map(is_, sids, repeat(None)))))
            numbers = range(len(kept), len(kept) + len(new))
            by_value.update(zip(new, numbers))
            by_id.update(zip(map(id, new), numbers))  # ``new`` are kept: their ids stay theirs
            kept += new
            sids = list(map(by_value.__getitem__, keys))
        return sids  # type: ignore[return-value]


class Sink:
    """What :func:`stream_file` hands each block's samples to."""

    def add(self, keys: list[tuple[str, Labels]], values: list[float], times: Iterable[float | None]) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class ColumnSink(Sink):
    """Every sample in file order, packed (``struct``, no ``array``: it imports ``collections``, ~2
    ms of a fresh process): series number (``I``), value and timestamp (``d``, NaN for none: the
    text format's timestamps are integers), 20 bytes a sample, with the distinct ``(name, labels)``
    in :attr:`index`. :meth:`columns` reads them back as memoryviews."""

    def __init__(self) -> None:
        from struct import pack  # ~0.4 ms of a fresh process: only for a file this long

        self._pack = pack
        self._nan = pack("d", _NAN)
        self.index = Index()
        self.n = 0
        self._sid: list[bytes] = []
        self._val: list[bytes] = []
        self._ts: list[bytes] = []

    def add(self, keys: list[tuple[str, Labels]], values: list[float], times: Iterable[float | None]) -> None:
        n = len(keys)
        if not n:
            return
        self.n += n
        pack = self._pack
        self._sid.append(pack(f"{n}I", *self.index.numbers(keys)))
        self._val.append(pack(f"{n}d", *values))
        if type(times) is repeat:
            self._ts.append(self._nan * n)
        else:
            times = list(times)
            self._ts.append(
                pack(f"{n}d", *([_NAN if t is None else t for t in times] if None in times else times))
            )

    def __len__(self) -> int:
        return self.n

    def columns(self) -> tuple[memoryview, memoryview, memoryview]:
        """Series numbers, values and timestamps (NaN: none) of every sample, in file order."""
        return tuple(  # type: ignore[return-value]
            memoryview(b"".join(c)).cast(f) for c, f in ((self._sid, "I"), (self._val, "d"), (self._ts, "d"))
        )

    def samples(self) -> list[PromSample]:
        """The samples as :class:`PromSample` tuples, in file order."""
        keys = self.index.keys
        new = tuple.__new__
        out = []
        append = out.append
        for sid, v, t in zip(*self.columns()):
            name, labels = keys[sid]
            append(new(PromSample, (name, labels, v, None if t != t else t)))
        return out


def stream_file(
    f: BinaryIO, size: int, sink: Sink, families: dict[str, Family], warnings: list[str]
) -> int | None:
    """Read the plain text-format file ``f`` (``size`` bytes) into ``sink`` and ``families``; its
    number of lines, or None when the careful loop must read it (a block the plain pass refuses, a
    first line ``# UNIT``, a last line ``# EOF``: OpenMetrics) or it is empty."""
    seen = prom_fast.Seen(remember=size > prom_fast.REMEMBER_ABOVE)
    n_lines = 0
    tail = ""
    first = True
    for text in text_blocks(f, warnings):
        if first and text.startswith("# UNIT "):
            return None
        first = False
        got = prom_fast.parse_block_columns(text, families, seen)
        if got is None:
            return None
        sink.add(*got[0])
        n_lines += got[1]
        tail = (tail + text)[-256:] if len(text) < 256 else text[-256:]
        if seen.full():
            seen.forget()
    if first or tail.rstrip().endswith("# EOF"):
        return None
    if not tail.endswith("\n"):
        warnings.append(f"line {n_lines}: last line has no newline (file may be truncated)")
    return n_lines


def stream_into(f: BinaryIO, size: int, sink: Sink, ms: MetricSet) -> bool:
    """Whether ``f`` was read into ``sink`` and ``ms`` (False: read it whole; ``ms`` is then spent)."""
    got = stream_file(f, size, sink, ms.families, ms.warnings)
    if got is None or not (len(sink) or ms.families):
        return False  # refused, or nothing read (the whole-text reader says which error)
    truncated = getattr(getattr(f, "raw", None), "truncated", None)
    if truncated:
        from clusterdoctor.errors import InputError

        raise InputError(truncated, ms.path)
    return True


def parse_prom_stream(f: BinaryIO, path: str | None = None) -> MetricSet:
    """:func:`parse_prom_text` of the bytes of ``f`` (a seekable binary file, opened by the caller,
    read from its start), read in blocks: the same samples, families and warnings, its samples held
    as columns (:attr:`MetricSet.columns`; ``len(ms)``) until ``samples`` is first read. A file the
    plain pass refuses is read again, whole, by :func:`parse_prom_text`."""
    from clusterdoctor.observe.control.prom_text import parse_prom_text

    size = f.seek(0, 2)
    f.seek(0)
    if size <= WHOLE:
        return parse_prom_text(f.read(), path)
    ms = MetricSet(path=path)
    sink = ColumnSink()
    if not paused_gc(stream_into, f, size, sink, ms):
        f.seek(0)
        return parse_prom_text(f.read(), path)
    ms.columns = sink
    ms._samples = None
    return ms


def paused_gc(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with the cyclic garbage collector paused, as
    :func:`~clusterdoctor.observe.control.prom_text.parse_prom_text` pauses it: the blocks' lists and
    tuples form no cycles, and each automatic collection would walk them all."""
    if not gc.isenabled():
        return fn(*args)
    gc.disable()
    try:
        return fn(*args)
    finally:
        gc.enable()


def open_file(path: str) -> tuple[Any, int]:
    """The file opened by the input rules (a context manager giving a binary stream) and its size; a
    file over the ``input`` budget is refused before it is read, one that grows past it while read."""
    from contextlib import contextmanager

    from clusterdoctor.observe.limits import (
        LimitExceeded,
        check_regular,
        human_size,
        max_input_bytes,
        open_input,
    )

    size, cap = check_regular(path).st_size, max_input_bytes()
    if size > cap:
        raise LimitExceeded(
            f"file is {human_size(size)}, larger than the input limit of {human_size(cap)}", path, "input"
        )

    class Capped:
        """``read`` counting the bytes against the budget (a file that grows while being read)."""

        def __init__(self, f: Any) -> None:
            self.f, self.raw, self.total = f, f.raw, 0

        def read(self, n: int) -> bytes:
            data = self.f.read(n)
            self.total += len(data)
            if self.total > cap:
                raise LimitExceeded(
                    f"file grew past the input limit of {human_size(cap)} while being read", path, "input"
                )
            return data

    @contextmanager
    def opened() -> Iterator[Capped]:
        with open_input(path, inflate=False) as f:
            yield Capped(f)

    return opened(), size
