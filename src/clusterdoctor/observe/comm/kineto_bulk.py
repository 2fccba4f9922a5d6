"""Bulk decoding of Kineto trace events: a run of whole events decoded at once by msgspec.

The streaming reader (:mod:`clusterdoctor.observe.comm.kineto`) hands over the events of its buffer up to
the last place where one event ends and the next begins (``}`` ``,`` ``{``). msgspec decodes that run
into small structs holding only the fields an analysis reads (unknown keys are skipped without being
built; ``Input Dims``/``Input type`` are kept as raw JSON and decoded only for the few collectives
that need them), in any key order. Decoding is all or nothing: a run with damaged JSON or a value of
an unexpected type (``"args": []``, ``NaN``, a number out of range) is refused and the reader decodes
those events one by one instead, so the result never depends on which path read an event.

The loop in :func:`feed_run` keeps the common events (launches, plain kernels, CPU operators) inline
and gives every other kept event to :meth:`_Builder.fields`, the rules every path shares; a property
test checks that both paths give the same trace.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from clusterdoctor.observe.comm.kineto import (
    COLL_ARG_KEYS,
    COMM,
    COMM_RECORD_PREFIXES,
    CPU_CATS,
    GPU_CATS,
    KEPT_CATS,
    LAUNCH_CATS,
    MAX_EVENT_DURATION_US,
    REPEATED_GPU,
    REPEATED_STEPS,
    _ph_label,
)

if TYPE_CHECKING:
    from clusterdoctor.observe.comm.kineto import _Builder

_COLL_FIELDS = tuple((f"c{i}", key) for i, key in enumerate(COLL_ARG_KEYS))
_NO_RAW = msgspec.Raw()


# the arrays hold 64-bit integers: a number outside them refuses the run (the event-by-event reader
# then counts that event as malformed ids)
_I64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


def _args_struct() -> type:
    """``args`` as a struct: ``stream``, ``correlation``, the collective keys, raw dims/types."""
    fields: list[tuple[str, Any, Any]] = [("stream", _I64 | None, None), ("correlation", _I64 | None, None)]
    fields += [(attr, Any, msgspec.field(default=None, name=key)) for attr, key in _COLL_FIELDS]
    fields += [
        ("dims", msgspec.Raw, msgspec.field(default=_NO_RAW, name="Input Dims")),
        ("types", msgspec.Raw, msgspec.field(default=_NO_RAW, name="Input type")),
    ]
    return msgspec.defstruct("Args", fields, gc=False)


_Args = _args_struct()


class _Event(msgspec.Struct, gc=False):
    """The fields the rules read, typed as real traces have them; any other type refuses the run."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    tid: _I64 | str | None = None
    ts: float | None = None  # a JSON integer arrives as float, as the rules would convert it
    dur: float | None = None
    args: _Args | None = None  # type: ignore[valid-type]


_DECODE = msgspec.json.Decoder(list[_Event]).decode
_BOUNDARY = re.compile(r"\}[ \t\r\n]*,[ \t\r\n]*\{")
_MAX_TRIES = 1000
_SPECIAL_NAMES = ("ProfilerStep", *COMM_RECORD_PREFIXES)


def last_boundary(buf: str, start: int, stop: int | None = None) -> tuple[int, int] | None:
    """``(end, next)``: the last place in ``buf[start:stop]`` where an event ends (``buf[end - 1]``
    is its ``}``) and the next begins (``buf[next]`` is ``{``); None if there is none."""
    i = len(buf) if stop is None else stop
    for _ in range(_MAX_TRIES):
        i = buf.rfind("}", start, i)
        if i < 0:
            return None
        m = _BOUNDARY.match(buf, i)
        if m is not None:
            return i + 1, m.end() - 1
    return None


def args_dict(a: Any) -> dict[str, Any]:
    """The struct's fields as the ``args`` mapping :meth:`_Builder.fields` reads."""
    if a is None:
        return {}
    out: dict[str, Any] = {}
    if a.stream is not None:
        out["stream"] = a.stream
    if a.correlation is not None:
        out["correlation"] = a.correlation
    for attr, key in _COLL_FIELDS:
        v = getattr(a, attr)
        if v is not None:
            out[key] = v
    if a.dims:
        out["Input Dims"] = msgspec.json.decode(a.dims)
    if a.types:
        out["Input type"] = msgspec.json.decode(a.types)
    return out


def feed_run(buf: str, start: int, end: int, b: _Builder) -> bool:
    """Decode the events in ``buf[start:end]`` (separated by commas) and keep what the analyses use;
    False, with nothing changed, when msgspec refuses the run."""
    try:
        events = _DECODE("[" + buf[start:end] + "]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    t = b.t
    gpu_ts = t.ts
    kinds, name_ids = t.kinds, b.name_ids
    ts_append, dur_append = gpu_ts.append, t.dur.append
    stream_append, corr_append, nid_append = t.stream.append, t.corr.append, t.name_id.append
    launch_corr_append, launch_ts_append = t.launch_corr.append, t.launch_ts.append
    cpu_ts_append, cpu_dur_append, cpu_tid_append = t.cpu_ts.append, t.cpu_dur.append, t.cpu_tid.append
    collect_cpu = b.collect_cpu()
    max_dur = MAX_EVENT_DURATION_US
    by_ph: dict[str | None, int] = {}
    by_cat: dict[str | None, int] = {}
    cpu_ops = 0
    repeated = repeated_gpu = 0
    step_names = b.step_names
    last_ts, last = b.last_gpu
    general = b.fields
    for e in events:
        ph = e.ph
        if ph != "X":
            by_ph[ph] = by_ph.get(ph, 0) + 1
            continue
        cat = e.cat
        if cat not in KEPT_CATS:
            by_cat[cat] = by_cat.get(cat, 0) + 1
            continue
        name, ts, dur = e.name, e.ts, e.dur
        if name is not None and ts is not None and dur is not None and 0.0 <= dur <= max_dur:
            if name in step_names and cat in CPU_CATS:  # a copy of a step kept before: counted only
                repeated += 1
                continue
            if cat == "cpu_op":
                if not name.startswith(_SPECIAL_NAMES):
                    cpu_ops += 1
                    if collect_cpu:
                        if gpu_ts:
                            collect_cpu = False
                        else:
                            tid = e.tid
                            cpu_ts_append(ts)
                            cpu_dur_append(dur)
                            cpu_tid_append(tid if type(tid) is int else -1)
                    continue
            elif cat in LAUNCH_CATS:
                a = e.args
                if a is not None and a.correlation is not None:
                    launch_corr_append(a.correlation)
                    launch_ts_append(ts)
                    continue
            elif cat in GPU_CATS:
                a = e.args
                if a is not None and a.stream is not None and (a.stream >= 0 or cat != "cuda_sync"):
                    nid = name_ids.get(name)
                    if nid is None:
                        nid = b.name_id(name)
                    if kinds[nid] != COMM:
                        corr = a.correlation
                        if ts == last_ts and dur == last[0] and (a.stream, corr, nid) == last[1:]:
                            repeated_gpu += 1  # a copy of the event before (same stream, same start)
                            continue
                        last_ts, last = ts, (dur, a.stream, corr, nid)
                        ts_append(ts)
                        dur_append(dur)
                        stream_append(a.stream)
                        corr_append(corr if corr is not None else -1)
                        nid_append(nid)
                        continue
        # The rules read args only for GPU activity, launches and collectives' CPU records.
        if cat in CPU_CATS and name is not None and not name.startswith(COMM_RECORD_PREFIXES):
            general(ph, cat, name, e.tid, ts, dur, {})
        else:
            b.last_gpu = (last_ts, last)  # the rules see the same event before as this loop
            general(ph, cat, name, e.tid, ts, dur, args_dict(e.args))
            last_ts, last = b.last_gpu
    t.events_read += len(events)
    b.cpu_ops += cpu_ops
    b.last_gpu = (last_ts, last)
    if repeated:
        b.skip(REPEATED_STEPS, repeated)
    if repeated_gpu:
        b.skip(REPEATED_GPU, repeated_gpu)
    for ph, n in by_ph.items():
        b.skip(_ph_label(ph) if ph is not None else "events without ph", n)
    for cat, n in by_cat.items():
        b.skip(cat if cat is not None else "events without cat/name", n)
    return True
