"""Whether compressing the cross-node stage of a bucket pays, from bandwidth and codec cost.

The model (per rank, per bucket, ring collectives as in nccl-tests doc/PERFORMANCE.md):

* uncompressed: one fp32 all-reduce of the node's chunk, ``2(g-1)/g * 4E`` bytes over the link;
* compressed: what the codec sends (int8: all-to-all + all-gather of int8 rows with a 4-byte scale;
  fp16/bf16: a 2-byte all-reduce) over the same link, plus the codec's measured host time for its
  encode/decode passes (int8 makes two: the sender's and the chunk owner's).

Compress only when the compressed time is below ``(1 - margin)`` of the uncompressed one, so a codec
is never applied where the model says it makes the step slower. Pure Python, no torch.
"""

from __future__ import annotations

import math
from typing import Any

from clusterdoctor.training.sync.codecs_math import int8_wire_bytes
from clusterdoctor.training.sync.stats import allreduce_bytes


def predict_cross_stage(
    *,
    elements: int,
    group_size: int,
    bytes_per_second: float,
    codec: str,
    codec_seconds_per_element: float,
    margin: float = 0.1,
) -> dict[str, Any]:
    """Predicted seconds for one bucket's cross-node stage with and without ``codec``.

    Returns ``{"compress": bool, "plain_seconds", "compressed_seconds", "plain_bytes",
    "compressed_bytes", "bytes_per_second", "codec"}``. Infinite bandwidth (a single node) or a
    group of one never compresses.
    """
    plain_bytes = allreduce_bytes(group_size, elements * 4)
    if codec == "int8":
        comp_bytes = int8_wire_bytes(group_size, elements)
        passes = 2
    elif codec in ("fp16", "bf16"):
        comp_bytes = allreduce_bytes(group_size, elements * 2)
        passes = 1
    else:
        raise ValueError(f"no cost model for codec {codec!r}")
    if group_size <= 1 or not math.isfinite(bytes_per_second) or bytes_per_second <= 0:
        plain_s = 0.0
        comp_s = passes * codec_seconds_per_element * elements
    else:
        plain_s = plain_bytes / bytes_per_second
        comp_s = comp_bytes / bytes_per_second + passes * codec_seconds_per_element * elements
    compress = group_size > 1 and comp_s < plain_s * (1.0 - margin)
    return {
        "compress": compress,
        "codec": codec,
        "plain_seconds": plain_s,
        "compressed_seconds": comp_s,
        "plain_bytes": plain_bytes,
        "compressed_bytes": comp_bytes,
        "bytes_per_second": bytes_per_second,
    }
