"""GPU clocks (DVFS): what a graphics clock inside its generation's range does to busy power and speed.

The relations (each a published model; the constants are assumptions, named):

- **Power** ``P(f) = idle_w + (peak_w - idle_w) * (m + (1 - m) * x * v(x)^2)`` with ``x = f / f_max``:
  CMOS dynamic power ``a C V^2 f`` (the form GPU DVFS work uses, e.g. Mei, Wang, Chu, "A survey and
  measurement study of GPU DVFS on energy conservation", Digital Communications and Networks 2017,
  doi 10.1016/j.dcan.2016.10.001). ``idle_w`` is the static part (leakage, board, fans) and does not move
  with the clock; ``m`` (``UNCLOCKED_SHARE`` = 0.3, assumption) is the share of the busy-above-idle
  watts drawn by HBM and I/O, which follow the memory clock, not the graphics clock.
- **Voltage** follows the clock linearly across the DVFS range, from ``V_MIN_REL`` (0.65, assumption)
  of the top voltage at ``f_min`` to 1 at ``f_max`` (the V/f curve is monotone; its exact shape per
  board is not published).
- **Speed** Hsu and Feng's beta model ("A power-aware run-time system for high-performance
  computing", SC'05): ``T(f) / T(f_max) = beta * (f_max / f - 1) + 1``; beta = 1 is compute-bound
  work (throughput ~ f), beta = 0 memory-bound work (no slowdown from the graphics clock).

Monotone by construction: a lower clock never raises power and never makes a job faster
(``tests/sim/test_sim_dvfs.py`` checks both with Hypothesis).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from clusterdoctor.sim.power import GpuPower

UNCLOCKED_SHARE = 0.3  # assumption: share of busy-above-idle watts not on the graphics clock (HBM, I/O)
V_MIN_REL = 0.65  # assumption: voltage at the range's lowest clock, relative to the top voltage
DEFAULT_BETA = 1.0  # compute-bound unless told: the case where a lower clock costs the most time


def _range(gp: GpuPower) -> tuple[float, float]:
    if gp.dvfs_mhz is None:
        return 1.0, 1.0
    lo, hi = gp.dvfs_mhz
    return float(lo), float(hi)


def min_clock_rel(gp: GpuPower) -> float:
    """Lowest clock of the generation's DVFS range as a share of its top clock (1.0: no range known)."""
    lo, hi = _range(gp)
    return lo / hi


def _clamp(gp: GpuPower, x: float) -> float:
    return min(max(float(x), min_clock_rel(gp)), 1.0)


def voltage_rel(gp: GpuPower, x: float) -> float:
    """Voltage at relative clock ``x`` (clamped into the range), as a share of the top voltage."""
    x = _clamp(gp, x)
    x0 = min_clock_rel(gp)
    if x0 >= 1.0:
        return 1.0
    return V_MIN_REL + (1.0 - V_MIN_REL) * (x - x0) / (1.0 - x0)


def power_factor(gp: GpuPower, x: float) -> float:
    """Busy-above-idle watts at relative clock ``x`` as a share of those at the top clock (1 at x=1)."""
    x = _clamp(gp, x)
    v = voltage_rel(gp, x)
    return UNCLOCKED_SHARE + (1.0 - UNCLOCKED_SHARE) * x * v * v


def busy_watts(gp: GpuPower, x: float) -> float:
    """Watts of a fully allocated GPU at relative clock ``x``."""
    return gp.idle_w + (gp.peak_w - gp.idle_w) * power_factor(gp, x)


def speed_factor(gp: GpuPower, x: float, beta: float = DEFAULT_BETA) -> float:
    """Progress rate at relative clock ``x`` as a share of the rate at the top clock (Hsu-Feng beta)."""
    x = _clamp(gp, x)
    b = min(max(float(beta), 0.0), 1.0)
    return 1.0 / (b * (1.0 / x - 1.0) + 1.0)


def clock_for_slowdown(gp: GpuPower, beta: float, max_slowdown: float) -> float:
    """The lowest relative clock at which a job runs at most ``1 + max_slowdown`` times as long."""
    b = min(max(float(beta), 0.0), 1.0)
    if max_slowdown <= 0:
        return 1.0
    if b == 0.0:
        return min_clock_rel(gp)
    # beta * (1/x - 1) + 1 = 1 + s  ->  x = 1 / (1 + s / beta)
    return _clamp(gp, 1.0 / (1.0 + max_slowdown / b))


@dataclass(frozen=True)
class ClockPolicy:
    """Which clock a job starts at (timed engine).

    ``max``: every job at the top clock (the default, and what every result before DVFS assumed).
    ``slack``: when no job waits in the queue (nothing is delayed by a slower job: spare capacity),
    a job starts at the clock that needs the least busy-above-idle energy for its work among the
    clocks that stretch it by at most ``max_slowdown``; when jobs wait it starts at the top clock.
    The clock is set at start and kept (a preempted or migrated job gets a new one when it restarts).
    The energy counted for the choice is the part a clock moves: ``(peak_w - idle_w) * power_factor /
    speed_factor``; the GPU's idle watts are drawn either way while the cluster keeps it on.
    """

    name: str = "max"
    max_slowdown: float = 0.10
    steps: int = 16
    # DVFS range (MHz) assumed for GPU models the catalogue has none for (openb's undisclosed G1-G3);
    # None: their clocks stay at the top
    assume_range_mhz: tuple[int, int] | None = None

    def entry(self, gp: GpuPower) -> GpuPower:
        """``gp`` with ``assume_range_mhz`` filled in where it has no DVFS range."""
        if gp.dvfs_mhz is None and self.assume_range_mhz is not None:
            return replace(gp, dvfs_mhz=self.assume_range_mhz)
        return gp

    def clock(self, gp: GpuPower, beta: float, waiting: int) -> float:
        if self.name == "max" or waiting > 0 or gp.dvfs_mhz is None:
            return 1.0
        lo = clock_for_slowdown(gp, beta, self.max_slowdown)
        best_x, best_e = 1.0, power_factor(gp, 1.0)
        for i in range(self.steps + 1):
            x = lo + (1.0 - lo) * i / self.steps
            e = power_factor(gp, x) / speed_factor(gp, x, beta)
            if e < best_e - 1e-12:
                best_x, best_e = x, e
        return best_x


CLOCK_POLICIES = ("max", "slack")


def get_clock_policy(
    name: str, max_slowdown: float = 0.10, assume_range_mhz: tuple[int, int] | None = None
) -> ClockPolicy:
    if name not in CLOCK_POLICIES:
        raise ValueError(f"unknown clock policy {name!r} (choose from {', '.join(CLOCK_POLICIES)})")
    if not 0.0 <= max_slowdown <= 10.0:
        raise ValueError(f"max slowdown {max_slowdown}: must be between 0 and 10 (0.1 = 10 % longer)")
    return ClockPolicy(name, max_slowdown, assume_range_mhz=assume_range_mhz)
