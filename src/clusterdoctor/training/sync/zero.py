"""Sharded data parallelism (ZeRO-1/2 style): each rank reduces, and steps, only the shard it owns.

Plain DDP all-reduces every gradient: each rank sends ``2(n-1)/n * S`` bytes per step and then runs
the whole optimizer on every rank. :class:`ShardedOptimizer` replaces both, without DDP:

1. after ``backward()``, the gradients (one flat buffer, the parameters' ``.grad`` are views of it)
   are **reduce-scattered**: each rank receives the sum of its own contiguous shard only, sending
   ``(n-1)/n * S`` bytes (half of an all-reduce);
2. the wrapped optimizer steps **only that shard** (its state — momentum, Adam moments — is ``1/n``
   of the model's: the memory saving of ZeRO-1/2);
3. the updated shards are **all-gathered** back into every rank's parameters, ``(n-1)/n * S'`` bytes,
   with ``S'`` the parameters in ``gather_dtype`` (default their own dtype).

What it saves, honestly: in the parameters' own precision the two halves add up to exactly the
all-reduce's ``2(n-1)/n * S`` — sharding moves the same bytes, in two collectives instead of one. It
sends fewer bytes only when the parameters travel in a lower precision than the gradients
(``gather_dtype=torch.bfloat16``: 25% fewer bytes than an fp32 all-reduce; the fp32 master shard stays
on its owner, so nothing is lost across steps), and it always saves optimizer memory and optimizer
compute (``1/n`` each). ``bench/sync_digits.py`` measures all three against DDP at equal accuracy.

Shard lengths are padded to a multiple of :data:`ALIGN_ELEMENTS` (64 elements: 128 bytes in bf16, a
multiple of the 16-byte alignment Tensor Cores and vectorised NCCL kernels want), so every rank's
shard starts aligned and all shards have the same length (reduce-scatter needs equal chunks).

Importing this module imports torch (it is only imported by users of the class).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist

from clusterdoctor.training.sync.stats import gather_bytes

__all__ = ["ALIGN_ELEMENTS", "ShardedOptimizer", "shard_layout"]

ALIGN_ELEMENTS = 64


def shard_layout(numel: int, world_size: int, align: int = ALIGN_ELEMENTS) -> tuple[int, int]:
    """(padded total, shard length): the flat buffer of ``numel`` elements padded so that it splits
    into ``world_size`` equal shards, each a multiple of ``align`` elements."""
    if numel < 0 or world_size < 1 or align < 1:
        raise ValueError("numel >= 0, world_size >= 1 and align >= 1")
    shard = -(-numel // world_size)
    shard = -(-shard // align) * align
    return shard * world_size, shard


class ShardedOptimizer:
    """Reduce-scatter gradients, step the own shard, all-gather parameters (see the module doc).

    ::

        model = Net()                                   # not wrapped in DistributedDataParallel
        opt = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-3)
        loss.backward(); opt.step(); opt.zero_grad()

    Every rank must start from the same parameters (``broadcast=True`` broadcasts rank 0's at
    construction). All parameters must share one dtype and device. ``stats()`` gives the bytes this
    rank sent (ring model, as :mod:`clusterdoctor.training.sync.stats`), the collectives issued, and
    the optimizer-state elements it holds.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        optimizer_class: type[torch.optim.Optimizer],
        *,
        process_group: Any = None,
        gather_dtype: torch.dtype | None = None,
        align: int = ALIGN_ELEMENTS,
        broadcast: bool = True,
        **optimizer_kwargs: Any,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("no parameter requires a gradient")
        dtypes = {p.dtype for p in self.params}
        devices = {p.device for p in self.params}
        if len(dtypes) != 1 or len(devices) != 1:
            raise ValueError(f"all parameters must share one dtype and device (got {dtypes}, {devices})")
        self.group = process_group
        self.world = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        dtype, device = dtypes.pop(), devices.pop()
        self.gather_dtype = gather_dtype or dtype
        self.numel = sum(p.numel() for p in self.params)
        self.padded, self.shard_len = shard_layout(self.numel, self.world, align)
        self.flat = torch.zeros(self.padded, dtype=dtype, device=device)
        self.flat_grad = torch.zeros(self.padded, dtype=dtype, device=device)
        off = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                self.flat[off : off + n].copy_(p.reshape(-1))
                p.data = self.flat[off : off + n].view_as(p)
                p.grad = self.flat_grad[off : off + n].view_as(p)
                off += n
        if broadcast and self.world > 1:
            dist.broadcast(self.flat, src=dist.get_global_rank(process_group, 0) if process_group else 0,
                           group=process_group)  # fmt: skip
        lo = self.rank * self.shard_len
        # the fp32 master copy of the own shard: what the optimizer steps (kept across steps, so a
        # low-precision gather loses nothing)
        self.master = torch.nn.Parameter(self.flat[lo : lo + self.shard_len].detach().clone().float())
        self.master.grad = torch.zeros_like(self.master)
        self.optimizer = optimizer_class([self.master], **optimizer_kwargs)
        self._grad_shard = torch.zeros(self.shard_len, dtype=dtype, device=device)
        self._gather_in = torch.zeros(self.shard_len, dtype=self.gather_dtype, device=device)
        self._gather_out = torch.zeros(self.padded, dtype=self.gather_dtype, device=device)
        self.bytes_sent = 0.0
        self.collectives = 0
        self.steps = 0

    # -- the step ---------------------------------------------------------------------------------
    def step(self) -> None:
        """Reduce-scatter (average) the gradients, step the own shard, all-gather the parameters."""
        self._relink_grads()
        _reduce_scatter(self._grad_shard, self.flat_grad, self.group)
        self._grad_shard.div_(self.world)
        self.master.grad.copy_(self._grad_shard)
        self.optimizer.step()
        self._gather_in.copy_(self.master.detach())
        _all_gather(self._gather_out, self._gather_in, self.group)
        with torch.no_grad():
            self.flat.copy_(self._gather_out)
            lo = self.rank * self.shard_len
            self.flat[lo : lo + self.shard_len].copy_(self.master.detach())  # own shard at full precision
        elt = self.flat_grad.element_size()
        self.bytes_sent += gather_bytes(self.world, self.padded * elt)
        self.bytes_sent += gather_bytes(self.world, self.padded * self._gather_out.element_size())
        self.collectives += 2
        self.steps += 1

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zero the flat gradient buffer (the parameters' ``.grad`` stay views of it)."""
        del set_to_none  # a None .grad would detach it from the flat buffer
        self.flat_grad.zero_()
        self._relink_grads()

    def _relink_grads(self) -> None:
        """Autograd writes into ``p.grad`` in place while it is a view; if user code replaced it (set it
        to None, assigned a new tensor), copy it back into the flat buffer."""
        off = 0
        for p in self.params:
            n = p.numel()
            view = self.flat_grad[off : off + n].view_as(p)
            if p.grad is None:
                view.zero_()
                p.grad = view
            elif p.grad.data_ptr() != view.data_ptr():
                view.copy_(p.grad)
                p.grad = view
            off += n

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """This rank's shard: its fp32 master parameters and optimizer state (save one per rank)."""
        return {
            "format": "clusterdoctor.sync.zero/1",
            "rank": self.rank,
            "world_size": self.world,
            "shard_len": self.shard_len,
            "master": self.master.detach().clone(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if (state.get("world_size"), state.get("shard_len")) != (self.world, self.shard_len):
            raise ValueError(
                f"shard layout differs: saved for world {state.get('world_size')} shard {state.get('shard_len')}, "
                f"this is world {self.world} shard {self.shard_len}"
            )
        with torch.no_grad():
            self.master.copy_(state["master"])
        self.optimizer.load_state_dict(state["optimizer"])

    def stats(self) -> dict[str, Any]:
        """Bytes this rank sent (ring model), collectives issued, optimizer-state share."""
        return {
            "scheme": "zero",
            "world_size": self.world,
            "steps": self.steps,
            "bytes_sent": self.bytes_sent,
            "collectives": self.collectives,
            "numel": self.numel,
            "padded_numel": self.padded,
            "shard_numel": self.shard_len,
            "gather_dtype": str(self.gather_dtype).replace("torch.", ""),
            "optimizer_state_share": self.shard_len / max(1, self.padded),
        }


def _reduce_scatter(out: torch.Tensor, inp: torch.Tensor, group: Any) -> None:
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        fn(out, inp, group=group)


def _all_gather(out: torch.Tensor, inp: torch.Tensor, group: Any) -> None:
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        fn(out, inp, group=group)
