"""Shared by the communication analyses: collective names, datatype sizes, mean and median."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any


def mean_of(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def median_of(values: Iterable[float]) -> float:
    vals = sorted(values)
    n = len(vals)
    if not n:
        return 0.0
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


# Element sizes of the dtype names PyTorch writes into traces and dumps.
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "half": 2,
    "float16": 2,
    "c10::half": 2,
    "bfloat16": 2,
    "c10::bfloat16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "short": 2,
    "int16": 2,
    "char": 1,
    "byte": 1,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
KERNEL_COLLECTIVE_RE = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_COLL_NAMES = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "_allgather_base": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "reducescatter": "reduce_scatter",
    "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "sendrecv",
    "send": "sendrecv",
    "recv": "sendrecv",
    "alltoall": "alltoall",
    "all_to_all": "alltoall",
    "all_to_all_single": "alltoall",
    "alltoall_base": "alltoall",
    "barrier": "barrier",
}


def normalize_collective(name: str | None) -> str:
    """``AllReduce``, ``allreduce``, ``nccl:all_reduce`` -> ``all_reduce`` (nccl-tests naming)."""
    if not name:
        return "unknown"
    n = name.split(":", 1)[-1].strip().lower()
    return _COLL_NAMES.get(n, _COLL_NAMES.get(n.replace("_", ""), n))


def dtype_bytes(dtype: Any) -> int | None:
    if not isinstance(dtype, str):
        return None
    return DTYPE_BYTES.get(dtype.strip().lower())
