"""DriftMonitor: per-layer drift of quantizer inputs against calibration, and gated repairs.

Usage::

    mon = DriftMonitor(qat_model, float_model=None)
    mon.calibrate(batches)          # reference histograms, moments and learned thresholds
    ...                             # every forward pass of qat_model is observed from here on
    for entry in mon.report():      # one entry per quantized layer
        print(entry["layer"], entry["score"], entry["action"], entry["reason"])
    done = mon.apply(unlabeled)     # gated fine-tunes / recalibrations, in place
    mon.restore()                   # undo them
    mon.save("qat-state.json")      # for `clusterdoctor qat report`

A *quantized layer* is a module with an activation fake quantizer: ``input_quantizer`` (the layers
in :mod:`~clusterdoctor.training.qat.fakequant`) or torch.ao's eager-QAT ``activation_post_process``
(a FakeQuantize on the module's output). The monitor hooks the quantizer itself, so it sees exactly
the tensor that is quantized. Linear/Conv layers without one are listed as not monitored.

Without ``float_model`` the float reference for the SQNR gate is the same model with every fake
quantizer switched off. That is the right reference after QAT fine-tuning: the QAT weights have
moved away from the original float model's (on the digits experiment the stale W8A8 model's SQNR
against the original float CNN was only ~16 dB on clean data), so a separately trained float twin
mixes weight divergence into the fidelity measure.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clusterdoctor.training.qat import decide as dec
from clusterdoctor.training.qat import metrics, recalibrate, thresholds
from clusterdoctor.training.qat.fakequant import quantizers as find_quantizers
from clusterdoctor.training.qat.histograms import (
    DEFAULT_BINS,
    DEFAULT_SAMPLE_LIMIT,
    LayerAccumulator,
    Summary,
    sample,
    summary_of_values,
)

#: Most distinct input shapes remembered per layer (dynamic shapes are reported, not stored).
MAX_SHAPES = 8
#: Share of weights outside a frozen weight quantizer's range above which the report says so.
WEIGHT_CLIP_NOTE = 1e-3
_LAYER_TYPES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


@dataclass
class _Point:
    layer: str
    quantizer_name: str
    quantizer: nn.Module
    role: str
    owner: nn.Module | None = None
    acc: LayerAccumulator | None = None
    ref: Summary | None = None
    ref_kurtosis: float | None = None
    thresholds: thresholds.Thresholds | None = None
    calib: list[list[torch.Tensor]] = field(default_factory=list)
    calib_note: str = ""
    empty_passes: int = 0
    non_float_passes: int = 0
    shapes: set[tuple[int, ...]] = field(default_factory=set)
    dynamic: bool = False
    calls: int = 0
    last_action: dict[str, Any] | None = None


def weight_clipped_fraction(layer: nn.Module | None) -> float | None:
    """Share of ``layer.weight`` outside its weight quantizer's current range, or None.

    Only meaningful for a quantizer with stored per-tensor or per-channel qparams (torch
    FakeQuantize family); dynamic quantizers never clip and return None.
    """
    if layer is None:
        return None
    w = getattr(layer, "weight", None)
    wq = getattr(layer, "weight_quantizer", None) or getattr(layer, "weight_fake_quant", None)
    if not isinstance(w, torch.Tensor) or wq is None or w.numel() == 0:
        return None
    try:
        scale = wq.scale.detach().double()
        zp = wq.zero_point.detach().double()
        qmin, qmax = float(wq.quant_min), float(wq.quant_max)
    except (AttributeError, TypeError, RuntimeError):
        return None
    wd = w.detach().double()
    if scale.numel() > 1:
        axis = int(getattr(wq, "ch_axis", 0))
        if scale.numel() != wd.shape[axis]:
            return None  # observer never ran: qparams not shaped yet
        shape = [1] * wd.dim()
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    lo, hi = (qmin - zp) * scale, (qmax - zp) * scale
    # values within half a step of the ends round to qmin/qmax: not clipped (1% slack for float error)
    out = (wd < lo - 0.51 * scale) | (wd > hi + 0.51 * scale)
    return float(out.double().mean())


def _first_tensor(batch: Any) -> torch.Tensor | None:
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], torch.Tensor):
        return batch[0]
    return None


def _output_tensor(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            if isinstance(o, torch.Tensor):
                return o
    if isinstance(out, dict):
        for o in out.values():
            if isinstance(o, torch.Tensor):
                return o
    return None


class DriftMonitor:
    """Per-layer drift detection for a fake-quantized model, with SQNR-gated repairs.

    Args:
        qat_model: the fake-quantized model (hooks are added to its quantizers).
        float_model: optional float twin used as the fidelity reference.
        bins: regular histogram bins over the reference range (plus two overflow bins).
        score_weights: weights of (KL, |Δkurtosis|) in the drift score (default 0.7, 0.3).
        threshold_mode: ``"learned"`` (mean + k·σ of the calibration batches) or ``"fixed"``.
        k_low, k_high: multipliers of σ for the learned thresholds.
        fixed_thresholds: the fixed (low, high) pair (default 0.15, 0.30).
        sample_limit: most elements looked at per forward pass and layer.
        every: observe one forward pass in ``every``.
        fine_tune_rate: share of the way a fine-tune moves the range toward the observed one.
        min_gain_db: an action is taken only when it raises SQNR by more than this.
        recal_method: ``"minmax"`` (mean per-batch min/max, as the QAT observers) or ``"mse"``
            (that range shrunk to the least quantization error), see
            :func:`~clusterdoctor.training.qat.recalibrate.measure_ranges`.
    """

    def __init__(
        self,
        qat_model: nn.Module,
        float_model: nn.Module | None = None,
        *,
        bins: int = DEFAULT_BINS,
        score_weights: tuple[float, float] = metrics.DEFAULT_SCORE_WEIGHTS,
        threshold_mode: str = "learned",
        k_low: float = thresholds.DEFAULT_K_LOW,
        k_high: float = thresholds.DEFAULT_K_HIGH,
        fixed_thresholds: tuple[float, float] = (thresholds.FIXED_LOW, thresholds.FIXED_HIGH),
        sample_limit: int = DEFAULT_SAMPLE_LIMIT,
        every: int = 1,
        fine_tune_rate: float = 1.0,
        min_gain_db: float = 0.0,
        recal_method: str = "minmax",
    ) -> None:
        if threshold_mode not in ("learned", "fixed"):
            raise ValueError(f"threshold_mode must be 'learned' or 'fixed', got {threshold_mode!r}")
        if recal_method not in recalibrate.METHODS:
            raise ValueError(f"recal_method must be one of {recalibrate.METHODS}, got {recal_method!r}")
        if bins < 2 or every < 1 or not 0 < fine_tune_rate <= 1:
            raise ValueError("need bins >= 2, every >= 1 and 0 < fine_tune_rate <= 1")
        self.model = qat_model
        self.float_model = float_model
        self.bins = bins
        self.score_weights = score_weights
        self.threshold_mode = threshold_mode
        self.k_low, self.k_high = k_low, k_high
        self.fixed_thresholds = fixed_thresholds
        self.sample_limit = sample_limit
        self.every = every
        self.fine_tune_rate = fine_tune_rate
        self.min_gain_db = min_gain_db
        self.recal_method = recal_method
        self._mode = "idle"  # idle | calibrate | observe | paused
        self._undo = recalibrate.UndoLog()
        self._actions: list[dict[str, Any]] = []
        self._order: list[str] = []
        self._downstream: dict[str, list[str]] = {}
        self._downstream_method = "none"
        self.calibrated_at: float | None = None
        self._points: dict[str, _Point] = {}
        self._unmonitored: list[tuple[str, str]] = []
        self._handles: list[Any] = []
        self._discover()

    # ------------------------------------------------------------------ discovery and hooks
    def _discover(self) -> None:
        from torch.ao.quantization import FakeQuantizeBase

        from clusterdoctor.training.qat.mixed import FP8FakeQuantize

        qtypes = (FakeQuantizeBase, FP8FakeQuantize)
        for name, m in self.model.named_modules():
            q = getattr(m, "input_quantizer", None)
            role = "input"
            qname = f"{name}.input_quantizer" if name else "input_quantizer"
            if not isinstance(q, qtypes):
                q = getattr(m, "activation_post_process", None)
                role = "output"
                qname = f"{name}.activation_post_process" if name else "activation_post_process"
            if isinstance(q, qtypes):
                layer = name or "<model>"
                self._points[layer] = _Point(layer, qname, q, role, owner=m)
                self._handles.append(q.register_forward_pre_hook(self._make_hook(layer)))
            elif isinstance(m, _LAYER_TYPES):
                has_w = getattr(m, "weight_quantizer", None) is not None or hasattr(m, "weight_fake_quant")
                why = "weights quantized but no activation quantizer" if has_w else "no activation quantizer"
                self._unmonitored.append((name, f"{why} (no observer): not monitored"))
        # Fake quantizers that belong to no layer (e.g. a bare FakeQuantize in a Sequential).
        owned = {p.quantizer for p in self._points.values()}
        weight_q = set()
        for _, m in self.model.named_modules():
            for attr in ("weight_quantizer", "weight_fake_quant"):
                if isinstance(getattr(m, attr, None), nn.Module):
                    weight_q.add(getattr(m, attr))
        for qname, q in find_quantizers(self.model):
            if q in owned or q in weight_q:
                continue
            self._points[qname] = _Point(qname, qname, q, "standalone")
            self._handles.append(q.register_forward_pre_hook(self._make_hook(qname)))

    def _make_hook(self, layer: str):
        def hook(mod: nn.Module, args: tuple) -> None:
            mode = self._mode
            if mode in ("idle", "paused"):
                return
            p = self._points[layer]
            x = args[0] if args else None
            if not isinstance(x, torch.Tensor):
                return
            if mode == "calibrate" and layer not in self._order:
                self._order.append(layer)
            if x.numel() == 0:
                p.empty_passes += 1
                return
            if not x.is_floating_point():
                p.non_float_passes += 1
                return
            shape = tuple(x.shape)
            if shape not in p.shapes:
                if p.shapes:
                    p.dynamic = True
                if len(p.shapes) < MAX_SHAPES:
                    p.shapes.add(shape)
            if mode == "calibrate":
                if p.calib:
                    p.calib[-1].append(sample(x, self.sample_limit).clone())
                return
            p.calls += 1
            if p.acc is not None and (p.calls - 1) % self.every == 0:
                p.acc.push(sample(x, self.sample_limit))

        return hook

    def close(self) -> None:
        """Remove every hook (the monitor stops observing)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._mode = "idle"

    @property
    def layers(self) -> list[str]:
        """Monitored layers in forward order (discovery order before calibration)."""
        rest = [name for name in self._points if name not in self._order]
        return [name for name in self._order if name in self._points] + rest

    # ------------------------------------------------------------------ calibration
    def calibrate(self, batches: Iterable[Any]) -> None:
        """Record the reference distributions from ``batches`` and learn thresholds.

        Runs the model in eval mode without gradients, with observers frozen, so calibration does
        not change the model. Empty batches are skipped (and counted per layer).
        """
        self._order = []
        for p in self._points.values():
            p.calib, p.ref, p.acc, p.thresholds, p.ref_kurtosis, p.calib_note = [], None, None, None, None, ""
            p.empty_passes = p.non_float_passes = p.calls = 0
            p.shapes, p.dynamic = set(), False
        all_q = [p.quantizer for p in self._points.values()]
        n_batches = 0
        self._mode = "calibrate"
        try:
            with recalibrate.eval_mode(self.model), recalibrate.quantizer_flags(all_q, None, False):
                for batch in batches:
                    x = _first_tensor(batch)
                    if x is None:
                        continue
                    for p in self._points.values():
                        p.calib.append([])
                    if x.numel() == 0:
                        for p in self._points.values():
                            p.empty_passes += 1
                        continue
                    self.model(x)
                    n_batches += 1
        finally:
            self._mode = "idle"
        for p in self._points.values():
            self._build_reference(p)
        self._build_downstream()
        self.calibrated_at = time.time()
        self._mode = "observe"

    def _build_reference(self, p: _Point) -> None:
        per_batch = [torch.cat(b) if b else None for b in p.calib]
        p.calib = []
        values = [v for v in per_batch if v is not None and v.numel() > 0]
        if not values:
            p.calib_note = "quantizer never ran on a non-empty calibration batch"
            return
        allv = torch.cat(values)  # same dtype as each batch, so the leave-one-out bins agree
        fin = torch.isfinite(allv)
        if not bool(fin.any()):
            p.calib_note = "calibration activations were all NaN/Inf"
            return
        n_bad = int((~fin).sum())
        good = allv[fin].to(torch.float64)
        lo, hi = float(good.min()), float(good.max())
        centre = float(good.mean())
        clip = recalibrate.representable_range(p.quantizer)
        ref = summary_of_values(allv, lo, hi, self.bins, centre, clip)
        p.ref = ref
        p.ref_kurtosis = metrics.kurtosis_from_moments(ref.moments)
        if n_bad:
            p.calib_note = f"{n_bad} NaN/Inf values in calibration were ignored"
        p.acc = LayerAccumulator(lo, hi, self.bins, centre, clip, device=allv.device)  # the reference's bins
        if self.threshold_mode == "fixed":
            p.thresholds = thresholds.fixed(*self.fixed_thresholds)
            return
        scores: list[float | None] = []
        for v in values:
            b = summary_of_values(v, lo, hi, self.bins, centre, clip)
            rest_hist = [max(r - c, 0.0) for r, c in zip(ref.hist, b.hist, strict=True)]
            rest_m = ref.moments - b.moments
            kl = metrics.kl_divergence(b.hist, rest_hist)
            ks = metrics.kurtosis_shift(
                metrics.kurtosis_from_moments(b.moments), metrics.kurtosis_from_moments(rest_m)
            )
            scores.append(metrics.drift_score(kl, ks, self.score_weights))
        p.thresholds = thresholds.learn(scores, self.k_low, self.k_high, self.fixed_thresholds)

    def _build_downstream(self) -> None:
        order = self.layers
        mapping: dict[str, str] = {}
        for name, p in self._points.items():
            mapping[p.quantizer_name] = name
            if p.role != "standalone":
                mapping[name] = name
        fx = dec.downstream_fx(self.model, mapping)
        if fx is not None:
            self._downstream = {n: [d for d in order if d in fx.get(n, [])] for n in order}
            self._downstream_method = "torch.fx"
        else:
            self._downstream = dec.downstream_by_order(order)
            self._downstream_method = "forward order"

    def reset_window(self) -> None:
        """Start a new observation window (current statistics are cleared, reference kept)."""
        for p in self._points.values():
            if p.acc is not None:
                p.acc.reset()
            p.empty_passes = p.non_float_passes = p.calls = 0

    # ------------------------------------------------------------------ report
    def _entry(self, p: _Point) -> dict[str, Any]:
        from clusterdoctor.training.qat.mixed import quantizer_precision

        e: dict[str, Any] = {
            "layer": p.layer,
            "quantizer": p.quantizer_name,
            "role": p.role,
            "precision": quantizer_precision(p.quantizer),
            "monitored": True,
            "score": None,
            "kl": None,
            "kurtosis_ref": p.ref_kurtosis,
            "kurtosis": None,
            "kurtosis_shift": None,
            "amax_ratio": None,
            "clipped_fraction": None,
            "clipped_fraction_ref": None,
            "observed": 0,
            "nonfinite": 0,
            "empty_passes": p.empty_passes,
            "dynamic_shapes": p.dynamic,
            "shapes": sorted(list(s) for s in p.shapes),
            "threshold_low": None,
            "threshold_high": None,
            "threshold_source": None,
            "downstream": self._downstream.get(p.layer, []),
            "last_action": p.last_action,
            "notes": [],
        }
        notes: list[str] = e["notes"]
        if p.calib_note:
            notes.append(p.calib_note)
        if p.dynamic:
            notes.append(f"dynamic input shapes seen ({len(p.shapes)}+ distinct); statistics are per element")
        if p.empty_passes:
            notes.append(f"{p.empty_passes} empty batches skipped")
        if p.non_float_passes:
            notes.append(f"{p.non_float_passes} non-float inputs skipped")
        if p.thresholds is not None:
            e["threshold_low"], e["threshold_high"] = p.thresholds.low, p.thresholds.high
            e["threshold_source"] = p.thresholds.source
        if p.ref is not None and p.ref.n + p.ref.nonfinite > 0:
            e["clipped_fraction_ref"] = metrics.clipped_fraction(p.ref.clipped, p.ref.n + p.ref.nonfinite)
        wclip = weight_clipped_fraction(p.owner)
        e["weight_clipped_fraction"] = wclip
        if wclip is not None and wclip > WEIGHT_CLIP_NOTE:
            notes.append(
                f"{wclip:.2%} of the weights lie outside the weight quantizer's range: its observer is "
                "frozen and the weights moved since (not acted on: weights are not recalibrated here)"
            )
        settable = recalibrate.unsupported_reason(p.quantizer)
        if p.ref is None or p.acc is None or p.thresholds is None:
            d = dec.decide(None, 0, 0, calibrated=False)
            e["action"], e["reason"] = d.action, d.reason + (f" ({p.calib_note})" if p.calib_note else "")
            return e
        s = p.acc.summary()
        kl = metrics.kl_divergence(s.hist, p.ref.hist)
        k_cur = metrics.kurtosis_from_moments(s.moments)
        ks = metrics.kurtosis_shift(k_cur, p.ref_kurtosis)
        score = metrics.drift_score(kl, ks, self.score_weights)
        total = s.n + s.nonfinite
        e.update(
            score=score,
            kl=kl,
            kurtosis=k_cur,
            kurtosis_shift=ks,
            amax_ratio=metrics.amax_ratio(s.abs_max, p.ref.abs_max),
            clipped_fraction=metrics.clipped_fraction(s.clipped, total),
            observed=int(total),
            nonfinite=int(s.nonfinite),
            hist_lo=p.acc.lo,
            hist_hi=p.acc.hi,
            hist_ref=p.ref.hist,
            hist_cur=s.hist,
            mean_min=s.mean_min,
            mean_max=s.mean_max,
        )
        d = dec.decide(
            score,
            p.thresholds.low,
            p.thresholds.high,
            nonfinite=s.nonfinite,
            observed=total,
            settable_reason=settable,
            kl=kl,
            kurtosis_shift=ks,
            amax_ratio=e["amax_ratio"],
            clipped=e["clipped_fraction"],
        )
        e["action"], e["reason"] = d.action, d.reason
        return e

    def report(self, include_histograms: bool = False) -> list[dict[str, Any]]:
        """One entry per quantized layer (forward order), then the layers that are not monitored.

        Each entry has ``layer``, ``score``, ``kl``, ``kurtosis_shift``, ``threshold_low``,
        ``threshold_high``, ``action`` (keep | fine_tune_scale | recalibrate), ``reason`` and more
        (amax_ratio, clipped_fraction, observed, nonfinite, notes, downstream ...).
        """
        out = []
        for name in self.layers:
            e = self._entry(self._points[name])
            if not include_histograms:
                for k in ("hist_ref", "hist_cur"):
                    e.pop(k, None)
            out.append(e)
        for name, why in self._unmonitored:
            out.append(
                {
                    "layer": name,
                    "monitored": False,
                    "score": None,
                    "kl": None,
                    "kurtosis_shift": None,
                    "threshold_low": None,
                    "threshold_high": None,
                    "action": dec.KEEP,
                    "reason": why,
                    "notes": [],
                }
            )
        return out

    # ------------------------------------------------------------------ actions
    def _reference_outputs(self, batches: list[torch.Tensor]) -> list[torch.Tensor | None]:
        all_q = [q for _, q in find_quantizers(self.model)]
        outs: list[torch.Tensor | None] = []
        if self.float_model is not None:
            with recalibrate.eval_mode(self.float_model):
                for b in batches:
                    outs.append(_output_tensor(self.float_model(b)))
            return outs
        with recalibrate.eval_mode(self.model), recalibrate.quantizer_flags(all_q, False, False):
            for b in batches:
                outs.append(_output_tensor(self.model(b)))
        return outs

    def _sqnr(self, batches: list[torch.Tensor], refs: list[torch.Tensor | None]) -> float:
        all_q = [q for _, q in find_quantizers(self.model)]
        sig = err = 0.0
        with recalibrate.eval_mode(self.model), recalibrate.quantizer_flags(all_q, None, False):
            for b, r in zip(batches, refs, strict=True):
                y = _output_tensor(self.model(b))
                if y is None or r is None or y.shape != r.shape:
                    return float("nan")
                r64, y64 = r.detach().double(), y.detach().double()
                sig += float((r64 * r64).sum())
                err += float(((r64 - y64) ** 2).sum())
        return metrics.sqnr_db(sig, err)

    def apply(self, batches: Iterable[Any]) -> list[dict[str, Any]]:
        """Perform the reported actions that raise fidelity on ``batches`` (unlabeled), in place.

        Layers are handled in forward order. A ``recalibrate`` covers the layer and its downstream
        quantized layers; a ``fine_tune_scale`` moves one quantizer's range toward the mean range
        seen since calibration. Each action is tried, the SQNR of the model output against the
        float reference is measured on ``batches``, and the action is kept only if SQNR rises by
        more than ``min_gain_db``; otherwise it is undone and the result says so. Returns one
        dict per non-keep decision: layer, action, layers, taken, sqnr_before_db, sqnr_after_db,
        reason. :meth:`restore` undoes every taken action.
        """
        started = time.perf_counter()
        data = [x for x in (_first_tensor(b) for b in batches) if x is not None and x.numel() > 0]
        entries = {e["layer"]: e for e in self.report() if e.get("monitored")}
        todo = [entries[n] for n in self.layers if n in entries and entries[n]["action"] != dec.KEEP]
        results: list[dict[str, Any]] = []
        if not todo:
            return results
        if not data:
            for e in todo:
                results.append(
                    _result(
                        e,
                        [e["layer"]],
                        False,
                        None,
                        None,
                        "not taken: no non-empty batch to measure fidelity on",
                    )
                )
            self._actions.extend(results)
            return results
        self._mode = "paused"
        try:
            refs = self._reference_outputs(data)
            current = self._sqnr(data, refs)
            done: set[str] = set()
            for e in todo:
                layer = e["layer"]
                if layer in done:
                    results.append(
                        _result(e, [layer], False, None, None, "covered by an upstream recalibration")
                    )
                    continue
                if not math.isfinite(current) and current != math.inf:
                    results.append(
                        _result(
                            e,
                            [layer],
                            False,
                            current,
                            None,
                            "not taken: model output not finite, SQNR undefined",
                        )
                    )
                    continue
                group, targets, notes = self._targets(e, data)
                if not targets:
                    results.append(_result(e, group, False, current, None, "not taken: " + "; ".join(notes)))
                    continue
                saved = {n: recalibrate.snapshot(self._points[n].quantizer) for n in targets}
                for n, (lo, hi) in targets.items():
                    self._undo.remember(self._points[n].quantizer_name, self._points[n].quantizer)
                    recalibrate.set_range(self._points[n].quantizer, lo, hi)
                after = self._sqnr(data, refs)
                extra = ("; " + "; ".join(notes)) if notes else ""
                if (
                    math.isfinite(after)
                    and after > current + self.min_gain_db
                    or (after == math.inf > current)
                ):
                    results.append(
                        _result(
                            e,
                            list(targets),
                            True,
                            current,
                            after,
                            f"taken: SQNR {current:.2f} -> {after:.2f} dB{extra}",
                        )
                    )
                    current = after
                    done.update(targets)
                else:
                    for n, snap in saved.items():
                        recalibrate.load(self._points[n].quantizer, snap)
                    verb = "lower" if after < current else "not raise"
                    results.append(
                        _result(
                            e,
                            list(targets),
                            False,
                            current,
                            after,
                            f"not taken: would {verb} fidelity (SQNR {current:.2f} -> {after:.2f} dB){extra}",
                        )
                    )
        finally:
            self._mode = "observe" if self.calibrated_at is not None else "idle"
        self._refresh_clip_ranges()
        elapsed = time.perf_counter() - started
        for r in results:
            r["seconds"] = elapsed
            pt = self._points.get(r["layer"])
            if pt is not None:
                pt.last_action = r
        self._actions.extend(results)
        return results

    def _targets(
        self, e: dict[str, Any], data: list[torch.Tensor]
    ) -> tuple[list[str], dict[str, tuple[float, float]], list[str]]:
        layer = e["layer"]
        notes: list[str] = []
        if e["action"] == dec.FINE_TUNE:
            p = self._points[layer]
            old = recalibrate.representable_range(p.quantizer)
            lo_t, hi_t = e.get("mean_min"), e.get("mean_max")
            if lo_t is None or hi_t is None:
                return [layer], {}, ["no range observed since calibration"]
            if old is None:
                return [layer], {layer: (lo_t, hi_t)}, notes
            r = self.fine_tune_rate
            return [layer], {layer: (old[0] + r * (lo_t - old[0]), old[1] + r * (hi_t - old[1]))}, notes
        group = [layer] + [d for d in self._downstream.get(layer, []) if d in self._points]
        usable: list[tuple[str, nn.Module]] = []
        for n in group:
            p = self._points[n]
            why = recalibrate.unsupported_reason(p.quantizer)
            if why is not None:
                notes.append(f"{n} left alone: {why}")
            elif p.ref is None:
                notes.append(f"{n} left alone: not calibrated")
            else:
                usable.append((n, p.quantizer))
        all_q = [q for _, q in find_quantizers(self.model)]
        ranges = (
            recalibrate.measure_ranges(self.model, usable, data, all_q, self.recal_method) if usable else {}
        )
        targets: dict[str, tuple[float, float]] = {}
        for n, r in ranges.items():
            if isinstance(r, str):
                notes.append(f"{n} left alone: {r}")
            else:
                targets[n] = r
        return group, targets, notes

    def _refresh_clip_ranges(self) -> None:
        for p in self._points.values():
            if p.acc is not None:
                p.acc.set_clip_range(recalibrate.representable_range(p.quantizer))

    def restore(self) -> list[str]:
        """Undo every action taken by :meth:`apply`; returns the quantizers restored."""
        names = self._undo.restore()
        self._refresh_clip_ranges()
        if names:
            self._actions.append({"layer": None, "action": "restore", "taken": True, "quantizers": names})
        for p in self._points.values():
            p.last_action = None
        return names

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """JSON-ready state: configuration, per-layer report with histograms, actions."""
        from clusterdoctor.training.qat.state import SCHEMA

        return {
            "schema": SCHEMA,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "calibrated_at": self.calibrated_at,
            "config": {
                "bins": self.bins,
                "score_weights": list(self.score_weights),
                "threshold_mode": self.threshold_mode,
                "k_low": self.k_low,
                "k_high": self.k_high,
                "fixed_thresholds": list(self.fixed_thresholds),
                "sample_limit": self.sample_limit,
                "recal_method": self.recal_method,
                "every": self.every,
                "downstream_method": self._downstream_method,
                "float_reference": "float_model" if self.float_model is not None else "fake quant disabled",
            },
            "layers": self.report(include_histograms=True),
            "actions": list(self._actions),
        }

    def save(self, path: str | Path) -> None:
        """Write :meth:`state` as JSON to ``path`` (read by ``clusterdoctor qat report``)."""
        from clusterdoctor.training.qat.state import save_state

        save_state(self.state(), path)


def _result(
    e: dict[str, Any], layers: list[str], taken: bool, before: float | None, after: float | None, reason: str
) -> dict[str, Any]:
    return {
        "layer": e["layer"],
        "action": e["action"],
        "layers": layers,
        "taken": taken,
        "sqnr_before_db": before,
        "sqnr_after_db": after,
        "reason": reason,
    }
