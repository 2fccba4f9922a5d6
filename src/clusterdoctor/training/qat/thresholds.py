"""Per-layer drift thresholds.

Fixed cut-offs do not work on activations (the pilot in ../shared/reference/qat.md §9 saw input-layer
PSI of 5–21 for every drift), so thresholds are learned per layer from the reference run's own
batch-to-batch variation, NannyML style: ``mean + k·σ`` of the scores of each calibration batch
against the rest (NannyML's default multiplier is 3, §4). The fixed defaults 0.15 / 0.30 stay
available, and are used (with the reason said) when there are too few calibration batches to learn.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Fixed defaults from issue 6.
FIXED_LOW = 0.15
FIXED_HIGH = 0.30
#: σ multiplier of the lower threshold. NannyML's default is 3 (reference §4), but a window is
#: flagged when *any* of its layers crosses, and drift scores are right-skewed: on the digits
#: experiment (bench/qat_digits.py, seeds 0-4, 4 layers, 50-image windows) k = 3 / 4 / 5 gave
#: 12.8% / 5.0% / 2.2% false alarms on undrifted windows, with every injected drift still flagged
#: at k = 5. Validated on seeds 5-9 (bench/RESULTS-qat.md).
DEFAULT_K_LOW = 5.0
#: Twice the distance for "recalibrate".
DEFAULT_K_HIGH = 10.0
#: Fewest calibration batches from which a spread can be learned.
MIN_BATCHES = 3
#: σ is floored at this share of the mean score: a handful of batches underestimates spread.
MIN_REL_SIGMA = 0.25
#: Absolute floor of σ so that perfectly repeatable calibration batches still leave some slack.
MIN_ABS_SIGMA = 1e-3


@dataclass(frozen=True)
class Thresholds:
    """Lower (keep below) and upper (recalibrate at or above) score thresholds of one layer."""

    low: float
    high: float
    source: str  # "learned" | "fixed" | "fixed (fallback: ...)"
    batch_scores: tuple[float, ...] = ()

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "low": self.low,
            "high": self.high,
            "source": self.source,
            "batch_scores": list(self.batch_scores),
        }


def fixed(low: float = FIXED_LOW, high: float = FIXED_HIGH, note: str | None = None) -> Thresholds:
    """The fixed thresholds (default 0.15 and 0.30)."""
    if not (0 <= low <= high):
        raise ValueError(f"need 0 <= low <= high, got {low}, {high}")
    return Thresholds(low, high, "fixed" if note is None else f"fixed (fallback: {note})")


def learn(
    batch_scores: Sequence[float | None],
    k_low: float = DEFAULT_K_LOW,
    k_high: float = DEFAULT_K_HIGH,
    fallback: tuple[float, float] = (FIXED_LOW, FIXED_HIGH),
) -> Thresholds:
    """``mean + k·σ`` of the calibration batches' leave-one-out scores.

    Undefined (None / non-finite) scores are dropped; with fewer than :data:`MIN_BATCHES` left the
    fixed thresholds are returned with the reason in ``source``.
    """
    if not (0 <= k_low <= k_high):
        raise ValueError(f"need 0 <= k_low <= k_high, got {k_low}, {k_high}")
    scores = [float(s) for s in batch_scores if s is not None and math.isfinite(s)]
    if len(scores) < MIN_BATCHES:
        return fixed(*fallback, note=f"{len(scores)} usable calibration batches, need {MIN_BATCHES} to learn")
    mean = statistics.fmean(scores)
    sigma = statistics.pstdev(scores)
    sigma = max(sigma, MIN_REL_SIGMA * abs(mean), MIN_ABS_SIGMA)
    return Thresholds(mean + k_low * sigma, mean + k_high * sigma, "learned", tuple(scores))
