"""Drift metrics for one quantized layer, computed from small accumulated summaries.

Everything here is plain Python/numpy on CPU so that reports, saved states and tests do not need
torch: the monitor accumulates histogram counts and raw moments on the tensor's device and hands
the (small) totals over.

* :func:`kl_divergence` — KL(current ‖ reference) between two histograms over the same fixed bins
  (overflow bins included), with additive smoothing of empty bins (Evidently fills empty bins with
  1e-4 the same way; see ../shared/reference/qat.md §4).
* :func:`kurtosis_from_moments` — Pearson kurtosis (normal = 3, uniform = 1.8) from raw power sums
  about a centre, i.e. from the distribution itself, not from the bin counts.
* :func:`drift_score` — ``w_kl·KL + w_kurt·|Δkurtosis|``, default 0.7 / 0.3 (issue 6).
* :func:`sqnr_db` — signal-to-quantization-noise ratio of a quantized output against a float one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Probability given to empty bins before renormalising (Evidently's 1e-4 fill).
KL_EPSILON = 1e-4
#: Default weights of the combined score (issue 6: 0.7·KL + 0.3·|Δkurtosis|).
DEFAULT_SCORE_WEIGHTS = (0.7, 0.3)


def _normalise(counts: Sequence[float] | np.ndarray, eps: float) -> np.ndarray | None:
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c < 0):
        return None
    total = float(c.sum())
    if total <= 0:
        return None
    p = c / total
    p = (p + eps) / (1.0 + eps * p.size)
    return p


def kl_divergence(
    current: Sequence[float], reference: Sequence[float], eps: float = KL_EPSILON
) -> float | None:
    """KL(current ‖ reference) in nats between two histograms over the same bins.

    Returns None when either histogram is empty, has negative or non-finite counts, or the bin
    counts differ. Always ≥ 0, and 0 for histograms that are proportional to each other.
    """
    p = _normalise(current, eps)
    q = _normalise(reference, eps)
    if p is None or q is None or p.size != q.size:
        return None
    kl = float(np.sum(p * (np.log(p) - np.log(q))))
    return max(kl, 0.0)


@dataclass(frozen=True)
class Moments:
    """Raw power sums of ``x - centre``: n, Σd, Σd², Σd³, Σd⁴."""

    n: float
    s1: float
    s2: float
    s3: float
    s4: float
    centre: float = 0.0

    def __add__(self, other: Moments) -> Moments:
        if other.centre != self.centre:
            raise ValueError("moments about different centres cannot be added")
        return Moments(
            self.n + other.n,
            self.s1 + other.s1,
            self.s2 + other.s2,
            self.s3 + other.s3,
            self.s4 + other.s4,
            self.centre,
        )

    def __sub__(self, other: Moments) -> Moments:
        if other.centre != self.centre:
            raise ValueError("moments about different centres cannot be subtracted")
        return Moments(
            self.n - other.n,
            self.s1 - other.s1,
            self.s2 - other.s2,
            self.s3 - other.s3,
            self.s4 - other.s4,
            self.centre,
        )

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray, centre: float = 0.0) -> Moments:
        """Moments of ``values`` (non-finite values are ignored)."""
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        v = v[np.isfinite(v)] - centre
        v2 = v * v
        return cls(
            float(v.size),
            float(v.sum()),
            float(v2.sum()),
            float((v2 * v).sum()),
            float((v2 * v2).sum()),
            centre,
        )

    def mean(self) -> float | None:
        """Mean of the distribution, or None when empty."""
        if self.n <= 0:
            return None
        return self.centre + self.s1 / self.n

    def variance(self) -> float | None:
        """Population variance, or None when empty."""
        if self.n <= 0:
            return None
        m1 = self.s1 / self.n
        return max(self.s2 / self.n - m1 * m1, 0.0)


def kurtosis_from_moments(m: Moments, rel_tol: float = 1e-9) -> float | None:
    """Pearson kurtosis E[(x-μ)⁴]/σ⁴ from raw power sums, or None when undefined.

    Undefined means fewer than 2 values or a (numerically) constant distribution.
    """
    if m.n < 2 or not all(math.isfinite(v) for v in (m.s1, m.s2, m.s3, m.s4)):
        return None
    a1 = m.s1 / m.n
    a2 = m.s2 / m.n
    a3 = m.s3 / m.n
    a4 = m.s4 / m.n
    var = a2 - a1 * a1
    if var <= rel_tol * max(a2, 1e-300):
        return None
    c4 = a4 - 4 * a1 * a3 + 6 * a1 * a1 * a2 - 3 * a1**4
    denom = var * var
    if not denom > 0 or not math.isfinite(denom):  # underflow of tiny variances
        return None
    k = c4 / denom
    return max(k, 0.0) if math.isfinite(k) else None


def kurtosis(values: Sequence[float] | np.ndarray) -> float | None:
    """Pearson kurtosis of ``values`` (centred first for numerical accuracy)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return None
    return kurtosis_from_moments(Moments.of(v, centre=float(v.mean())))


def kurtosis_shift(current: float | None, reference: float | None) -> float | None:
    """current − reference kurtosis, or None when either is undefined."""
    if current is None or reference is None:
        return None
    return current - reference


def amax_ratio(current_amax: float | None, reference_amax: float | None) -> float | None:
    """max|x| now over max|x| at calibration (1 = unchanged), None when undefined."""
    if current_amax is None or reference_amax is None or not math.isfinite(current_amax):
        return None
    if reference_amax <= 0 or not math.isfinite(reference_amax):
        return None
    return current_amax / reference_amax


def clipped_fraction(clipped: float, total: float) -> float | None:
    """Share of values outside the quantizer's representable range, None when nothing was seen."""
    if total <= 0:
        return None
    return min(max(clipped / total, 0.0), 1.0)


def drift_score(
    kl: float | None,
    kurt_shift: float | None,
    weights: tuple[float, float] = DEFAULT_SCORE_WEIGHTS,
) -> float | None:
    """Combined drift score ``w_kl·KL + w_kurt·|Δkurtosis|``.

    An undefined kurtosis shift (constant distribution) contributes 0; an undefined KL makes the
    score undefined.
    """
    if kl is None:
        return None
    w_kl, w_k = weights
    ks = abs(kurt_shift) if kurt_shift is not None else 0.0
    return w_kl * kl + w_k * ks


def sqnr_db(reference_power: float, error_power: float) -> float:
    """10·log10(‖y_float‖² / ‖y_float − y_quant‖²); +inf for an exact match, -inf for no signal."""
    if not (math.isfinite(reference_power) and math.isfinite(error_power)):
        return float("nan")
    if error_power <= 0:
        return math.inf
    if reference_power <= 0:
        return -math.inf
    return 10.0 * math.log10(reference_power / error_power)
