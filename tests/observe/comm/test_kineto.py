"""Streaming Kineto trace reader: compared with a plain json.load of the same real traces; truncated and
damaged input, other layouts and missing fields, bounded memory."""

from __future__ import annotations

import gzip
import io
import json
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.kineto import (
    COMM,
    GPU_CATS,
    LAUNCH_CATS,
    kernel_type,
    load_kineto,
    parse_kineto,
    sniff_kineto,
)
from tests.conftest import TEST_DATA, shared_fixture

TRACE_A = "comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz"
TRACE_B = "comm/kineto/hta_sampled_rank-0_ws128.json.gz"
GLOO = TEST_DATA / "comm" / "gloo_2rank"
GLOO_PLAIN = TEST_DATA / "comm" / "gloo_2rank_plain"


def _reference(doc: dict) -> dict:
    """What the reader should keep, computed the obvious way from a fully loaded document."""
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    gpu = sorted(
        (e["name"], float(e["ts"]), float(e["dur"]), e["args"]["stream"], e["args"].get("correlation", -1))
        for e in ev
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS
    )
    launches = sorted(
        (e["args"]["correlation"], float(e["ts"]))
        for e in ev
        if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})
    )
    steps = sorted(
        (int(e["name"].split("#")[1]), float(e["ts"]))
        for e in ev
        if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
    )
    return {"gpu": gpu, "launches": launches, "steps": steps, "events": len(ev)}


def _kept(t) -> dict:
    gpu = sorted(t.gpu_event(i) for i in range(t.n_gpu_events))
    return {
        "gpu": gpu,
        "launches": sorted(zip(t.launch_corr, t.launch_ts)),
        "steps": [(s, ts) for s, ts, _ in t.steps],
        "events": t.events_read,
    }


@pytest.mark.parametrize("rel", [TRACE_A, TRACE_B])
def test_matches_full_json_load(rel: str) -> None:
    path = shared_fixture(rel)
    t = load_kineto(path)
    ref = _reference(json.loads(gzip.decompress(path.read_bytes())))
    assert _kept(t) == ref
    assert not t.truncated and not t.warnings
    assert t.rank == 0


def test_trace_a_facts_from_sources_md() -> None:
    t = load_kineto(shared_fixture(TRACE_A))
    assert (t.rank, t.world_size, t.backend) == (0, 2, "nccl")
    assert t.events_read == 40573
    names = Counter(t.names[t.name_id[i]] for i in range(t.n_gpu_events))
    assert (
        names["ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"] == 15
        or sum(n for k, n in names.items() if k.startswith("ncclKernel_AllReduce_RING_LL_Sum_float")) == 15
    )
    assert sum(n for k, n in names.items() if k.startswith("ncclKernel_Broadcast_RING_LL_Sum_int")) == 6
    metas = [t.coll_meta[i] for i in sorted(t.coll_meta)]
    assert metas and all(m["group_size"] == 2 for m in metas)
    assert {m["collective"] for m in metas} >= {"allreduce"}
    assert (
        "python_function" not in t.skipped
    )  # the fixture has none; the skip summary names what was left out
    assert "skipped" in t.skipped_summary()


def test_trace_b_steps_and_streams() -> None:
    t = load_kineto(shared_fixture(TRACE_B))
    assert [s for s, _, _ in t.steps] == [551, 552]
    comm_streams = {t.stream[i] for i in range(t.n_gpu_events) if t.kinds[t.name_id[i]] == COMM}
    assert comm_streams == {84, 203}
    assert t.world_size == 128


def test_plain_and_gzip_equal_and_layout_fallback(tmp_path: Path) -> None:
    plain = GLOO_PLAIN / "rank0.json"
    doc = json.loads(plain.read_text())
    t_plain = load_kineto(plain)
    gz = tmp_path / "rank0.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    t_gz = load_kineto(gz)
    assert _kept(t_plain) == _kept(t_gz)
    assert list(t_plain.cpu_ts) == list(t_gz.cpu_ts) and len(t_plain.cpu_ts) > 0
    # Same events with keys in another order (not Kineto's): the bulk scanner must not be used.
    other = tmp_path / "sorted.json"
    other.write_text(json.dumps(doc, sort_keys=True))
    t_other = load_kineto(other)
    assert _kept(t_other) == _kept(t_plain)
    assert sorted(t_other.cpu_ts) == sorted(t_plain.cpu_ts)
    assert [c.name for c in t_other.comm_records] == [c.name for c in t_plain.comm_records]


def test_cpu_trace_comm_records() -> None:
    t = load_kineto(GLOO / "rank1.json.gz")
    assert t.rank == 1 and t.backend == "gloo" and not t.has_gpu
    gloo = [c for c in t.comm_records if c.name == "gloo:all_reduce"]
    assert len(gloo) == 9  # 3 steps x 3 sizes
    assert sorted({c.meta["in_nelems"] for c in gloo}) == [1024, 16384, 262144]
    assert {c.meta["dtype"] for c in gloo} == {"float"}


@pytest.mark.parametrize("frac", [0.05, 0.3, 0.6, 0.95])
def test_truncated_gzip_yields_prefix_and_warning(tmp_path: Path, frac: float) -> None:
    data = shared_fixture(TRACE_B).read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: int(len(data) * frac)])
    full = load_kineto(shared_fixture(TRACE_B))
    try:
        t = load_kineto(p)
    except InputError:
        assert frac < 0.1  # so early that not even the header survives
        return
    assert t.truncated and t.warnings
    assert t.events_read < full.events_read
    # Everything kept is a real event of the full trace.
    full_gpu = set(full.gpu_event(i) for i in range(full.n_gpu_events))
    assert all(t.gpu_event(i) in full_gpu for i in range(t.n_gpu_events))


def test_truncated_plain_json(tmp_path: Path) -> None:
    text = (GLOO_PLAIN / "rank0.json").read_text()
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 2])
    t = load_kineto(p)
    assert t.truncated and "ends early" in t.warnings[0]


def test_missing_fields_of_other_versions(tmp_path: Path) -> None:
    # Older/other writers: array form, no distributedInfo, stream only in tid, events without dur.
    events = [
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "ncclKernel_AllReduce_x",
            "pid": 0,
            "tid": "stream 7",
            "ts": 10,
            "dur": 5,
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 12,
            "dur": 6,
            "args": {"stream": 7},
        },
        {"ph": "X", "cat": "kernel", "name": "no_dur", "pid": 0, "tid": 7, "ts": 12},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "x"}},
    ]
    p = tmp_path / "trace_rank3.json"
    p.write_text(json.dumps(events))
    t = load_kineto(p)
    assert t.rank == 3 and any("file name" in w for w in t.warnings)
    assert t.n_gpu_events == 2 and t.stream[0] == 7
    assert t.skipped["events without ts/dur"] == 1


def test_not_a_trace_is_input_error(tmp_path: Path) -> None:
    for content in (b"hello", b"", b'{"a": 1}', b"\x1f\x8bjunk"):
        p = tmp_path / "x.json"
        p.write_bytes(content)
        with pytest.raises(InputError):
            load_kineto(p)


def test_memory_is_bounded_compared_with_json_load() -> None:
    path = shared_fixture(TRACE_A)
    raw = path.read_bytes()
    tracemalloc.start()
    json.loads(gzip.decompress(raw))
    _, peak_json = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracemalloc.start()
    parse_kineto(io.BytesIO(raw), "a")
    _, peak_ours = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak_ours < peak_json / 3, (peak_ours, peak_json)


def test_kernel_type_follows_hta_regexes() -> None:
    assert kernel_type("ncclKernel_AllReduce_RING_LL_Sum_float") == "COMMUNICATION"
    assert kernel_type("ncclDevKernel_AllGather_RING_LL") == "COMMUNICATION"
    assert kernel_type("Memcpy DtoD (Device -> Device)") == "MEMORY"
    assert kernel_type("void at::native::vectorized_elementwise_kernel<4>") == "COMPUTATION"
    assert kernel_type("cudaStreamSynchronize Sync") == "OTHER"


def test_sniff() -> None:
    assert sniff_kineto(shared_fixture(TRACE_A).read_bytes()[:65536])
    assert sniff_kineto((GLOO_PLAIN / "rank0.json").read_bytes()[:65536])
    assert not sniff_kineto(b'{"entries": []}')


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=3000))
def test_fuzz_random_bytes(data: bytes) -> None:
    try:
        parse_kineto(io.BytesIO(data), "fuzz")
    except InputError:
        pass


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutations_of_real_trace(data) -> None:
    text = (GLOO_PLAIN / "rank1.json").read_bytes()
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, min(len(text), i + 400)))
    junk = data.draw(st.binary(max_size=40))
    blob = text[:i] + junk + text[j:]
    if data.draw(st.booleans()):
        blob = gzip.compress(blob)[: data.draw(st.integers(0, len(blob)))]
    try:
        parse_kineto(io.BytesIO(blob), "fuzz")
    except InputError:
        pass


def test_cuda_sync_on_a_stream_is_gpu_activity(tmp_path: Path) -> None:
    # Kineto "cuda_sync" events (PyTorch PR 105187): on a stream they occupy it; device-wide ones (stream -1) not.
    events = [
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 5, "dur": 3,
         "args": {"stream": 7, "correlation": 9}},
        {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 7, "ts": 9, "dur": 3,
         "args": {"stream": -1, "correlation": 10}},
    ]  # fmt: skip
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    t = load_kineto(p)
    assert [t.gpu_event(i)[0] for i in range(t.n_gpu_events)] == ["Stream Sync"]
    assert kernel_type("Stream Sync") == "OTHER"
    assert t.skipped["device-wide cuda_sync events"] == 1


def _rewrite_events(src: Path, dst: Path, change) -> None:
    """Write ``src``'s trace again with ``change(event)`` applied, one ``json.dumps`` per event: the
    top-level keys keep the file's (Kineto's) order and spacing, so the bulk scanner still reads it."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc.pop("traceEvents")
    head = json.dumps(doc)[:-1]
    body = ",\n".join(json.dumps(change(e)) for e in events)
    dst.write_text(head + ', "traceEvents": [\n' + body + "\n]}\n")


@pytest.mark.parametrize("layout", ["correlation_first", "key_between"])
def test_gpu_args_in_other_orders_read_the_same(tmp_path: Path, layout: str) -> None:
    """Kineto writes "stream" then "correlation"; other orders take the generic path, same result."""
    path = shared_fixture(TRACE_B)

    def change(e: dict) -> dict:
        args = e.get("args")
        if e.get("cat") not in GPU_CATS or not isinstance(args, dict) or "stream" not in args:
            return e
        rest = {k: v for k, v in args.items() if k not in ("stream", "correlation")}
        if layout == "correlation_first":
            new = {"correlation": args.get("correlation", -1), **rest, "stream": args["stream"]}
        else:
            new = {"stream": args["stream"], "queued": 0, "correlation": args.get("correlation", -1), **rest}
        return dict(e, args=new)

    _rewrite_events(path, tmp_path / "t.json", change)
    t = load_kineto(tmp_path / "t.json")
    ref = load_kineto(path)
    assert _kept(t) == _kept(ref) == _reference(json.loads(gzip.decompress(path.read_bytes())))
    assert t.skipped == ref.skipped and t.coll_meta == ref.coll_meta


def test_cpu_operators_kept_only_without_gpu_activity() -> None:
    """CPU operator intervals serve CPU-only traces: all of them there (checked against json.load),
    none in a GPU trace whose CPU operators come before its kernels (TRACE_B has no deviceProperties)."""
    for plain in sorted(GLOO_PLAIN.glob("rank*.json")):
        ev = json.loads(plain.read_text())["traceEvents"]
        want = sorted(
            float(e["ts"])
            for e in ev
            if e.get("ph") == "X"
            and e.get("cat") == "cpu_op"
            and e["name"] != "record_param_comms"
            and not e["name"].startswith("ProfilerStep")
        )
        assert want and sorted(load_kineto(plain).cpu_ts) == want
    t = load_kineto(shared_fixture(TRACE_B))
    assert t.has_gpu and len(t.cpu_ts) == 0
    doc = json.loads(gzip.decompress(shared_fixture(TRACE_B).read_bytes()))
    assert "deviceProperties" not in doc
    first_gpu = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") in GPU_CATS)
    assert any(e.get("cat") == "cpu_op" for e in doc["traceEvents"][:first_gpu])


# -- bulk decoding (kineto_bulk, msgspec) against event-by-event decoding ----------------------------


def _state(t) -> dict:
    """Everything a trace holds, for comparing two reads of the same file."""
    return {
        "gpu": [t.gpu_event(i) for i in range(t.n_gpu_events)],
        "kinds": list(t.kinds),
        "coll_meta": t.coll_meta,
        "launches": list(zip(t.launch_corr, t.launch_ts)),
        "steps": t.steps,
        "comm": [(c.name, c.ts, c.dur, c.tid, c.meta) for c in t.comm_records],
        "cpu": list(zip(t.cpu_ts, t.cpu_dur, t.cpu_tid)),
        "events_read": t.events_read,
        "skipped": t.skipped,
        "truncated": t.truncated,
        "warnings": t.warnings,
        "ids": (t.rank, t.world_size, t.backend),
    }


def _real_traces() -> list[Path]:
    out = sorted(GLOO.glob("*.json.gz")) + sorted(GLOO_PLAIN.glob("*.json"))
    for rel in (TRACE_A, TRACE_B):
        try:
            out.append(shared_fixture(rel))
        except pytest.skip.Exception:
            pass
    return out


@pytest.mark.parametrize("path", _real_traces(), ids=lambda p: p.name)
def test_bulk_and_event_by_event_agree_on_real_traces(path: Path, monkeypatch) -> None:
    data = path.read_bytes()
    one_by_one = _state(parse_kineto(io.BytesIO(data), "t", bulk=False))
    assert _state(parse_kineto(io.BytesIO(data), "t")) == one_by_one
    # Small reads: many runs per file, boundaries everywhere, same result.
    monkeypatch.setattr("clusterdoctor.observe.comm.kineto._READ", 4096)
    monkeypatch.setattr("clusterdoctor.observe.comm.kineto._READ_GZ", 1024)
    assert _state(parse_kineto(io.BytesIO(data), "t")) == one_by_one


def test_cpu_operators_of_gpu_traces_are_counted_as_skipped() -> None:
    """Nothing is skipped silently: a GPU trace's CPU operators are counted, computed here from json.load."""
    path = shared_fixture(TRACE_A)
    ev = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    cpu_ops = sum(
        1
        for e in ev
        if e.get("ph") == "X"
        and e.get("cat") == "cpu_op"
        and not e["name"].startswith(("ProfilerStep", "record_param_comms", "nccl:", "gloo:"))
    )
    flows = sum(1 for e in ev if e.get("ph") in ("s", "f", "t"))
    t = load_kineto(path)
    assert len(t.cpu_ts) == 0 and cpu_ops > 10_000
    assert t.skipped["CPU operators (not used on GPU traces)"] == cpu_ops
    assert t.skipped["flow events"] == flows
    assert sum(t.skipped.values()) + t.n_gpu_events + len(t.launch_corr) + len(t.steps) + len(
        t.comm_records
    ) == len(ev)


_NAMES = [
    "gemm",
    "ncclKernel_AllReduce_RING_LL_Sum_float",
    "ncclDevKernel_AllGather_RING_LL",
    "Memcpy DtoD (Device -> Device)",
    "Stream Sync",
    "ProfilerStep#7",
    "ProfilerStep#",
    "record_param_comms",
    "nccl:all_reduce",
    "gloo:broadcast",
    "aten::add",
    "cudaLaunchKernel",
    'we"ird\\name \u00e9',
    "looks like a boundary }, {",
]
_CATS = ["kernel", "gpu_memcpy", "cuda_sync", "Kernel", "cuda_runtime", "cuda_driver", "cpu_op",
         "user_annotation", "python_function", "ac2g", "gpu_user_annotation", "Trace", "mystery"]  # fmt: skip
_COLL_ARGS = {
    "Collective name": st.sampled_from(["allreduce", "allgather", 3, None, True]),
    "In msg nelems": st.sampled_from([1024, 0, "n", 2.5]),
    "Out msg nelems": st.sampled_from([2048, None]),
    "Group size": st.sampled_from([2, 128, "2"]),
    "dtype": st.sampled_from(["Float", "BFloat16", 1]),
    "Seq": st.sampled_from([0, 1, 99, "1"]),
    "Process Group Name": st.sampled_from(["0", "1", 5]),
    "Input Dims": st.sampled_from([[[4, 256]], [[[2, 3]], [1]], [], [["a"]], "x", None]),
    "Input type": st.sampled_from([["float"], [""], [], "float", [None]]),
    "External id": st.integers(0, 99),
}
# Odd values a writer could put anywhere (a field gets one of these now and then).
_ODD = st.sampled_from([None, True, False, -1, 0, 1e18, "12", "x", [1], {"a": 1}, 2.5])


@st.composite
def _event(draw) -> dict:
    """A plausible Kineto event, then now and then a field dropped or given an odd value."""
    ev = {
        "ph": draw(st.sampled_from(["X"] * 6 + ["f", "s", "M", "i"])),
        "cat": draw(st.sampled_from(_CATS)),
        "name": draw(st.sampled_from(_NAMES)),
        "pid": 1,
        "tid": draw(st.sampled_from([7, 300, "stream 7", "thread"])),
        "ts": draw(st.one_of(st.integers(0, 10**6), st.floats(0, 1e7, allow_nan=False))),
        "dur": draw(st.one_of(st.integers(0, 1000), st.floats(0, 1e4, allow_nan=False))),
    }
    args = {
        "stream": draw(st.sampled_from([7, 7, 0, -1])),
        "correlation": draw(st.integers(0, 50)),
        **draw(st.fixed_dictionaries({}, optional=_COLL_ARGS)),
    }
    if draw(st.booleans()):
        ev["args"] = args
    for _ in range(draw(st.integers(0, 2))):
        target = draw(st.sampled_from(["ph", "cat", "name", "tid", "ts", "dur", "stream", "correlation"]))
        holder = args if target in ("stream", "correlation") else ev
        if draw(st.booleans()):
            holder.pop(target, None)
        else:
            holder[target] = draw(_ODD)
    return ev


# Values msgspec refuses to type (the run they are in is read event by event instead).
_POISON = st.sampled_from(
    [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": float("nan"), "args": {"stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": []},
        {"ph": "X", "cat": "cpu_op", "name": "lone \ud800 surrogate", "ts": 1, "dur": 2},
        {"ph": "X", "cat": "cuda_runtime", "name": "k", "ts": 1, "dur": 2, "args": "corr"},
        1,
        "text",
        [],
        None,
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    events=st.lists(_event(), min_size=20, max_size=80),
    cpu_only=st.booleans(),
    poison=st.lists(st.tuples(st.integers(0, 60), _POISON), max_size=2),
    indent=st.sampled_from([None, 2]),
    devices=st.booleans(),
)
def test_bulk_and_event_by_event_agree_on_any_events(
    events: list, cpu_only: bool, poison: list, indent, devices: bool
) -> None:
    """Generated events with every odd value a writer could put there (wrong types, NaN, lone
    surrogates, args that are not objects): the bulk path, which refuses runs it cannot type and hands
    them to the event-by-event path, keeps exactly what the event-by-event path keeps."""
    if cpu_only:  # a CPU (gloo) trace: its CPU operators are kept
        events = [e for e in events if not (isinstance(e.get("cat"), str) and e["cat"] in GPU_CATS)]
    for i, ev in poison:
        events.insert(i, ev)
    doc = {"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": events}
    if devices:
        doc = {"deviceProperties": [{"name": "GPU"}], **doc}
    data = json.dumps(doc, indent=indent).encode("utf-8", "surrogatepass")
    one_by_one = _state(parse_kineto(io.BytesIO(data), "t", bulk=False))
    assert _state(parse_kineto(io.BytesIO(data), "t")) == one_by_one
    import clusterdoctor.observe.comm.kineto as k

    old = k._READ
    k._READ = 256  # many runs, some refused, some accepted
    try:
        assert _state(parse_kineto(io.BytesIO(data), "t")) == one_by_one
    finally:
        k._READ = old


def test_no_readable_event_is_an_input_error_not_an_empty_analysis(tmp_path: Path) -> None:
    p = tmp_path / "damaged.json"
    p.write_bytes(b'{"traceEvents": [\n' + b"QUJD" * 200)
    with pytest.raises(InputError, match="no trace event could be read"):
        load_kineto(p)
    # An empty but well-formed trace is not damaged: a warning, no error.
    q = tmp_path / "empty.json"
    q.write_text('{"traceEvents": []}')
    assert any("no events" in w for w in load_kineto(q).warnings)


def test_one_odd_event_is_read_alone_not_its_whole_buffer(tmp_path: Path, monkeypatch) -> None:
    """A run msgspec refuses is halved until the odd event stands alone: the event-by-event reader
    sees a handful of events, not the thousands around it, and the trace is the same."""
    import clusterdoctor.observe.comm.kineto as k

    doc = json.loads(gzip.decompress(shared_fixture(TRACE_B).read_bytes()))
    events = doc.pop("traceEvents")
    odd = {"ph": "X", "cat": "kernel", "name": "odd", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": []}
    events.insert(len(events) // 2, odd)
    p = tmp_path / "t.json"
    p.write_text(
        json.dumps(doc)[:-1] + ', "traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n]}"
    )
    one_by_one = []
    original = k._Builder.event
    monkeypatch.setattr(k._Builder, "event", lambda self, ev: (one_by_one.append(ev), original(self, ev))[1])
    t = load_kineto(p)
    assert odd in one_by_one and len(one_by_one) <= 3  # the odd event, the last event, perhaps one more
    monkeypatch.setattr(k._Builder, "event", original)
    assert _state(t) == _state(parse_kineto(io.BytesIO(p.read_bytes()), str(p), bulk=False))
    assert "odd" in t.names  # kept: without args, its stream comes from tid
