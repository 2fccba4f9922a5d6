"""Periodicity of a time series: the dominant period and how strongly the series repeats.

:func:`detect_period` resamples the points onto a uniform grid, removes the mean and a linear
trend, and reads the autocorrelation function (computed with numpy's FFT): the period is the lag
of the highest ACF peak after the ACF first drops below zero, refined by parabolic interpolation;
the strength is the ACF value there (1 = repeats exactly, ~0 = no periodic structure). At least
``min_cycles`` cycles must fit in the series. numpy is imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Periodicity", "detect_period", "resample"]


@dataclass(frozen=True)
class Periodicity:
    """A detected period (seconds), its strength in [0, 1] and how many cycles the data holds."""

    period: float
    strength: float
    cycles: float


def resample(
    points: Sequence[tuple[float, float]], step: float | None = None
) -> tuple[list[float], float, float]:
    """``(values, t0, step)`` on a uniform grid (linear interpolation; NaN points dropped).

    ``step`` defaults to the median spacing of the points.
    """
    import numpy as np

    pts = sorted((float(t), float(v)) for t, v in points if v == v and t == t and math.isfinite(v))
    if len(pts) < 2:
        return [v for _, v in pts], (pts[0][0] if pts else 0.0), (step or 0.0)
    t = np.array([p[0] for p in pts])
    v = np.array([p[1] for p in pts])
    keep = np.concatenate(([True], np.diff(t) > 0))
    t, v = t[keep], v[keep]
    if len(t) < 2:
        return [float(x) for x in v], float(t[0]), step or 0.0
    st = float(step) if step else float(np.median(np.diff(t)))
    if st <= 0:
        return [float(x) for x in v], float(t[0]), 0.0
    grid = np.arange(t[0], t[-1] + st * 0.5, st)
    return [float(x) for x in np.interp(grid, t, v)], float(t[0]), st


def detect_period(
    points: Sequence[tuple[float, float]],
    min_period: float | None = None,
    max_period: float | None = None,
    min_cycles: float = 3.0,
    min_strength: float = 0.3,
    step: float | None = None,
) -> Periodicity | None:
    """The dominant period of ``(time, value)`` points, or None when there is none strong enough."""
    import numpy as np

    vals, _, st = resample(points, step)
    n = len(vals)
    if n < 8 or st <= 0:
        return None
    x = np.asarray(vals, dtype=float)
    idx = np.arange(n)
    slope, intercept = np.polyfit(idx, x, 1)
    x = x - (slope * idx + intercept)
    var = float(np.dot(x, x))
    if var <= 1e-12 * max(1.0, float(np.max(np.abs(vals))) ** 2 * n):
        return None
    size = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(x, size)
    acf = np.fft.irfft(f * np.conj(f), size)[:n] / var
    # unbiased-ish: correct for the shrinking overlap so late lags are not penalised
    acf = acf * n / np.maximum(n - np.arange(n), 1)
    max_lag = int(n / min_cycles)
    if max_period is not None:
        max_lag = min(max_lag, int(max_period / st))
    min_lag = max(2, int(math.ceil((min_period or 0) / st)))
    if max_lag <= min_lag:
        return None
    below = np.nonzero(acf[1 : max_lag + 1] < 0)[0]
    if len(below) == 0:
        return None
    start = max(min_lag, int(below[0]) + 1)
    if start >= max_lag:
        return None
    seg = acf[start : max_lag + 1]
    # local maxima in the segment
    peaks = [i for i in range(1, len(seg) - 1) if seg[i] >= seg[i - 1] and seg[i] >= seg[i + 1]]
    if not peaks:
        return None
    best = max(peaks, key=lambda i: seg[i])
    # prefer the shortest lag whose peak is nearly as high (avoid picking a multiple of the period)
    for i in peaks:
        if seg[i] >= 0.75 * seg[best]:
            best = i
            break
    k = start + best
    y0, y1, y2 = acf[k - 1], acf[k], acf[k + 1] if k + 1 < n else acf[k]
    denom = y0 - 2 * y1 + y2
    shift = 0.5 * (y0 - y2) / denom if denom < 0 else 0.0
    lag = (k + max(-0.5, min(0.5, shift))) * st
    strength = float(max(0.0, min(1.0, y1)))
    if strength < min_strength:
        return None
    return Periodicity(period=float(lag), strength=strength, cycles=float(n * st / lag))
