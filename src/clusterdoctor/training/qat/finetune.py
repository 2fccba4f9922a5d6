"""The QAT fine-tune loop, with the design's weight-gradient rescaling as an option.

:func:`qat_finetune` trains a fake-quantized model (``quantize_model``) with Adam on mini-batches and
records what the optimizer was given: the norm of the weight gradients at every step. With
``rescale=True`` it first attaches :func:`~clusterdoctor.training.qat.grad_scale.attach_weight_grad_rescaling`
(weight gradient x ``s_act/s_weight``, clipped to ``±grad_clip_max``) and removes it at the end, so the
same call measures the loop with and without the rescaling (``bench/qat_rescale.py``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clusterdoctor.training.qat.grad_scale import DEFAULT_GRAD_CLIP_MAX, attach_weight_grad_rescaling

__all__ = ["qat_finetune"]


def qat_finetune(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    lr: float,
    seed: int = 0,
    batch: int = 64,
    rescale: bool = False,
    grad_clip_max: float = DEFAULT_GRAD_CLIP_MAX,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
) -> dict[str, Any]:
    """Fine-tune ``model`` in place on ``(x, y)``; returns the steps taken and the weight-gradient norms
    the optimizer saw (mean, median, max), and with ``rescale`` the mean ratio and clipped share."""
    if epochs < 0 or batch < 1 or lr <= 0:
        raise ValueError("need epochs >= 0, batch >= 1 and lr > 0")
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    att = attach_weight_grad_rescaling(model, grad_clip_max) if rescale else None
    weights = [m.weight for m in model.modules() if isinstance(getattr(m, "weight", None), nn.Parameter)]
    norms: list[float] = []
    ratios: list[float] = []
    clipped: list[float] = []
    model.train()
    try:
        for _ in range(epochs):
            perm = torch.randperm(x.shape[0], generator=g)
            for i in range(0, x.shape[0], batch):
                idx = perm[i : i + batch]
                opt.zero_grad()
                loss_fn(model(x[idx]), y[idx]).backward()
                norms.append(
                    float(torch.stack([w.grad.norm() for w in weights if w.grad is not None]).norm())
                )
                if att is not None and att.factors:
                    ratios.append(statistics.fmean(att.factors.values()))
                    clipped.append(statistics.fmean(att.clipped_share.values()))
                opt.step()
    finally:
        if att is not None:
            att.remove()
        model.eval()
    out: dict[str, Any] = {
        "steps": len(norms),
        "grad_norm_mean": statistics.fmean(norms) if norms else 0.0,
        "grad_norm_median": statistics.median(norms) if norms else 0.0,
        "grad_norm_max": max(norms, default=0.0),
        "rescale": rescale,
    }
    if att is not None:
        out["ratio_mean"] = statistics.fmean(ratios) if ratios else 1.0
        out["clipped_share_mean"] = statistics.fmean(clipped) if clipped else 0.0
        out["layers"] = list(att.scaled)
        out["skipped"] = dict(att.skipped)
    return out
