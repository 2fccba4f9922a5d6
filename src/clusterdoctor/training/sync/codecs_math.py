"""Wire sizes of the codecs, without torch (shared by the hook's accounting and the cost model)."""

from __future__ import annotations

import math

from clusterdoctor.training.sync.stats import gather_bytes

SCALE_BYTES = 4


def int8_wire_bytes(group_size: int, elements: int) -> float:
    """Bytes one rank sends for the int8 exchange of ``elements``: all-to-all then all-gather of
    ``group_size`` rows of ``ceil(elements/group_size)`` int8 values plus a float32 scale each."""
    row = math.ceil(elements / max(group_size, 1)) + SCALE_BYTES
    return 2 * gather_bytes(group_size, group_size * row)
