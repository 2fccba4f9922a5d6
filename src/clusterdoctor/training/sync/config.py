"""The sync configuration: validated options, and a digest every rank must agree on."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMES = ("allreduce", "sharded", "fp16", "bf16", "int8", "topk", "powersgd", "adaptive")
"""Scheme names accepted by :func:`clusterdoctor.training.sync.install`."""

# Codec used for the cross-node stage by each scheme (None: no compression).
SCHEME_CODEC = {
    "allreduce": None,
    "sharded": None,
    "fp16": "fp16",
    "bf16": "bf16",
    "int8": "int8",
    "topk": "topk",
    "powersgd": "powersgd",
    "adaptive": "int8",
}
ADAPTIVE_CODECS = ("int8", "fp16", "bf16")
LINK_CLASSES = ("world", "intra", "inter")


@dataclass(frozen=True)
class SyncConfig:
    """Options of one installed sync hook (see :func:`clusterdoctor.training.sync.install`)."""

    scheme: str
    shard_elements: int = 1 << 18
    error_feedback: bool = True
    warmup_steps: int = 10
    min_compress_elements: int = 1024
    topk_ratio: float = 0.01
    powersgd_rank: int = 2
    hierarchical: bool = False
    ranks_per_node: int | None = None
    adaptive_codec: str = "int8"
    link_bandwidth: dict[str, float] = field(default_factory=dict)
    margin: float = 0.1
    probe_elements: int = 1 << 20

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown sync scheme {self.scheme!r}; choose one of {', '.join(SCHEMES)}")
        if self.shard_elements < 1:
            raise ValueError(f"shard_elements must be >= 1, got {self.shard_elements}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.min_compress_elements < 0:
            raise ValueError(f"min_compress_elements must be >= 0, got {self.min_compress_elements}")
        if not 0.0 < self.topk_ratio <= 1.0:
            raise ValueError(f"topk_ratio must be in (0, 1], got {self.topk_ratio}")
        if self.powersgd_rank < 1:
            raise ValueError(f"powersgd_rank must be >= 1, got {self.powersgd_rank}")
        if self.ranks_per_node is not None and self.ranks_per_node < 1:
            raise ValueError(f"ranks_per_node must be >= 1, got {self.ranks_per_node}")
        if self.adaptive_codec not in ADAPTIVE_CODECS:
            raise ValueError(f"adaptive_codec must be one of {ADAPTIVE_CODECS}, got {self.adaptive_codec!r}")
        for k, v in self.link_bandwidth.items():
            if k not in ("intra", "inter") or not v > 0:
                raise ValueError(f"link_bandwidth takes 'intra'/'inter' -> bytes/s > 0, got {k!r}: {v!r}")
        if self.scheme == "powersgd" and self.uses_hierarchy:
            raise ValueError("powersgd runs torch's flat PowerSGD hook; it cannot be hierarchical")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {self.margin}")
        if self.probe_elements < 1:
            raise ValueError(f"probe_elements must be >= 1, got {self.probe_elements}")

    @property
    def codec(self) -> str | None:
        """The compression codec: ``fp16``/``bf16``/``int8``/``topk``/``powersgd`` or None."""
        if self.scheme == "adaptive":
            return self.adaptive_codec
        return SCHEME_CODEC[self.scheme]

    @property
    def uses_hierarchy(self) -> bool:
        return self.hierarchical or self.scheme == "adaptive"

    @property
    def compress_start_step(self) -> int:
        """First step that may compress. DDP rebuilds its buckets after step 0, so per-bucket error
        feedback must not start before step 1 (torch PowerSGD needs 2: see its start_powerSGD_iter)."""
        floor = 2 if self.scheme == "powersgd" else 1
        return max(self.warmup_steps, floor)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["link_bandwidth"] = dict(sorted(self.link_bandwidth.items()))
        return d

    def digest(self) -> int:
        """A 63-bit digest of the options, equal on ranks that were given the same configuration."""
        text = json.dumps(self.as_dict(), sort_keys=True)
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1
