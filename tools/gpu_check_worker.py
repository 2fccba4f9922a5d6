"""The training part of tools/gpu_check.py: 2 ranks on cuda:0 (gloo carries the collectives), run as

    python tools/gpu_check_worker.py PORT WATCH_DIR RESULT_JSON STEPS

A. probe overhead: the same DDP step timed in alternating blocks without and with the fail-slow
   probe (``watch.install``), median per step, ratio;
B. one injected fault: a fresh probe writing ``WATCH_DIR/fault``; from step STEPS/2 rank 1 does 3x
   the GPU work per step (the straggler ``clusterdoctor watch --from`` must name);
C. gradient sync on CUDA: int8 + error feedback and the ShardedOptimizer against plain DDP.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2
# GPU_CHECK_DEVICE=cpu runs the same code on the CPU (a dry run of this script where no GPU is lent)
DEVICE = os.environ.get("GPU_CHECK_DEVICE", "cuda")
DIM = 2048 if DEVICE == "cuda" else 256


def net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(DIM, DIM), nn.ReLU(), nn.Linear(DIM, DIM), nn.ReLU(), nn.Linear(DIM, 16)
    ).to(DEVICE)


def step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, extra: int = 0) -> float:
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    for _ in range(extra):  # injected slowness: more GPU work on this rank only
        loss = loss + 0.0 * model(x).pow(2).mean()
    loss.backward()
    opt.step()
    return loss.item()  # synchronises: host marks then see the GPU's time


def worker(rank: int, port: int, wdir: str, res: str, steps: int) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    if DEVICE == "cuda":
        torch.cuda.set_device(0)
    else:
        torch.set_num_threads(1)
    from clusterdoctor.training import sync, watch

    x = torch.randn(256, DIM, generator=torch.Generator().manual_seed(rank)).to(DEVICE)
    out: dict = {"device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu (dry run)"}
    # A. overhead, alternating blocks of 10 steps
    model = DDP(net())
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(5):
        step(model, opt, x)
    plain, probed = [], []
    w = watch.install(model, job="gpu-check-overhead", port=None, jsonl_dir=None)
    for block in range(6):
        for _ in range(10):
            t0 = time.perf_counter()
            step(model, opt, x)
            if block % 2:
                w.step()
                probed.append(time.perf_counter() - t0)
            else:
                plain.append(time.perf_counter() - t0)
    w.close()
    out["overhead"] = {
        "plain_ms": 1e3 * statistics.median(plain),
        "probed_ms": 1e3 * statistics.median(probed),
        "ratio": statistics.median(probed) / statistics.median(plain),
    }
    # B. injected fault
    dist.barrier()
    fdir = os.path.join(wdir, "fault")
    os.makedirs(fdir, exist_ok=True)
    model = DDP(net(1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    w = watch.install(model, job="gpu-check-fault", port=None, jsonl_dir=fdir, every=5)
    onset = steps // 2
    for s in range(steps):
        step(model, opt, x, extra=2 if rank == 1 and s >= onset else 0)
        w.step()
    w.close()
    out["fault"] = {"rank": 1, "onset_step": onset, "steps": steps, "extra_work": "3x forward on rank 1"}
    # C. sync hooks on CUDA
    dist.barrier()

    def trained(scheme: str | None) -> list[torch.Tensor]:
        m = DDP(net(2))
        if scheme:
            sync.install(m, scheme=scheme, warmup_steps=1)
        o = torch.optim.SGD(m.parameters(), lr=1e-2)
        for _ in range(4):
            step(m, o, x)
        return [p.detach().cpu() for p in m.module.parameters()]

    ref = trained(None)
    i8 = trained("int8")
    from clusterdoctor.training.sync.zero import ShardedOptimizer

    zm = net(2)
    zo = ShardedOptimizer(zm.parameters(), torch.optim.SGD, lr=1e-2)
    for _ in range(4):
        step(zm, zo, x)
    zp = [p.detach().cpu() for p in zm.parameters()]
    d_i8 = max(float((a - b).abs().max()) for a, b in zip(ref, i8))
    d_z = max(float((a - b).abs().max()) for a, b in zip(ref, zp))
    out["sync"] = {"int8_max_diff": d_i8, "zero_max_diff": d_z, "ok": d_z < 1e-4 and d_i8 < 1e-2}
    if rank == 0:
        with open(res, "w") as f:
            json.dump(out, f, indent=2)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    port, wdir, res, steps = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    mp.start_processes(worker, args=(port, wdir, res, steps), nprocs=WORLD, start_method="spawn")
