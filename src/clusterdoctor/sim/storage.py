"""Storage-tier model for checkpoints and activations, and its effect on checkpoint stalls.

Tiers (hot to cold):

- **HBM / host snapshot (hot)**: a checkpoint younger than ``hot_window_s`` (15 min) stays here; saving
  only blocks training for the device-to-host copy (CheckFreq's snapshot() phase, FAST'21);
- **persistent memory (warm)**: capacity-limited, evicts the least frequently accessed checkpoint
  (least recently used among equals);
- **NVMe (cold)**: zstd-compressed, unlimited; reading pays decompression.

``stall_per_checkpoint`` is the time training waits per save. Writing straight to NVMe stalls for the
whole write; with the hot tier training only waits for the snapshot copy and the demotion to warm and
cold happens in the background — unless the next save arrives before the background write finished,
in which case the excess shows up as stall (the pipeline is full). Bandwidths are parameters with
defaults marked as assumptions; set them from your own measurements.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Tier:
    name: str
    capacity_gb: float  # float("inf") for unbounded
    write_gbps: float  # GB/s
    read_gbps: float
    compression_ratio: float = 1.0  # bytes in / bytes stored


# Defaults are assumptions (order-of-magnitude: PCIe Gen4 x16 host copy ~20 GB/s, Optane-class PMem
# ~6 GB/s write, one Gen4 NVMe ~3 GB/s write); pass your own Tier objects.
HOT = Tier("hbm-snapshot", 80.0, 20.0, 20.0)
WARM = Tier("pmem", 512.0, 6.0, 10.0)
COLD = Tier("nvme-zstd", float("inf"), 3.0, 5.0, compression_ratio=1.3)
HOT_WINDOW_S = 15 * 60.0


@dataclass
class _Entry:
    key: str
    size_gb: float
    created: float
    tier: str
    accesses: int = 0
    last_access: float = 0.0


@dataclass
class TierModel:
    """Where each checkpoint lives over time, and what saving and loading cost."""

    hot: Tier = HOT
    warm: Tier = WARM
    cold: Tier = COLD
    hot_window_s: float = HOT_WINDOW_S
    entries: dict[str, _Entry] = field(default_factory=dict)
    stalls_s: list[float] = field(default_factory=list)
    _background_until: float = 0.0

    def used_gb(self, tier: str) -> float:
        return sum(e.size_gb for e in self.entries.values() if e.tier == tier)

    def save(self, key: str, size_gb: float, now: float) -> float:
        """Record a checkpoint save at ``now``; returns the training stall in seconds."""
        self.age(now)
        snap = size_gb / self.hot.write_gbps
        if size_gb <= self.warm.capacity_gb:
            bg = size_gb / self.warm.write_gbps
        else:
            bg = size_gb / self.cold.compression_ratio / self.cold.write_gbps
        backlog = max(0.0, self._background_until - now)  # previous background write still running
        stall = snap + backlog
        self._background_until = now + stall + bg
        tier = (
            self.hot.name if size_gb <= self.hot.capacity_gb - self.used_gb(self.hot.name) else self.warm.name
        )
        self.entries[key] = _Entry(key, size_gb, now, tier, last_access=now)
        self._evict_hot(now)
        self.stalls_s.append(stall)
        return stall

    def load(self, key: str, now: float) -> float:
        """Seconds to read checkpoint ``key`` back (from whichever tier holds it)."""
        self.age(now)
        e = self.entries[key]
        e.accesses += 1
        e.last_access = now
        t = {self.hot.name: self.hot, self.warm.name: self.warm, self.cold.name: self.cold}[e.tier]
        return e.size_gb / t.compression_ratio / t.read_gbps

    def age(self, now: float) -> None:
        """Demote checkpoints older than the hot window; keep warm within capacity (LFU, then LRU)."""
        for e in self.entries.values():
            if e.tier == self.hot.name and now - e.created >= self.hot_window_s:
                e.tier = self.warm.name
        self._evict_warm()

    def _evict_hot(self, now: float) -> None:
        hot = sorted((e for e in self.entries.values() if e.tier == self.hot.name), key=lambda e: e.created)
        while sum(e.size_gb for e in hot) > self.hot.capacity_gb and hot:
            hot.pop(0).tier = self.warm.name
        self._evict_warm()

    def _evict_warm(self) -> None:
        warm = [e for e in self.entries.values() if e.tier == self.warm.name]
        total = sum(e.size_gb for e in warm)
        for e in sorted(warm, key=lambda e: (e.accesses, e.last_access)):
            if total <= self.warm.capacity_gb:
                break
            e.tier = self.cold.name
            total -= e.size_gb


def stall_per_checkpoint(size_gb: float, interval_s: float, tiered: bool = True, hot: Tier = HOT,
                         warm: Tier = WARM, cold: Tier = COLD, saves: int = 20) -> float:  # fmt: skip
    """Mean training stall (s) per checkpoint for periodic saves; ``tiered=False`` writes straight to NVMe."""
    if not tiered:
        return size_gb / cold.compression_ratio / cold.write_gbps
    m = TierModel(hot, warm, cold)
    for i in range(saves):
        m.save(f"ckpt-{i}", size_gb, i * interval_s)
    return sum(m.stalls_s) / len(m.stalls_s)


CKPT_GB_PER_GPU = 5.0  # assumption: checkpoint bytes per GPU of a job (a 40 GB checkpoint per 8-GPU node)
CKPT_INTERVAL_S = 600.0  # a checkpoint every 10 min (the stall example above)


def restart_cost_s(num_gpus: int, gb_per_gpu: float = CKPT_GB_PER_GPU, interval_s: float = CKPT_INTERVAL_S,
                   tiered: bool = True, warm: Tier = WARM, cold: Tier = COLD) -> float:  # fmt: skip
    """Seconds of progress a job loses when stopped and restarted elsewhere: half a checkpoint interval of
    work since the last checkpoint, plus reading the checkpoint back (the host snapshot dies with the
    node, so from the warm tier when tiered, else from NVMe) and the save stall it pays again."""
    size = max(num_gpus, 1) * gb_per_gpu
    read = size / warm.read_gbps if tiered else size / cold.compression_ratio / cold.read_gbps
    return interval_s / 2 + read + stall_per_checkpoint(size, interval_s, tiered)
