"""PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, read as a stream with bounded memory.

Only what an analysis uses is kept, in compact arrays: GPU activity (kernels, memcpy, memset: name,
start, duration, stream, correlation, collective metadata of NCCL kernels), CUDA launch
correlations (for HTA's "kernels launched in the traced steps" filter), ``ProfilerStep#N`` windows,
communication records (``record_param_comms``, ``nccl:*``/``gloo:*`` annotations), the data
loader's ``enumerate(DataLoader)#...`` annotations (one per batch) and, for CPU-only traces (gloo),
CPU operator intervals. Everything else (``python_function``, flows, metadata,
``gpu_user_annotation``, a GPU trace's CPU operators) is counted in ``skipped`` by reason, and the
trace says so.

The reader walks the top-level object itself, reading the decompressed text about 1 MB at a time.
Inside ``traceEvents`` it hands each buffer's whole events to :mod:`~clusterdoctor.observe.comm.kineto_bulk`
(msgspec, in any key order); runs that decoder refuses (damaged JSON, a value of an unexpected type)
and the last event are decoded one by one with :mod:`json`. Both paths apply the same rules
(:meth:`_Builder.fields`). Memory is the read buffer plus the kept records.

A truncated file (cut-off .gz or JSON) yields the events read so far and a warning; anything that
is not a Chrome trace raises :class:`~clusterdoctor.errors.InputError`.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import zlib
from array import array
from typing import Any, BinaryIO

import msgspec

from clusterdoctor.errors import InputError
from clusterdoctor.observe.limits import Budget, LimitExceeded

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
# CPU records of collectives: record_param_comms, and the backends' annotations (nccl:all_reduce, ...).
COMM_BACKENDS = ("nccl", "gloo", "mpi", "ucc", "xccl")
COMM_ANNOTATION_RE = re.compile("^(" + "|".join(COMM_BACKENDS) + "):")
COMM_RECORD_PREFIXES = ("record_param_comms", *(b + ":" for b in COMM_BACKENDS))
# torch.utils.data.DataLoader's iterator wraps each __next__ in a record_function named so
LOADER_ANNOTATION = "enumerate(DataLoader)#"
# A profiler writes each ProfilerStep#N once; a copy (a crafted trace of one event repeated) is counted
REPEATED_STEPS = "repeated ProfilerStep events (a step number seen before)"
# Two GPU activities cannot start at the same time on one stream: an exact copy of the event before
# (name, start, duration, stream, correlation) is counted, not kept
REPEATED_GPU = "repeated GPU events (copies of the event before)"
_MAX_STEP_NAMES = 4096  # names the bulk reader recognises copies of (a crafted trace repeats one)
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
_MAX_SPLITS = 16  # a refused run is halved at most this deep (2**16 pieces) before one-by-one reading
_WS_RE = re.compile(r"[ \t\r\n]*")
_SEP = re.compile(r"[ \t\r\n,]*")
_NEXT_EVENT = re.compile(r'\{\s*"ph"\s*:')
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
# What an analysis reads, by category of an "X" event; every other event is counted and skipped.
KEPT_CATS = (GPU_CATS | LAUNCH_CATS | CPU_CATS) - SKIP_CATS
_NUM = frozenset({int, float})  # JSON numbers (bool excluded: type(), not isinstance)


def kernel_type(name: str) -> str:
    """HTA's kernel type of a GPU activity name: COMMUNICATION, MEMORY, COMPUTATION or OTHER."""
    if COMM_KERNEL_RE.match(name):
        return COMM
    if MEMORY_KERNEL_RE.match(name):
        return MEMORY
    if not NOT_COMPUTE_RE.match(name):
        return COMPUTE
    return OTHER


class CommRecord(msgspec.Struct):
    """A collective as the CPU side (or a CPU backend) recorded it."""

    name: str
    ts: float
    dur: float
    tid: int
    meta: dict[str, Any] = msgspec.field(default_factory=dict)


class KinetoTrace(msgspec.Struct):
    """What the analyses need from one rank's trace; GPU activity in parallel compact arrays."""

    path: str
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    names: list[str] = msgspec.field(default_factory=list)
    kinds: list[str] = msgspec.field(default_factory=list)  # kernel type per name id
    ts: array = msgspec.field(default_factory=lambda: array("d"))
    dur: array = msgspec.field(default_factory=lambda: array("d"))
    stream: array = msgspec.field(default_factory=lambda: array("q"))
    corr: array = msgspec.field(default_factory=lambda: array("q"))
    name_id: array = msgspec.field(default_factory=lambda: array("l"))
    coll_meta: dict[int, dict[str, Any]] = msgspec.field(default_factory=dict)  # GPU event index -> metadata
    launch_corr: array = msgspec.field(default_factory=lambda: array("q"))
    launch_ts: array = msgspec.field(default_factory=lambda: array("d"))
    steps: list[tuple[int, float, float]] = msgspec.field(default_factory=list)  # (step, ts, end) on the CPU
    comm_records: list[CommRecord] = msgspec.field(default_factory=list)
    cpu_ts: array = msgspec.field(default_factory=lambda: array("d"))
    cpu_dur: array = msgspec.field(default_factory=lambda: array("d"))
    cpu_tid: array = msgspec.field(default_factory=lambda: array("q"))
    # ``enumerate(DataLoader)#...__next__`` annotations (time blocked fetching a batch), any thread
    loader_ts: array = msgspec.field(default_factory=lambda: array("d"))
    loader_dur: array = msgspec.field(default_factory=lambda: array("d"))
    events_read: int = 0
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    truncated: bool = False
    warnings: list[str] = msgspec.field(default_factory=list)

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
    """What the reader keeps of each event: one set of rules for every path (see :meth:`fields`)."""

    def __init__(self, trace: KinetoTrace, bulk: bool = True) -> None:
        self.t = trace
        self.name_ids: dict[str, int] = {}
        self.cpu_ops = 0  # CPU operator intervals seen (kept only while the trace shows no GPU)
        self.step_numbers: set[int] = set()  # ProfilerStep numbers kept (one window per step)
        self.step_names: set[str] = set()  # and their names (the bulk reader skips exact copies)
        # the last GPU event kept: (ts, (dur, stream, correlation, name id)), to count exact copies
        self.last_gpu: tuple[float | None, tuple[Any, ...]] = (None, ())
        self.bulk = bulk  # decode runs of events with msgspec (kineto_bulk)

    def skip(self, what: str, n: int = 1) -> None:
        s = self.t.skipped
        s[what] = s.get(what, 0) + n

    def name_id(self, name: str) -> int:
        i = self.name_ids.get(name)
        if i is None:
            i = self.name_ids[name] = len(self.t.names)
            self.t.names.append(name)
            self.t.kinds.append(kernel_type(name))
        return i

    def collect_cpu(self) -> bool:
        """CPU operator intervals serve CPU-only (gloo) traces: stop storing them once the trace lists
        GPUs (``deviceProperties``, written before the events) or shows GPU activity."""
        return not (self.t.ts or self.t.meta.get("devices"))

    def event(self, ev: Any) -> None:
        """One decoded event (any JSON value)."""
        if not isinstance(ev, dict):
            self.skip("non-object entries")
            return
        args = ev.get("args")
        self.fields(
            ev.get("ph"),
            ev.get("cat"),
            ev.get("name"),
            ev.get("tid"),
            ev.get("ts"),
            ev.get("dur"),
            args if isinstance(args, dict) else {},
        )

    def fields(self, ph: Any, cat: Any, name: Any, tid: Any, ts: Any, dur: Any, args: dict[str, Any]) -> None:
        """The rules, in order: an "X" event with a known category, a name, numeric ``ts``/``dur`` and
        a sane duration; then by category (GPU activity, launch, CPU operator or annotation). Whatever
        is not kept is counted in ``trace.skipped`` under the reason."""
        if ph != "X":
            self.skip(_ph_label(ph) if isinstance(ph, str) else "events without ph")
            return
        if not isinstance(cat, str):
            self.skip("events without cat/name")
            return
        if cat not in KEPT_CATS:
            self.skip(cat)
            return
        if not isinstance(name, str):
            self.skip("events without cat/name")
            return
        if type(ts) not in _NUM or type(dur) not in _NUM:
            self.skip("events without ts/dur")
            return
        if not 0 <= dur <= MAX_EVENT_DURATION_US:
            self.skip("events with corrupt duration")
            return
        t = self.t
        if cat in GPU_CATS:
            stream = _i64(args.get("stream"))
            if cat == "cuda_sync" and (stream is None or stream < 0):
                self.skip("device-wide cuda_sync events")
                return
            if stream is None:
                stream = _i64(tid) if type(tid) is int else _int_suffix(tid)
                if stream is None:
                    self.skip("GPU events without stream")
                    return
            corr = _i64(args.get("correlation"))
            nid = self.name_id(name)
            key = (float(dur), stream, corr, nid)
            if self.last_gpu == (float(ts), key) and t.kinds[nid] != COMM:
                self.skip(REPEATED_GPU)
                return
            idx = len(t.ts)
            if t.kinds[nid] != COMM:
                self.last_gpu = (float(ts), key)
            t.ts.append(float(ts))
            t.dur.append(float(dur))
            t.stream.append(stream)
            t.corr.append(corr if corr is not None else -1)
            t.name_id.append(nid)
            if t.kinds[nid] == COMM:
                meta = _coll_meta(args)
                if meta:
                    t.coll_meta[idx] = meta
            return
        if cat in LAUNCH_CATS:
            corr = _i64(args.get("correlation"))
            if corr is not None:
                t.launch_corr.append(corr)
                t.launch_ts.append(float(ts))
            else:
                self.skip("runtime events without correlation")
            return
        if name.startswith("ProfilerStep"):
            step = _int_suffix(name)
            if step is None:
                self.skip("ProfilerStep events without a number")
            elif step in self.step_numbers:  # a profiler writes each step once: a copy keeps nothing
                self.skip(REPEATED_STEPS)
            else:
                self.step_numbers.add(step)
                if len(self.step_names) < _MAX_STEP_NAMES:
                    self.step_names.add(name)
                t.steps.append((step, float(ts), float(ts) + float(dur)))
            return
        tid_i = _i64(tid)
        tid_i = -1 if tid_i is None else tid_i
        if name == "record_param_comms" or COMM_ANNOTATION_RE.match(name):
            t.comm_records.append(CommRecord(name, float(ts), float(dur), tid_i, _coll_meta(args)))
            return
        if cat == "cpu_op":
            self.cpu_ops += 1
            if self.collect_cpu():
                t.cpu_ts.append(float(ts))
                t.cpu_dur.append(float(dur))
                t.cpu_tid.append(tid_i)
            return
        if name.startswith(LOADER_ANNOTATION):  # one per batch: the fail-slow data-loader wait
            t.loader_ts.append(float(ts))
            t.loader_dur.append(float(dur))
            return
        self.skip(cat)  # annotations that are neither collectives nor the data loader


_PH_NAMES = {"M": "metadata", "f": "flow", "s": "flow", "t": "flow", "i": "instant", "I": "instant", "C": "counter",
              "b": "async", "e": "async", "n": "async", "B": "begin/end", "E": "begin/end"}  # fmt: skip


def _ph_label(ph: str) -> str:
    return f"{_PH_NAMES.get(ph, 'ph=' + ph)} events"


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1  # what the compact arrays hold


def _i64(v: Any) -> int | None:
    """An integer id (stream, correlation, thread) the arrays can hold, else None (2**63 in a
    crafted trace is not an id: it would overflow the array)."""
    return v if type(v) is int and _I64_MIN <= v <= _I64_MAX else None


def _int_suffix(text: Any) -> int | None:
    """The number a name ends in (``ProfilerStep#12``, ``stream 7``), at most 18 digits; found without
    a regex, so that a name of a million digits followed by a letter costs one pass."""
    if not isinstance(text, str):
        return None
    t = text.rstrip()
    digits = len(t) - len(t.rstrip("0123456789"))
    if not 0 < digits <= 18:
        return None
    return int(t[len(t) - digits :])


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

    def __init__(self, fh: BinaryIO, path: str, budget: Budget | None = None) -> None:
        self.path = path
        self.fh = fh
        # bytes inflated and wall time are checked at every read, kept records at every fill
        self.budget = budget if budget is not None else Budget(path)
        self.on_fill: Any = None
        head = fh.read(2)
        fh.seek(0)
        self.gz = head == b"\x1f\x8b"
        self.z: Any = zlib.decompressobj(31) if self.gz else None
        self.carry = b""
        self.dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buf = ""
        self.pos = 0
        self.base = 0  # characters dropped before buf[0]: buf[i] is character base + i of the text
        self.eof = False
        self.truncated_reason: str | None = None
        self.bytes_read = 0

    def _next_bytes(self) -> bytes:
        """The next chunk of (decompressed) bytes, at most ``_READ``; b"" at the end of input."""
        self.budget.check_time()
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
            self.budget.add_inflated(len(out))
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
                self.base += self.pos
                self.buf = self.buf[self.pos :] + tail
                self.pos = 0
                return True
            return False
        if self.on_fill is not None:
            self.on_fill()
        text = self.dec.decode(chunk)
        if self.pos > 0:
            self.base += self.pos
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


def parse_kineto(
    fh: BinaryIO, path: str = "<trace>", *, bulk: bool = True, budget: Budget | None = None
) -> KinetoTrace:
    """Read one Kineto trace from a binary file object (plain JSON or gzip).

    ``bulk=False`` decodes every event one by one (the path bulk decoding falls back to); the result
    is the same, only slower: the tests compare the two. ``budget`` (default: the limits in force)
    bounds bytes inflated, records kept and wall time (:mod:`clusterdoctor.observe.limits`); a trace
    nested deeper than the JSON decoders can follow is refused as too deep.
    """
    try:
        return _parse_kineto(fh, path, bulk, budget)
    except RecursionError:
        raise LimitExceeded("trace JSON nested too deep to read", path, "depth") from None


class _RecordCount:
    """What a trace keeps, counted against the ``records`` budget at every buffer fill (about 1 MB of
    text): one per kept event (its array entries: 40 bytes), 16 per record holding a metadata dict (a
    collective's arguments: 580 bytes measured for an NCCL kernel's ten), 6 per ProfilerStep window
    (a tuple of three numbers and its set entry: about 240 bytes), one per 64 characters of kept
    names and one per skip reason. The default budget keeps a trace under about 0.5 GB."""

    def __init__(self, trace: KinetoTrace, budget: Budget) -> None:
        self.t, self.budget = trace, budget
        self.names_seen = 0
        self.name_chars = 0

    def __call__(self) -> None:
        t = self.t
        for n in t.names[self.names_seen :]:
            self.name_chars += len(n)
        self.names_seen = len(t.names)
        self.budget.set_records(
            len(t.ts) + len(t.launch_corr) + len(t.cpu_ts) + 6 * len(t.steps) + len(t.skipped)
            + 16 * (len(t.coll_meta) + len(t.comm_records)) + self.name_chars // 64
        )  # fmt: skip


def _parse_kineto(fh: BinaryIO, path: str, bulk: bool, budget: Budget | None) -> KinetoTrace:
    trace = KinetoTrace(path=path)
    b = _Builder(trace, bulk)
    try:
        src = _Source(fh, path, budget)
        src.on_fill = _RecordCount(trace, src.budget)
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
        if trace.events_read == 0:  # nothing to analyse: an error, not an empty analysis
            raise InputError(f"no trace event could be read: {src.truncated_reason}", path)
        trace.truncated = True
        trace.warnings.append(f"{path}: {src.truncated_reason}; analysed the {trace.events_read} events read")
    _finish(b)
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

    Whole runs of events are decoded in bulk (:mod:`clusterdoctor.observe.comm.kineto_bulk`); a run it
    cannot decode (damaged JSON, a value of an unexpected type) and the last event are decoded one by
    one here.
    """
    if b.bulk:
        from clusterdoctor.observe.comm.kineto_bulk import last_boundary

        while True:
            buf = src.buf
            p = _SEP.match(buf, src.pos).end()
            src.pos = p
            q = last_boundary(buf, p)
            if q is not None:
                end, nxt = q
                state = _read_run(src, b, src.base + p, src.base + end, src.base + nxt)
                if state is not None:
                    return state == "done"
            elif len(buf) - p > _MAX_EVENT_CHARS:
                break
            if not src.fill():
                break
    return _read_events_slow(src, b, None) == "done"


def _read_run(src: _Source, b: _Builder, start: int, end: int, nxt: int, depth: int = 0) -> str | None:
    """The whole events between text positions ``start`` and ``end`` (the next event starts at
    ``nxt``), leaving the cursor at ``nxt`` (or past it). A run msgspec refuses is split in two at
    an event boundary near its middle, so that one odd event costs a few small decodes rather than
    decoding the whole buffer one event at a time; a run that cannot be split is read one by one.
    None when done, else the event-by-event reader's "done"/"eof" (the input ended inside the run)."""
    from clusterdoctor.observe.comm.kineto_bulk import feed_run, last_boundary

    base = src.base
    if feed_run(src.buf, start - base, end - base, b):
        src.pos = nxt - base
        return None
    q = last_boundary(src.buf, start - base, (start + end) // 2 - base) if depth < _MAX_SPLITS else None
    if q is None:
        src.pos = start - base
        state = _read_events_slow(src, b, until=nxt)
        return None if state == "until" else state
    mid_end, mid_next = q[0] + base, q[1] + base
    state = _read_run(src, b, start, mid_end, mid_next, depth + 1)
    if state is not None:
        return state
    if src.base + src.pos > mid_next:  # the event-by-event reader went past the split (odd layout)
        state = _read_events_slow(src, b, until=nxt)
        return None if state == "until" else state
    return _read_run(src, b, mid_next, end, nxt, depth + 1)


def _read_events_slow(src: _Source, b: _Builder, until: int | None) -> str:
    """Decode events one by one: "done" at the closing bracket, "eof" at end of input, or "until"
    once the cursor reaches character ``until`` of the text."""
    trace = b.t
    sep_match = _SEP.match
    while True:
        buf = src.buf
        p = sep_match(buf, src.pos).end()
        src.pos = p
        if until is not None and src.base + p >= until:
            return "until"
        if p >= len(buf):
            if not src.fill():
                src.truncated_reason = src.truncated_reason or "JSON ends early (truncated)"
                return "eof"
            continue
        if buf[p] == "]":
            src.pos = p + 1
            return "done"
        try:
            ev = _decode_value(src)
        except _Bad as e:
            if src.eof:
                src.truncated_reason = src.truncated_reason or f"JSON ends early inside an event ({e})"
                return "eof"
            # A damaged event in the middle: resynchronise on the next event.
            nxt = _NEXT_EVENT.search(src.buf, src.pos + 1)
            if nxt is None:
                src.truncated_reason = src.truncated_reason or f"damaged JSON ({e})"
                return "eof"
            b.skip("malformed events")
            src.pos = nxt.start()
            continue
        trace.events_read += 1
        b.event(ev)


def _finish(b: _Builder) -> None:
    trace = b.t
    di = trace.meta.get("distributedInfo")
    if isinstance(di, dict):
        r = di.get("rank")
        trace.rank = r if isinstance(r, int) and not isinstance(r, bool) else None
        ws = di.get("world_size")
        trace.world_size = ws if isinstance(ws, int) and not isinstance(ws, bool) else None
        be = di.get("backend")
        trace.backend = be if isinstance(be, str) else None
    if trace.rank is None:
        m = _RANK_IN_NAME.search(os.path.basename(trace.path))
        if m:
            trace.rank = int(m.group(1))
            trace.warnings.append(
                f"{trace.path}: no distributedInfo.rank; rank {trace.rank} taken from the file name"
            )
        else:
            trace.warnings.append(f"{trace.path}: no distributedInfo.rank and none in the file name")
    if trace.events_read == 0:
        trace.warnings.append(f"{trace.path}: the trace holds no events")
    if trace.has_gpu and b.cpu_ops:
        # CPU operator intervals only serve CPU-only (gloo) traces; drop them to save memory.
        trace.cpu_ts, trace.cpu_dur, trace.cpu_tid = array("d"), array("d"), array("q")
        b.skip("CPU operators (not used on GPU traces)", b.cpu_ops)
    trace.steps.sort()


def load_kineto(path: str | os.PathLike[str]) -> KinetoTrace:
    """Read a trace file (``.json`` or ``.json.gz``, detected by content)."""
    from clusterdoctor.observe.limits import open_regular

    p = os.fspath(path)
    try:
        with open_regular(p) as fh:  # devices, FIFOs and links to them refused before reading
            return parse_kineto(fh, p)
    except InputError as e:
        raise e.with_path(p) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", p) from None


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
