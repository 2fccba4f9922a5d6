"""PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, read as a stream with bounded memory.

Only what an analysis uses is kept, in compact arrays: GPU activity (kernels, memcpy, memset: name,
start, duration, stream, correlation, collective metadata of NCCL kernels), CUDA launch
correlations (for HTA's "kernels launched in the traced steps" filter), ``ProfilerStep#N`` windows,
communication records (``record_param_comms``, ``nccl:*``/``gloo:*`` annotations) and, for CPU-only
traces (gloo), CPU operator intervals. ``python_function``, flow events (``ac2g``, ``fwdbwd``),
``gpu_user_annotation`` and metadata events are skipped and counted, and the trace says so.

The reader walks the top-level object itself. The first events of ``traceEvents`` are decoded one
at a time with :meth:`json.JSONDecoder.raw_decode`; they also tell the exact spelling of
``"ph": "X", "cat": "`` the writer uses. If every kept event matches the bulk scanner's pattern
(Kineto's key order ``ph, cat, name, pid, tid, ts, dur``), the rest is read a buffer (about 1 MB) at a
time by one regular-expression scan that starts from that literal text: launches and plain kernels
are taken from the match and their flat ``args`` without decoding, NCCL kernels, step and
communication records are decoded, and everything else is only counted. Otherwise (another writer,
another key order) each event is decoded; an event that can be ruled out from its first bytes is
skipped to where the next one starts (a ``{`` followed by the ``"ph"`` key cannot occur inside a
JSON string, whose quotes are escaped), guarded by checking that the span holds one ``"ph"`` key.
Memory is the read buffer plus the kept records.

A truncated file (cut-off .gz or JSON) yields the events read so far and a warning; anything that
is not a Chrome trace raises :class:`~clusterdoctor.errors.InputError`.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from clusterdoctor.errors import InputError

# Kernel classification, from HTA hta/utils/utils.py (NCCL_KERNEL_RE, MEMORY_KERNEL_RE,
# NCCL_COMPUTE_KERNEL_RE), so that our breakdowns match HTA's.
COMM_KERNEL_RE = re.compile(r"^nccl.*Kernel")
MEMORY_KERNEL_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

COMM, MEMORY, COMPUTE, OTHER = "COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER"

# GPU activity. cuda_sync events on a stream (Stream Sync, Stream Wait Event) count as GPU activity of
# type OTHER, as in HTA (it keeps every event with stream != -1); device-wide ones (stream -1) do not.
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "cuda_sync"})
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime"})
CPU_CATS = frozenset({"cpu_op", "user_annotation", "Operator", "python_function"})
SKIP_CATS = frozenset({"python_function", "gpu_user_annotation", "ac2g", "fwdbwd", "Trace", "overhead"})
MAX_EVENT_DURATION_US = 7 * 24 * 3600 * 1e6  # HTA hta/common/constants.py: longer = CUPTI overflow
COMM_ANNOTATION_RE = re.compile(r"^(nccl|gloo|mpi|ucc|xccl):")
META_KEYS = ("schemaVersion", "distributedInfo", "baseTimeNanoseconds", "displayTimeUnit", "traceName")
COLL_ARG_KEYS = {
    "Collective name": "collective",
    "In msg nelems": "in_nelems",
    "Out msg nelems": "out_nelems",
    "In msg size": "in_size",
    "Out msg size": "out_size",
    "Group size": "group_size",
    "dtype": "dtype",
    "Process Group Name": "pg_name",
    "Process Group Description": "pg_desc",
    "Process Group Ranks": "pg_ranks",
    "Seq": "seq",
    "Rank": "rank",
}

_READ = 1 << 20  # text per read: the buffer stays around 1-2 MB whatever the trace size
_READ_GZ = 256 << 10  # compressed bytes per read
_MAX_EVENT_CHARS = 64 << 20
_WS_RE = re.compile(r"[ \t\r\n]*")
_PH = re.compile(r'\{\s*"ph"\s*:\s*"([^"\\]*)"')
_CAT_NAME = re.compile(r'\s*,\s*"cat"\s*:\s*"([^"\\]*)"\s*,\s*"name"\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"')
_CORRELATION = re.compile(r'"correlation"\s*:\s*(\d+)')
# After '"ph": "X", "cat": "': a category whose args are read next (group 1: GPU activity and
# launches) or another kept category (2), name (3), tid (4), ts (5), dur (6).
_X_TAIL = (
    r'(?:(%s)|(%s))"\s*,\s*"name"\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"'
    r'\s*,\s*"pid"\s*:\s*(?:-?\d+|"[^"\\]*")\s*,\s*"tid"\s*:\s*(-?\d+|"[^"\\]*")'
    r'\s*,\s*"ts"\s*:\s*(-?[\d.]+(?:[eE][-+]?\d+)?)\s*,\s*"dur"\s*:\s*(-?[\d.]+(?:[eE][-+]?\d+)?)'
)
_WANTED_ARGS = (
    "kernel|gpu_memcpy|gpu_memset|Kernel|Memcpy|Memset|cuda_sync|cuda_runtime|cuda_driver|Runtime|hip_runtime"
)
_PH_X_CAT = r'"ph"\s*:\s*"X"\s*,\s*"cat"\s*:\s*"'
_LITERAL = re.compile(r'\{\s*("ph"\s*:\s*"X"\s*,\s*"cat"\s*:\s*")')


@functools.lru_cache(maxsize=8)
def _scanner(prefix: str | None, with_cpu: bool) -> re.Pattern[str]:
    """The bulk scanner, starting at ``"ph"``. With the exact prefix text the trace uses (say
    ``"ph": "X", "cat": "``) the regex engine can search for a literal, about 4x faster."""
    head = re.escape(prefix) if prefix else _PH_X_CAT
    other = "user_annotation|" + (
        "cpu_op" if with_cpu else r'cpu_op(?="\s*,\s*"name"\s*:\s*"(?:record_param_comms|ProfilerStep))'
    )
    return re.compile(head + _X_TAIL % (_WANTED_ARGS, other))


_ARGS_FLAT = re.compile(r'\s*,\s*"args"\s*:\s*\{([^{}]*)\}')
# A plain GPU event's flat args in Kineto's layout: "stream" (1) directly followed by "correlation" (2),
# neither key earlier. One match instead of _ARGS_FLAT + _STREAM + _CORRELATION (the fallback).
_KERNEL_ARGS = re.compile(
    r'\s*,\s*"args"\s*:\s*\{[^{}"]*(?:"(?!stream"|correlation")[^{}"]*)*'
    r'"stream"\s*:\s*(-?\d+)\s*,\s*"correlation"\s*:\s*(\d+)[^{}]*\}'
)
_STREAM = re.compile(r'"stream"\s*:\s*(-?\d+)')
# A launch's correlation: its flat args up to the first "correlation" key (greedy, about 1.5x faster
# than a lazy [^{}]*? scan).
_RUNTIME_CORR = re.compile(
    r'\s*,\s*"args"\s*:\s*\{[^{}"]*(?:"(?!correlation")[^{}"]*)*"correlation"\s*:\s*(\d+)'
)
_PRELUDE_EVENTS = 64  # decoded generically first, to check the trace uses the layout the scanner knows
_SEP = re.compile(r"[ \t\r\n,]*")
_NEXT_EVENT = re.compile(r'\{\s*"ph"\s*:')
_CPU_TIMES = re.compile(r'"tid"\s*:\s*(-?\d+)\s*,\s*"ts"\s*:\s*(-?[\d.eE+]+)\s*,\s*"dur"\s*:\s*(-?[\d.eE+]+)')
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def kernel_type(name: str) -> str:
    """HTA's kernel type of a GPU activity name: COMMUNICATION, MEMORY, COMPUTATION or OTHER."""
    if COMM_KERNEL_RE.match(name):
        return COMM
    if MEMORY_KERNEL_RE.match(name):
        return MEMORY
    if not NOT_COMPUTE_RE.match(name):
        return COMPUTE
    return OTHER


@dataclass
class CommRecord:
    """A collective as the CPU side (or a CPU backend) recorded it."""

    name: str
    ts: float
    dur: float
    tid: int
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class KinetoTrace:
    """What the analyses need from one rank's trace; GPU activity in parallel compact arrays."""

    path: str
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # kernel type per name id
    ts: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    stream: array = field(default_factory=lambda: array("q"))
    corr: array = field(default_factory=lambda: array("q"))
    name_id: array = field(default_factory=lambda: array("l"))
    coll_meta: dict[int, dict[str, Any]] = field(default_factory=dict)  # GPU event index -> metadata
    launch_corr: array = field(default_factory=lambda: array("q"))
    launch_ts: array = field(default_factory=lambda: array("d"))
    steps: list[tuple[int, float, float]] = field(default_factory=list)  # (step, ts, end) on the CPU
    comm_records: list[CommRecord] = field(default_factory=list)
    cpu_ts: array = field(default_factory=lambda: array("d"))
    cpu_dur: array = field(default_factory=lambda: array("d"))
    cpu_tid: array = field(default_factory=lambda: array("q"))
    events_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def n_gpu_events(self) -> int:
        return len(self.ts)

    @property
    def has_gpu(self) -> bool:
        return len(self.ts) > 0

    def gpu_event(self, i: int) -> tuple[str, float, float, int, int]:
        """(name, ts, dur, stream, correlation) of GPU event ``i``."""
        return self.names[self.name_id[i]], self.ts[i], self.dur[i], self.stream[i], self.corr[i]

    def skipped_summary(self) -> str:
        """One line saying what was not kept (so users know what the analysis did not look at)."""
        parts = [f"{n} {k}" for k, n in sorted(self.skipped.items(), key=lambda kv: -kv[1])]
        return "skipped " + ", ".join(parts) if parts else "nothing skipped"


class _Builder:
    def __init__(self, trace: KinetoTrace) -> None:
        self.t = trace
        self.name_ids: dict[str, int] = {}

        self.kept = 0
        self.layout_ok = True
        self.literal: str | None | bool = None  # exact '"ph": "X", "cat": "' text, False when it varies
        self.check_layout_at: int | None = None

    def skip(self, what: str) -> None:
        s = self.t.skipped
        s[what] = s.get(what, 0) + 1

    def after_event(self) -> None:
        """In the prelude: an event the scanner would not match must not have been kept."""
        if self.check_layout_at is not None:
            if self.kept != self.check_layout_at:
                self.layout_ok = False
            self.check_layout_at = None

    def skip_many(self, what: str, n: int) -> None:
        s = self.t.skipped
        s[what] = s.get(what, 0) + n

    def name_id(self, name: str) -> int:
        i = self.name_ids.get(name)
        if i is None:
            i = self.name_ids[name] = len(self.t.names)
            self.t.names.append(name)
            self.t.kinds.append(kernel_type(name))
        return i

    def event(self, ev: Any) -> bool:
        """Keep what an analysis uses from one decoded event; True when something was kept."""
        if not isinstance(ev, dict):
            self.skip("non-object entries")
            return False
        ph = ev.get("ph")
        if ph != "X":
            self.skip(_ph_label(ph) if isinstance(ph, str) else "events without ph")
            return False
        cat = ev.get("cat")
        name = ev.get("name")
        ts = ev.get("ts")
        dur = ev.get("dur")
        if not isinstance(cat, str) or not isinstance(name, str):
            self.skip("events without cat/name")
            return False
        if cat in SKIP_CATS:
            self.skip(cat)
            return False
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or isinstance(ts, bool):
            self.skip("events without ts/dur")
            return False
        if dur < 0 or dur > MAX_EVENT_DURATION_US:
            self.skip("events with corrupt duration")
            return False
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {}
        t = self.t
        if cat in GPU_CATS:
            stream = args.get("stream")
            if cat == "cuda_sync" and (not isinstance(stream, int) or stream < 0):
                self.skip("device-wide cuda_sync events")
                return False
            if not isinstance(stream, int):
                tid = ev.get("tid")
                stream = tid if isinstance(tid, int) else _int_suffix(tid)
                if stream is None:
                    self.skip("GPU events without stream")
                    return False
            corr = args.get("correlation")
            idx = len(t.ts)
            t.ts.append(float(ts))
            t.dur.append(float(dur))
            t.stream.append(stream)
            t.corr.append(corr if isinstance(corr, int) else -1)
            nid = self.name_id(name)
            t.name_id.append(nid)
            if t.kinds[nid] == COMM:
                meta = _coll_meta(args)
                if meta:
                    t.coll_meta[idx] = meta
            return True
        if cat in LAUNCH_CATS:
            corr = args.get("correlation")
            if isinstance(corr, int):
                t.launch_corr.append(corr)
                t.launch_ts.append(float(ts))
            else:
                self.skip("runtime events without correlation")
            return False
        if cat in CPU_CATS:
            if name.startswith("ProfilerStep"):
                step = _int_suffix(name)
                if step is not None:
                    t.steps.append((step, float(ts), float(ts) + float(dur)))
                return True
            tid = ev.get("tid")
            tid_i = tid if isinstance(tid, int) else -1
            if name == "record_param_comms" or COMM_ANNOTATION_RE.match(name):
                t.comm_records.append(CommRecord(name, float(ts), float(dur), tid_i, _coll_meta(args)))
                return True
            if cat == "cpu_op":
                self.cpu_interval(tid_i, float(ts), float(dur))
                return True
            self.skip(cat)
            return False
        self.skip(cat)

    def cpu_interval(self, tid: int, ts: float, dur: float) -> None:
        self.kept += 1
        t = self.t
        t.cpu_ts.append(ts)
        t.cpu_dur.append(dur)
        t.cpu_tid.append(tid)


_PH_NAMES = {"M": "metadata", "f": "flow", "s": "flow", "t": "flow", "i": "instant", "I": "instant", "C": "counter",
              "b": "async", "e": "async", "n": "async", "B": "begin/end", "E": "begin/end"}  # fmt: skip


def _ph_label(ph: str) -> str:
    return f"{_PH_NAMES.get(ph, 'ph=' + ph)} events"


def _int_suffix(text: Any) -> int | None:
    if not isinstance(text, str):
        return None
    m = re.search(r"(\d+)\s*$", text)
    return int(m.group(1)) if m else None


def _coll_meta(args: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in args.items():
        key = COLL_ARG_KEYS.get(k)
        if key is not None and isinstance(v, (str, int, float)) and not isinstance(v, bool):
            out[key] = v
    dims = args.get("Input Dims")
    if "in_nelems" not in out and isinstance(dims, list):
        n = _numel(dims)
        if n:
            out["in_nelems"] = n
    types = args.get("Input type")
    if "dtype" not in out and isinstance(types, list) and types and isinstance(types[0], str) and types[0]:
        out["dtype"] = types[0]
    return out


def _numel(dims: list[Any]) -> int:
    """Elements of the first tensor argument of an ``Input Dims`` list (nested for TensorList)."""
    first = dims[0] if dims else None
    while isinstance(first, list) and first and isinstance(first[0], list):
        first = first[0]
    if not isinstance(first, list) or not all(isinstance(d, int) for d in first):
        return 0
    n = 1
    for d in first:
        n *= d
    return n


class _Source:
    """Decompressed text of a file, read in chunks, with a sliding buffer.

    gzip is inflated with :mod:`zlib` directly (not :class:`gzip.GzipFile`) so that a truncated file
    still yields everything before the cut; concatenated gzip members are followed.
    """

    def __init__(self, fh: BinaryIO, path: str) -> None:
        self.path = path
        self.fh = fh
        head = fh.read(2)
        fh.seek(0)
        self.gz = head == b"\x1f\x8b"
        self.z: Any = zlib.decompressobj(31) if self.gz else None
        self.carry = b""
        self.dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.truncated_reason: str | None = None
        self.bytes_read = 0

    def _next_bytes(self) -> bytes:
        """The next chunk of (decompressed) bytes, at most ``_READ``; b"" at the end of input."""
        if self.z is None:
            raw = self.fh.read(_READ)
            self.bytes_read += len(raw)
            return raw
        while True:
            if self.z.unconsumed_tail:
                data = self.z.unconsumed_tail
            elif self.carry:
                data, self.carry = self.carry, b""
            else:
                data = self.fh.read(_READ_GZ)
                self.bytes_read += len(data)
                if not data:
                    if not self.z.eof:
                        self.truncated_reason = "the gzip stream ends early (truncated file)"
                        return self.z.flush()
                    return b""
            out = self.z.decompress(data, _READ)
            if self.z.eof and self.z.unused_data:  # another gzip member follows
                self.carry = self.z.unused_data
                self.z = zlib.decompressobj(31)
            if out:
                return out

    def fill(self) -> bool:
        """Append the next chunk; False at end of input."""
        if self.eof:
            return False
        try:
            chunk = self._next_bytes()
        except (zlib.error, OSError) as e:
            chunk = b""
            self.truncated_reason = f"damaged compressed data ({e})"
        if not chunk:
            self.eof = True
            tail = self.dec.decode(b"", final=True)
            if tail:
                self.buf = self.buf[self.pos :] + tail
                self.pos = 0
                return True
            return False
        text = self.dec.decode(chunk)
        if self.pos > 0:
            self.buf = self.buf[self.pos :] + text
            self.pos = 0
        else:
            self.buf += text
        return True

    def skip_ws(self) -> bool:
        """Move past whitespace; False when the input ends."""
        while True:
            p = _WS_RE.match(self.buf, self.pos).end()
            self.pos = p
            if p < len(self.buf):
                return True
            if not self.fill():
                return False

    def peek(self) -> str | None:
        return self.buf[self.pos] if self.skip_ws() else None


_DECODER = json.JSONDecoder()


def _decode_value(src: _Source) -> Any:
    """Decode one JSON value at the cursor, reading more input as needed."""
    while True:
        try:
            value, end = _DECODER.raw_decode(src.buf, src.pos)
            if end == len(src.buf) and not src.eof and isinstance(value, (int, float)):
                raise ValueError("number may continue")  # a number cut by the chunk boundary
            src.pos = end
            return value
        except ValueError as e:
            if len(src.buf) - src.pos > _MAX_EVENT_CHARS or not src.fill():
                raise _Bad(str(e)) from None


class _Bad(Exception):
    pass


def parse_kineto(fh: BinaryIO, path: str = "<trace>") -> KinetoTrace:
    """Read one Kineto trace from a binary file object (plain JSON or gzip)."""
    trace = KinetoTrace(path=path)
    b = _Builder(trace)
    try:
        src = _Source(fh, path)
        first = src.peek()
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"cannot read trace: {e}", path) from None
    if first is None:
        raise InputError(
            "empty trace" if src.truncated_reason is None else f"unreadable trace: {src.truncated_reason}",
            path,
        )
    if first == "[":
        src.pos += 1
        _read_events(src, b)
    elif first == "{":
        src.pos += 1
        _read_object(src, b)
    else:
        raise InputError("not a Chrome/Kineto trace (does not start with '{' or '[')", path, 1)
    if src.truncated_reason:
        trace.truncated = True
        trace.warnings.append(f"{path}: {src.truncated_reason}; analysed the {trace.events_read} events read")
    _finish(trace)
    return trace


def _read_object(src: _Source, b: _Builder) -> None:
    trace = b.t
    saw_events = False
    while True:
        c = src.peek()
        if c is None:
            if not saw_events:
                raise InputError("trace has no traceEvents", src.path)
            src.truncated_reason = src.truncated_reason or "JSON ends early (truncated)"
            return
        if c == "}":
            src.pos += 1
            break
        if c == ",":
            src.pos += 1
            continue
        if c != '"':
            if not saw_events:
                raise InputError(f"bad JSON near character {src.pos}: expected a key", src.path)
            src.truncated_reason = "bad JSON after the events"
            return
        try:
            key = _decode_value(src)
            if src.peek() != ":":
                raise _Bad("expected ':'")
            src.pos += 1
            if src.peek() is None:
                raise _Bad("ends after a key")
        except _Bad as e:
            if saw_events:
                src.truncated_reason = src.truncated_reason or f"JSON ends early ({e})"
                return
            raise InputError(f"not a JSON trace: {e}", src.path) from None
        if key == "traceEvents":
            if src.peek() != "[":
                raise InputError("traceEvents is not a list", src.path)
            src.pos += 1
            saw_events = True
            if not _read_events(src, b):
                return
            continue
        try:
            value = _decode_value(src)
        except _Bad as e:
            if saw_events:
                src.truncated_reason = src.truncated_reason or f"JSON ends early ({e})"
                return
            raise InputError(f"not a JSON trace: {e}", src.path) from None
        if key in META_KEYS:
            trace.meta[key] = value
        elif key == "deviceProperties" and isinstance(value, list):
            trace.meta["devices"] = [d.get("name") for d in value if isinstance(d, dict)]
    if not saw_events:
        raise InputError("trace has no traceEvents", src.path)


def _read_events(src: _Source, b: _Builder) -> bool:
    """Read the events array up to its closing ``]``; False when the input ended first.

    The first events are decoded one by one; when each of them that an analysis keeps also
    matches the scanner's pattern (Kineto's key order ``ph, cat, name, pid, tid, ts, dur``), the
    rest is scanned in bulk by :func:`_scan`, which decodes only kept events.
    """
    state = _read_events_slow(src, b, _PRELUDE_EVENTS)
    if state != "limit":
        return state == "done"
    if b.layout_ok:
        _read_events_fast(src, b)
    return _read_events_slow(src, b, None) == "done"


def _read_events_fast(src: _Source, b: _Builder) -> None:
    """Scan whole buffers for kept events; leaves the cursor at the last event start of the input."""
    while True:
        buf = src.buf
        k = buf.rfind('"ph"', src.pos)
        j = buf.rfind("{", src.pos, k) if k > src.pos else -1
        if j > src.pos:
            _scan(buf, src.pos, j, b)
            src.pos = j
        elif len(buf) - src.pos > _MAX_EVENT_CHARS:
            return
        if not src.fill():
            return


def _scan(buf: str, start: int, end: int, b: _Builder) -> None:
    trace = b.t
    n_events = buf.count('"ph"', start, end)
    kept = 0
    runtime_corr = _RUNTIME_CORR.match
    args_flat = _ARGS_FLAT.match
    kernel_args = _KERNEL_ARGS.match
    stream_search = _STREAM.search
    corr_search = _CORRELATION.search
    kinds = trace.kinds
    name_ids = b.name_ids
    ts_append, dur_append = trace.ts.append, trace.dur.append
    stream_append, corr_append, nid_append = trace.stream.append, trace.corr.append, trace.name_id.append
    launch_corr_append, launch_ts_append = trace.launch_corr.append, trace.launch_ts.append
    gpu_ts = trace.ts
    # CPU operator intervals only serve CPU-only traces; a trace that lists GPUs in deviceProperties
    # (written before traceEvents) or already showed GPU activity does not need them.
    with_cpu = not (gpu_ts or trace.meta.get("devices"))
    cpu_tid_append, cpu_ts_append, cpu_dur_append = (
        trace.cpu_tid.append,
        trace.cpu_ts.append,
        trace.cpu_dur.append,
    )
    rx = _scanner(b.literal or None, with_cpu)
    for m in rx.finditer(buf, start, end):
        cat, other, name, tid, ts, dur_s = m.groups()
        if cat is not None:
            if cat in LAUNCH_CATS:
                c = runtime_corr(buf, m.end())
                if c is not None:
                    launch_corr_append(int(c.group(1)))
                    launch_ts_append(float(ts))
                    kept += 1
                    continue
            else:
                # Plain kernels/memcpy/memset: ts, dur, stream and correlation are all a regex away.
                # NCCL kernels carry collective metadata: those are decoded in full below.
                ka = kernel_args(buf, m.end())
                if ka is not None and "\\" not in name:
                    stream_s, corr_s = ka.groups()
                    nid = name_ids.get(name)
                    if nid is None:
                        nid = b.name_id(name)
                    if cat == "cuda_sync" and stream_s[0] == "-":
                        b.skip("device-wide cuda_sync events")
                        continue
                    if kinds[nid] != COMM:
                        dur = float(dur_s)
                        if 0 <= dur <= MAX_EVENT_DURATION_US:
                            ts_append(float(ts))
                            dur_append(dur)
                            stream_append(int(stream_s))
                            corr_append(int(corr_s))
                            nid_append(nid)
                            kept += 1
                        else:
                            b.skip("events with corrupt duration")
                        continue
                a = None if ka is not None else args_flat(buf, m.end())
                if a is not None and "\\" not in name:
                    bs, be = a.span(1)
                    st_m = stream_search(buf, bs, be)
                    nid = name_ids.get(name)
                    if nid is None:
                        nid = b.name_id(name)
                    if st_m is not None and cat == "cuda_sync" and st_m.group(1).startswith("-"):
                        b.skip("device-wide cuda_sync events")
                        continue
                    if st_m is not None and kinds[nid] != COMM:
                        dur = float(dur_s)
                        if 0 <= dur <= MAX_EVENT_DURATION_US:
                            co = corr_search(buf, bs, be)
                            ts_append(float(ts))
                            dur_append(dur)
                            stream_append(int(st_m.group(1)))
                            corr_append(int(co.group(1)) if co is not None else -1)
                            nid_append(nid)
                            kept += 1
                        else:
                            b.skip("events with corrupt duration")
                        continue
        elif other == "cpu_op":
            if name != "record_param_comms" and not name.startswith("ProfilerStep"):
                if with_cpu and not gpu_ts:
                    dur = float(dur_s)
                    if 0 <= dur <= MAX_EVENT_DURATION_US:
                        cpu_tid_append(int(tid) if tid[0] != '"' else -1)
                        cpu_ts_append(float(ts))
                        cpu_dur_append(dur)
                        kept += 1
                continue
        j = buf.rfind("{", start, m.start())
        if j < 0 or buf[j + 1 : m.start()].strip():
            b.skip("malformed events")  # "ph" is not the event's first key: cannot find its start
            continue
        try:
            ev, _ = _DECODER.raw_decode(buf, j)
        except ValueError:
            b.skip("malformed events")
            continue
        kept += 1
        b.event(ev)
    trace.events_read += n_events
    if n_events > kept:
        b.skip_many(
            "events no analysis uses (CPU operators, flows, python_function, metadata)", n_events - kept
        )


def _read_events_slow(src: _Source, b: _Builder, limit: int | None) -> str:
    """Decode events one by one: "done" at the closing bracket, "eof" at end of input, or "limit"."""
    trace = b.t
    fast_all = _scanner(None, True).match
    count = 0
    ph_match = _PH.match
    catname_match = _CAT_NAME.match
    next_event = _NEXT_EVENT.search
    cpu_times = _CPU_TIMES.search
    corr_search = _CORRELATION.search
    sep_match = _SEP.match
    while True:
        buf = src.buf
        p = sep_match(buf, src.pos).end()
        src.pos = p
        if p >= len(buf):
            if not src.fill():
                src.truncated_reason = src.truncated_reason or "JSON ends early (truncated)"
                return "eof"
            continue
        if buf[p] == "]":
            src.pos = p + 1
            return "done"
        if limit is not None:
            if count >= limit:
                return "limit"
            count += 1
            lit = _LITERAL.match(buf, p)
            if b.layout_ok and (lit is None or not fast_all(buf, lit.start(1))):
                b.check_layout_at = b.kept
            if lit is not None and b.literal is not False:
                if b.literal is None:
                    b.literal = lit.group(1)
                elif b.literal != lit.group(1):
                    b.literal = False  # spacing varies: use the generic (slower) scanner
        m = ph_match(buf, p)
        if m is not None:
            ph = m.group(1)
            fast = None  # what to do without decoding: "skip:<what>", "cpu", "launch"
            if ph != "X":
                fast = "skip:" + _ph_label(ph)
            else:
                m2 = catname_match(buf, m.end())
                if m2 is not None:
                    cat = m2.group(1)
                    if cat in SKIP_CATS:
                        fast = "skip:" + cat
                    elif cat == "cpu_op":
                        name = m2.group(2)
                        if name != "record_param_comms" and not name.startswith("ProfilerStep"):
                            fast = "cpu"
                    elif cat in LAUNCH_CATS:
                        fast = "launch"
            if fast is not None:
                q = _event_end(src, m.end() - p, next_event)
                p = src.pos  # reading more input rebases the buffer
                buf = src.buf
                if q is not None:
                    if fast == "cpu":
                        t = cpu_times(buf, p, q)
                        if t is None:
                            q = None  # unusual layout: decode it properly below
                        else:
                            dur = float(t.group(3))
                            if 0 <= dur <= MAX_EVENT_DURATION_US:
                                b.cpu_interval(int(t.group(1)), float(t.group(2)), dur)
                            else:
                                b.skip("events with corrupt duration")
                    elif fast == "launch":
                        t = cpu_times(buf, p, q)
                        c = corr_search(buf, p, q)
                        if t is None or c is None:
                            q = None
                        else:
                            trace.launch_corr.append(int(c.group(1)))
                            trace.launch_ts.append(float(t.group(2)))
                            b.kept += 1
                    else:
                        b.skip(fast[5:])
                    if q is not None:
                        trace.events_read += 1
                        src.pos = q
                        b.after_event()
                        continue
        try:
            ev = _decode_value(src)
        except _Bad as e:
            if src.eof:
                src.truncated_reason = src.truncated_reason or f"JSON ends early inside an event ({e})"
                return "eof"
            # A damaged event in the middle: resynchronise on the next event.
            nxt = next_event(src.buf, src.pos + 1)
            if nxt is None:
                src.truncated_reason = src.truncated_reason or f"damaged JSON ({e})"
                return "eof"
            b.skip("malformed events")
            src.pos = nxt.start()
            continue
        trace.events_read += 1
        if b.event(ev):
            b.kept += 1
        b.after_event()


def _event_end(src: _Source, header_len: int, next_event: Any) -> int | None:
    """Where the next event starts (so the current one can be skipped), or None to decode instead."""
    start = src.pos
    after = start + header_len
    while True:
        m = next_event(src.buf, after)
        if m is not None:
            q = m.start()
            # Exactly one "ph" key in the skipped span: no event without a leading "ph" hides in it.
            if src.buf.count('"ph"', start, q) != 1:
                return None
            return q
        if src.eof:
            return None  # last event: decode it (finds the closing bracket properly)
        off = after - start
        if len(src.buf) - start > _MAX_EVENT_CHARS or not src.fill():
            return None
        start = src.pos  # fill() rebases the buffer so that the event starts at 0
        after = start + off


def _finish(trace: KinetoTrace) -> None:
    di = trace.meta.get("distributedInfo")
    if isinstance(di, dict):
        r = di.get("rank")
        trace.rank = r if isinstance(r, int) and not isinstance(r, bool) else None
        ws = di.get("world_size")
        trace.world_size = ws if isinstance(ws, int) and not isinstance(ws, bool) else None
        be = di.get("backend")
        trace.backend = be if isinstance(be, str) else None
    if trace.rank is None:
        m = _RANK_IN_NAME.search(Path(trace.path).name)
        if m:
            trace.rank = int(m.group(1))
            trace.warnings.append(
                f"{trace.path}: no distributedInfo.rank; rank {trace.rank} taken from the file name"
            )
        else:
            trace.warnings.append(f"{trace.path}: no distributedInfo.rank and none in the file name")
    if trace.events_read == 0:
        trace.warnings.append(f"{trace.path}: the trace holds no events")
    if trace.has_gpu:
        # CPU operator intervals only serve CPU-only (gloo) traces; drop them to save memory.
        trace.cpu_ts, trace.cpu_dur, trace.cpu_tid = array("d"), array("d"), array("q")
    trace.steps.sort()


def load_kineto(path: str | Path) -> KinetoTrace:
    """Read a trace file (``.json`` or ``.json.gz``, detected by content)."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            return parse_kineto(fh, str(p))
    except InputError as e:
        raise e.with_path(str(p)) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", str(p)) from None


def sniff_kineto(head: bytes) -> bool:
    """Whether the first bytes look like a Chrome/Kineto trace (gzip is decompressed first)."""
    if head[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(31)
            head = d.decompress(head, 65536)
        except zlib.error:
            return False
    text = head[:65536].decode("utf-8", "replace")
    return '"traceEvents"' in text or ('"ph"' in text and text.lstrip().startswith("["))
