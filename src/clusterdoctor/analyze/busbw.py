"""Bus bandwidth: nccl-tests' factors that turn a collective's algorithm bandwidth into bus bandwidth.

algbw = size / time; busbw = algbw * factor(collective, n ranks), so that busbw is comparable with the
hardware's link bandwidth whatever the collective and rank count (NVIDIA/nccl-tests
doc/PERFORMANCE.md): all-reduce 2(n-1)/n; reduce-scatter, all-gather and all-to-all (n-1)/n on the
total size; broadcast, reduce and send/recv 1.
"""

from __future__ import annotations

from collections.abc import Callable

BUSBW_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def busbw_factor(collective: str, nranks: int) -> float:
    """nccl-tests' algbw -> busbw factor for ``collective`` over ``nranks`` ranks (1.0 if unknown)."""
    f = BUSBW_FACTOR.get(collective)
    if f is None or nranks < 1:
        return 1.0
    return f(nranks)
