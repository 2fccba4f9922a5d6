"""NCCL Init timings: the rank whose communicator setup is an outlier."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from clusterdoctor.analyze.comm.common import median_of

if TYPE_CHECKING:  # parsers of the other sources are imported only when their data is analysed
    from clusterdoctor.observe.comm.nccl_log import NcclLog


class InitOutlier(msgspec.Struct):
    rank: int
    total_s: float
    median_s: float
    parts: dict[str, float]
    source: str
    line: int | None


def init_outliers(
    logs: Iterable[NcclLog], *, factor: float = 2.0, min_excess_s: float = 1.0
) -> list[InitOutlier]:
    """Ranks whose ``Init timings`` total exceeds ``factor`` × the median and the median by ``min_excess_s``."""
    out = []
    for log in logs:
        tim = log.init_timings
        if len(tim) < 3:
            continue
        med = median_of(t.total_s for t in tim)
        for t in tim:
            if t.total_s > factor * med and t.total_s - med >= min_excess_s:
                out.append(InitOutlier(t.rank, t.total_s, med, t.parts, log.path, t.line))
    return out
