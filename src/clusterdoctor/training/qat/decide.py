"""What to do about one layer's drift, and which layers sit downstream of it.

:func:`decide` maps a layer's metrics and thresholds to ``keep`` (score below the lower threshold),
``fine_tune_scale`` (between the thresholds: move this quantizer's range to the statistics seen
since calibration) or ``recalibrate`` (at or above the upper threshold: recalibrate this layer and
every quantized layer downstream of it on an unlabeled batch). Anything that makes the metrics
untrustworthy — non-finite activations, no data, no reference, an unsettable quantizer — yields
``keep`` with the reason, never a silent action.

:func:`downstream_layers` finds the quantized layers downstream of a layer from the torch.fx graph
when the model traces, else from the order in which the quantizers ran (every later layer).
The gating by predicted benefit (SQNR against the float model) lives in the monitor, which owns
the model; see :meth:`clusterdoctor.training.qat.monitor.DriftMonitor.apply`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torch import nn

KEEP = "keep"
FINE_TUNE = "fine_tune_scale"
RECALIBRATE = "recalibrate"
ACTIONS = (KEEP, FINE_TUNE, RECALIBRATE)


@dataclass(frozen=True)
class Decision:
    """An action and why."""

    action: str
    reason: str


def decide(
    score: float | None,
    low: float,
    high: float,
    *,
    nonfinite: float = 0,
    observed: float = 0,
    calibrated: bool = True,
    settable_reason: str | None = None,
    kl: float | None = None,
    kurtosis_shift: float | None = None,
    amax_ratio: float | None = None,
    clipped: float | None = None,
) -> Decision:
    """Decide for one layer; see the module docstring for the rules."""
    if not calibrated:
        return Decision(KEEP, "not calibrated: no reference statistics for this layer")
    if nonfinite > 0:
        return Decision(
            KEEP,
            f"{int(nonfinite)} NaN/Inf activation values since calibration: no action taken; "
            "find where they come from before trusting or changing this quantizer",
        )
    if observed <= 0:
        return Decision(KEEP, "no activations observed since calibration")
    if score is None:
        return Decision(KEEP, "drift score undefined (empty histogram)")
    details = _details(score, kl, kurtosis_shift, amax_ratio, clipped)
    if score < low:
        return Decision(KEEP, f"score {score:.3g} < low threshold {low:.3g} ({details})")
    action = FINE_TUNE if score < high else RECALIBRATE
    if settable_reason is not None:
        return Decision(KEEP, f"would {action} (score {score:.3g}; {details}) but cannot: {settable_reason}")
    if action == FINE_TUNE:
        return Decision(
            FINE_TUNE, f"score {score:.3g} between thresholds {low:.3g} and {high:.3g} ({details})"
        )
    return Decision(RECALIBRATE, f"score {score:.3g} >= high threshold {high:.3g} ({details})")


def _details(
    score: float, kl: float | None, ks: float | None, amax_ratio: float | None, clipped: float | None
) -> str:
    parts = []
    if kl is not None:
        parts.append(f"KL {kl:.3g}")
    if ks is not None:
        parts.append(f"Δkurtosis {ks:+.3g}")
    if amax_ratio is not None:
        parts.append(f"amax ×{amax_ratio:.3g}")
    if clipped is not None:
        parts.append(f"clipped {clipped:.2%}")
    return ", ".join(parts) if parts else f"score {score:.3g}"


def downstream_fx(model: nn.Module, layer_of_module: Mapping[str, str]) -> dict[str, list[str]] | None:
    """Quantized layers reachable from each quantized layer in the torch.fx graph, or None.

    ``layer_of_module`` maps a module path seen in the graph (the layer or its quantizer) to the
    monitored layer name. Returns None when the model does not trace.
    """
    try:
        from clusterdoctor.training.qat.mixed import _LeafTracer

        graph = _LeafTracer().trace(model)
    except Exception:
        return None
    node_layer: dict[object, str] = {}
    for node in graph.nodes:
        if node.op == "call_module" and str(node.target) in layer_of_module:
            node_layer[node] = layer_of_module[str(node.target)]
    out: dict[str, list[str]] = {}
    for start, layer in node_layer.items():
        seen: set[object] = set()
        stack = list(start.users)
        found: list[str] = []
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            other = node_layer.get(n)
            if other is not None and other != layer and other not in found:
                found.append(other)
            stack.extend(n.users)
        out.setdefault(layer, [])
        out[layer] = sorted(set(out[layer]) | set(found))
    return out


def downstream_by_order(order: Sequence[str]) -> dict[str, list[str]]:
    """Every later layer in forward order (the conservative fallback when fx cannot trace)."""
    return {name: list(order[i + 1 :]) for i, name in enumerate(order)}
