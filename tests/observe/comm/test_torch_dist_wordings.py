"""ProcessGroupNCCL's watchdog in every wording users paste (1.8's no-SeqNum line, 1.11's TensorShape,
a wrapped and elided block) and TORCH_NCCL_DESYNC_DEBUG's desync report, read from dev cases of the
incident corpus and public threads; properties on generated reports."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.comm.nccl_log import parse_nccl_log, sniff_nccl_log
from clusterdoctor.observe.comm.torch_dist import DistScanner

INCIDENTS = Path(__file__).resolve().parents[2] / "data" / "incidents"


def _paste(case: str) -> str:
    return (INCIDENTS / case / "paste.txt").read_text()


def _wd(text: str) -> list[tuple]:
    log = parse_nccl_log(text)
    return [(w.rank, w.seq, w.op, w.numel_in, w.timeout_ms, w.ran_ms) for w in log.watchdog_timeouts]


def test_watchdog_without_seqnum_pytorch_1_8() -> None:
    # accelerate#314 (nccl-014): "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for ..." on rank 6
    assert _wd(_paste("nccl-014")) == [(6, None, "ALLREDUCE", None, 1800000, 1802246)]


def test_watchdog_with_tensor_shape_pytorch_1_11() -> None:
    line = (
        "[E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
        "OpType=BROADCAST, TensorShape=[10], Timeout(ms)=1800000) ran for 1806152 milliseconds before timing out."
    )
    assert _wd(line + "\n") == [(1, 5, "BROADCAST", None, 1800000, 1806152)]


def test_watchdog_block_wrapped_and_elided_by_the_user() -> None:
    # autocast#381 (nccl-027): the message over three indented lines, "WorkNCCL(..., OpType=" elided
    assert _wd(_paste("nccl-027")) == [(0, None, "ALLREDUCE", 1, 1800000, 1800090)]


# yiqiao-yin/deepspeed-course, docs page "Qwen3.8-27B: Fine-tuning a Hybrid-Attention Model" (section 6,
# a 2-GPU pod's first barrier): the message wrapped between its fields and the rest indented
_Q38 = (
    "[rank1] Watchdog caught collective operation timeout:\n"
    "  WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1,\n"
    "           Timeout(ms)=1800000) ran for 1800069 milliseconds before timing out\n"
    "  PG status: last enqueued work: 1, last completed work: -1\n"
    "  #0 barrier from torch/distributed/distributed_c10d.py:5030\n"
)


def test_watchdog_wrapped_between_fields_and_indented() -> None:
    assert _wd(_Q38) == [(1, 1, "ALLREDUCE", 1, 1800000, 1800069)]
    # dev case nccl-053: the same message from "WorkNCCL(" on, wrapped before "ran for"
    assert _wd(_paste("nccl-053")) == [(None, 1, "ALLREDUCE", 1, 600000, 721595)]


def test_desync_report_names_the_rank_that_did_not_join() -> None:
    # pytorch#152623 (nccl-041): rank 0's report: "[7] finished collective #182, but didn't join #183"
    log = parse_nccl_log(_paste("nccl-041"))
    (d,) = [e for e in log.dist_errors if e.kind == "desync"]
    assert d.rank == 0 and d.ranks == (7,) and d.op == "ALLREDUCE" and d.seq == 315
    assert "rank 7 finished collective #182 but never joined #183" in d.text
    assert "#317 started by ranks 3, 4, 5, 6: _ALLGATHER_BASE" in d.text


def test_desync_line_alone_is_read_and_sniffed() -> None:
    # NVIDIA/nccl issue (2x GB10): the line pasted on its own, after the watchdog line
    text = (
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1155874, OpType=ALLREDUCE, "
        "NumelIn=9445376, NumelOut=9445376, Timeout(ms)=1800000) ran for 1800002 milliseconds before timing out.\n"
        "\n"
        "[1] finished collective #1155873, but didn't join collective #1155874\n"
    )
    assert sniff_nccl_log(text[-80:].encode())
    (d,) = [e for e in parse_nccl_log(text).dist_errors if e.kind == "desync"]
    assert d.ranks == (1,) and d.rank is None


def test_desync_never_joined_and_joined_but_not_finished() -> None:
    text = (
        "[rank3]:[E ProcessGroupNCCL.cpp:1937] Rank 3\n"
        "\t - [3] Timeout at collective: ALLREDUCE, #41\n"
        "\t - To our best knowledge, ranks [5, 6] are the lagging ranks that caused this timeout. "
        "They never joined any collectives\n"
        "[rank2]:[E ProcessGroupNCCL.cpp:1937] Rank 2\n"
        "\t - [2] Timeout at collective: BROADCAST, #9\n"
        "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
        "\t   - [4] joined but didn't finish collective #8 (count from 1)\n"
    )
    got = sorted(
        (e.rank, e.ranks, e.op, e.seq) for e in parse_nccl_log(text).dist_errors if e.kind == "desync"
    )
    assert got == [(2, (4,), "BROADCAST", 9), (3, (5, 6), "ALLREDUCE", 41)]


@settings(max_examples=60, deadline=None)
@given(
    reporter=st.integers(0, 4095),
    culprits=st.lists(st.integers(0, 4095), min_size=1, max_size=40, unique=True),
    seq=st.integers(1, 10**9),
    prefix=st.sampled_from(["", "[rank0]:", "E       ", "\t", "  - "]),
)
def test_desync_report_roundtrip(reporter: int, culprits: list[int], seq: int, prefix: str) -> None:
    ranks = ", ".join(str(r) for r in culprits)
    text = (
        f"{prefix}[{reporter}] Timeout at collective: ALLREDUCE, #{seq + 1}\n"
        f"{prefix}[{ranks}] finished collective #{seq}, but didn't join collective #{seq + 1} (count from 1)\n"
    )
    s = DistScanner()
    s.feed(text)
    (d,) = s.errors
    assert d.rank == reporter and d.ranks == tuple(sorted(culprits)) and d.seq == seq + 1


@settings(max_examples=60, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from("[]#0123456789, :\n\tabcdefinshedjoinrkcollectiveTimeout'"), max_size=400
    )
)
def test_desync_scanner_never_raises(text: str) -> None:
    s = DistScanner()
    s.feed(text + " didn't join collective #1\n")
    for e in s.errors:
        assert e.kind == "desync" and e.ranks


# github.com/DEKHTIARJonathan/HVD_TF_Worker_Desync_BugReport (README): Horovod 0.21's stall inspector
HOROVOD_STALL = (
    "[2021-02-02 21:19:07.345988: W /tmp/pip-install-dxtho7yu/horovod_0bde588442554cf4b80c76441efc4e03/horovod/"
    "common/stall_inspector.cc:105] One or more tensors were submitted to be reduced, gathered or broadcasted by "
    "subset of ranks and are waiting for remainder of ranks for more than 10 seconds. This may indicate that "
    "different ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, "
    "which will cause deadlock. \n"
    "Missing ranks:\n"
    "0: [cond_1/then/_10/cond_1/SGD/PartitionedCall/DistributedSGD_Allreduce/cond/then/_79/DistributedSGD_Allreduce"
    "/cond/HorovodAllreduce_grads_0]\n"
)


def test_horovod_stall_inspector_names_the_missing_rank() -> None:
    assert sniff_nccl_log(HOROVOD_STALL.encode())
    (e,) = [e for e in parse_nccl_log(HOROVOD_STALL).dist_errors if e.kind == "horovod_stall"]
    assert e.ranks == (0,) and e.timeout_ms == 10_000 and "HorovodAllreduce_grads_0" in e.text
    # the pre-0.21 wording: "<tensor> [missing ranks: 1, 3]" after "Stalled ops:"
    old = (
        HOROVOD_STALL.split("Missing ranks:")[0]
        + "Stalled ops:\nDistributedAdam_Allreduce/grad_0 [missing ranks: 1, 3]\n"
    )
    (e2,) = [e for e in parse_nccl_log(old).dist_errors if e.kind == "horovod_stall"]
    assert e2.ranks == (1, 3)
