"""Placement policies, one module each. ``get_policy(name)`` imports the module lazily (numpy).

Names follow the FGD artifact's table (01-Random .. 06-FGD) plus ours: first-fit, tidal and
fgd-bf (FGD with a best-fit tie-break), fgd-cpu (FGD, CPU-only pods to GPU-busy nodes), hetero (heterogeneity-aware, Gavel/Sia throughputs),
defrag / defrag-cpu (FGD / FGD-CPU plus budgeted migration), pwr / pwr-fgd (PWR, CCGrid'25, alone
and with FGD), pwr-sleep (ours: PWR+FGD that also counts waking a sleeping node).
"""

from __future__ import annotations

import importlib

# name -> (module, class, label in the FGD table or None)
_REGISTRY: dict[str, tuple[str, str, str | None]] = {
    "random": ("clusterdoctor.sim.policies.random_fit", "RandomPolicy", "01-Random"),
    "dot-product": ("clusterdoctor.sim.policies.dot_product", "DotProductPolicy", "02-DotProd"),
    "gpu-clustering": (
        "clusterdoctor.sim.policies.gpu_clustering",
        "GpuClusteringPolicy",
        "03-GpuClustering",
    ),
    "gpu-packing": ("clusterdoctor.sim.policies.gpu_packing", "GpuPackingPolicy", "04-GpuPacking"),
    "best-fit": ("clusterdoctor.sim.policies.best_fit", "BestFitPolicy", "05-BestFit"),
    "fgd": ("clusterdoctor.sim.policies.fgd", "FGDPolicy", "06-FGD"),
    "first-fit": ("clusterdoctor.sim.policies.first_fit", "FirstFitPolicy", None),
    "tidal": ("clusterdoctor.sim.policies.tidal", "TidalPolicy", None),
    "fgd-bf": ("clusterdoctor.sim.policies.fgd_bf", "FGDBestFitPolicy", None),
    "fgd-cpu": ("clusterdoctor.sim.policies.fgd_cpu", "FGDCpuPolicy", None),
    "hetero": ("clusterdoctor.sim.policies.hetero", "HeteroPolicy", None),
    "defrag": ("clusterdoctor.sim.policies.defrag", "DefragPolicy", None),
    "defrag-cpu": ("clusterdoctor.sim.policies.defrag", "DefragCpuPolicy", None),
    "pwr": ("clusterdoctor.sim.policies.pwr", "PowerPolicy", None),
    "pwr-fgd": ("clusterdoctor.sim.policies.pwr", "PwrFgdPolicy", None),
    "pwr-sleep": ("clusterdoctor.sim.policies.pwr", "PwrSleepPolicy", None),
    "pwr-eff": ("clusterdoctor.sim.policies.pwr", "PwrEffPolicy", None),
}

POLICY_NAMES: tuple[str, ...] = tuple(_REGISTRY)

# The FGD paper's table labels for our policy names.
FGD_LABELS: dict[str, str] = {k: v[2] for k, v in _REGISTRY.items() if v[2]}


def get_policy(name: str, **kwargs):
    """A fresh policy object for ``name`` (see ``POLICY_NAMES``)."""
    from clusterdoctor.errors import UsageError

    key = name.strip().lower().replace("_", "-")
    aliases = {
        "bestfit": "best-fit",
        "firstfit": "first-fit",
        "dotprod": "dot-product",
        "packing": "gpu-packing",
        "gpupacking": "gpu-packing",
        "clustering": "gpu-clustering",
        "gpuclustering": "gpu-clustering",
    }
    key = aliases.get(key, key)
    if key not in _REGISTRY:
        raise UsageError(f"unknown policy {name!r} (choose from {', '.join(POLICY_NAMES)})")
    mod_name, cls_name, _ = _REGISTRY[key]
    cls = getattr(importlib.import_module(mod_name), cls_name)
    return cls(**kwargs)
