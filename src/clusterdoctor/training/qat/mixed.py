"""Mixed precision: INT4 weights with FP8 (E4M3) activations, emulated; and a precision scan.

FP8 is emulated by a real round trip through ``torch.float8_e4m3fn`` (reference §6: the CPU wheel
has the dtype, not FP8 GEMMs). E4M3 has a maximum of ±448 and no infinities (Micikevicius et al.
2022, reference §3), so values are clamped to ±448 after scaling, like TE's per-tensor scale
``FP8_MAX/amax``.

:func:`scan_precision` lists every linear/conv/matmul with its input precisions and where a cast
(quantize op) or a fallback to FP16 would be inserted, with the count and bytes of those casts for
one forward pass of the example input.
"""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

#: Largest finite E4M3 value (arXiv 2209.05433; TE Format.E4M3).
E4M3_MAX = 448.0
#: Moving-average constant of the static FP8 scale, as torch's MovingAverageMinMaxObserver (§2).
AMAX_AVERAGING = 0.01

#: Bytes per element of each precision name used in the scan.
BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8_e4m3": 1.0, "int8": 1.0, "int4": 0.5}
#: (weight precision, activation precision) pairs with a fused kernel on current GPUs: FP8 and
#: INT8 W8A8 (Hopper), INT4 weight-only with FP16 or FP8/INT8 activations (W4A16, W4A8; torchao
#: Int4WeightOnly / Float8DynamicActivationInt4Weight / 8da4w, reference §1). Anything else falls
#: back to FP16.
SUPPORTED_KERNELS = {
    ("fp16", "fp16"),
    ("fp8_e4m3", "fp8_e4m3"),
    ("int8", "int8"),
    ("int4", "fp16"),
    ("int4", "fp8_e4m3"),
    ("int4", "int8"),
}


def fp8_e4m3_fake_quant(x: torch.Tensor, scale: torch.Tensor | float) -> torch.Tensor:
    """``x`` rounded through E4M3 at per-tensor ``scale`` (x ≈ fp8(x/scale)·scale), same dtype as x."""
    y = (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).to(x.dtype)
    return y * scale


class FP8FakeQuantize(nn.Module):
    """Per-tensor E4M3 fake quantizer with a straight-through gradient.

    ``dynamic=True`` scales each tensor by its own amax (weights); otherwise the scale is static,
    from a moving average of amax while the observer is enabled (activations), and can be frozen,
    fine-tuned and recalibrated like an integer quantizer. The flags are buffers named as in
    torch's FakeQuantize so the same tools handle both.
    """

    def __init__(self, dynamic: bool = False, averaging_constant: float = AMAX_AVERAGING) -> None:
        super().__init__()
        self.dynamic = dynamic
        self.averaging_constant = averaging_constant
        self.register_buffer("amax", torch.tensor(float("nan")))
        self.register_buffer("fake_quant_enabled", torch.tensor([1], dtype=torch.uint8))
        self.register_buffer("observer_enabled", torch.tensor([1], dtype=torch.uint8))

    @property
    def scale(self) -> torch.Tensor:
        """Current per-tensor scale amax/448 (1 before any observation)."""
        a = self.amax
        return torch.where(torch.isfinite(a) & (a > 0), a / E4M3_MAX, torch.ones_like(a))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dynamic:
            amax = x.detach().abs().amax().clamp_min(torch.finfo(torch.float32).tiny)
            scale = amax / E4M3_MAX
        else:
            if self.observer_enabled[0] == 1 and x.numel() > 0:
                cur = x.detach().abs().amax().to(self.amax.dtype)
                if torch.isfinite(cur):
                    if torch.isnan(self.amax):
                        self.amax.copy_(cur)
                    else:
                        self.amax.add_(self.averaging_constant * (cur - self.amax))
            scale = self.scale.to(x.dtype)
        if self.fake_quant_enabled[0] != 1:
            return x
        q = fp8_e4m3_fake_quant(x, scale)
        return x + (q - x).detach()

    def extra_repr(self) -> str:
        return f"e4m3, dynamic={self.dynamic}, amax={float(self.amax):.4g}"


def prepare_w4a8fp8(model: nn.Module, skip: tuple[str, ...] = ()) -> nn.Module:
    """A copy of ``model`` with INT4 per-channel weights and FP8 E4M3 activations on every Linear/Conv2d."""
    from clusterdoctor.training.qat.fakequant import quantize_model

    return quantize_model(model, weight="int4", act="fp8_e4m3", skip=skip)


def quantizer_precision(q: nn.Module | None) -> str:
    """Precision name of a fake quantizer (``fp16`` when absent: the unquantized deployment dtype)."""
    if q is None:
        return "fp16"
    if isinstance(q, FP8FakeQuantize):
        return "fp8_e4m3"
    qmin, qmax = getattr(q, "quant_min", None), getattr(q, "quant_max", None)
    if qmin is None or qmax is None:
        return "unknown"
    levels = int(qmax) - int(qmin) + 1
    if levels <= 16:
        return "int4"
    if levels <= 256:
        return "int8"
    return f"int{levels.bit_length() - 1}"


@dataclass
class ScanEntry:
    """One linear/conv/matmul in the scan."""

    name: str
    op: str
    weight_precision: str | None
    input_precision: str
    kernel: str
    cast: str | None = None
    cast_count: int = 0
    cast_bytes: float = 0.0
    fallback_fp16: bool = False
    reason: str = ""
    input_shape: list[int] = field(default_factory=list)


@dataclass
class PrecisionScan:
    """Result of :func:`scan_precision`."""

    entries: list[ScanEntry]
    cast_count: int
    cast_bytes: float
    fallback_count: int
    method: str  # "torch.fx" or "forward hooks (matmul not visible)"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "entries": [asdict(e) for e in self.entries],
            "cast_count": self.cast_count,
            "cast_bytes": self.cast_bytes,
            "fallback_count": self.fallback_count,
            "method": self.method,
        }


def _classify(name: str, op: str, wp: str | None, ap: str, numel: int, weight_numel: int) -> ScanEntry:
    e = ScanEntry(name, op, wp, ap, kernel="")
    w_eff = wp if wp is not None else ap  # matmul: both operands are activations
    if (w_eff, ap) in SUPPORTED_KERNELS:
        e.kernel = f"w:{w_eff} a:{ap}"
        if ap != "fp16":
            e.cast = f"fp16->{ap}"
            e.cast_count = 1 if wp is not None else 2
            e.cast_bytes = BYTES[ap] * numel
            e.reason = f"activation quantized to {ap} before the GEMM"
        else:
            e.reason = "runs in fp16"
        return e
    e.fallback_fp16 = True
    e.kernel = "w:fp16 a:fp16 (fallback)"
    e.cast = "dequantize->fp16"
    e.cast_count = 1 + (1 if wp not in (None, "fp16") else 0)
    e.cast_bytes = BYTES["fp16"] * numel + (BYTES["fp16"] * weight_numel if wp not in (None, "fp16") else 0.0)
    e.reason = f"no fused kernel for weights {w_eff} with activations {ap}: falls back to fp16"
    return e


class _LeafTracer(torch.fx.Tracer):
    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        from torch.ao.quantization import FakeQuantizeBase

        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, FakeQuantizeBase, FP8FakeQuantize)):
            return True
        return super().is_leaf_module(m, qualname)


_MATMULS = {torch.matmul, torch.bmm, torch.mm, operator.matmul}


def scan_precision(model: nn.Module, example_input: torch.Tensor) -> PrecisionScan:
    """List every linear/conv/matmul of ``model`` with input precisions and inserted casts/fallbacks.

    Uses torch.fx (with shape propagation on ``example_input``) when the model traces; otherwise
    forward hooks on Linear/Conv modules, which cannot see functional matmuls (said in ``method``).
    """
    entries: list[ScanEntry] = []
    was_training = model.training
    model.eval()
    try:
        try:
            entries = _scan_fx(model, example_input)
            method = "torch.fx"
        except Exception:
            entries = _scan_hooks(model, example_input)
            method = "forward hooks (matmul not visible)"
    finally:
        model.train(was_training)
    return PrecisionScan(
        entries,
        cast_count=sum(e.cast_count for e in entries),
        cast_bytes=sum(e.cast_bytes for e in entries),
        fallback_count=sum(1 for e in entries if e.fallback_fp16),
        method=method,
    )


def _module_precisions(m: nn.Module) -> tuple[str | None, str]:
    wq = getattr(m, "weight_quantizer", None) or getattr(m, "weight_fake_quant", None)
    aq = getattr(m, "input_quantizer", None)
    return quantizer_precision(wq), quantizer_precision(aq)


def _scan_fx(model: nn.Module, example_input: torch.Tensor) -> list[ScanEntry]:
    from torch.fx.passes.shape_prop import ShapeProp

    graph = _LeafTracer().trace(model)
    gm = torch.fx.GraphModule(model, graph)
    with torch.no_grad():
        ShapeProp(gm).propagate(example_input)
    out: list[ScanEntry] = []
    for node in gm.graph.nodes:
        if node.op == "call_module":
            m = gm.get_submodule(node.target)
            if not isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)):
                continue
            arg = node.args[0] if node.args else None
            meta = getattr(arg, "meta", {}).get("tensor_meta") if arg is not None else None
            shape = list(meta.shape) if meta is not None else []
            numel = int(torch.Size(shape).numel()) if shape else 0
            wp, ap = _module_precisions(m)
            e = _classify(str(node.target), type(m).__name__, wp, ap, numel, m.weight.numel())
            e.input_shape = shape
            out.append(e)
        elif node.op == "call_function" and node.target in _MATMULS:
            numel = 0
            shape: list[int] = []
            for a in node.args[:2]:
                meta = getattr(a, "meta", {}).get("tensor_meta")
                if meta is not None:
                    numel += int(meta.shape.numel())
                    shape = shape or list(meta.shape)
            e = _classify(node.name, "matmul", None, "fp16", numel, 0)
            e.input_shape = shape
            out.append(e)
    return out


def _scan_hooks(model: nn.Module, example_input: torch.Tensor) -> list[ScanEntry]:
    shapes: dict[str, list[int]] = {}
    handles = []
    for name, m in model.named_modules():
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)):

            def hook(mod: nn.Module, args: tuple, _name: str = name) -> None:
                if args and isinstance(args[0], torch.Tensor):
                    shapes.setdefault(_name, list(args[0].shape))

            handles.append(m.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            model(example_input)
    finally:
        for h in handles:
            h.remove()
    out = []
    for name, m in model.named_modules():
        if name in shapes:
            wp, ap = _module_precisions(m)
            shape = shapes[name]
            e = _classify(name, type(m).__name__, wp, ap, int(torch.Size(shape).numel()), m.weight.numel())
            e.input_shape = shape
            out.append(e)
    return out
