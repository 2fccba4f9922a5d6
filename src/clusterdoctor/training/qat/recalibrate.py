"""Set, recalibrate and restore activation quantizers, in place and reversibly.

Works on torch's ``FakeQuantize`` family (qparams computed by the quantizer's own observer with
``calculate_qparams``, so the affine/symmetric rules and eps floor of §2 of the reference apply)
and on :class:`~clusterdoctor.training.qat.mixed.FP8FakeQuantize` (amax). Every change goes through
:class:`UndoLog`, which keeps the state before the first change so :meth:`UndoLog.restore` puts
the model back exactly.

Recalibration on an unlabeled batch mirrors how the quantizers were calibrated in QAT: the range is
the mean over batches of each batch's min/max (what the moving-average observer converges to on
stationary data), measured with the recalibrated quantizers passing values through in float, so a
stale upstream range does not distort the ranges downstream.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Sequence

import torch
from torch import nn

from clusterdoctor.training.qat.mixed import E4M3_MAX, FP8FakeQuantize


def unsupported_reason(q: nn.Module) -> str | None:
    """Why the range of ``q`` cannot be set, or None when it can."""
    if isinstance(q, FP8FakeQuantize):
        return "dynamic FP8 quantizer (scale follows each tensor)" if q.dynamic else None
    if not (hasattr(q, "scale") and hasattr(q, "zero_point") and hasattr(q, "quant_min")):
        return f"{type(q).__name__} has no scale/zero_point to set"
    scale = q.scale
    if isinstance(scale, torch.Tensor) and scale.numel() > 1:
        return "per-channel activation quantizer: range setting not supported"
    obs = getattr(q, "activation_post_process", None)
    if obs is None or not hasattr(obs, "calculate_qparams") or not hasattr(obs, "min_val"):
        return f"{type(q).__name__} has no min/max observer to compute qparams with"
    return None


def representable_range(q: nn.Module) -> tuple[float, float] | None:
    """The float range ``q`` represents without clipping, or None when unknown or not yet set."""
    if isinstance(q, FP8FakeQuantize):
        if q.dynamic:
            return None
        a = float(q.amax)
        return (-a, a) if math.isfinite(a) and a > 0 else None
    try:
        scale = q.scale.detach().reshape(-1).double()
        zp = q.zero_point.detach().reshape(-1).double()
        qmin, qmax = float(q.quant_min), float(q.quant_max)
    except (AttributeError, RuntimeError):
        return None
    lo = float(((qmin - zp) * scale).min())
    hi = float(((qmax - zp) * scale).max())
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return None
    return lo, hi


def set_range(q: nn.Module, lo: float, hi: float) -> None:
    """Set ``q``'s qparams from the float range [lo, hi] (raises ValueError when unsupported)."""
    why = unsupported_reason(q)
    if why is not None:
        raise ValueError(why)
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"bad range [{lo}, {hi}]")
    with torch.no_grad():
        if isinstance(q, FP8FakeQuantize):
            q.amax.fill_(max(abs(lo), abs(hi), torch.finfo(torch.float32).tiny * E4M3_MAX))
            return
        obs = q.activation_post_process
        obs.min_val.resize_(()).fill_(lo)
        obs.max_val.resize_(()).fill_(hi)
        scale, zp = obs.calculate_qparams()
        q.scale.data = scale.to(q.scale.device, q.scale.dtype).reshape(
            q.scale.shape if q.scale.numel() else (1,)
        )
        q.zero_point.data = zp.to(q.zero_point.device, q.zero_point.dtype).reshape(q.scale.shape)


def snapshot(q: nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of ``q``'s full state (qparams, observer min/max, flags)."""
    return {k: v.detach().clone() for k, v in q.state_dict(keep_vars=False).items()}


def load(q: nn.Module, snap: dict[str, torch.Tensor]) -> None:
    """Put ``q`` back to ``snap`` (shapes included)."""
    with torch.no_grad():
        own = q.state_dict(keep_vars=True)
        for k, v in snap.items():
            t = own[k]
            if t.shape != v.shape:
                t.data = v.clone()
            else:
                t.copy_(v)


class UndoLog:
    """The state of each quantizer before its first change, for :meth:`restore`."""

    def __init__(self) -> None:
        self._saved: dict[str, tuple[nn.Module, dict[str, torch.Tensor]]] = {}

    def remember(self, name: str, q: nn.Module) -> None:
        """Keep ``q``'s current state unless it is already kept."""
        if name not in self._saved:
            self._saved[name] = (q, snapshot(q))

    def names(self) -> list[str]:
        """Quantizers with a kept state."""
        return list(self._saved)

    def restore(self) -> list[str]:
        """Put every changed quantizer back; returns their names and forgets them."""
        names = list(self._saved)
        for q, snap in self._saved.values():
            load(q, snap)
        self._saved.clear()
        return names


@contextlib.contextmanager
def quantizer_flags(
    quantizers: Iterable[nn.Module], fake_quant: bool | None, observer: bool | None
) -> Iterator[None]:
    """Temporarily set the fake-quant / observer flags of ``quantizers`` (None leaves a flag alone)."""
    saved = []
    for q in quantizers:
        fq = getattr(q, "fake_quant_enabled", None)
        ob = getattr(q, "observer_enabled", None)
        saved.append((q, None if fq is None else fq.clone(), None if ob is None else ob.clone()))
        if fake_quant is not None and fq is not None:
            fq[0] = 1 if fake_quant else 0
        if observer is not None and ob is not None:
            ob[0] = 1 if observer else 0
    try:
        yield
    finally:
        for q, fq, ob in saved:
            if fq is not None:
                q.fake_quant_enabled.copy_(fq)
            if ob is not None:
                q.observer_enabled.copy_(ob)


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """``model.eval()`` and no_grad for the block, then each module's own mode back."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for m, t in modes:
            m.training = t


#: Range shrink factors tried by the "mse" method (1.0 = the min/max range).
MSE_ALPHAS = tuple(1.0 - 0.05 * i for i in range(11))
#: Most input values kept per quantizer for the "mse" search.
MSE_SAMPLE = 65536
METHODS = ("minmax", "mse")


def mse_range(q: nn.Module, values: torch.Tensor, lo: float, hi: float) -> tuple[float, float]:
    """The range (α·lo, α·hi), α in :data:`MSE_ALPHAS`, whose fake quantization of ``values`` by
    a copy of ``q`` has the least squared error (an approximation of the L2 search of torch's
    HistogramObserver and ModelOpt's "mse" calibration, reference §2/§3)."""
    import copy

    trial = copy.deepcopy(q)
    best, best_err = (lo, hi), math.inf
    with torch.no_grad(), quantizer_flags([trial], True, False):
        for a in MSE_ALPHAS:
            set_range(trial, lo * a, hi * a)
            err = float(((trial(values) - values) ** 2).mean())
            if err < best_err:
                best, best_err = (lo * a, hi * a), err
    return best


def measure_ranges(
    model: nn.Module,
    named: Sequence[tuple[str, nn.Module]],
    batches: Sequence[torch.Tensor],
    all_quantizers: Sequence[nn.Module],
    method: str = "minmax",
) -> dict[str, tuple[float, float] | str]:
    """The range to set for each quantizer in ``named``, measured on ``batches``.

    ``minmax``: the mean per-batch (min, max) of the quantizer's input. ``mse``: that range
    shrunk by the factor with the least quantization error on the inputs (:func:`mse_range`).
    Those quantizers pass values through (fake quant off) while measuring; every observer is
    frozen and the model runs in eval mode, so nothing else changes. A quantizer that saw only
    non-finite values or nothing maps to a reason string instead of a range.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    kept: dict[str, list[torch.Tensor]] = {n: [] for n, _ in named}
    sums: dict[str, list[float]] = {n: [0.0, 0.0, 0.0] for n, _ in named}
    bad: dict[str, int] = {n: 0 for n, _ in named}
    handles = []
    for name, q in named:

        def hook(mod: nn.Module, args: tuple, _n: str = name) -> None:
            if not args or not isinstance(args[0], torch.Tensor) or args[0].numel() == 0:
                return
            x = args[0].detach()
            fin = torch.isfinite(x)
            if not bool(fin.all()):
                bad[_n] += 1
                return
            mn, mx = torch.aminmax(x)
            if method == "mse":
                flat = x.reshape(-1)
                kept[_n].append(flat[:: max(1, flat.numel() // MSE_SAMPLE)].clone())
            s = sums[_n]
            s[0] += float(mn)
            s[1] += float(mx)
            s[2] += 1

        handles.append(q.register_forward_pre_hook(hook))
    try:
        with (
            eval_mode(model),
            quantizer_flags(all_quantizers, None, False),
            quantizer_flags([q for _, q in named], False, None),
        ):
            for b in batches:
                model(b)
    finally:
        for h in handles:
            h.remove()
    out: dict[str, tuple[float, float] | str] = {}
    for name, _ in named:
        lo, hi, n = sums[name]
        if n == 0:
            out[name] = (
                f"no finite input seen ({bad[name]} batches with NaN/Inf)" if bad[name] else "no input seen"
            )
        else:
            out[name] = (lo / n, hi / n)
    return out
