"""COMM020: ranks on the same GPU number joined by P2P/SHM as one node's (two machines taken for one)."""

from __future__ import annotations

from pathlib import Path

from clusterdoctor.model import Severity
from clusterdoctor.observe.comm.nccl_log import parse_nccl_log, sniff_nccl_log
from clusterdoctor.rules.comm_local_peers import local_peers_on_one_gpu
from clusterdoctor.rules.registry import REQUIRED_SECTIONS

INCIDENTS = Path(__file__).resolve().parents[1] / "data" / "incidents"


def _run(text: str) -> list:
    return list(local_peers_on_one_gpu.fn({"nccl_log": [parse_nccl_log(text, "paste")]}))


def test_documented() -> None:
    assert set(REQUIRED_SECTIONS) <= set(local_peers_on_one_gpu.sections())


def test_old_nccl_ring_lines_across_two_machines() -> None:
    # dev case nccl-067 (NCCL 2.x without "NCCL" before INFO): rank 6 [6] -> rank 10 [2] via P2P/IPC on
    # "learngpu060", whose rank 2 is on GPU 2 too: the second machine's ranks taken as this one's
    text = (INCIDENTS / "nccl-067" / "paste-2.txt").read_text()
    assert sniff_nccl_log(text.encode())
    log = parse_nccl_log(text)
    assert len(log.transports) == 6 and log.hosts == {"learngpu060"}
    (f,) = _run(text)
    assert f.severity == Severity.CRITICAL and f.subject == "ranks 2 and 10"
    assert "nccl.same-hostname" in f.causes


def test_two_nodes_with_the_same_gpu_numbers_are_quiet() -> None:
    # constructed in NCCL's Channel line format: two hosts, each ranks on GPUs 0-1, NET between them
    lines = [
        "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        "a:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0",
        "b:3:3 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/IPC",
        "b:4:4 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0",
    ]
    assert not _run("\n".join(lines) + "\n")
    # without the host prefix: ranks joined by P2P lines only
    bare = "\n".join(x.split(" ", 2)[2] for x in lines) + "\n"
    assert len(parse_nccl_log(bare).transports) == 4 and not _run(bare)
