"""Worker for make_torchrun_logs.sh: a 2-rank gloo job (CPU) in which rank 1 fails to take part.

Usage (through torchrun): torchrun --standalone --nproc-per-node 2 torchrun_hang_worker.py MODE
MODE ``stuck_rank``: both ranks join the process group, rank 1 then sleeps instead of calling the first
all_reduce, so rank 0's all_reduce times out. MODE ``late_rank``: rank 1 sleeps before
``init_process_group``, so rank 0 times out while the process group is being created.
The process-group timeout is 5 s so that a capture takes seconds, not the default 30 minutes.
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

mode = sys.argv[1]
rank = int(os.environ["RANK"])
if mode == "late_rank" and rank == 1:
    time.sleep(60)  # never arrives at init_process_group within the timeout
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
print(f"rank {rank}: process group ready", flush=True)
t = torch.ones(1024)
if mode == "stuck_rank" and rank == 1:
    time.sleep(60)  # joined, but never calls the first all_reduce
dist.all_reduce(t)
print(f"rank {rank}: all_reduce done", flush=True)
dist.destroy_process_group()
