"""Honest accounting of one rank's gradient synchronisation (no torch needed).

Bytes are what this rank *sends* under ring algorithms, using the factors of NVIDIA nccl-tests
doc/PERFORMANCE.md: all-reduce ``2(n-1)/n * S``, reduce-scatter / all-gather / all-to-all
``(n-1)/n * S`` with S the total array size. They are modelled from the collectives issued, not
counted at the socket. ``bytes_uncompressed`` is what the same collectives would have sent in fp32
without compression, so ``compression_ratio`` compares like with like.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from clusterdoctor.training.sync.config import LINK_CLASSES


def allreduce_bytes(group_size: int, nbytes: float) -> float:
    """Bytes one rank sends in a ring all-reduce of ``nbytes``."""
    return 2.0 * (group_size - 1) / group_size * nbytes if group_size > 1 else 0.0


def gather_bytes(group_size: int, total_nbytes: float) -> float:
    """Bytes one rank sends in an all-gather / reduce-scatter / all-to-all over ``total_nbytes``."""
    return (group_size - 1) / group_size * total_nbytes if group_size > 1 else 0.0


@dataclass
class SyncStats:
    """Counters of one installed hook on one rank. Read them with :meth:`as_dict`.

    ``compress_seconds`` is host time spent encoding and decoding (on CUDA, kernel launch time
    unless the stream is synchronised). ``error_norm`` is the L2 norm of the compression error of the
    last step (compensated gradient minus what was sent), ``relative_error`` that divided by the
    norm of the compensated gradient.
    """

    scheme: str
    rank: int = 0
    world_size: int = 1
    steps: int = 0
    compressed_steps: int = 0
    bytes_sent: float = 0.0
    bytes_uncompressed: float = 0.0
    bytes_by_link: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LINK_CLASSES, 0.0))
    last_step_bytes_by_link: dict[str, float] = field(default_factory=dict)
    compress_seconds: float = 0.0
    error_norm: float = 0.0
    relative_error: float = 0.0
    shards_compressed: int = 0
    shards_skipped_small: int = 0
    layout_mismatches: int = 0
    staging_allocations: int = 0
    staging_bytes: int = 0
    node_grouping: str = "none (flat)"
    link_bandwidth: dict[str, dict[str, Any]] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _step_bytes: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    _step_err_sq: float = field(default=0.0, repr=False, compare=False)
    _step_ref_sq: float = field(default=0.0, repr=False, compare=False)

    # -- recording (called by the hook) --------------------------------------------------------
    def add_bytes(self, link: str, sent: float, uncompressed: float) -> None:
        with self._lock:
            self.bytes_sent += sent
            self.bytes_uncompressed += uncompressed
            self.bytes_by_link[link] = self.bytes_by_link.get(link, 0.0) + sent
            self._step_bytes[link] = self._step_bytes.get(link, 0.0) + sent

    def add_compress_time(self, seconds: float) -> None:
        with self._lock:
            self.compress_seconds += seconds

    def add_error(self, err_sq: float, ref_sq: float) -> None:
        with self._lock:
            self._step_err_sq += err_sq
            self._step_ref_sq += ref_sq

    def end_step(self, compressed: bool) -> None:
        with self._lock:
            self.steps += 1
            if compressed:
                self.compressed_steps += 1
                self.error_norm = math.sqrt(self._step_err_sq)
                self.relative_error = (
                    math.sqrt(self._step_err_sq / self._step_ref_sq) if self._step_ref_sq > 0 else 0.0
                )
            self.last_step_bytes_by_link = dict(self._step_bytes)
            self._step_bytes = {}
            self._step_err_sq = self._step_ref_sq = 0.0

    # -- reading -------------------------------------------------------------------------------
    @property
    def compression_ratio(self) -> float:
        """``bytes_uncompressed / bytes_sent`` (1.0 before anything was sent)."""
        return self.bytes_uncompressed / self.bytes_sent if self.bytes_sent > 0 else 1.0

    def as_dict(self) -> dict[str, Any]:
        """All counters as plain JSON-able values."""
        with self._lock:
            return {
                "scheme": self.scheme,
                "rank": self.rank,
                "world_size": self.world_size,
                "steps": self.steps,
                "compressed_steps": self.compressed_steps,
                "bytes_sent": self.bytes_sent,
                "bytes_uncompressed": self.bytes_uncompressed,
                "compression_ratio": self.compression_ratio,
                "bytes_per_step": self.bytes_sent / self.steps if self.steps else 0.0,
                "bytes_by_link": {k: v for k, v in self.bytes_by_link.items() if v or k == "world"},
                "last_step_bytes_by_link": dict(self.last_step_bytes_by_link),
                "compress_seconds": self.compress_seconds,
                "error_norm": self.error_norm,
                "relative_error": self.relative_error,
                "shards_compressed": self.shards_compressed,
                "shards_skipped_small": self.shards_skipped_small,
                "layout_mismatches": self.layout_mismatches,
                "staging_allocations": self.staging_allocations,
                "staging_bytes": self.staging_bytes,
                "node_grouping": self.node_grouping,
                "link_bandwidth": {k: dict(v) for k, v in self.link_bandwidth.items()},
                "decisions": {k: dict(v) for k, v in self.decisions.items()},
                "notes": list(self.notes),
            }

    def prometheus_text(self) -> str:
        """The counters in the Prometheus text exposition format (metric prefix ``clusterdoctor_sync_``)."""
        d = self.as_dict()
        base = f'scheme="{_esc(self.scheme)}",rank="{self.rank}"'
        lines: list[str] = []

        def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
            full = f"clusterdoctor_sync_{name}"
            lines.append(f"# HELP {full} {help_text}")
            lines.append(f"# TYPE {full} {kind}")
            for extra, value in samples:
                labels = base + ("," + extra if extra else "")
                lines.append(f"{full}{{{labels}}} {_num(value)}")

        metric(
            "steps_total", "counter", "Optimizer steps whose gradients were synchronised.", [("", d["steps"])]
        )
        metric(
            "compressed_steps_total",
            "counter",
            "Steps past warm-up in which compression could apply.",
            [("", d["compressed_steps"])],
        )
        metric(
            "bytes_sent_total",
            "counter",
            "Bytes this rank sent (ring-algorithm model), by link class.",
            [(f'link="{k}"', v) for k, v in sorted(self.bytes_by_link.items())],
        )
        metric(
            "bytes_uncompressed_total",
            "counter",
            "Bytes the same collectives would have sent in fp32 without compression.",
            [("", d["bytes_uncompressed"])],
        )
        metric(
            "compression_ratio", "gauge", "bytes_uncompressed / bytes_sent.", [("", d["compression_ratio"])]
        )
        metric(
            "compress_seconds_total",
            "counter",
            "Host seconds spent encoding and decoding.",
            [("", d["compress_seconds"])],
        )
        metric(
            "error_norm",
            "gauge",
            "L2 norm of the compression error of the last step.",
            [("", d["error_norm"])],
        )
        metric(
            "relative_error",
            "gauge",
            "Compression error norm over gradient norm, last step.",
            [("", d["relative_error"])],
        )
        metric(
            "staging_allocations_total",
            "counter",
            "Staging buffers allocated (flat after the first compressed step).",
            [("", d["staging_allocations"])],
        )
        return "\n".join(lines) + "\n"


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))
