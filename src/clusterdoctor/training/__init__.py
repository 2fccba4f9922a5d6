"""PyTorch-side remedies: NUMA-aware data loading and gradient synchronisation hooks.

Needs the ``training`` extra (torch). Importing this package does not import torch; the names below
are loaded on first use::

    from clusterdoctor.training import numa_worker_init_fn, sync
    stats = sync.install(ddp_model, scheme="int8")
    from clusterdoctor.training import watch     # the fail-slow probe: w = watch.install(model); w.step()

Subpackages (``sync``, ``qat``) are ordinary submodules; ``import clusterdoctor.training.qat`` works.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["NumaDataLoader", "numa_worker_init_fn", "plan_worker_cpus", "sync"]

_LAZY = {
    "numa_worker_init_fn": ("clusterdoctor.training.dataloader", "numa_worker_init_fn"),
    "NumaDataLoader": ("clusterdoctor.training.dataloader", "NumaDataLoader"),
    "plan_worker_cpus": ("clusterdoctor.training.dataloader", "plan_worker_cpus"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    if name == "sync":
        return importlib.import_module("clusterdoctor.training.sync")
    raise AttributeError(f"module 'clusterdoctor.training' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
