"""Worker side of tests/training/test_sync_hooks.py: real gloo process groups on 127.0.0.1.

Each case runs in every rank and saves what it observed to ``<outdir>/<case>.rank<r>.pt``; the test
process then compares ranks and references. Not a test module itself (no ``test_`` prefix).
"""

from __future__ import annotations

import faulthandler
import os
import socket
import traceback
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from clusterdoctor.training import sync

WORKER_TIMEOUT_S = 120
BUCKET_MB = 0.01  # ~2.6k floats per bucket, so the model spans several buckets


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 48), nn.Tanh(), nn.Linear(48, 4))


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(16, 32, generator=g), torch.randn(16, 4, generator=g)


def train(ddp: nn.Module, rank: int, steps: int, lr: float = 0.1, start: int = 0) -> list[float]:
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    losses = []
    for s in range(start, start + steps):
        x, y = batch(rank, s)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def params(model: nn.Module) -> list[torch.Tensor]:
    m = model.module if isinstance(model, DDP) else model
    return [p.detach().clone() for p in m.parameters()]


def ddp_of(model: nn.Module, bucket_cap_mb: float = BUCKET_MB) -> DDP:
    return DDP(model, bucket_cap_mb=bucket_cap_mb)


# -- cases ------------------------------------------------------------------------------------------
def case_parity(rank: int, world: int) -> dict[str, Any]:
    """Parameters after 4 SGD steps, plain DDP vs each uncompressed / compressed scheme."""
    steps = 4
    out: dict[str, Any] = {"plain": params(_trained(None, rank, steps, {}))}
    for name, scheme, opts in [
        ("allreduce", "allreduce", {}),
        ("sharded", "sharded", {"shard_elements": 1000}),
        ("adaptive_single_node", "adaptive", {"warmup_steps": 0}),
        ("fp16", "fp16", {"warmup_steps": 1, "shard_elements": 1000, "min_compress_elements": 64}),
        ("int8", "int8", {"warmup_steps": 1, "shard_elements": 1000, "min_compress_elements": 64}),
    ]:
        ddp = _trained(scheme, rank, steps, opts)
        out[name] = params(ddp)
        out[name + ".stats"] = ddp._clusterdoctor_sync.stats.as_dict()
    return out


def _trained(scheme: str | None, rank: int, steps: int, opts: dict[str, Any]) -> DDP:
    ddp = ddp_of(make_model())
    if scheme is not None:
        sync.install(ddp, scheme=scheme, **opts)
    train(ddp, rank, steps)
    return ddp


EF_OPTS = {"warmup_steps": 1, "shard_elements": 700, "min_compress_elements": 64, "topk_ratio": 0.05}


def fixed_param_steps(ddp: DDP, rank: int, world: int, start: int, n: int, acc: dict[str, Any]) -> None:
    """Backward passes with the parameters held fixed; accumulate what DDP delivered (``out``) and
    the true mean of the ranks' local gradients (``true``), both flat in parameter order."""
    ref = ddp.module
    for s in range(start, start + n):
        x, y = batch(rank, s)
        ddp.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        out = torch.cat([p.grad.reshape(-1) for p in ref.parameters()])
        local = torch.autograd.grad(nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        true = torch.cat([g.reshape(-1) for g in local])
        dist.all_reduce(true)
        true /= world
        acc["out"] = acc.get("out", 0) + out
        acc["true"] = acc.get("true", 0) + true


def case_error_feedback(rank: int, world: int) -> dict[str, Any]:
    """Per codec: sums of delivered and true gradients over 5 steps, and the final hook state."""
    out: dict[str, Any] = {}
    for scheme in ("int8", "fp16", "topk"):
        ddp = ddp_of(make_model())
        sync.install(ddp, scheme=scheme, **EF_OPTS)
        acc: dict[str, Any] = {}
        fixed_param_steps(ddp, rank, world, 0, 2, acc)
        allocs_after_2 = ddp._clusterdoctor_sync.stats.staging_allocations
        fixed_param_steps(ddp, rank, world, 2, 3, acc)
        stats = ddp._clusterdoctor_sync.stats
        out[scheme] = {
            **acc,
            "state": sync.state_dict(ddp),
            "stats": stats.as_dict(),
            "prometheus": stats.prometheus_text(),
            "allocs_after_2": allocs_after_2,
            "numels": [p.numel() for p in ddp.module.parameters()],
        }
    return out


def case_state_dict(rank: int, world: int, path: str) -> dict[str, Any]:
    """int8: 3 steps, save (torch.save), new DDP + hook, load, 3 more steps; and the same without
    loading. PowerSGD: its state survives the round trip."""
    out: dict[str, Any] = {}
    acc: dict[str, Any] = {}
    first = ddp_of(make_model())
    sync.install(first, scheme="int8", **EF_OPTS)
    fixed_param_steps(first, rank, world, 0, 3, acc)
    f = f"{path}.int8.rank{rank}"
    torch.save(sync.state_dict(first), f)
    saved = torch.load(f, weights_only=False)
    resumed = ddp_of(make_model())
    sync.install(resumed, scheme="int8", **EF_OPTS)
    sync.load_state_dict(resumed, saved)
    reloaded = sync.state_dict(resumed)
    acc_fresh = {k: v.clone() for k, v in acc.items()}
    fixed_param_steps(resumed, rank, world, 3, 3, acc)
    fresh = ddp_of(make_model())
    sync.install(fresh, scheme="int8", **EF_OPTS)
    fixed_param_steps(fresh, rank, world, 3, 3, acc_fresh)
    out["int8"] = {
        "saved": saved,
        "reloaded": reloaded,
        "resumed": {
            **acc,
            "state": sync.state_dict(resumed),
            "stats": resumed._clusterdoctor_sync.stats.as_dict(),
        },
        "fresh": {**acc_fresh, "state": sync.state_dict(fresh)},
        "numels": [p.numel() for p in first.module.parameters()],
    }
    psgd_opts = {"warmup_steps": 2, "powersgd_rank": 1}
    a = ddp_of(make_model())
    sync.install(a, scheme="powersgd", **psgd_opts)
    train(a, rank, 3)
    sd = sync.state_dict(a)
    torch.save(sd, f + ".psgd")
    b = ddp_of(make_model())
    sync.install(b, scheme="powersgd", **psgd_opts)
    sync.load_state_dict(b, torch.load(f + ".psgd", weights_only=False))
    train(b, rank, 2, start=3)
    hb = b._clusterdoctor_sync
    out["powersgd"] = {
        "saved_iter": sd["powersgd"]["iter"],
        "saved_errors": {k: v.clone() for k, v in sd["powersgd"]["error_dict"].items()},
        "resumed_iter": hb.powersgd_state.iter,
        "resumed_stats": hb.stats.as_dict(),
        "a_stats": a._clusterdoctor_sync.stats.as_dict(),
    }
    return out


def case_refusals(rank: int, world: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard

    try:  # FSDP1 cannot be built without an accelerator: an unbuilt instance is still an FSDP1 model
        sync.install(FullyShardedDataParallel.__new__(FullyShardedDataParallel), scheme="int8")
        out["fsdp1"] = None
    except TypeError as e:
        out["fsdp1"] = str(e)
    try:
        sync.install(fully_shard(make_model()), scheme="int8")
        out["fsdp2"] = None
    except TypeError as e:
        out["fsdp2"] = str(e)
    try:
        sync.install(make_model(), scheme="int8")
        out["plain_module"] = None
    except TypeError as e:
        out["plain_module"] = str(e)
    return out


def case_mismatch(rank: int, world: int) -> dict[str, Any]:
    ddp = ddp_of(make_model())
    scheme = "int8" if rank == 0 else "fp16"
    sync.install(ddp, scheme=scheme, warmup_steps=1)
    x, y = batch(rank, 0)
    try:
        nn.functional.mse_loss(ddp(x), y).backward()
        return {"error": None}
    except RuntimeError as e:
        return {"error": str(e)}


def case_hierarchical(rank: int, world: int) -> dict[str, Any]:
    """4 ranks as 2 emulated nodes: hierarchy without compression vs plain DDP; adaptive decisions."""
    steps = 3
    out: dict[str, Any] = {"plain": params(_trained(None, rank, steps, {}))}
    ddp = _trained(
        "sharded", rank, steps, {"hierarchical": True, "ranks_per_node": 2, "shard_elements": 1000}
    )
    out["hier"] = params(ddp)
    out["hier.stats"] = ddp._clusterdoctor_sync.stats.as_dict()
    common = {"ranks_per_node": 2, "warmup_steps": 1, "probe_elements": 4096, "min_compress_elements": 64}
    slow = _trained("adaptive", rank, steps, {**common, "link_bandwidth": {"inter": 1e6}})
    out["adaptive_slow"] = params(slow)
    out["adaptive_slow.stats"] = slow._clusterdoctor_sync.stats.as_dict()
    fast = _trained("adaptive", rank, steps, {**common, "link_bandwidth": {"inter": 1e15}})
    out["adaptive_fast"] = params(fast)
    out["adaptive_fast.stats"] = fast._clusterdoctor_sync.stats.as_dict()
    measured = _trained("adaptive", rank, steps, common)
    out["adaptive_measured.stats"] = measured._clusterdoctor_sync.stats.as_dict()
    i8 = _trained("int8", rank, steps, {"warmup_steps": 1, "min_compress_elements": 64})
    out["int8"] = params(i8)
    out["int8.stats"] = i8._clusterdoctor_sync.stats.as_dict()
    return out


def case_zero(rank: int, world: int) -> dict[str, Any]:
    """ShardedOptimizer (reduce-scatter, sharded SGD+momentum step, all-gather) vs plain DDP with the
    same optimizer; a bf16 gather; a state-dict round trip; what it counted."""
    from clusterdoctor.training.sync.zero import ShardedOptimizer

    steps = 4

    def run_zero(model: nn.Module, opt: ShardedOptimizer, start: int, n: int) -> None:
        for s in range(start, start + n):
            x, y = batch(rank, s)
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()

    ddp = ddp_of(make_model())
    dopt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        x, y = batch(rank, s)
        dopt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        dopt.step()
    out: dict[str, Any] = {"plain": params(ddp)}
    m = make_model()
    z = ShardedOptimizer(m.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
    run_zero(m, z, 0, steps)
    out["zero"] = params(m)
    out["zero.stats"] = z.stats()
    out["momentum_numel"] = int(z.optimizer.state[z.master]["momentum_buffer"].numel())
    mb = make_model()
    zb = ShardedOptimizer(mb.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9, gather_dtype=torch.bfloat16)
    run_zero(mb, zb, 0, steps)
    out["bf16"] = params(mb)
    out["bf16.stats"] = zb.stats()
    # resume: 2 steps, save, a new optimizer loads the shard state and the parameters, 2 more steps
    ma = make_model()
    za = ShardedOptimizer(ma.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
    run_zero(ma, za, 0, 2)
    saved = za.state_dict()
    mr = make_model()
    with torch.no_grad():
        for a, b in zip(mr.parameters(), ma.parameters()):
            a.copy_(b)
    zr = ShardedOptimizer(mr.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9, broadcast=False)
    zr.load_state_dict(saved)
    run_zero(mr, zr, 2, 2)
    out["resumed"] = params(mr)
    try:
        ShardedOptimizer(make_model().parameters(), torch.optim.SGD, lr=0.1, align=64).load_state_dict(
            {**saved, "shard_len": saved["shard_len"] + 64}
        )
        out["layout_refused"] = None
    except ValueError as e:
        out["layout_refused"] = str(e)
    return out


CASES = {
    "zero": case_zero,
    "parity": case_parity,
    "error_feedback": case_error_feedback,
    "state_dict": case_state_dict,
    "refusals": case_refusals,
    "mismatch": case_mismatch,
    "hierarchical": case_hierarchical,
}


def _worker(rank: int, world: int, port: int, outdir: str, cases: list[str]) -> None:
    faulthandler.dump_traceback_later(WORKER_TIMEOUT_S, exit=True)  # a hang fails with stacks, not forever
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        for name in cases:
            fn = CASES[name]
            try:
                if name == "state_dict":
                    res = fn(rank, world, os.path.join(outdir, "ckpt"))
                else:
                    res = fn(rank, world)
            except Exception:
                res = {"exception": traceback.format_exc()}
            torch.save(res, os.path.join(outdir, f"{name}.rank{rank}.pt"))
            dist.barrier()
    finally:
        dist.destroy_process_group()


def run(world: int, cases: list[str], outdir: str) -> list[dict[str, dict[str, Any]]]:
    """Run ``cases`` on ``world`` gloo ranks; return per rank {case: result}."""
    mp.start_processes(_worker, args=(world, free_port(), outdir, cases), nprocs=world, start_method="spawn")
    return [
        {c: torch.load(os.path.join(outdir, f"{c}.rank{r}.pt"), weights_only=False) for c in cases}
        for r in range(world)
    ]
