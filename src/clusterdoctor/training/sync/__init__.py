"""Gradient synchronisation for DDP as communication hooks: two lines in a training script.

::

    from clusterdoctor.training import sync
    stats = sync.install(ddp_model, scheme="int8")      # after DistributedDataParallel(...)
    ...
    print(stats.as_dict())                               # bytes, ratio, error, compress time

Schemes: ``allreduce`` (one all-reduce per bucket, equal to plain DDP), ``sharded`` (buckets cut
into ``shard_elements`` shards), ``fp16``/``bf16`` (cast), ``int8`` (per-shard scale),
``topk`` (packed indices), ``powersgd`` (torch's PowerSGD hook), ``adaptive`` (hierarchical: reduce
inside a node, compress across nodes only where the measured link makes it pay). Compressing
schemes keep error feedback per bucket (``error_feedback=True``) and run ``warmup_steps``
uncompressed steps first; shards under ``min_compress_elements`` are never compressed.

Importing this module does not import torch; :func:`install` does.
"""

from __future__ import annotations

from typing import Any

from clusterdoctor.training.sync.config import SCHEMES, SyncConfig
from clusterdoctor.training.sync.stats import SyncStats

__all__ = ["SCHEMES", "SyncConfig", "SyncStats", "install", "load_state_dict", "state_dict"]

_ATTR = "_clusterdoctor_sync"

FSDP_MESSAGE = (
    "clusterdoctor sync installs DDP communication hooks; FSDP has none to install. "
    "For FSDP2 (fully_shard) use MixedPrecisionPolicy(reduce_dtype=torch.bfloat16) to reduce gradients "
    "in low precision, or set_custom_reduce_scatter()/set_all_reduce_hook() for a custom transport; "
    "for FSDP1 use model.register_comm_hook() with torch.distributed.algorithms._comm_hooks "
    "(fp16/bf16 hooks). Or wrap the model in DistributedDataParallel to use these schemes."
)


def install(ddp_model: Any, scheme: str = "allreduce", **options: Any) -> SyncStats:
    """Register the sync hook for ``scheme`` on a ``DistributedDataParallel`` model; return its stats.

    Call it on every rank with the same arguments, before the first backward. Options are the
    fields of :class:`SyncConfig`: ``shard_elements`` (2**18), ``error_feedback`` (True),
    ``warmup_steps`` (10), ``min_compress_elements`` (1024), ``topk_ratio`` (0.01),
    ``powersgd_rank`` (2), ``hierarchical`` (False), ``ranks_per_node`` (None: group ranks by
    hostname; set it to emulate nodes on one machine), ``adaptive_codec`` ("int8"),
    ``link_bandwidth`` ({"inter": bytes/s} overrides the measurement, reported as simulated),
    ``margin`` (0.1), ``probe_elements`` (2**20).

    Ranks given different configurations fail at the first step with a message naming the
    differing options. FSDP models are refused with a message saying what to use instead.
    """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from clusterdoctor.training.sync.hook import SyncHook, ddp_hook

    if _is_fsdp(ddp_model):
        raise TypeError(FSDP_MESSAGE)
    if not isinstance(ddp_model, DistributedDataParallel):
        raise TypeError(
            f"sync.install() needs a torch.nn.parallel.DistributedDataParallel model, got {type(ddp_model).__name__}"
        )
    if getattr(ddp_model, _ATTR, None) is not None:
        raise RuntimeError(
            "a clusterdoctor sync hook is already installed on this model (DDP allows one hook)"
        )
    cfg = SyncConfig(scheme=scheme, **options)
    stats = SyncStats(
        scheme=scheme,
        rank=dist.get_rank(ddp_model.process_group),
        world_size=dist.get_world_size(ddp_model.process_group),
    )
    hook = SyncHook(ddp_model, cfg, stats)
    ddp_model.register_comm_hook(hook, ddp_hook)
    setattr(ddp_model, _ATTR, hook)
    return stats


def _hook_of(ddp_model: Any) -> Any:
    hook = getattr(ddp_model, _ATTR, None)
    if hook is None:
        raise ValueError("no clusterdoctor sync hook is installed on this model (call sync.install first)")
    return hook


def state_dict(ddp_model: Any) -> dict[str, Any]:
    """The hook's checkpointable state: step, error-feedback residuals per bucket, PowerSGD state."""
    return _hook_of(ddp_model).state_dict()


def load_state_dict(ddp_model: Any, state: dict[str, Any]) -> None:
    """Restore what :func:`state_dict` returned (on a model with the same scheme installed)."""
    _hook_of(ddp_model).load_state_dict(state)


def _is_fsdp(model: Any) -> bool:
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # pragma: no cover - torch without distributed
        return False
    classes: list[type] = [FullyShardedDataParallel]
    try:
        from torch.distributed.fsdp import FSDPModule

        classes.append(FSDPModule)
    except ImportError:  # pragma: no cover - torch < 2.6
        pass
    return isinstance(model, tuple(classes))
