"""Gradient-scale repair for QAT fine-tuning.

* **LSQ gradient scaling** (Esser et al., ICLR 2020, arXiv 1902.08153; reference §5): the gradient
  of a learnable step size is multiplied by ``g = 1/sqrt(N·Q_P)`` (N = weights in the layer for a
  weight quantizer, features per sample for an activation quantizer) so that its relative update
  matches the weights'. torchao's range learning applies no such factor (reference §1);
  :func:`attach_lsq_grad_scaling` adds it to any quantizer with a learnable ``scale`` parameter,
  and :class:`LSQFakeQuantize` is an LSQ quantizer with it built in.
* **Weight-gradient rescaling** (the design's "gradient rescale"): a fake-quantized layer's weight
  gradient is multiplied by the ratio of its activation step size to its weight step size (per output
  channel when weights are quantized per channel) and the *rescaled gradient* is clipped elementwise to
  ``±grad_clip_max`` (default 2.0) (:func:`attach_weight_grad_rescaling`). It is wired into the QAT
  fine-tune path (``qat_finetune(rescale=True)``, :mod:`clusterdoctor.training.qat.finetune`) and measured
  by ``bench/qat_rescale.py``
  with and without it: accuracy and gradient norms (bench/RESULTS-qat.md).
* **Scale synchronisation** across data-parallel ranks every N steps (default 5): step sizes and
  zero points are averaged, FP8 amax values and observer ranges take the max/min over ranks
  (TE's ``reduce_amax`` takes the max across the group, reference §3) (:class:`ScaleSync`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

#: Default clip of the activation/weight scale ratio (issue 6).
DEFAULT_GRAD_CLIP_MAX = 2.0
#: Default steps between scale synchronisations (issue 6).
DEFAULT_SYNC_EVERY = 5


def lsq_grad_factor(n: int, qp: int) -> float:
    """LSQ step-size gradient scale ``1/sqrt(N·Q_P)`` (raises ValueError for N or Q_P < 1)."""
    if n < 1 or qp < 1:
        raise ValueError(f"need N >= 1 and Q_P >= 1, got {n}, {qp}")
    return 1.0 / math.sqrt(n * qp)


def grad_scale(x: torch.Tensor, g: float) -> torch.Tensor:
    """Identity forward, gradient multiplied by ``g`` (LSQ reference code ``grad_scale``)."""
    y = x * g
    return (x - y).detach() + y


def round_pass(x: torch.Tensor) -> torch.Tensor:
    """Round forward, straight-through backward."""
    return (x.round() - x).detach() + x


class LSQFakeQuantize(nn.Module):
    """LSQ fake quantizer with a learnable per-tensor step size and built-in gradient scaling.

    ``v̂ = round(clip(v/s, -Q_N, Q_P))·s`` with ``s`` initialised to ``2·mean|v|/sqrt(Q_P)`` on the
    first forward pass and its gradient scaled by ``1/sqrt(N·Q_P)``, N = ``v.numel()`` for
    weights and ``v[0].numel()`` (features per sample) for activations.
    """

    def __init__(self, bits: int = 8, signed: bool = True, role: str = "weight") -> None:
        super().__init__()
        if not 2 <= bits <= 16 or role not in ("weight", "activation"):
            raise ValueError("bits must be 2..16 and role 'weight' or 'activation'")
        self.bits, self.signed, self.role = bits, signed, role
        self.qn = 2 ** (bits - 1) if signed else 0
        self.qp = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
        self.scale = nn.Parameter(torch.tensor(1.0))
        self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

    def n_for(self, x: torch.Tensor) -> int:
        """N of the LSQ gradient scale for input ``x``."""
        if self.role == "weight" or x.dim() < 2:
            return max(x.numel(), 1)
        return max(x[0].numel(), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() == 0:
            return x
        if int(self.initialized) == 0:
            with torch.no_grad():
                init = 2 * x.detach().abs().mean() / math.sqrt(self.qp)
                self.scale.fill_(float(init) if float(init) > 0 else 1.0)
                self.initialized.fill_(1)
        s = grad_scale(self.scale, lsq_grad_factor(self.n_for(x), self.qp))
        return round_pass((x / s).clamp(-self.qn, self.qp)) * s


def _qp_of(m: nn.Module) -> int | None:
    qp = getattr(m, "qp", None) or getattr(m, "quant_max", None)
    if qp is None:
        return None
    try:
        return int(qp)
    except (TypeError, ValueError):
        return None


@dataclass
class Attached:
    """Hooks added to a model; :meth:`remove` takes them off."""

    handles: list[Any] = field(default_factory=list)
    scaled: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    factors: dict[str, float] = field(default_factory=dict)

    def remove(self) -> None:
        """Remove every hook."""
        for h in self.handles:
            h.remove()
        self.handles.clear()


def attach_lsq_grad_scaling(model: nn.Module, activation: Callable[[str], bool] | None = None) -> Attached:
    """Scale the gradient of every learnable ``scale`` parameter by ``1/sqrt(N·Q_P)``.

    N is read from the quantizer's input on each forward pass. Quantizers that already scale
    (ours, or torch's ``_LearnableFakeQuantize`` with ``use_grad_scaling``) are skipped and listed
    with the reason. ``activation(name)`` says whether a quantizer quantizes activations (then N
    is the features per sample); by default names containing "weight" are weight quantizers.
    """
    out = Attached()
    is_act = activation or (lambda name: "weight" not in name)
    for name, m in model.named_modules():
        scale = getattr(m, "scale", None)
        if not isinstance(scale, nn.Parameter):
            continue
        if isinstance(m, LSQFakeQuantize) or bool(getattr(m, "use_grad_scaling", False)):
            out.skipped[name] = "already applies LSQ gradient scaling"
            continue
        qp = _qp_of(m)
        if qp is None or qp < 1:
            out.skipped[name] = "no quant_max to take Q_P from"
            continue
        state: dict[str, float] = {}

        def pre(mod: nn.Module, args: tuple, _name: str = name, _qp: int = qp, _st: dict = state) -> None:
            x = args[0] if args else None
            if isinstance(x, torch.Tensor) and x.numel() > 0:
                n = x.numel() if not is_act(_name) or x.dim() < 2 else x[0].numel()
                _st["g"] = lsq_grad_factor(n, _qp)
                out.factors[_name] = _st["g"]

        def on_grad(g: torch.Tensor, _st: dict = state) -> torch.Tensor:
            return g * _st["g"] if "g" in _st else g

        out.handles.append(m.register_forward_pre_hook(pre))
        out.handles.append(scale.register_hook(on_grad))
        out.scaled.append(name)
    return out


def scale_ratio(
    act_scale: torch.Tensor, weight_scale: torch.Tensor, weight: torch.Tensor, ch_axis: int = 0
) -> torch.Tensor:
    """``s_act / s_weight`` shaped to broadcast over ``weight`` (per output channel when the weight
    quantizer is per-channel); 1 wherever a scale is zero, negative, NaN or infinite."""
    a = act_scale.detach().reshape(-1).to(weight.dtype)
    w = weight_scale.detach().reshape(-1).to(weight.dtype)
    if a.numel() != 1:
        raise ValueError("the activation scale must be per-tensor")
    ratio = a / w
    ok = torch.isfinite(ratio) & (ratio > 0) & (w > 0) & torch.isfinite(w)
    ratio = torch.where(ok, ratio, torch.ones_like(ratio))
    if ratio.numel() == 1:
        return ratio.reshape(())
    if ratio.numel() != weight.shape[ch_axis]:
        raise ValueError(f"{ratio.numel()} weight scales for {weight.shape[ch_axis]} channels")
    shape = [1] * weight.dim()
    shape[ch_axis] = ratio.numel()
    return ratio.reshape(shape)


def rescale_weight_grad(
    grad: torch.Tensor, ratio: torch.Tensor, grad_clip_max: float = DEFAULT_GRAD_CLIP_MAX
) -> torch.Tensor:
    """The weight gradient times the layer's activation/weight scale ratio, then clipped elementwise to
    ``[-grad_clip_max, grad_clip_max]`` (the clip bounds the *rescaled gradient*, as
    ``torch.nn.utils.clip_grad_value_`` does, not the ratio)."""
    if not grad_clip_max > 0:
        raise ValueError(f"grad_clip_max must be > 0, got {grad_clip_max}")
    return (grad * ratio).clamp(-grad_clip_max, grad_clip_max)


@dataclass
class Rescaled(Attached):
    """:class:`Attached` plus what the rescaling did on the last backward pass, per layer: the mean
    ratio, the gradient norm before and after, and the share of elements the clip cut."""

    norms_before: dict[str, float] = field(default_factory=dict)
    norms_after: dict[str, float] = field(default_factory=dict)
    clipped_share: dict[str, float] = field(default_factory=dict)


def attach_weight_grad_rescaling(model: nn.Module, grad_clip_max: float = DEFAULT_GRAD_CLIP_MAX) -> Rescaled:
    """On every fake-quantized layer (``input_quantizer`` and ``weight_quantizer`` with scales), multiply
    the **weight gradient** by ``s_act / s_weight`` (per output channel for a per-channel weight
    quantizer) and clip the rescaled gradient to ``±grad_clip_max`` (:func:`rescale_weight_grad`).
    Scales are read at backward time, so observers may keep moving. Layers without both scales are
    listed in ``skipped`` with the reason (an unquantized input, a quantizer without a scale)."""
    if not grad_clip_max > 0:
        raise ValueError(f"grad_clip_max must be > 0, got {grad_clip_max}")
    out = Rescaled()
    for name, layer in model.named_modules():
        aq, wq = getattr(layer, "input_quantizer", None), getattr(layer, "weight_quantizer", None)
        weight = getattr(layer, "weight", None)
        if aq is None and wq is None:
            continue
        a_s, w_s = getattr(aq, "scale", None), getattr(wq, "scale", None)
        if (
            not isinstance(weight, nn.Parameter)
            or not isinstance(a_s, torch.Tensor)
            or not isinstance(w_s, torch.Tensor)
        ):
            out.skipped[name] = "needs an activation scale and a weight scale (integer fake quantizers)"
            continue
        if a_s.numel() != 1:
            out.skipped[name] = "per-channel activation scale: ratio undefined"
            continue
        ch_axis = int(getattr(wq, "ch_axis", 0) or 0)

        def on_grad(
            g: torch.Tensor, _aq: nn.Module = aq, _wq: nn.Module = wq, _n: str = name, _ax: int = ch_axis
        ) -> torch.Tensor:
            r = scale_ratio(_aq.scale, _wq.scale, g, _ax)
            new = rescale_weight_grad(g, r, grad_clip_max)
            out.factors[_n] = float(r.mean())
            out.norms_before[_n] = float(g.norm())
            out.norms_after[_n] = float(new.norm())
            out.clipped_share[_n] = float(((g * r).abs() > grad_clip_max).float().mean())
            return new

        out.handles.append(weight.register_hook(on_grad))
        out.scaled.append(name)
    return out


class ScaleSync:
    """Average quantizer step sizes across data-parallel ranks every ``every`` steps.

    Call :meth:`step` once per optimizer step; it all-reduces on steps every, 2·every, ... and
    returns True when it did. Scales and zero points are averaged (zero points rounded), FP8
    ``amax`` and observer ``max_val`` take the max, observer ``min_val`` the min. Without an
    initialised process group (or with one rank) it does nothing and :attr:`reason` says why.
    """

    def __init__(self, model: nn.Module, every: int = DEFAULT_SYNC_EVERY, group: Any = None) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.model, self.every, self.group = model, every, group
        self.steps = 0
        self.syncs = 0
        self.reason = ""

    def _tensors(self) -> list[tuple[str, torch.Tensor, str]]:
        from clusterdoctor.training.qat.mixed import FP8FakeQuantize

        out: list[tuple[str, torch.Tensor, str]] = []
        for name, m in self.model.named_modules():
            scale = m._parameters.get("scale") if "scale" in m._parameters else m._buffers.get("scale")
            if isinstance(scale, torch.Tensor) and scale.is_floating_point():
                out.append((f"{name}.scale", scale, "avg"))
            zp = m._buffers.get("zero_point")
            if isinstance(zp, torch.Tensor):
                out.append((f"{name}.zero_point", zp, "avg_round"))
            if isinstance(m, FP8FakeQuantize):
                out.append((f"{name}.amax", m.amax, "max"))
            for attr, op in (("min_val", "min"), ("max_val", "max")):
                t = m._buffers.get(attr)
                if isinstance(t, torch.Tensor) and t.numel() > 0:
                    out.append((f"{name}.{attr}", t, op))
        return out

    def sync_now(self) -> bool:
        """All-reduce the quantizer state now; False (with :attr:`reason`) when not distributed."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            self.reason = "torch.distributed not initialised: nothing to synchronise"
            return False
        world = dist.get_world_size(self.group)
        if world < 2:
            self.reason = "one rank: nothing to synchronise"
            return False
        ops = {
            "avg": dist.ReduceOp.SUM,
            "avg_round": dist.ReduceOp.SUM,
            "max": dist.ReduceOp.MAX,
            "min": dist.ReduceOp.MIN,
        }
        with torch.no_grad():
            for _, t, kind in self._tensors():
                buf = t.detach().clone().to(torch.float64)
                finite = torch.isfinite(buf)
                if kind in ("max", "min"):
                    fill = -math.inf if kind == "max" else math.inf
                    buf = torch.where(finite, buf, torch.full_like(buf, fill))
                dist.all_reduce(buf, op=ops[kind], group=self.group)
                if kind == "avg":
                    buf /= world
                elif kind == "avg_round":
                    buf = (buf / world).round()
                if kind in ("max", "min"):
                    buf = torch.where(torch.isfinite(buf), buf, t.detach().to(buf.dtype))
                t.copy_(buf.to(t.dtype))
        self.syncs += 1
        self.reason = ""
        return True

    def step(self) -> bool:
        """Count one step; synchronise on every ``every``-th. Returns True when it synchronised."""
        self.steps += 1
        if self.steps % self.every:
            return False
        return self.sync_now()
