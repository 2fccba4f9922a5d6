"""PyTorch distributed failures in job logs as users have them: real torchrun captures (gloo, CPU) and
public NCCL watchdog logs (tests/data/comm/public/SOURCES.md), launcher prefixes, wraps, fuzz."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.observe.comm.nccl_log import load_nccl_log, parse_nccl_log
from clusterdoctor.observe.comm.sources import HEAD_BYTES, _json_prefix, classify, looks_like_json
from tests.conftest import TEST_DATA

PUBLIC = TEST_DATA / "comm" / "public"
TORCHRUN = TEST_DATA / "comm" / "torchrun_gloo"


def _wd(name: str) -> list[tuple]:
    log = load_nccl_log(PUBLIC / name)
    return [
        (w.rank, w.seq, w.op, w.numel_in, w.numel_out, w.timeout_ms, w.ran_ms) for w in log.watchdog_timeouts
    ]


def _st(name: str) -> list[tuple]:
    log = load_nccl_log(PUBLIC / name)
    return [(s.rank, s.seq, s.last_enqueued, s.last_completed, s.pg) for s in log.watchdog_status]


def test_first_collective_never_completed_4_ranks() -> None:
    # hpc-community.unige.ch/t/4301: four "[rankN]:" watchdog lines, SeqNum=1 ALLGATHER 1 -> 4 elements.
    assert sorted(_wd("unige_hpc_4301_allgather_seq1_4rank.log")) == [
        (r, 1, "ALLGATHER", 1, 4, 600000, 600004) for r in range(4)
    ]
    # Each rank prints its status twice ("failure detected ..." and "Received a dump signal ..."): kept once.
    assert sorted(_st("unige_hpc_4301_allgather_seq1_4rank.log")) == [(r, 1, 1, -1, "0") for r in range(4)]


def test_status_wordings_and_pg_tags() -> None:
    assert _st("basicsr_737_allreduce_seq808.log") == [(1, 808, 811, 807, "0"), (0, 808, 811, 807, "0")]
    # "Exception ... detected by watchdog at work" and "Timeout at NCCL work" of one rank: one status.
    assert _st("sglang_1693_timeout_at_work.log") == [(4, 9141, 9141, 9140, "3")]
    assert _wd("sglang_1693_timeout_at_work.log") == [
        (1, 9141, "_ALLGATHER_BASE", 19008, 152064, 600000, 600071),
        (4, 9141, "_ALLGATHER_BASE", 19008, 152064, 600000, 600071),
    ]


def test_line_number_prefix_and_markdown_indentation() -> None:
    assert _wd("llamafactory_7396_lineno_prefix.log") == [
        (0, 1580, "ALLREDUCE", 466119168, 466119168, 600000, 600060),
        (4, 1580, "ALLREDUCE", 466119168, 466119168, 600000, 600067),
    ]
    assert _st("llamafactory_7396_lineno_prefix.log") == [
        (0, 1580, 1582, 1579, "1"),
        (3, 1580, 1582, 1579, "1"),
    ]
    assert [w[:4] for w in _wd("nccl_1409_indented_op_mismatch.log")] == [
        (7, 80078, "BROADCAST", 5056),
        (3, 80078, "ALLREDUCE", 2106881),
    ]


def test_terminal_wrapped_messages() -> None:
    assert _wd("sglang_3368_wrapped_mid_word.log") == [(6, 2, "ALLREDUCE", 1, 1, 600000, 600050)]
    assert _wd("open_r1_620_wrapped.log") == [(2, 4, "BROADCAST", 112, 112, 1800000, 1800010)]
    assert _wd("milabench_269_prefixed_wrapped.log") == [(6, 2070, "ALLREDUCE", 1, 1, 600000, 600022)]
    log = load_nccl_log(PUBLIC / "open_r1_620_wrapped.log")
    assert log.watchdog_timeouts[0].line == 2  # the line where the message starts


def test_old_format_interleaved_with_nccl_info() -> None:
    log = load_nccl_log(PUBLIC / "megatron_735_old_format_interleaved.log")
    assert [(w.rank, w.seq, w.op, w.line) for w in log.watchdog_timeouts] == [
        (2, 305, "ALLREDUCE", 1),
        (0, 305, "ALLREDUCE", 5),
        (1, 305, "ALLREDUCE", 9),
    ]


def test_deepspeed_pdsh_prefixes() -> None:
    log = load_nccl_log(PUBLIC / "deepspeed_pdsh_accelerate_1317.log")
    assert log.hosts == {"lambda-scalar02", "lambda-scalar03"}
    # 9 channel lines, one in the older "Channel 00 : 11[44000] -> 10[43000]" form (no connection index).
    assert len(log.transports) == 9
    assert (11, 10, "P2P") in {(t.src, t.dst, t.kind) for t in log.transports}
    sock = load_nccl_log(PUBLIC / "deepspeed_pdsh_accelerate_1317_socket.log")
    assert set(sock.networks) == {"Socket"} and sock.no_device == ["NET/IB : No device found."] * 2
    assert sock.hosts == {"lambda-scalar02", "lambda-scalar03"}


def test_gloo_timeout_behind_every_torchrun_prefix() -> None:
    for name in (
        "stuck_rank_plain.log",
        "stuck_rank_tee/console.log",
        "stuck_rank_prefix_template.log",
    ):
        log = load_nccl_log(TORCHRUN / name)
        errs = [(e.kind, e.rank, e.op, e.timeout_ms) for e in log.dist_errors]
        assert errs == [("gloo_timeout", 0, "recv", 5000)], name
        assert not log.watchdog_timeouts  # gloo has no NCCL watchdog
    (tee_err,) = TORCHRUN.glob("stuck_rank_tee/*/attempt_0/0/stderr.log")
    assert [(e.kind, e.rank) for e in load_nccl_log(tee_err).dist_errors] == [("gloo_timeout", 0)]


def test_gloo_names_the_rank_with_distributed_debug_detail() -> None:
    log = load_nccl_log(TORCHRUN / "stuck_rank_detail.log")
    (e,) = log.dist_errors  # "Rank 1 failed ..." and "Ranks 1 failed ..." are one failure
    assert (e.kind, e.rank, e.ranks, e.timeout_ms) == ("monitored_barrier", 0, (1,), 5000)


def test_store_timeout_while_creating_the_process_group() -> None:
    log = load_nccl_log(TORCHRUN / "late_rank_plain.log")
    (e,) = log.dist_errors
    assert (e.kind, e.rank, e.ranks, e.timeout_ms) == ("store_wait", None, (1,), 5000)
    assert e.text == "/default_pg/0//cpu//0/1"


def test_logs_starting_with_a_bracket_are_not_json() -> None:
    for name in ("basicsr_737_allreduce_seq808.log", "llamafactory_7396_lineno_prefix.log"):
        head = (PUBLIC / name).read_bytes()
        assert head.startswith(b"[") and not looks_like_json(head)
        assert classify(head, name) == ["nccl_log"]
    head = (TORCHRUN / "stuck_rank_tee" / "console.log").read_bytes()
    assert classify(head, "console.log")[:1] == ["nccl_log"]  # (and its tracebacks: py_traceback)
    # DeepSpeed's launcher lines start with "[2021-01-31 …]"; followed by NCCL output it is a log.
    ds = (PUBLIC / "deepspeed_716_launcher_header.log").read_bytes()
    # alone it is DeepSpeed's launcher console (read, judged by its messages)
    assert not looks_like_json(ds) and classify(ds, "ds.log") == ["launcher_log"]
    both = ds + (PUBLIC / "deepspeed_pdsh_accelerate_1317_socket.log").read_bytes()
    assert classify(both, "ds.log") == ["nccl_log"]


def test_json_prefixes_stay_json() -> None:
    """A whole small file must parse; the head of a large one must be a prefix of a JSON document."""
    trace = (TEST_DATA / "comm" / "gloo_2rank_plain" / "rank0.json").read_bytes()
    assert looks_like_json(trace) and looks_like_json(trace[:-3])  # a cut file is still a (truncated) trace
    assert not looks_like_json(b"[rank0]: x")  # a whole small file must parse
    text = trace.decode()
    for cut in range(2, 4096, 37):  # cut anywhere after the first "{", even inside a string or number
        assert _json_prefix(text[:cut]), cut
    big = b'{"traceEvents": [' + b'{"ph": "X", "name": "k", "ts": 1.5, "dur": 2},' * 2000
    assert len(big) > HEAD_BYTES and looks_like_json(big[:HEAD_BYTES])
    assert not looks_like_json(b"[1,0]<stdout>:host:1:2 [0] NCCL INFO x\n")
    assert not looks_like_json(b"[2024, -05")
    assert not _json_prefix('{"a": 1 "b"') and not _json_prefix("[1,]") and not _json_prefix("{1: 2}")


LINE = (
    "[E606 09:09:08.164985364 ProcessGroupNCCL.cpp:757] [Rank 2] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=7, OpType=ALLGATHER, NumelIn=1, NumelOut=4, Timeout(ms)=600000) ran for 600004 milliseconds "
    "before timing out."
)
PREFIXES = st.sampled_from(
    [
        "",
        "[rank2]:",
        "[default2]:[rank2]:",
        "[trainer-r2-l0]:[rank2]:",
        "worker-1: [rank2]:",
        "2: ",
        "[80746] ",
        "    ",
    ]
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PREFIXES, st.text(alphabet="abc []:0123456789-", max_size=12), st.integers(20, 200), st.booleans())
def test_watchdog_line_behind_random_prefixes_and_wraps(
    prefix: str, junk: str, width: int, wrap: bool
) -> None:
    line = junk + prefix + LINE
    text = "\n".join(line[i : i + width] for i in range(0, len(line), width)) if wrap else line
    log = parse_nccl_log("noise before\n" + text + "\nnoise after\n")
    (w,) = log.watchdog_timeouts
    assert (w.rank, w.seq, w.op, w.numel_in, w.numel_out, w.timeout_ms, w.ran_ms) == (
        2,
        7,
        "ALLGATHER",
        1,
        4,
        600000,
        600004,
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 6592), st.integers(0, 400))
def test_truncated_real_log_keeps_what_is_whole(cut: int, drop: int) -> None:
    """Any cut of the real 4-rank log: never raises, never invents a rank or a value."""
    text = (PUBLIC / "unige_hpc_4301_allgather_seq1_4rank.log").read_text()
    part = text[drop : drop + cut]
    log = parse_nccl_log(part)
    for w in log.watchdog_timeouts:
        assert w.rank in (None, *range(4)) and (w.seq, w.op, w.numel_in, w.numel_out) == (
            1,
            "ALLGATHER",
            1,
            4,
        )
        assert w.timeout_ms == 600000 and w.ran_ms in (None, 600004)
    for s in log.watchdog_status:
        assert s.rank in (None, *range(4)) and (s.last_enqueued, s.last_completed) == (1, -1)
    whole = len(re.findall(r"Watchdog caught[^\n]*before timing out\.\n", part))
    assert len(log.watchdog_timeouts) >= whole


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(JSON_VALUES, min_size=1, max_size=3), st.integers(0, 10_000), st.booleans())
def test_any_cut_of_a_json_document_is_a_json_prefix(values, cut: int, indent: bool) -> None:
    import json

    doc = json.dumps({"traceEvents": values}, indent=2 if indent else None)
    assert _json_prefix(doc[: max(1, cut)])


@settings(max_examples=150, deadline=None)
@given(PREFIXES.filter(lambda p: p.strip().startswith("[")), st.text(max_size=60))
def test_launcher_prefixed_lines_are_not_json(prefix: str, rest: str) -> None:
    assert not looks_like_json(
        (prefix + "[E606 09:09:08.1 ProcessGroupNCCL.cpp:757] " + rest + "\n").encode()
    )


def test_deepspeed_log_starting_with_a_bracket_is_read(tmp_path) -> None:
    """DeepSpeed's launcher lines (`[2021-01-31 …] [INFO] …`) followed by its workers' pdsh-prefixed NCCL
    lines, as one console file (two real excerpts, in the order DeepSpeed prints them)."""
    from clusterdoctor.observe.comm.sources import load_comm_observations

    p = tmp_path / "deepspeed.log"
    p.write_bytes(
        (PUBLIC / "deepspeed_716_launcher_header.log").read_bytes()
        + (PUBLIC / "deepspeed_pdsh_accelerate_1317_socket.log").read_bytes()
    )
    data = load_comm_observations(p)
    (log,) = data["nccl_log"]
    assert set(log.networks) == {"Socket"} and log.hosts == {"lambda-scalar02", "lambda-scalar03"}


def test_a_large_log_is_scanned_only_around_trigger_words(tmp_path) -> None:
    """3,000 copies of a real NCCL INFO log (~29 MB) with one real watchdog block at the end: found, with
    its line number, and the words that start a scan elsewhere ("timed out") do not make the parse
    search the whole file with the failure patterns (that took 10 s; the windows take milliseconds)."""
    import time

    from tests.conftest import shared_fixture

    base = shared_fixture("comm/nccl_efa_2node_t4_init_and_allreduce_perf.log").read_text()
    tail = (PUBLIC / "unige_hpc_4301_allgather_seq1_4rank.log").read_text()
    p = tmp_path / "big.log"
    p.write_text(base * 3000 + "x timed out y\n" + tail)
    t0 = time.process_time()
    log = load_nccl_log(p)
    cpu = time.process_time() - t0
    first = base.count("\n") * 3000 + 2
    assert sorted(w.line for w in log.watchdog_timeouts) == [first, first + 1, first + 2, first + 3]
    plain = tmp_path / "plain.log"
    plain.write_text(base * 3000)
    t0 = time.process_time()
    load_nccl_log(plain)
    ref = time.process_time() - t0
    assert cpu < 2 * ref + 0.5, (cpu, ref)  # CPU time, not wall time: the machine's load does not count


def test_watchdog_message_pasted_from_worknccl_on_and_wrapped() -> None:
    # dev case nccl-053: the paste starts at "WorkNCCL(" and the terminal wrapped before "ran for"
    from pathlib import Path

    from clusterdoctor.observe.comm.nccl_log import parse_nccl_log

    text = (Path(__file__).resolve().parents[2] / "data" / "incidents" / "nccl-053" / "paste.txt").read_text()
    (w,) = parse_nccl_log(text).watchdog_timeouts
    assert (w.seq, w.op, w.numel_in, w.timeout_ms, w.ran_ms) == (1, "ALLREDUCE", 1, 600000, 721595)


def test_worknccl_without_its_timing_out_tail_is_not_a_timeout() -> None:
    from clusterdoctor.observe.comm.nccl_log import parse_nccl_log

    text = "[Rank 0] Work WorkNCCL(SeqNum=5, OpType=BROADCAST, NumelIn=8, NumelOut=8, Timeout(ms)=600000) started\n"
    assert not parse_nccl_log(text).watchdog_timeouts
