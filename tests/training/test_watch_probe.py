"""The fail-slow probe in one process: timing, files, metrics, stalls, and never breaking training."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
import warnings

import pytest

torch = pytest.importorskip("torch")

from clusterdoctor.observe.control.prom_text import parse_prom_text  # noqa: E402
from clusterdoctor.observe.watch.records import load_watch_dir  # noqa: E402
from clusterdoctor.testing import comparable_samples, prom_client_samples  # noqa: E402
from clusterdoctor.training import watch  # noqa: E402
from tests.conftest import needs_real_lock_timeouts  # noqa: E402

pytestmark = pytest.mark.torch


def _loop(w, steps: int, data_s: float = 0.0, own_s: float = 0.002):
    import torch.distributed as dist

    def slow():
        for i in range(steps):
            time.sleep(data_s)
            yield i

    for _ in w.loader(slow()):
        time.sleep(own_s)
        w._clk.enter()  # what the tapped collective marks when no process group exists
        w._clk.done()
        w.step()
    return dist


def test_steps_files_and_metrics(tmp_path):
    with watch.install(None, job="unit", port=0, bind="127.0.0.1", jsonl_dir=tmp_path, every=5) as w:
        _loop(w, 20, data_s=0.004)
        body = urllib.request.urlopen(f"http://127.0.0.1:{w.port}/metrics", timeout=60).read().decode()
    wf = load_watch_dir(str(tmp_path))
    assert [r.step for r in wf.steps] == list(range(1, 21))
    ident = wf.identity(0)
    assert ident.job == "unit" and ident.world_size == 1
    assert all(r.data >= 0.003 and r.own >= r.data and r.wall >= r.own for r in wf.steps[1:])
    # the exposition parses the same with our parser and the reference client
    assert comparable_samples(parse_prom_text(body)) == prom_client_samples(body)
    fams = {s.name: s for s in parse_prom_text(body).samples}
    assert fams["clusterdoctor_watch_steps_total"].value == 20
    labels = dict(fams["clusterdoctor_watch_steps_total"].labels)
    assert {"job", "rank", "local_rank", "host", "gpu"} <= set(labels) and labels["job"] == "unit"
    assert fams["clusterdoctor_watch_data_wait_seconds_total"].value >= 20 * 0.003


def test_port_in_use_and_unwritable_dir_are_warnings(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    bad = tmp_path / "file"
    bad.write_text("")
    try:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            w = watch.install(None, port=port, bind="127.0.0.1", jsonl_dir=bad / "sub")
            _loop(w, 5)
            w.close()
        msgs = [str(x.message) for x in got if issubclass(x.category, watch.WatchWarning)]
        assert any("cannot listen" in m and "training goes on" in m for m in msgs)
        assert any("JSON lines not written" in m for m in msgs)
        assert w.step_index == 5 and w.port is None
    finally:
        s.close()


def test_close_restores_torch_distributed():
    import torch.distributed as dist

    orig = dist.all_reduce
    w = watch.install(None, port=None, jsonl_dir=None)
    assert dist.all_reduce is not orig and dist.all_reduce.__wrapped__ is orig
    w.close()
    w.close()  # idempotent
    assert dist.all_reduce is orig


def test_memory_is_bounded(tmp_path):
    w = watch.install(None, port=None, jsonl_dir=tmp_path, jsonl_max_bytes=20_000, heartbeat=False)
    _loop(w, 2000, own_s=0)
    w.close()
    assert len(w.recent) == watch.WINDOW
    sizes = sorted(p.stat().st_size for p in tmp_path.iterdir())
    assert len(sizes) == 2 and max(sizes) <= 20_000  # rotated once, never above the cap
    wf = load_watch_dir(str(tmp_path))
    assert wf.steps[-1].step == 2000 and not wf.warnings


def test_heartbeat_sees_the_process_frozen(tmp_path):
    """SIGSTOP this very process for 0.4 s from a child: the stall lands in the step it happened in."""
    w = watch.install(None, port=None, jsonl_dir=tmp_path)
    _loop(w, 3)
    freezer = subprocess.Popen(
        [
            "sh",
            "-c",
            f"kill -STOP {__import__('os').getpid()}; sleep 0.4; kill -CONT {__import__('os').getpid()}",
        ]
    )
    freezer.wait(timeout=120)  # stopped and continued by now, however late the child ran: no sleep race
    w.step()
    _loop(w, 3)
    w.close()
    stalls = [r.stall for r in load_watch_dir(str(tmp_path)).steps]
    assert stalls[3] >= 0.3 and max(stalls[:3] + stalls[4:]) < 0.1


@needs_real_lock_timeouts  # gloo's timeout is a timed wait too
def test_dead_peer_never_stops_training(tmp_path):
    """Two real ranks (gloo); rank 1 dies after 10 steps. Rank 0 trains on: the exchange times out in
    the background with a warning, steps keep coming at their pace."""
    script = textwrap.dedent(
        """
        import os, sys, time, warnings
        import torch.distributed as dist
        from clusterdoctor.training import watch
        dist.init_process_group("gloo")
        r = dist.get_rank()
        w = watch.install(None, job="dead", port=None, jsonl_dir=sys.argv[1], every=2, exchange_timeout=2)
        t0 = time.monotonic()
        for i in range(60):
            time.sleep(0.02)
            w.step()
            if r == 1 and i == 10:
                os._exit(0)
        print("steps", w.step_index, "seconds", round(time.monotonic() - t0, 2), "exchange_ok", w.exchange_ok,
              "picture", sorted(w.picture()), flush=True)
        os._exit(0)
        """
    )
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    p = port.getsockname()[1]
    port.close()
    procs = []
    for r in range(2):
        env = dict(
            __import__("os").environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(p)
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", script, str(tmp_path)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    out, err = procs[0].communicate(timeout=120)
    procs[1].communicate(timeout=30)
    assert "steps 60" in out, (out, err)
    secs = float(out.split("seconds")[1].split()[0])
    assert secs < 60 * 0.02 + 10  # never blocked on the dead peer beyond scheduling noise
    assert "exchange_ok 0.0" in out and "picture [0, 1]" in out
    assert "exchange between ranks stopped" in err


def test_plain_loop_collectives_are_timed_through_the_tap(tmp_path):
    """Two real ranks, a plain loop with dist.all_reduce (what FSDP and hand-written loops call):
    rank 1 works 30 ms more a step, so rank 0 waits for it in the collective."""
    script = textwrap.dedent(
        """
        import sys, time
        import torch, torch.distributed as dist
        from clusterdoctor.training import watch
        dist.init_process_group("gloo")
        r = dist.get_rank()
        w = watch.install(None, job="tap", port=None, jsonl_dir=sys.argv[1], every=5)
        t = torch.ones(1000)
        for i in range(30):
            time.sleep(0.01 + (0.03 if r == 1 else 0.0))
            dist.all_reduce(t)
            w.step()
        w.close()
        """
    )
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    procs = []
    for r in range(2):
        env = dict(
            __import__("os").environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(p)
        )
        procs.append(subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))  # fmt: skip
    for pr in procs:
        _, err = pr.communicate(timeout=120)
        assert pr.returncode == 0, err
    wf = load_watch_dir(str(tmp_path))
    by = {r: [x for x in wf.steps if x.rank == r][5:] for r in (0, 1)}
    med = {
        r: {k: sorted(getattr(x, k) for x in v)[len(v) // 2] for k in ("own", "wait")} for r, v in by.items()
    }
    assert med[1]["own"] > med[0]["own"] + 0.02  # rank 1's own work is the longer
    assert med[0]["wait"] > med[1]["wait"] + 0.02  # rank 0 waits for it in the collective
    assert {x.step for x in wf.steps} == set(range(1, 31))


@pytest.mark.parametrize("wrap", ["fsdp1", "fsdp2"])
def test_fsdp_collectives_are_timed(tmp_path, wrap):
    """Two real ranks of FSDP training on CPU (gloo): FSDP1 ``FullyShardedDataParallel(device_id=cpu)``
    and FSDP2 ``fully_shard`` per layer. From step 12 rank 1's forward runs 30 ms longer (inside the
    step, between FSDP's all-gathers, as a slower GPU would): its own work is the longer and rank 0
    waits for it inside the collectives. Before the probe tapped ``all_gather_single`` /
    ``reduce_scatter_single`` (torch 2.13's names) it saw no FSDP2 collective at all, and for FSDP1
    'own work' ended at the forward's first all-gather, before the slow compute."""
    script = textwrap.dedent(
        """
        import sys, time, warnings
        import torch, torch.distributed as dist
        from clusterdoctor.training import watch
        dist.init_process_group("gloo")
        r = dist.get_rank()
        torch.set_num_threads(1)
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
        step = [0]
        def slow(mod, inp):
            if r == 1 and step[0] >= 12:
                time.sleep(0.03)
        m[2].register_forward_pre_hook(slow)
        if sys.argv[2] == "fsdp1":
            from torch.distributed.fsdp import FullyShardedDataParallel
            model = FullyShardedDataParallel(m, device_id=torch.device("cpu"))
        else:
            from torch.distributed.fsdp import fully_shard
            for layer in m:
                if isinstance(layer, torch.nn.Linear):
                    fully_shard(layer)
            model = fully_shard(m)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with warnings.catch_warnings():
            warnings.simplefilter("error", watch.WatchWarning)  # no warning installing on FSDP
            w = watch.install(model, job=sys.argv[2], port=None, jsonl_dir=sys.argv[1], every=5)
        x = torch.randn(16, 64)
        for i in range(30):
            step[0] = i
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            w.step()
        w.close()
        """
    )
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    procs = []
    for r in range(2):
        env = dict(
            __import__("os").environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(p)
        )
        procs.append(subprocess.Popen([sys.executable, "-c", script, str(tmp_path), wrap], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))  # fmt: skip
    for pr in procs:
        _, err = pr.communicate(timeout=180)
        assert pr.returncode == 0, err
    wf = load_watch_dir(str(tmp_path))
    assert {x.step for x in wf.steps} == set(range(1, 31))
    med = {}
    for r in (0, 1):
        for part, (a, b) in (("before", (3, 11)), ("after", (14, 30))):
            rows = [x for x in wf.steps if x.rank == r and a <= x.step < b]
            med[r, part] = {
                k: sorted(getattr(x, k) for x in rows)[len(rows) // 2] for k in ("own", "coll", "wait")
            }
    assert med[0, "before"]["coll"] > 0 and med[1, "before"]["coll"] > 0  # FSDP's collectives are seen
    assert med[1, "after"]["own"] > med[0, "after"]["own"] + 0.02  # rank 1's own work is the longer
    assert med[1, "after"]["own"] > med[1, "before"]["own"] + 0.02
    assert med[0, "after"]["wait"] > med[1, "after"]["wait"] + 0.02  # rank 0 waits for it inside them
    assert wf.identity(0).gpu == "cpu"
