"""Low-overhead per-layer activation statistics, accumulated on the tensor's device.

Per observed forward pass a :class:`LayerAccumulator` adds, without a host sync:

* a histogram over fixed bins spanning the reference range, plus one underflow and one overflow
  bin (so out-of-range mass is counted, not lost): one ``clamp`` + one ``histc``;
* raw power sums Σd, Σd², Σd³, Σd⁴ of d = x − centre in float64 (kurtosis from the distribution,
  not from the bins), the count, non-finite count, count outside the quantizer's range (clipped),
  per-pass min and max (for the mean range a recalibration would set) and running min/max.

Large tensors are subsampled with a strided view (``sample_limit`` elements per pass) so the cost
per pass is bounded whatever the activation size. To keep the per-pass cost to a few tensor ops,
:meth:`LayerAccumulator.push` only copies the sample; the statistics are computed on the
concatenated samples every ``flush_every`` passes and before any summary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from clusterdoctor.training.qat.metrics import Moments

#: Default number of regular bins (plus two overflow bins).
DEFAULT_BINS = 64
#: Default most elements looked at per forward pass and layer.
DEFAULT_SAMPLE_LIMIT = 4096
#: Default passes whose samples are batched into one statistics update.
DEFAULT_FLUSH_EVERY = 16

# Layout of the summed statistics vector.
N, NONFINITE, CLIPPED, S1, S2, S3, S4, SUM_MIN, SUM_MAX, PASSES = range(10)
_VEC = 10


def _next_prime(n: int) -> int:
    n = max(n, 2)
    while any(n % d == 0 for d in range(2, int(n**0.5) + 1)):
        n += 1
    return n


def sample_step(n: int, limit: int) -> int:
    """Stride of the sample of an ``n``-element tensor: 1, or a prime ≥ n/limit.

    A prime stride is coprime with the (usually power-of-two) tensor dimensions, so the sample
    cycles over every channel and position instead of always hitting the same columns.
    """
    if limit <= 0 or n <= limit:
        return 1
    return _next_prime(-(-n // limit))


def sample(x: torch.Tensor, limit: int) -> torch.Tensor:
    """A strided, detached 1-D sample of at most about ``limit`` elements of ``x``."""
    flat = x.detach().reshape(-1)
    step = sample_step(flat.numel(), limit)
    return flat if step == 1 else flat[::step]


@dataclass
class Summary:
    """Host-side totals of one accumulator (or one calibration batch)."""

    hist: list[float]
    n: float
    nonfinite: float
    clipped: float
    moments: Moments
    mean_min: float | None
    mean_max: float | None
    amin: float | None
    amax: float | None

    @property
    def abs_max(self) -> float | None:
        """max|x| seen."""
        if self.amin is None or self.amax is None:
            return None
        return max(abs(self.amin), abs(self.amax))


class LayerAccumulator:
    """Histogram and moments of one layer's quantizer input over fixed bins [lo, hi]."""

    def __init__(
        self,
        lo: float,
        hi: float,
        bins: int = DEFAULT_BINS,
        centre: float = 0.0,
        clip_range: tuple[float, float] | None = None,
        device: torch.device | str = "cpu",
        flush_every: int = DEFAULT_FLUSH_EVERY,
    ) -> None:
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"reference range must be finite, got [{lo}, {hi}]")
        if hi <= lo:
            pad = max(abs(lo) * 1e-3, 1e-6)
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi, self.bins, self.centre = float(lo), float(hi), int(bins), float(centre)
        self.width = (self.hi - self.lo) / self.bins
        self.clip_range = clip_range
        self.device = torch.device(device)
        self.flush_every = max(int(flush_every), 1)
        self.pending: list[torch.Tensor] = []
        self.reset()

    def reset(self) -> None:
        """Forget everything accumulated."""
        dt = torch.float64
        self.hist = torch.zeros(self.bins + 2, dtype=dt, device=self.device)
        self.vec = torch.zeros(_VEC, dtype=dt, device=self.device)
        self.run_min = torch.full((), math.inf, dtype=dt, device=self.device)
        self.run_max = torch.full((), -math.inf, dtype=dt, device=self.device)
        self.pending = []

    def push(self, s: torch.Tensor) -> None:
        """Keep a copy of a 1-D sample of one pass; statistics are updated every ``flush_every`` passes."""
        if s.numel() == 0:
            return
        self.pending.append(s.detach().clone())
        if len(self.pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Fold the pending samples into the statistics (one host sync per flush)."""
        if not self.pending:
            return
        pend, self.pending = self.pending, []
        self.add_passes(pend)

    def set_clip_range(self, clip_range: tuple[float, float] | None) -> None:
        """Quantizer range used for the clipped count from now on."""
        self.clip_range = clip_range

    def add(self, s: torch.Tensor) -> None:
        """Accumulate the 1-D sample of one forward pass."""
        self.add_passes([s])

    def add_passes(self, samples: list[torch.Tensor]) -> None:
        """Accumulate the 1-D samples of several forward passes (moved to our device if needed).

        Histogram, clip and comparison work is done in float32 (float64 inputs stay float64);
        power sums are accumulated in float64 about the reference centre.
        """
        samples = [t.reshape(-1) for t in samples if t.numel() > 0]
        if not samples:
            return
        dev = samples[0].device
        if dev != self.device:
            self.device = dev
            self.hist = self.hist.to(dev)
            self.vec = self.vec.to(dev)
            self.run_min = self.run_min.to(dev)
            self.run_max = self.run_max.to(dev)
        dt = torch.float64 if samples[0].dtype == torch.float64 else torch.float32
        same = len({t.numel() for t in samples}) == 1
        x = (torch.stack(samples) if same else torch.cat(samples)).to(dt).reshape(-1)
        n = x.numel()
        nfin = torch.isfinite(x).sum()
        if int(nfin) != n:
            # Non-finite values are neutralised for the sums; the layer is flagged by the count.
            x = torch.nan_to_num(x, nan=self.centre, posinf=self.hi + self.width, neginf=self.lo - self.width)
        if same:
            mins, maxs = torch.aminmax(x.view(len(samples), -1), dim=1)
        else:
            parts = torch.split(x, [t.numel() for t in samples])
            mm = [torch.aminmax(p) for p in parts]
            mins, maxs = torch.stack([a for a, _ in mm]), torch.stack([b for _, b in mm])
        w = self.width
        self.hist += torch.histc(
            x.clamp(self.lo - 0.5 * w, self.hi + 0.5 * w), self.bins + 2, self.lo - w, self.hi + w
        ).to(torch.float64)
        if self.clip_range is not None:
            clipped = (x.clamp(self.clip_range[0], self.clip_range[1]) != x).sum()
        else:
            clipped = torch.zeros((), dtype=torch.int64, device=dev)
        d = x - self.centre
        d2 = d * d
        f64 = torch.float64
        v = torch.stack(
            [
                nfin.to(f64),
                (n - nfin).to(f64),
                clipped.to(f64),
                d.sum(dtype=f64),
                d2.sum(dtype=f64),
                (d2 * d).sum(dtype=f64),
                (d2 * d2).sum(dtype=f64),
                mins.sum(dtype=f64),
                maxs.sum(dtype=f64),
                torch.full((), float(len(samples)), dtype=f64, device=dev),
            ]
        )
        self.vec += v
        torch.minimum(self.run_min, mins.min().to(f64), out=self.run_min)
        torch.maximum(self.run_max, maxs.max().to(f64), out=self.run_max)

    def summary(self) -> Summary:
        """Totals on the host (one sync)."""
        self.flush()
        return summarise(self.hist, self.vec, self.run_min, self.run_max, self.centre)


def summarise(
    hist: torch.Tensor, vec: torch.Tensor, run_min: torch.Tensor, run_max: torch.Tensor, centre: float
) -> Summary:
    """Host-side :class:`Summary` of accumulated tensors."""
    v = vec.detach().cpu().tolist()
    passes = v[PASSES]
    mn, mx = float(run_min), float(run_max)
    return Summary(
        hist=hist.detach().cpu().tolist(),
        n=v[N],
        nonfinite=v[NONFINITE],
        clipped=v[CLIPPED],
        moments=Moments(v[N], v[S1], v[S2], v[S3], v[S4], centre),
        mean_min=v[SUM_MIN] / passes if passes else None,
        mean_max=v[SUM_MAX] / passes if passes else None,
        amin=mn if math.isfinite(mn) else None,
        amax=mx if math.isfinite(mx) else None,
    )


def summary_of_values(
    values: torch.Tensor,
    lo: float,
    hi: float,
    bins: int,
    centre: float,
    clip_range: tuple[float, float] | None,
) -> Summary:
    """:class:`Summary` of one batch of values (used for calibration batches)."""
    acc = LayerAccumulator(lo, hi, bins, centre, clip_range, device=values.device)
    acc.add(values.reshape(-1))
    return acc.summary()
