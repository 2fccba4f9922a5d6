"""Choose between FP16, FP8, INT8 and INT4-weight variants of a model from measured numbers.

:func:`compare_precisions` builds each variant (fake-quantized, so accuracy is *measured*),
measures accuracy with the caller's ``eval_fn``, latency here (or takes supplied latencies: fake
quantization on a CPU says nothing about FP8/INT8 kernel speed on a GPU, reference §6/§8), memory
from the parameter bytes at each precision, and calibration cost as the seconds spent calibrating.
Starting from the cheapest variant it moves to a more expensive one only while

    ROI = (accuracy gain [points] × value) / (latency increase + memory overhead)   (relative)

is at least ``roi_threshold`` (default 1.8). :class:`PrecisionTriggers` says when to revisit the
choice at run time: QPS below a floor for 3 consecutive windows, GPU utilisation below 35% for 2
minutes, or ROI more than 15% below its running mean.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: Default ROI needed to pay for a more expensive precision (issue 6).
DEFAULT_ROI_THRESHOLD = 1.8
#: Runtime trigger defaults (issue 6).
QPS_WINDOWS = 3
UTIL_FLOOR = 0.35
UTIL_SECONDS = 120.0
ROI_DROP = 0.15

#: (weight format, activation format) of each variant; None = unquantized at that precision.
VARIANTS: dict[str, tuple[str | None, str | None]] = {
    "fp16": (None, None),
    "fp8": ("fp8_e4m3", "fp8_e4m3"),
    "int8": ("int8", "int8"),
    "int4_weight": ("int4", None),
}
#: Bytes per weight element of each variant's quantized layers.
WEIGHT_BYTES = {"fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4_weight": 0.5}


@dataclass
class VariantResult:
    """Measured numbers of one variant."""

    name: str
    accuracy: float
    latency_s: float
    latency_source: str
    memory_bytes: float
    calibration_s: float
    roi_vs_previous: float | None = None
    chosen: bool = False
    note: str = ""


@dataclass
class PrecisionDecision:
    """All variants, the choice and why."""

    variants: list[VariantResult]
    choice: str
    reason: str
    roi_threshold: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "variants": [asdict(v) for v in self.variants],
            "choice": self.choice,
            "reason": self.reason,
            "roi_threshold": self.roi_threshold,
        }


def roi(acc_gain: float, latency_increase: float, memory_overhead: float, value: float = 1.0) -> float:
    """``(acc_gain × value) / (latency_increase + memory_overhead)``.

    ``acc_gain`` in accuracy points, the costs as relative increases (0.5 = +50%). A free upgrade
    (cost ≤ 0) has infinite ROI when it gains accuracy and 0 otherwise; no gain gives ROI ≤ 0.
    """
    gain = acc_gain * value
    cost = latency_increase + memory_overhead
    if cost <= 0:
        return math.inf if gain > 0 else 0.0
    return gain / cost


def choose(
    variants: Sequence[VariantResult], roi_threshold: float = DEFAULT_ROI_THRESHOLD, value: float = 1.0
) -> PrecisionDecision:
    """Walk from the cheapest variant (memory, then latency) up while ROI ≥ ``roi_threshold``."""
    if not variants:
        raise ValueError("no variants to choose from")
    order = sorted(variants, key=lambda v: (v.memory_bytes, v.latency_s))
    current = order[0]
    reasons = [f"start at the cheapest, {current.name}"]
    for v in order[1:]:
        gain = (v.accuracy - current.accuracy) * 100.0
        lat = (v.latency_s - current.latency_s) / current.latency_s if current.latency_s > 0 else 0.0
        mem = (
            (v.memory_bytes - current.memory_bytes) / current.memory_bytes
            if current.memory_bytes > 0
            else 0.0
        )
        r = roi(gain, lat, mem, value)
        v.roi_vs_previous = r
        if r >= roi_threshold:
            reasons.append(
                f"{v.name}: ROI {r:.3g} >= {roi_threshold:g} vs {current.name} (+{gain:.2f} pts), upgrade"
            )
            current = v
        else:
            reasons.append(
                f"{v.name}: ROI {r:.3g} < {roi_threshold:g} vs {current.name} ({gain:+.2f} pts), stay"
            )
    for v in variants:
        v.chosen = v is current
    return PrecisionDecision(list(variants), current.name, "; ".join(reasons), roi_threshold)


def _fp16_copy(model: Any) -> Any:
    import torch

    m = copy.deepcopy(model)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.half().float())
    return m


def build_variant(model: Any, name: str) -> Any:
    """A fake-quantized copy of ``model`` for variant ``name`` (see :data:`VARIANTS`)."""
    from clusterdoctor.training.qat.fakequant import quantize_model

    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    if name == "fp16":
        return _fp16_copy(model)
    w, a = VARIANTS[name]
    return quantize_model(_fp16_copy(model), weight=w, act=a)


def memory_bytes(model: Any, name: str) -> float:
    """Parameter bytes of ``model`` deployed as variant ``name`` (quantized layers' weights at the
    variant's width plus a 4-byte scale per output channel; everything else FP16)."""
    from torch import nn

    total = 0.0
    for m in model.modules():
        own = list(m.parameters(recurse=False))
        if isinstance(m, (nn.Linear, nn.Conv2d)) and name != "fp16":
            total += m.weight.numel() * WEIGHT_BYTES[name] + 4.0 * m.weight.shape[0]
            total += sum(p.numel() * 2.0 for p in own if p is not m.weight)
        else:
            total += sum(p.numel() * 2.0 for p in own)
    return total


def measure_latency(model: Any, example: Any, reps: int = 20) -> float:
    """Median seconds of one forward pass of ``example`` (eval mode, no grad, 2 warm-ups)."""
    import torch

    was = model.training
    model.eval()
    times = []
    try:
        with torch.no_grad():
            for _ in range(2):
                model(example)
            for _ in range(reps):
                t0 = time.perf_counter()
                model(example)
                times.append(time.perf_counter() - t0)
    finally:
        model.train(was)
    return statistics.median(times)


def compare_precisions(
    model: Any,
    eval_fn: Callable[[Any], float],
    calib_batches: Sequence[Any],
    example_input: Any,
    variants: Sequence[str] = tuple(VARIANTS),
    latency: Mapping[str, float] | None = None,
    value: float = 1.0,
    roi_threshold: float = DEFAULT_ROI_THRESHOLD,
    reps: int = 20,
) -> PrecisionDecision:
    """Build, calibrate, measure and choose among ``variants`` of a float ``model``.

    ``eval_fn(model) -> accuracy in [0, 1]`` measures accuracy; ``latency`` (seconds per forward
    of ``example_input``) overrides the latency measured here per variant.
    """
    import torch

    from clusterdoctor.training.qat.fakequant import set_observers

    results = []
    for name in variants:
        m = build_variant(model, name)
        t0 = time.perf_counter()
        m.eval()
        with torch.no_grad():
            for b in calib_batches or [example_input]:  # weight observers need one pass at least
                m(b)
        calib_s = time.perf_counter() - t0 if name != "fp16" else 0.0
        set_observers(m, False)
        acc = float(eval_fn(m))
        if latency is not None and name in latency:
            lat, src = float(latency[name]), "supplied"
        else:
            lat, src = measure_latency(m, example_input, reps), "measured here (emulated: fake quantization)"
        results.append(VariantResult(name, acc, lat, src, memory_bytes(model, name), calib_s))
    return choose(results, roi_threshold, value)


class PrecisionTriggers:
    """Runtime signals that the precision choice should be revisited.

    Feed one observation per window with :meth:`observe`; it returns the triggers that fired.
    """

    def __init__(
        self,
        qps_floor: float | None = None,
        qps_windows: int = QPS_WINDOWS,
        util_floor: float = UTIL_FLOOR,
        util_seconds: float = UTIL_SECONDS,
        roi_drop: float = ROI_DROP,
    ) -> None:
        self.qps_floor, self.qps_windows = qps_floor, qps_windows
        self.util_floor, self.util_seconds, self.roi_drop = util_floor, util_seconds, roi_drop
        self._low_qps = 0
        self._low_util_since: float | None = None
        self._util_fired = False
        self._rois: list[float] = []

    def observe(
        self,
        t: float,
        qps: float | None = None,
        gpu_util: float | None = None,
        roi_value: float | None = None,
    ) -> list[str]:
        """Record one window at time ``t`` (seconds); GPU utilisation as a fraction 0..1."""
        fired: list[str] = []
        if qps is not None and self.qps_floor is not None and math.isfinite(qps):
            self._low_qps = self._low_qps + 1 if qps < self.qps_floor else 0
            if self._low_qps == self.qps_windows:
                fired.append(f"qps below {self.qps_floor:g} for {self.qps_windows} consecutive windows")
        if gpu_util is not None and math.isfinite(gpu_util):
            if gpu_util < self.util_floor:
                if self._low_util_since is None:
                    self._low_util_since, self._util_fired = t, False
                if not self._util_fired and t - self._low_util_since >= self.util_seconds:
                    fired.append(f"GPU utilisation below {self.util_floor:.0%} for {self.util_seconds:g} s")
                    self._util_fired = True
            else:
                self._low_util_since, self._util_fired = None, False
        if roi_value is not None and math.isfinite(roi_value):
            if self._rois:
                mean = statistics.fmean(self._rois)
                if mean > 0 and roi_value < (1 - self.roi_drop) * mean:
                    fired.append(
                        f"ROI {roi_value:.3g} more than {self.roi_drop:.0%} below its running mean {mean:.3g}"
                    )
            self._rois.append(roi_value)
        return fired
