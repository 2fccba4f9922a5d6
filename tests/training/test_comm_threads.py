"""clusterdoctor.training.threads on a real 2-rank gloo job: its communication threads are bound to the
communication CPUs by thread id, every other thread to the compute CPUs (read back from /proc)."""

from __future__ import annotations

import os
import socket

import pytest

torch = pytest.importorskip("torch")

from clusterdoctor.training.threads import COMM_THREAD, bind_comm_threads, thread_names  # noqa: E402

pytestmark = pytest.mark.torch

CPUS = sorted(os.sched_getaffinity(0))


def _affinity(tid: int) -> set[int]:
    return set(os.sched_getaffinity(tid))


def _worker(rank: int, port: int, comm: list[int], compute: list[int], out: str) -> None:
    import torch.distributed as dist

    use_env = rank == 0  # rank 0 as under `numa exec` (sets from the environment, watching), rank 1 explicit
    if use_env:
        os.environ["CLUSTERDOCTOR_COMM_CPUS"] = ",".join(map(str, comm))
        os.environ["CLUSTERDOCTOR_COMPUTE_CPUS"] = ",".join(map(str, compute))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    b = (
        bind_comm_threads(None, None, watch=True, interval=0.05)
        if use_env
        else bind_comm_threads(comm, compute)
    )
    x = torch.ones(1 << 16)
    dist.all_reduce(x)
    b.scan()
    threads = {tid: (name, sorted(_affinity(tid))) for tid, name in thread_names().items()}
    torch.save(
        {"threads": threads, "bound": b.bound, "errors": b.errors, "main": os.getpid()}, f"{out}.{rank}"
    )
    b.stop()
    dist.destroy_process_group()


def _run(tmp_path) -> list[dict]:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "res")
    mp.start_processes(_worker, args=(port, CPUS[-1:], CPUS[:-1], out), nprocs=2, start_method="spawn")
    return [torch.load(f"{out}.{r}", weights_only=False) for r in range(2)]


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs to split compute and communication")
def test_gloo_threads_go_to_comm_cpus_and_the_rest_to_compute(tmp_path):
    comm, compute = CPUS[-1:], CPUS[:-1]
    for res in _run(tmp_path):
        assert not res["errors"]
        names = {name for name, _ in res["threads"].values()}
        assert {"gloo_tcp_loop", "pt_gloo_runloop"} <= names, names  # gloo's threads exist by then
        for tid, (name, cpus) in res["threads"].items():
            if COMM_THREAD.match(name):
                assert cpus == comm, (name, cpus)
                assert tid in res["bound"]
            elif name != "cd_bind_comm":
                assert cpus == compute, (name, cpus)
        assert res["threads"][res["main"]][1] == compute  # the main (training) thread


def test_no_comm_cpus_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("CLUSTERDOCTOR_COMM_CPUS", raising=False)
    with pytest.raises(ValueError, match="numa exec"):
        bind_comm_threads()


def test_thread_names_of_this_process_include_the_main_thread():
    names = thread_names()
    assert os.getpid() in names
