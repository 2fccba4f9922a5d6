"""Programs of the comm share that pastes bring and that were not read before: training progress logs
(Hugging Face, Megatron-LM, DeepSpeed), Python tracebacks (cut, prefixed, interleaved), nccl-tests output
cut before its rows or run as independent copies, and fr_trace's (torchfrtrace) newer report wordings.
Real lines from dev cases of the incident corpus and public threads; properties for the parsers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.flight_recorder import parse_flight_recorder, sniff_flight_recorder
from clusterdoctor.observe.comm.nccl_tests import parse_nccl_tests, sniff_nccl_tests
from clusterdoctor.observe.comm.pytraceback import parse_tracebacks, sniff_tracebacks
from clusterdoctor.observe.comm.sources import classify
from clusterdoctor.observe.comm.train_log import parse_train_log, sniff_train_log

INCIDENTS = Path(__file__).resolve().parents[2] / "data" / "incidents"


def _paste(case: str, name: str = "paste.txt") -> str:
    return (INCIDENTS / case / name).read_text()


# -- training progress logs ------------------------------------------------------------------------


def test_hugging_face_loss_dicts_with_line_numbers() -> None:
    # accelerate + DeepSpeed run of the maintainers (ok-nccl-007): the viewer's line numbers before 3 of 4
    text = _paste("ok-nccl-007")
    assert sniff_train_log(text.encode()) and classify(text.encode(), "paste.txt") == ["train_log"]
    log = parse_train_log(text)
    assert [s.loss for s in log.steps] == [1.306, 1.3887, 1.4621, 1.3461]
    assert [s.epoch for s in log.steps] == [0.0, 0.0, 0.0, 0.01] and log.frameworks == {"huggingface"}
    assert not log.non_finite_losses


def test_megatron_iteration_line() -> None:
    line = (
        " [2024-03-01 10:00:00] iteration      100/  500000 | consumed samples:         6400 | elapsed time per "
        "iteration (ms): 1234.5 | learning rate: 1.000E-04 | global batch size:    64 | lm loss: 7.123456E+00 | "
        "loss scale: 65536.0 | grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   2 |"
    )
    (s,) = parse_train_log(line).steps
    assert (s.framework, s.step, s.loss, s.iteration_ms, s.nan_iterations) == (
        "megatron",
        100,
        7.123456,
        1234.5,
        2,
    )
    assert s.learning_rate == 1e-4 and s.skipped == 0


def test_deepspeed_lines_and_nan_loss() -> None:
    text = (
        "[Rank 0] step=100, skipped=3, lr=[0.0001], mom=[(0.9, 0.999)]\n"
        "steps: 100 loss: nan iter time (s): 0.512 samples/sec: 62.5\n"
        "{'loss': nan, 'learning_rate': 2e-05, 'epoch': 1.0}\n"
    )
    log = parse_train_log(text)
    assert [(s.framework, s.step) for s in log.steps] == [
        ("deepspeed", 100),
        ("deepspeed", 100),
        ("huggingface", None),
    ]
    assert log.steps[0].skipped == 3 and log.steps[1].iteration_ms == 512.0
    assert len(log.non_finite_losses) == 2


@settings(max_examples=80, deadline=None)
@given(
    losses=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=20),
    prefix=st.sampled_from(["", "  6 ", "[rank0]:", "2024-01-01 10:00:00 INFO "]),
)
def test_hf_dict_roundtrip(losses: list[float], prefix: str) -> None:
    text = "".join(f"{prefix}{{'loss': {v!r}, 'learning_rate': 1e-05, 'epoch': 0.5}}\n" for v in losses)
    got = parse_train_log(text).losses()
    assert len(got) == len(losses) and all(
        math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300) for a, b in zip(got, losses)
    )


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=500))
def test_train_log_parser_never_raises(text: str) -> None:
    parse_train_log(text)


# -- Python tracebacks -----------------------------------------------------------------------------


def test_traceback_cut_above_its_header_pytest_prefixed() -> None:
    # meta-pytorch/data#659 (nccl-040): pytest's "E   " before every line, cut before the exception line
    text = _paste("nccl-040")
    assert sniff_tracebacks(text.encode()) and "py_traceback" in classify(text.encode(), "paste.txt")
    (tb,) = parse_tracebacks(text).tracebacks
    assert tb.has_header and tb.exc_type is None
    assert [f.func for f in tb.frames] == ["_wrap", "training", "__iter__", "_get_iterator", "__init__"]


def test_traceback_with_exception_and_rank_prefix() -> None:
    # HRNet#171 (nccl-026): frames after the error lines; open-r1-multimodal#7 (nccl-004): [rank0]: frames
    (tb,) = parse_tracebacks(_paste("nccl-026")).tracebacks
    assert tb.frames[-1].func == "set_device" and tb.frames[0].file == "tools/train.py"
    (tb4,) = parse_tracebacks(_paste("nccl-004")).tracebacks
    assert tb4.rank == 0 and tb4.innermost_collective == "broadcast"
    assert tb4.exc_type == "torch.distributed.DistBackendError" and "NCCL error in" in (tb4.message or "")


def test_interleaved_tracebacks_without_prefixes_are_one_run_of_frames() -> None:
    # Lightning#19106 (nccl-037): two ranks' tracebacks interleaved line by line, no rank prefix: frames
    # are read, but which rank is in which collective cannot be told
    (tb,) = parse_tracebacks(_paste("nccl-037")).tracebacks
    assert not tb.has_header and tb.innermost_collective == "broadcast" and tb.rank is None


def test_ranks_in_different_collectives() -> None:
    text = "".join(
        f"[rank{r}]: Traceback (most recent call last):\n"
        f'[rank{r}]:   File "train.py", line 10, in <module>\n'
        f'[rank{r}]:   File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 2, in {c}\n'
        f"[rank{r}]: RuntimeError: timed out\n"
        for r, c in ((0, "broadcast"), (1, "barrier"), (2, "barrier"))
    )
    tbs = parse_tracebacks(text).tracebacks
    assert [(t.rank, t.innermost_collective, t.exc_type) for t in tbs] == [
        (0, "broadcast", "RuntimeError"),
        (1, "barrier", "RuntimeError"),
        (2, "barrier", "RuntimeError"),
    ]


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=600))
def test_traceback_parser_never_raises(text: str) -> None:
    parse_tracebacks(text + '\n  File "x.py", line 1, in f\n')


# -- nccl-tests ------------------------------------------------------------------------------------


def test_header_and_devices_only_is_read_with_a_warning() -> None:
    # AWS p3dn 2-node run (ok-nccl-008), cut inside the device list: no rows to judge, not refused
    text = _paste("ok-nccl-008")
    assert sniff_nccl_tests(text.encode())
    run = parse_nccl_tests(text)
    assert not run.rows and len(run.ranks) == 7 and run.n_gpus == 1 and run.independent_copies == 1
    assert any("no result rows" in w for w in run.warnings)
    with pytest.raises(InputError):
        parse_nccl_tests("# just a comment\n")


def test_nccl_tests_device_list_alone_and_summary_alone_are_read_not_judged() -> None:
    # dev control ok-nccl-009: the device list of a cuda-gdb session (no '#', no header line)
    text = _paste("ok-nccl-009")
    assert sniff_nccl_tests(text.encode())
    run = parse_nccl_tests(text)
    assert len(run.ranks) == 4 and not run.rows and run.hosts == {"51e6e7896958"}
    # dev case nccl-035: the two summary lines only
    text = _paste("nccl-035", "paste-2.txt")
    assert sniff_nccl_tests(text.encode())
    run = parse_nccl_tests(text)
    assert run.avg_busbw_gbs == 3.95192 and any("summary lines only" in w for w in run.warnings)
    # prose that mentions a rank is not nccl-tests output
    assert not sniff_nccl_tests(b"Rank 0 is running collective on host a\n")


def test_copies_without_mpi_print_rank_0_on_every_host() -> None:
    # nccl-tests#254: "all the ranks show as Rank 0" on dgx01 and dgx02 (the '#' lost in the paste)
    lines = [
        "Rank  0 Group  0 Pid 544816 on    dgx01 device  0 [0x1a] NVIDIA H100 80GB HBM3",
        "Rank  0 Group  0 Pid 332597 on    dgx02 device  0 [0x1a] NVIDIA H100 80GB HBM3",
        "Rank  0 Group  0 Pid 332599 on    dgx02 device  0 [0x1a] NVIDIA H100 80GB HBM3",
        "Rank  0 Group  0 Pid 544818 on    dgx01 device  0 [0x1a] NVIDIA H100 80GB HBM3",
    ]
    text = "# nThread 1 nGpus 1 minBytes 128 maxBytes 17179869184 step: 2(factor) warmup iters: 100\n"
    run = parse_nccl_tests(text + "\n".join(lines) + "\n")
    assert run.independent_copies == 4 and run.hosts == {"dgx01", "dgx02"}
    # one host's two runs pasted one after the other are not "copies"
    one_host = (
        text
        + "#  Rank  0 Group  0 Pid 1 on h device  0 [0x1a] A\n"
        + text
        + "#  Rank  0 Group  0 Pid 2 on h device  0 [0x1a] A\n"
    )
    assert parse_nccl_tests(one_host).independent_copies == 1


# nccl-tests#213 (two H800 nodes, "seems they run seperately on each node"): the two copies' headers
# interleave before either device list
_NT213 = (
    "Warning: Permanently added '[10.0.0.15]:9001' (ED25519) to the list of known hosts.\n"
    + "# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
    * 2
    + "".join(
        f"#  Rank  {r} Group  0 Pid    798 on       hw14 device  {r} [{bus}] NVIDIA H800\n"
        for r, bus in enumerate(("0x0f", "0x34", "0x48", "0x5a"))
    )
)


def test_copies_without_mpi_told_by_interleaved_headers_or_summaries() -> None:
    run = parse_nccl_tests(_NT213)
    assert run.independent_copies == 1 and run.interleaved_copies == 2 and run.headers == 2
    # dev case nccl-035 (nccl-tests#27): two summaries, no row between them
    run = parse_nccl_tests(_paste("nccl-035"))
    assert run.interleaved_copies == 2 and run.summaries == 2 and run.interleaved_summaries == 1
    # its single-host rerun (paste-2) prints one
    assert parse_nccl_tests(_paste("nccl-035", "paste-2.txt")).interleaved_copies == 1
    # two runs one after the other (each header, devices, rows, summary) are not copies
    one = (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#   Rank  0 Pid   1688 on    fastmoe device  0 [0x18] GeForce RTX 2080 Ti\n"
        "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "           8             2     float     sum    12.80    0.00    0.00  0e+00    12.66    0.00    0.00  0e+00\n"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.0\n#\n"
    )
    assert parse_nccl_tests(one + one).interleaved_copies == 1


@settings(max_examples=40, deadline=None)
@given(copies=st.integers(1, 6), runs=st.integers(1, 4))
def test_interleaved_copies_counted_and_sequential_runs_not(copies: int, runs: int) -> None:
    # the summary shape of nccl-035 (nccl-tests#27) repeated by each copy; a run's rows end the streak
    summary = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 3.94145 \n#\n"
    row = "           8             2     float     sum    12.80    0.00    0.00  0e+00    12.66    0.00    0.00  0e+00\n"
    assert parse_nccl_tests(summary * copies).interleaved_copies == copies
    assert parse_nccl_tests((row + summary) * runs).interleaved_copies == 1


def test_copies_without_mpi_told_by_nccl_comm_lines_when_the_device_list_is_cut() -> None:
    # dev case nccl-034: the excerpt starts inside the rows; NCCL's 'comm ... rank 0 nranks 2' lines
    # of testgpu1 and testgpu2 say that each host ran its own 2-rank test
    run = parse_nccl_tests(_paste("nccl-034"))
    assert run.independent_copies == 2 and run.hosts == {"testgpu1", "testgpu2"}
    assert run.gpu_models == set()  # the comm lines do not name the GPU
    # one MPI run over two hosts: each rank number once (Init and Destroy lines of one process)
    mpi = "".join(
        f"{h}:{pid}:{pid} [{d}] NCCL INFO comm 0x55c6f1c65b50 rank {r} nranks 4 cudaDev {d} busId 3000 - {w} COMPLETE\n"
        for h, pid, r, d in (("a", 1, 0, 0), ("a", 1, 1, 1), ("b", 2, 2, 0), ("b", 2, 3, 1))
        for w in ("Init", "Destroy")
    )
    row = "   268435456      67108864     float     sum      -1    55270    4.86    4.86      0    55213    4.86    4.86      0\n"
    assert parse_nccl_tests(row + mpi).independent_copies == 1


# -- fr_trace (torchfrtrace) reports ---------------------------------------------------------------

# pytorch/pytorch#140969: fr_trace's block as printed by PyTorch 2.6 ("Not all ranks joining collective:
# sequence number: N", the fields one per line)
FR_NOT_JOINED = """Not all ranks joining collective: sequence number: 31117
internal record id: 31116
group info: 0:default_pg
collective: nccl:all_reduce
missing ranks: {3, 4, 5, 6, 7}
input sizes: [[1571911]]
output sizes: [[1571911]]
world size: 8
expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}
collective state: scheduled
collective stack trace:
 all_reduce at /packages/fblearner.flow.canary/workflow#link-tree/torch/distributed/distributed_c10d.py:2707
wrapper at /packages/fblearner.flow.canary/workflow#link-tree/torch/distributed/c10d_logger.py:81
"""


def test_fr_trace_not_all_ranks_joining_new_wording() -> None:
    assert sniff_flight_recorder(FR_NOT_JOINED.encode())
    rep = parse_flight_recorder(FR_NOT_JOINED.encode())
    (m,) = rep.mismatches
    assert (m.kind, m.collective_seq_id, m.missing_ranks, m.expected_ranks) == (
        "not all ranks joining",
        31117,
        (3, 4, 5, 6, 7),
        8,
    )
    assert m.entry == 31116 and m.collective == "nccl:all_reduce" and m.state == "scheduled"


def test_fr_trace_errors_name_the_culprit_rank() -> None:
    # the "has errors" block of fr_trace (utils.error_analysis / types.EntryState.log), its error msg line
    # as MatchInfo prints it
    text = FR_NOT_JOINED.replace(
        "Not all ranks joining collective: sequence number: 31117",
        "Collective sequence number: 12 has errors",
    ).replace(
        "missing ranks: {3, 4, 5, 6, 7}\n",
        "error msg: Culprit rank 2; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: 'all_reduce' "
        "does not match found collective type: 'broadcast'\n",
    )
    (m,) = parse_flight_recorder(text.encode()).mismatches
    assert (m.kind, m.collective_seq_id, m.culprit_ranks) == ("type mismatch", 12, (2,))


def test_traceback_tail_behind_a_logger_prefix() -> None:
    # dev case nccl-051: vLLM's "ERROR 06-13 07:35:59 [core.py:517] " before the last frame and the exception
    text = _paste("nccl-051")
    assert sniff_tracebacks(text.encode())
    (tb,) = parse_tracebacks(text).tracebacks
    assert tb.exc_type == "cupy_backends.cuda.libs.nccl.NcclError" and len(tb.frames) == 1


def test_one_frame_without_an_exception_is_not_a_traceback() -> None:
    assert not sniff_tracebacks(b'  File "/x/y.py", line 3, in f\n    g()\nsome other line\n')
