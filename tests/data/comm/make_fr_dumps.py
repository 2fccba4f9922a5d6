"""Capture real Flight Recorder dumps (pickle and JSON) of a 2-rank gloo job where rank 0 calls one
extra all_reduce that rank 1 never joins (the PyTorch tutorial's hang scenario, on CPU).

Usage: TORCH_FR_BUFFER_SIZE=100 python tests/data/comm/make_fr_dumps.py OUT_DIR
Writes ``fr_trace_rank_<r>.pkl`` and ``fr_trace_rank_<r>.json`` for r in 0, 1.
"""

from __future__ import annotations

import os
import sys
import time


def _worker(rank: int, out_dir: str, port: int) -> None:
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    t = torch.ones(3, 4)
    for _ in range(3):
        dist.all_reduce(t)
    dist.broadcast(t, src=0)
    dist.barrier()
    if rank == 0:
        work = dist.all_reduce(t, async_op=True)  # rank 1 never calls this one
        time.sleep(1.0)
        del work
    else:
        time.sleep(1.0)
    with open(os.path.join(out_dir, f"fr_trace_rank_{rank}.pkl"), "wb") as f:
        f.write(_dump_fr_trace(includeStackTraces=False))
    with open(os.path.join(out_dir, f"fr_trace_rank_{rank}.json"), "wb") as f:
        f.write(_dump_fr_trace_json())
    os._exit(0)  # rank 0 still has a pending collective: do not wait for it


def main() -> None:
    import torch.multiprocessing as mp

    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "100")
    mp.spawn(_worker, args=(out_dir, 29600 + os.getpid() % 1000), nprocs=2, join=True)


if __name__ == "__main__":
    main()
