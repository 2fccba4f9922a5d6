"""The hang rules on real pastes (dev cases of the incident corpus, public threads): the culprit is the rank
the input says is behind or absent, not the one that reports the timeout; cause classes per finding; a
timeout no input explains is a symptom that folds into the cause beside it; COMM013 and COMM014."""

from __future__ import annotations

from pathlib import Path

from clusterdoctor import diagnosis
from clusterdoctor.model import Severity

INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents"
NOW = 1_790_000_000.0


def _diagnose(*paths: Path):
    obs = diagnosis.new_observations(clock=lambda: NOW)
    refs = diagnosis.load_sources(obs, list(paths))
    return diagnosis.run(obs, refs).findings


def _paste(tmp_path: Path, text: str, name: str = "paste.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_desync_report_names_rank_7_not_the_reporter() -> None:
    # pytorch#152623 (nccl-041): rank 0 times out; the desync report says rank 7 never joined #183
    (f, *_) = _diagnose(INCIDENTS / "nccl-041" / "paste.txt")
    assert f.rule == "COMM009" and f.subject == "rank 7" and f.role == "cause"
    assert set(f.causes) == {"nccl.rank-behind", "nccl.collective-mismatch"}
    ev = {e.description: e.value for e in f.evidence}
    assert ev["culprit ranks"] == [7] and ev["ranks reporting it"] == [0]
    assert "never joined #183" in f.summary


def test_ranks_that_do_not_report_the_others_timeout_are_the_suspects() -> None:
    # pytorch#141069 (nccl-039): ranks 1-3 time out at work 19; rank 0 (which ran out of data) is silent
    (f, *_) = _diagnose(INCIDENTS / "nccl-039" / "paste.txt")
    assert f.rule == "COMM009" and f.subject == "rank 0" and "nccl.rank-behind" in f.causes
    assert "the suspects" in f.summary and f.severity == Severity.CRITICAL


def test_one_rank_timeout_is_a_symptom_naming_both_readings() -> None:
    # accelerate#314 (nccl-014): one rank's 1.8-era watchdog line: behind or mismatched, not known which
    (f, *_) = _diagnose(INCIDENTS / "nccl-014" / "paste.txt")
    assert f.rule == "COMM009" and f.subject == "rank 6" and f.role == "symptom"
    assert set(f.causes) == {"nccl.rank-behind", "nccl.collective-mismatch"}


def test_timeout_folds_into_the_network_error_that_explains_it(tmp_path: Path) -> None:
    # the same watchdog line beside an IB retry-exceeded WARN (NVIDIA/nccl#1405): the IB error leads and
    # carries the timeout as evidence
    text = (INCIDENTS / "nccl-014" / "paste.txt").read_text() + (
        "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
        "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
    )
    findings = _diagnose(_paste(tmp_path, text))
    assert [f.rule for f in findings] == ["IB101"]
    assert any("explains COMM009" in e.description for e in findings[0].evidence)


def test_every_rank_reporting_the_first_collective_points_at_the_path() -> None:
    from tests.conftest import TEST_DATA

    (f, *_) = _diagnose(TEST_DATA / "comm" / "public" / "unige_hpc_4301_allgather_seq1_4rank.log")
    assert f.rule == "COMM012" and set(f.causes) == {"nccl.p2p-unsupported", "nccl.ib-connect"}


def test_fr_trace_report_names_the_missing_ranks(tmp_path: Path) -> None:
    # pytorch/pytorch#140969: fr_trace's "Not all ranks joining collective" block (2.6 wording)
    text = (
        "Not all ranks joining collective: sequence number: 31117\ninternal record id: 31116\n"
        "group info: 0:default_pg\ncollective: nccl:all_reduce\nmissing ranks: {3, 4, 5, 6, 7}\n"
        "input sizes: [[1571911]]\noutput sizes: [[1571911]]\nworld size: 8\n"
        "expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}\ncollective state: scheduled\n"
    )
    (f, *_) = _diagnose(_paste(tmp_path, text))
    assert f.rule == "COMM009" and f.subject == "ranks 3-7" and f.causes == ("nccl.rank-behind",)


def test_nccl_tests_copies_without_mpi(tmp_path: Path) -> None:
    # nccl-tests#254: every process prints Rank 0, on dgx01 and dgx02
    text = (
        "# nThread 1 nGpus 1 minBytes 128 maxBytes 17179869184 step: 2(factor) warmup iters: 100\n"
        + "".join(
            f"#  Rank  0 Group  0 Pid {pid} on    {host} device  0 [0x1a] NVIDIA H100 80GB HBM3\n"
            for pid, host in ((544816, "dgx01"), (332597, "dgx02"), (332599, "dgx02"), (544818, "dgx01"))
        )
    )
    (f, *_) = _diagnose(_paste(tmp_path, text))
    assert f.rule == "COMM013" and f.causes == ("nccl-tests.no-mpi-build",) and "4 processes" in f.summary


def test_nccl_tests_copies_without_mpi_told_by_two_summaries(tmp_path: Path) -> None:
    # dev case nccl-035 (nccl-tests#27): mpirun over two hosts printed two summaries, nothing between
    text = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 3.94145 \n#\n"
    text += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 3.94156 \n"
    (f, *_) = _diagnose(_paste(tmp_path, text))
    assert f.rule == "COMM013" and f.causes == ("nccl-tests.no-mpi-build",) and "2 copies" in f.summary
    # one summary is one run: nothing to say
    assert not [f for f in _diagnose(_paste(tmp_path, text.split("#\n")[0])) if f.rule == "COMM013"]


def test_first_collective_that_is_a_barrier_names_the_unbound_device(tmp_path: Path) -> None:
    # dev case nccl-053 (yiqiao-yin/deepspeed-course#17): a barrier before any rank bound its GPU hung
    # on cuda:0; dist.barrier() is a 1-element ALLREDUCE on a guessed device (pytorch#134617)
    (f, *_) = _diagnose(INCIDENTS / "nccl-053" / "paste.txt")
    assert f.rule == "COMM012" and "nccl.duplicate-gpu" in f.causes and "barrier" in f.summary
    # the same course's Qwen3.8 page: a 2-GPU pod whose P2P did not work hung in the same barrier
    text = (
        "[rank1] Watchdog caught collective operation timeout:\n"
        "  WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1,\n"
        "           Timeout(ms)=1800000) ran for 1800069 milliseconds before timing out\n"
    )
    (f, *_) = _diagnose(_paste(tmp_path, text))
    assert f.rule == "COMM012" and {"nccl.duplicate-gpu", "nccl.p2p-unsupported"} <= set(f.causes)
    # a first collective that carries data is no barrier (LlamaFactory#7396's ALLREDUCE, SeqNum made 1)
    text = (
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
        "Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n"
    )
    (f, *_) = _diagnose(_paste(tmp_path, text))
    assert f.rule == "COMM012" and "nccl.duplicate-gpu" not in f.causes and "barrier" not in f.summary


def test_ranks_stuck_in_different_collectives(tmp_path: Path) -> None:
    text = "".join(
        f"[rank{r}]: Traceback (most recent call last):\n"
        f'[rank{r}]:   File "train.py", line 10, in <module>\n'
        f'[rank{r}]:   File "/opt/torch/distributed/distributed_c10d.py", line 2, in {c}\n'
        f"[rank{r}]: KeyboardInterrupt\n"
        for r, c in ((0, "broadcast"), (1, "barrier"), (2, "barrier"))
    )
    (f, *_) = _diagnose(_paste(tmp_path, text))
    assert f.rule == "COMM014" and f.subject == "rank 0" and f.causes == ("nccl.collective-mismatch",)
    # one rank's chained tracebacks (the same rank twice) are not two ranks
    one = text.replace("[rank1]", "[rank0]").replace("[rank2]", "[rank0]")
    assert "COMM014" not in {x.rule for x in _diagnose(_paste(tmp_path, one, "one.txt"))}


def test_interleaved_tracebacks_without_rank_prefix_in_two_collectives(tmp_path: Path) -> None:
    # dev case nccl-037 (Lightning log_dict with different keys): the lines of two processes' tracebacks
    # are interleaved, one in broadcast, one in barrier; no rank prefix
    (f, *_) = _diagnose(INCIDENTS / "nccl-037" / "paste.txt")
    assert f.rule == "COMM014" and "barrier, broadcast" in f.summary
    # one process's stack through broadcast_object_list into broadcast is one collective, not two
    one = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 10, in <module>\n'
        "    dist.broadcast_object_list(objs, src=0)\n"
        '  File "/opt/torch/distributed/distributed_c10d.py", line 2, in broadcast_object_list\n'
        "    broadcast(object_sizes_tensor, src=src, group=group)\n"
        '  File "/opt/torch/distributed/distributed_c10d.py", line 3, in broadcast\n'
        "    work = default_pg.broadcast([tensor], opts)\n"
        "KeyboardInterrupt\n"
    )
    assert "COMM014" not in {x.rule for x in _diagnose(_paste(tmp_path, one))}


def test_the_suspect_busy_in_its_own_progress_bar_is_the_rank_behind(tmp_path: Path) -> None:
    # dev case nccl-015 (nanotron): ranks 2 and 3 time out in ALLREDUCE while rank 0 is still grouping a
    # dataset (its tqdm bar at 8%, 30 min left); rank 1 printed nothing
    (f, *_) = _diagnose(INCIDENTS / "nccl-015" / "paste.txt")
    assert f.rule == "COMM009" and f.subject == "rank 0" and f.causes == ("nccl.rank-behind",)
    assert "Grouping texts" in f.summary
    text = (INCIDENTS / "nccl-015" / "paste.txt").read_text()
    # two suspects with unfinished bars: neither is singled out
    two = _paste(
        tmp_path,
        text.replace(
            "[default2]:[E",
            "[default1]:Tokenizing:  50%|#####     | 5/10 [00:01<00:01, 5.0it/s]\n[default2]:[E",
            1,
        ),
        "two.txt",
    )
    (f2, *_) = _diagnose(two)
    assert f2.subject == "ranks 0, 1"
    # a finished bar is not work in progress
    done = _paste(tmp_path, text.replace("   8%|", " 100%|", 1), "done.txt")
    (f3, *_) = _diagnose(done)
    assert f3.subject == "ranks 0, 1"


def test_healthy_controls_of_the_comm_share_are_read_and_quiet() -> None:
    for case in ("ok-nccl-004", "ok-nccl-005", "ok-nccl-007", "ok-nccl-008"):
        obs = diagnosis.new_observations(clock=lambda: NOW)
        refs = diagnosis.load_sources(obs, sorted((INCIDENTS / case).glob("paste*.txt")))
        diag = diagnosis.run(obs, refs)
        assert not [f for f in diag.findings if f.severity >= Severity.WARNING], case
        assert not [w for w in diag.warnings if w.startswith("not used: ")], case


def test_socket_interface_that_does_not_route(tmp_path: Path) -> None:
    # pytorch#68893: an AWS node's NCCL picks a docker veth (link-local address) beside ens5 for the socket
    # transport of a 2-node job: "Network is unreachable / Connection refused"
    text = (
        "\x1b[0m ip-172-31-0-137:14605:14673 [0] NCCL INFO NET/Socket : Using [0]ens5:172.31.0.137<0> "
        "[1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>\n"
        "\x1b[0m ip-172-31-0-137:14605:14673 [0] NCCL INFO Using network Socket\n"
        "\x1b[0m NCCL version 2.7.8+cuda11.1\n"
        "\x1b[0m ip-172-31-0-137:14605:14688 [0] NCCL INFO Channel 00 : 1[1e0] -> 0[1e0] [receive] via NET/Socket/0\n"
    )
    (f, *_) = _diagnose(_paste(tmp_path, text))
    assert f.rule == "COMM015" and f.causes == ("nccl.socket-iface",) and "veth75fa783" in f.summary
    # one node on loopback is normal
    one = "h:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>\nh:1:1 [0] NCCL INFO Using network Socket\n"
    assert "COMM015" not in {x.rule for x in _diagnose(_paste(tmp_path, one, "one.txt"))}
