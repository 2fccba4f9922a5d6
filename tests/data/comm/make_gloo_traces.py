"""Capture real 2-rank PyTorch profiler (Kineto) traces on CPU with the gloo backend.

Usage: python tests/data/comm/make_gloo_traces.py OUT_DIR [STEPS] [--gzip]

Each rank runs ProfilerStep-annotated iterations of a small matmul (compute) followed by
all_reduce calls of several sizes (communication) and writes ``rank<r>.json`` (or ``.json.gz``).
Rank 1 sleeps a little before its collectives so that rank 0 waits (cross-rank skew).
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import time


def _worker(rank: int, world: int, out_dir: str, steps: int, compress: bool, port: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    a = torch.randn(128, 128)
    sizes = (1 << 10, 1 << 14, 1 << 18)  # elements of float32: 4 KiB, 64 KiB, 1 MiB
    tensors = [torch.ones(n) for n in sizes]
    sched = schedule(wait=0, warmup=1, active=steps, repeat=1)
    path = os.path.join(out_dir, f"rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True) as prof:
        for _ in range(steps + 1):
            for _ in range(4):
                a = torch.tanh(a @ a) * 0.5
            if rank == 1:
                time.sleep(0.002)
            for t in tensors:
                dist.all_reduce(t)
            prof.step()
    prof.export_chrome_trace(path)
    dist.barrier()
    dist.destroy_process_group()
    if compress:
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)


def main() -> None:
    import torch.multiprocessing as mp

    out_dir = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 3
    compress = "--gzip" in sys.argv
    os.makedirs(out_dir, exist_ok=True)
    port = 29500 + (os.getpid() % 2000)
    mp.spawn(_worker, args=(2, out_dir, steps, compress, port), nprocs=2, join=True)


if __name__ == "__main__":
    main()
