"""Communication analysis: per-rank breakdown against an independent computation, cross-rank matching on
real gloo traces, hangs from NCCL logs, Flight Recorder dumps and torchfrtrace reports."""

from __future__ import annotations

import gzip
import json

import pytest

from clusterdoctor.analyze.comm import (
    analyze_comm,
    collectives_of,
    hangs_from_flight_recorder,
    hangs_from_nccl_logs,
    init_outliers,
    match_collectives,
    normalize_collective,
    rank_breakdown,
)
from clusterdoctor.analyze.intervals import intersection_length, subtract, total, union
from clusterdoctor.observe.comm.flight_recorder import load_flight_recorder
from clusterdoctor.observe.comm.kineto import GPU_CATS, kernel_type, load_kineto
from clusterdoctor.observe.comm.nccl_log import parse_nccl_log
from tests.conftest import TEST_DATA, shared_fixture

GLOO = TEST_DATA / "comm" / "gloo_2rank"


def _oracle(doc: dict) -> dict:
    """HTA's definitions computed with plain lists from the fully loaded JSON."""
    ev = doc["traceEvents"]
    steps = [e for e in ev if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    if len({e["name"] for e in steps}) >= 2:
        last = max(e["ts"] for e in steps)
        ok = {
            e["args"]["correlation"]
            for e in ev
            if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {}) and e["ts"] < last
        }
        gpu = [e for e in gpu if e["args"].get("correlation", -1) in ok]
    iv = {k: [] for k in ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER")}
    for e in gpu:
        iv[kernel_type(e["name"])].append((e["ts"], e["ts"] + e["dur"]))
    all_u = union([x for v in iv.values() for x in v])
    comp, comm = union(iv["COMPUTATION"]), union(iv["COMMUNICATION"])
    span = all_u[-1][1] - all_u[0][0]
    return {
        "span": span,
        "idle": span - total(all_u),
        "compute": total(comp),
        "comm": total(comm),
        "overlap": intersection_length(comm, comp),
        "exposed": total(subtract(comm, comp)),
    }


def test_breakdown_equals_independent_computation() -> None:
    path = shared_fixture("comm/kineto/hta_sampled_rank-0_ws128.json.gz")
    ref = _oracle(json.loads(gzip.decompress(path.read_bytes())))
    rb = rank_breakdown(load_kineto(path))
    assert rb.span_us == pytest.approx(ref["span"])
    assert rb.idle_us == pytest.approx(ref["idle"])
    assert rb.compute_us == pytest.approx(ref["compute"])
    assert rb.comm_us == pytest.approx(ref["comm"])
    assert rb.overlap_us == pytest.approx(ref["overlap"])
    assert rb.exposed_comm_us == pytest.approx(ref["exposed"])
    assert rb.comm_comp_overlap_pct == pytest.approx(100 * ref["overlap"] / ref["comm"])
    assert rb.non_compute_us == pytest.approx(ref["span"] - ref["idle"] - ref["compute"])
    assert sum(rb.kernel_types_pct().values()) == pytest.approx(100.0)
    assert rb.events_dropped_last_step > 0  # two ProfilerSteps: the last one is left out, as HTA does


def test_steps_are_consistent() -> None:
    rb = rank_breakdown(load_kineto(shared_fixture("comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz")))
    assert rb.steps
    for s in rb.steps:
        assert 0 <= s.exposed_comm_us <= s.comm_us + 1e-6
        assert s.idle_us >= -1e-6 and s.compute_us <= s.span_us + 1e-6


def test_gloo_ranks_matched_by_sequence() -> None:
    traces = [load_kineto(GLOO / f"rank{r}.json.gz") for r in (0, 1)]
    per_rank = {t.rank: collectives_of(t) for t in traces}
    assert [len(v) for v in per_rank.values()] == [9, 9]
    groups = match_collectives(per_rank)
    assert len(groups) == 9 and all(len(g.calls) == 2 and not g.mismatch for g in groups)
    assert sorted({g.nbytes for g in groups}) == [4096, 65536, 1048576]  # 1024/16384/262144 float32
    for g in groups:
        d = [c.dur for c in g.calls.values()]
        assert g.true_us == min(d)
        assert g.skew_us == pytest.approx(abs(g.calls[0].ts - g.calls[1].ts))
        # all_reduce over 2 ranks: busbw factor 2(n-1)/n = 1.
        assert g.busbw_gbs() == pytest.approx(g.nbytes / (g.true_us * 1e3))
    a = analyze_comm(traces)
    assert [r.device for r in a.ranks] == ["cpu", "cpu"]
    for r in a.ranks:
        assert r.exposed_comm_us <= r.comm_us + 1e-6
        assert r.compute_us + r.non_compute_us + r.idle_us == pytest.approx(r.span_us)
    assert sum(c.count for c in a.collectives) == 9
    assert {s.rank for s in a.stragglers} <= {0, 1}
    assert sum(s.late_count for s in a.stragglers) == a.stragglers[0].matched


def test_mismatch_across_ranks_is_a_hang() -> None:
    traces = [load_kineto(GLOO / f"rank{r}.json.gz") for r in (0, 1)]
    per_rank = {t.rank: collectives_of(t) for t in traces}
    per_rank[1][4].nbytes = 12345  # rank 1 reduces a different size at seq 4
    groups = match_collectives(per_rank)
    bad = [g for g in groups if g.mismatch]
    assert [g.seq for g in bad] == [4] and "size differs" in bad[0].mismatch[0]


# COLL lines in NVIDIA/nccl src/enqueue.cc's format (reference/comm.md section 3), three ranks interleaved.
COLL = "host{h}:{pid}:{pid} [0] NCCL INFO {op}: opCount {opc:x} sendbuff 0x1 recvbuff 0x2 count {cnt} datatype 7 op 0 root 0 comm {comm} [nranks=3] stream 0x9"
INIT = (
    "host{h}:{pid}:{pid} [0] NCCL INFO comm {comm} rank {r} nranks 3 cudaDev 0 busId {r}000 - Init COMPLETE"
)


def _coll_log(stop_rank: int, stop_at: int, odd: tuple[int, int] | None = None) -> str:
    lines = [INIT.format(h=r, pid=100 + r, comm=f"0xc{r}", r=r) for r in range(3)]
    for opc in range(6):
        for r in range(3):
            if r == stop_rank and opc > stop_at:
                continue
            cnt = 999 if odd == (r, opc) else 1024
            lines.append(COLL.format(h=r, pid=100 + r, op="AllReduce", opc=opc, cnt=cnt, comm=f"0xc{r}"))
    return "\n".join(lines)


def test_lagging_rank_from_opcounts() -> None:
    hangs = hangs_from_nccl_logs([parse_nccl_log(_coll_log(stop_rank=2, stop_at=3))])
    (h,) = hangs
    assert h.kind == "lagging" and h.culprit_ranks == (2,) and h.seq == 3
    assert "0x5" in h.detail


def test_mismatched_count_from_coll_lines() -> None:
    hangs = hangs_from_nccl_logs([parse_nccl_log(_coll_log(stop_rank=-1, stop_at=9, odd=(1, 2)))])
    (h,) = hangs
    assert h.kind == "mismatch" and h.culprit_ranks == (1,) and h.seq == 2


def test_watchdog_timeout_hang() -> None:
    text = (
        "[PG 0 Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, "
        "NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
        "[PG 0 Rank 3] failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 547, "
        "last completed work: -1\n"
    )
    (h,) = hangs_from_nccl_logs([parse_nccl_log(text)])  # the status line belongs to the timeout
    assert (h.kind, h.seq, h.op, h.group, h.reporters) == ("timeout", 1, "BROADCAST", "0", (3,))
    assert (h.last_enqueued, h.last_completed, h.first_collective) == (547, -1, True)
    assert "547" in h.detail and "no collective of this group ever completed" in h.detail


def test_flight_recorder_missing_rank_from_real_dumps() -> None:
    dumps = [
        load_flight_recorder(TEST_DATA / "comm" / "fr_gloo_2rank" / f"fr_trace_rank_{r}.pkl") for r in (0, 1)
    ]
    hangs = hangs_from_flight_recorder(dumps)
    nj = [h for h in hangs if h.kind == "not_joined"]
    assert len(nj) == 1
    assert (nj[0].seq, nj[0].op, nj[0].culprit_ranks) == (6, "gloo:all_reduce", (1,))


def test_torchfrtrace_report_names_missing_rank() -> None:
    rep = load_flight_recorder(shared_fixture("comm/torchfrtrace_not_all_ranks_joining_2rank.txt"))
    (h,) = hangs_from_flight_recorder([rep])
    assert (h.kind, h.seq, h.culprit_ranks) == ("not_joined", 5, (1,))


def test_init_timing_outlier() -> None:
    # "Init timings" format from NVIDIA/nccl#1412 (reference/comm.md section 3).
    totals = [1.0, 1.1, 0.9, 5.0]
    text = "\n".join(
        f"h:{10 + r}:{10 + r} [0] NCCL INFO Init timings: rank {r} nranks 4 total {t} (kernels 0.1, bootstrap {t - 0.3:.2f}, "
        "allgathers 0.01, topo 0.1, graphs 0.04, connections 0.02, rest 0.00)"
        for r, t in enumerate(totals)
    )
    (o,) = init_outliers([parse_nccl_log(text)])
    assert o.rank == 3 and o.total_s == 5.0 and o.median_s == pytest.approx(1.05)
    assert max(o.parts, key=o.parts.get) == "bootstrap"


def test_normalize_collective() -> None:
    assert normalize_collective("AllReduce") == "all_reduce"
    assert normalize_collective("nccl:all_reduce") == "all_reduce"
    assert normalize_collective("_allgather_base") == "all_gather"
    assert normalize_collective("ReduceScatter") == "reduce_scatter"
    assert normalize_collective("SendRecv") == "sendrecv"


@pytest.mark.parametrize(
    "path",
    [
        "comm/kineto/hta_nccl_data_rank0_ws2_allreduce.json.gz",
        "comm/kineto/hta_sampled_rank-0_ws128.json.gz",
        "gloo:rank0.json.gz",
        "gloo:rank1.json.gz",
    ],
)
def test_list_and_numpy_paths_agree(path: str) -> None:
    p = GLOO / path.split(":", 1)[1] if path.startswith("gloo:") else shared_fixture(path)
    t = load_kineto(p)
    assert rank_breakdown(t, vectorized=True).as_dict() == rank_breakdown(t, vectorized=False).as_dict()


def test_lagging_rank_across_one_log_per_rank() -> None:
    text = _coll_log(stop_rank=0, stop_at=2)
    per_host = {r: "\n".join(ln for ln in text.splitlines() if ln.startswith(f"host{r}:")) for r in range(3)}
    logs = [parse_nccl_log(t, f"rank{r}.log") for r, t in per_host.items()]
    (h,) = hangs_from_nccl_logs(logs)
    assert h.kind == "lagging" and h.culprit_ranks == (0,) and h.seq == 2


def test_odd_ranks_tie_does_not_depend_on_set_order() -> None:
    """A two-way tie goes to the lowest rank's value (values holding None hash differently in each
    process, so a set-ordered choice changed the culprit from run to run)."""
    from clusterdoctor.analyze.comm.hangs import _odd_ranks

    assert _odd_ranks({0: ("all_reduce", None, None), 1: ("sendrecv", None, None)}) == (1,)
    assert _odd_ranks({5: ("sendrecv", None, None), 2: ("all_reduce", None, None)}) == (5,)
    assert _odd_ranks({0: ("a", 1), 1: ("b", 2), 2: ("b", 2)}) == (0,)  # the majority still wins


def test_numpy_only_where_it_pays_for_its_import() -> None:
    """Small traces stay on plain lists; numpy for one large trace or many medium ones (same results:
    test_list_and_numpy_paths_agree)."""
    from clusterdoctor.analyze.comm.breakdown import NUMPY_IMPORT_EVENTS, SMALL_TRACE_EVENTS, _vectorize

    assert not _vectorize(SMALL_TRACE_EVENTS, 100 * NUMPY_IMPORT_EVENTS)
    assert _vectorize(NUMPY_IMPORT_EVENTS + 1, NUMPY_IMPORT_EVENTS + 1)
    assert _vectorize(SMALL_TRACE_EVENTS + 1, 8 * (SMALL_TRACE_EVENTS + 1))
