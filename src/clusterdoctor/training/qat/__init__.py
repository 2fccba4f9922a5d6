"""QAT health: per-layer drift of quantizer inputs, gated recalibration, gradient-scale repair,
mixed precision and the precision decision.

``from clusterdoctor.training.qat import DriftMonitor`` — see :mod:`.monitor`. Attributes are
loaded lazily so that light modules (``state``, ``render``, ``metrics``, ``thresholds``) can be
imported without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DriftMonitor": "clusterdoctor.training.qat.monitor",
    "quantize_model": "clusterdoctor.training.qat.fakequant",
    "QuantConv2d": "clusterdoctor.training.qat.fakequant",
    "QuantLinear": "clusterdoctor.training.qat.fakequant",
    "FP8FakeQuantize": "clusterdoctor.training.qat.mixed",
    "prepare_w4a8fp8": "clusterdoctor.training.qat.mixed",
    "scan_precision": "clusterdoctor.training.qat.mixed",
    "LSQFakeQuantize": "clusterdoctor.training.qat.grad_scale",
    "ScaleSync": "clusterdoctor.training.qat.grad_scale",
    "attach_weight_grad_rescaling": "clusterdoctor.training.qat.grad_scale",
    "qat_finetune": "clusterdoctor.training.qat.finetune",
    "compare_precisions": "clusterdoctor.training.qat.precision",
    "PrecisionTriggers": "clusterdoctor.training.qat.precision",
    "load_state": "clusterdoctor.training.qat.state",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
