"""Fake-quantized Linear/Conv2d layers for QAT, built on torch's own FakeQuantize.

torch.ao's eager ``prepare_qat`` quantizes a layer's *output*; these layers quantize their *input*
(the activation feeding the GEMM) and their weight, which is what INT4/FP8 kernels consume and
what the drift monitor watches. Formats:

* ``"int8"`` / ``"int4"`` activations: per-tensor affine ``FakeQuantize`` with the moving-average
  min/max observer (torch's default QAT activation observer, c = 0.01; reference §2).
* ``"int8"`` / ``"int4"`` weights: per-channel symmetric ``FakeQuantize`` (ModelOpt INT8_DEFAULT
  uses per-channel weights, reference §3).
* ``"fp8_e4m3"`` activations or weights: :class:`clusterdoctor.training.qat.mixed.FP8FakeQuantize`.

:func:`quantize_model` returns a copy of a float model with every Conv2d/Linear swapped.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization import (
    FakeQuantize,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
)

FORMATS = ("int8", "int4", "fp8_e4m3")


def int_activation_quantizer(bits: int = 8) -> FakeQuantize:
    """Per-tensor affine unsigned fake quantizer with a moving-average min/max observer."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be 2..8, got {bits}")
    return FakeQuantize(
        observer=MovingAverageMinMaxObserver,
        quant_min=0,
        quant_max=2**bits - 1,
        dtype=torch.quint8,
        qscheme=torch.per_tensor_affine,
    )


def int_weight_quantizer(bits: int = 8, ch_axis: int = 0) -> FakeQuantize:
    """Per-output-channel symmetric signed fake quantizer for weights."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be 2..8, got {bits}")
    return FakeQuantize(
        observer=MovingAveragePerChannelMinMaxObserver,
        quant_min=-(2 ** (bits - 1)),
        quant_max=2 ** (bits - 1) - 1,
        dtype=torch.qint8,
        qscheme=torch.per_channel_symmetric,
        ch_axis=ch_axis,
        averaging_constant=1.0,  # weights: follow the current tensor
    )


def make_quantizer(fmt: str | None, role: str) -> nn.Module | None:
    """A fake quantizer for ``fmt`` (``int8``, ``int4``, ``fp8_e4m3`` or None) as ``input`` or ``weight``."""
    if fmt is None:
        return None
    if fmt == "fp8_e4m3":
        from clusterdoctor.training.qat.mixed import FP8FakeQuantize

        return FP8FakeQuantize(dynamic=(role == "weight"))
    if fmt in ("int8", "int4"):
        bits = 8 if fmt == "int8" else 4
        return int_activation_quantizer(bits) if role == "input" else int_weight_quantizer(bits)
    raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")


class QuantLinear(nn.Linear):
    """``nn.Linear`` whose input and weight pass through fake quantizers (either may be None)."""

    input_quantizer: nn.Module | None
    weight_quantizer: nn.Module | None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_quantizer is not None:
            x = self.input_quantizer(x)
        w = self.weight if self.weight_quantizer is None else self.weight_quantizer(self.weight)
        return F.linear(x, w, self.bias)


class QuantConv2d(nn.Conv2d):
    """``nn.Conv2d`` whose input and weight pass through fake quantizers (either may be None)."""

    input_quantizer: nn.Module | None
    weight_quantizer: nn.Module | None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_quantizer is not None:
            x = self.input_quantizer(x)
        w = self.weight if self.weight_quantizer is None else self.weight_quantizer(self.weight)
        return self._conv_forward(x, w, self.bias)


def _swap(mod: nn.Module, act: str | None, weight: str | None) -> nn.Module:
    cls = QuantLinear if isinstance(mod, nn.Linear) else QuantConv2d
    new = copy.copy(mod)
    new.__class__ = cls
    new._modules = dict(mod._modules)
    new.add_module("input_quantizer", make_quantizer(act, "input"))
    new.add_module("weight_quantizer", make_quantizer(weight, "weight"))
    return new


def quantize_model(
    model: nn.Module,
    weight: str | None = "int8",
    act: str | None = "int8",
    skip: Iterable[str] = (),
) -> nn.Module:
    """A deep copy of ``model`` with every ``nn.Linear``/``nn.Conv2d`` (except ``skip`` names) fake-quantized."""
    for fmt in (weight, act):
        if fmt is not None and fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    out = copy.deepcopy(model)
    skipped = set(skip)
    targets = [
        (name, m)
        for name, m in out.named_modules()
        if name not in skipped and type(m) in (nn.Linear, nn.Conv2d)
    ]
    for name, m in targets:
        parent_name, _, child = name.rpartition(".")
        parent = out.get_submodule(parent_name) if parent_name else out
        setattr(parent, child, _swap(m, act, weight))
    return out


def quantizers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Every fake-quantizer module in ``model`` (torch FakeQuantizeBase or ours), by name."""
    from torch.ao.quantization import FakeQuantizeBase

    from clusterdoctor.training.qat.mixed import FP8FakeQuantize

    return [(n, m) for n, m in model.named_modules() if isinstance(m, (FakeQuantizeBase, FP8FakeQuantize))]


def set_observers(model: nn.Module, enabled: bool) -> None:
    """Enable or freeze every quantizer's observer (freezing is the usual late-QAT step, §2)."""
    for _, q in quantizers(model):
        q.observer_enabled[0] = 1 if enabled else 0
