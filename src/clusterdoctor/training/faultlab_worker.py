"""One rank of the fault lab's training job: real DDP training on CPU (gloo) with the probe installed.

Run by :mod:`clusterdoctor.training.faultlab` (``python -m clusterdoctor.training.faultlab_worker``);
configured by the usual torch.distributed variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
LOCAL_RANK) and ``FAULTLAB_*`` variables. The model is a small MLP; the data loader runs in one
worker process (so a fault can slow the loader from outside) and does a little CPU work per batch.

With ``FAULTLAB_LAB=DIR`` the process runs one training run ("episode") after another: it waits
for ``DIR/go-<k>`` (a JSON object: steps, every, job, dir; optional ``wrap`` ddp/fsdp1/fsdp2,
``profile_dir`` for Kineto traces, ``fr_dir`` for Flight Recorder dumps), trains a fresh model with
a fresh probe writing to ``dir``, and rank 0 writes ``DIR/done-<k>``; ``DIR/stop`` ends it. Starting torch
takes ~10 s on a shared 2-core machine; episodes share that cost. Without it: one run from the
environment.
"""

from __future__ import annotations

import json
import os
import sys
import time

T0 = time.time()


def _env(name: str, default: str) -> str:
    return os.environ.get(f"FAULTLAB_{name}", default)


def _mark(what: str) -> None:
    if _env("TRACE", "0") == "1":
        print(f"faultlab {time.time() - T0:.2f} s: {what}", file=sys.stderr, flush=True)


def _wait_for(lab: str, k: int) -> dict | None:
    go, stop = os.path.join(lab, f"go-{k}"), os.path.join(lab, "stop")
    parent = os.getppid()
    while True:
        if os.path.exists(stop) or os.getppid() != parent:  # the lab ended, or its process died
            return None
        if os.path.exists(go):
            try:
                with open(go, encoding="utf-8") as f:
                    return json.load(f)
            except (OSError, ValueError):
                pass  # written right now: read it again
        time.sleep(0.02)


def main() -> int:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset

    from clusterdoctor.training import watch

    _mark("torch imported")
    torch.set_num_threads(1)
    width = int(_env("WIDTH", "256"))
    batch = int(_env("BATCH", "32"))
    loader_work = int(_env("LOADER_WORK", "64"))

    class Synthetic(Dataset):
        """Batches made with a little CPU work (as decoding/augmenting would)."""

        def __len__(self) -> int:
            return 1 << 30

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            g = torch.Generator().manual_seed(i)
            x = torch.randn(batch, width, generator=g)
            for _ in range(loader_work // 16):
                x = torch.tanh(x @ torch.ones(width, 1) / width + x)
            return x, torch.randint(0, 10, (batch,), generator=g)

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    _mark("initialised")
    loader = DataLoader(
        Synthetic(), batch_size=None, num_workers=1, prefetch_factor=2, persistent_workers=True
    )
    batches = iter(loader)
    lab = _env("LAB", "")
    k = 0
    while True:
        if lab:
            cfg = _wait_for(lab, k)
            if cfg is None:
                break
        else:
            cfg = {
                "steps": int(_env("STEPS", "100")),
                "every": int(_env("EVERY", "5")),
                "job": _env("JOB", "faultlab"),
                "dir": _env("DIR", "") or None,
                "port": None if _env("PORT", "none") == "none" else int(_env("PORT", "0")),
                "probe": _env("PROBE", "1") == "1",
            }
        dist.barrier()
        walls = _episode(cfg, batches, torch, dist, DDP, watch)
        dist.barrier()  # agree on the end (a rank that stops early would leave the others in a collective)
        if rank == 0:
            walls.sort()
            med = walls[len(walls) // 2] if walls else 0.0
            if lab:
                tmp = os.path.join(lab, f".done-{k}")
                with open(tmp, "w") as f:
                    json.dump({"median_step_s": med, "steps": len(walls)}, f)
                os.replace(tmp, os.path.join(lab, f"done-{k}"))
            if _env("REPORT", "0") == "1":
                print(f"median step {med * 1000:.2f} ms over {len(walls)} steps", file=sys.stderr)
        k += 1
        if not lab:
            break
    _mark("done")
    sys.stdout.flush()
    sys.stderr.flush()
    # skip the slow teardown of the loader worker and gloo (seconds on a loaded machine)
    os._exit(0)


def _episode(cfg: dict, batches, torch, dist, DDP, watch) -> list[float]:
    width = int(_env("WIDTH", "256"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width * 2),
        torch.nn.ReLU(),
        torch.nn.Linear(width * 2, width * 2),
        torch.nn.ReLU(),
        torch.nn.Linear(width * 2, 10),
    )
    ddp = _wrap(cfg.get("wrap", "ddp"), model, torch, DDP)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    w = None
    if cfg.get("probe", True):
        w = watch.install(
            ddp,
            job=cfg.get("job", "faultlab"),
            every=int(cfg.get("every", 5)),
            port=cfg["ports"][dist.get_rank()] if cfg.get("ports") else cfg.get("port"),
            jsonl_dir=cfg.get("dir"),
            exchange_timeout=float(cfg.get("exchange_timeout", 30)),
            link_every=int(cfg.get("link_every", 20)),
        )
    lossf = torch.nn.CrossEntropyLoss()
    walls = []
    steps = int(cfg["steps"])

    def source():
        while True:
            yield next(batches)

    it = w.loader(source()) if w is not None else source()
    prof = None
    if cfg.get("profile_dir"):  # a Kineto trace per rank, one ProfilerStep#N a step
        from torch.profiler import ProfilerActivity, profile, schedule

        # a schedule (record every step) is what makes the profiler write ProfilerStep#N annotations
        prof = profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=10**6))
        prof.__enter__()
    me = dist.get_rank()
    imb = cfg.get("imbalance") or {}
    factor = int(imb.get("factor", 1)) if imb.get("rank") == me else 1
    ckpt = cfg.get("ckpt") or {}
    ckpt_mine = ckpt.get("rank") == me
    t0 = time.perf_counter()
    for i, (x, y) in enumerate(it):
        if factor > 1:  # more work per batch on this rank (the same batch repeated)
            x, y = torch.cat([x] * factor), torch.cat([y] * factor)
        loss = lossf(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if ckpt_mine and i + 1 >= int(ckpt["after"]) and (i + 1) % int(ckpt["every"]) == 0:
            _checkpoint(ckpt, model, i + 1)
        if w is not None:
            w.step()
        if prof is not None:
            prof.step()
        t1 = time.perf_counter()
        walls.append(t1 - t0)  # the whole iteration, data included
        t0 = t1
        if i + 1 >= steps:
            break
    if w is not None:
        w.close()
    if prof is not None:
        prof.__exit__(None, None, None)
        os.makedirs(cfg["profile_dir"], exist_ok=True)
        prof.export_chrome_trace(os.path.join(cfg["profile_dir"], f"rank{dist.get_rank()}.pt.trace.json"))
    if cfg.get("fr_dir"):  # this rank's Flight Recorder buffer (TORCH_FR_BUFFER_SIZE set at start)
        _dump_flight_recorder(cfg["fr_dir"], dist.get_rank())
    return walls


def _checkpoint(ckpt: dict, model, step: int) -> None:
    """Write ``mb`` MiB (the model's weights, repeated) and fsync it: a real checkpoint's I/O."""
    os.makedirs(ckpt["dir"], exist_ok=True)
    blob = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
    need = int(ckpt["mb"]) << 20
    path = os.path.join(ckpt["dir"], f"ckpt-{step % 2}.bin")
    with open(path, "wb") as f:
        n = 0
        while n < need:
            f.write(blob[: need - n])
            n += min(len(blob), need - n)
        f.flush()
        os.fsync(f.fileno())


def _wrap(kind: str, model, torch, DDP):
    """The data-parallel wrapper of an episode: DDP (default), FSDP1 or FSDP2 (CPU, gloo)."""
    if kind == "ddp":
        return DDP(model, bucket_cap_mb=1)
    if kind == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel

        # FSDP1 refuses a machine without an accelerator unless told to shard on the CPU
        return FullyShardedDataParallel(model, device_id=torch.device("cpu"))
    if kind == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        return fully_shard(model)
    raise ValueError(f"unknown wrap {kind!r} (ddp, fsdp1, fsdp2)")


def _dump_flight_recorder(out_dir: str, rank: int) -> None:
    """Write ``fr_trace_rank_<rank>`` (pickle, as the NCCL watchdog and ``torchfrtrace`` name them)."""
    from torch._C._distributed_c10d import _dump_fr_trace

    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, f".fr_trace_rank_{rank}")
    with open(tmp, "wb") as f:
        f.write(_dump_fr_trace(includeStackTraces=False))
    os.replace(tmp, os.path.join(out_dir, f"fr_trace_rank_{rank}"))


if __name__ == "__main__":
    sys.exit(main())
