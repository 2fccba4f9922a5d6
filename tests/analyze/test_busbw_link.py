"""Link-class matching of a measured busbw (analyze/busbw.py): GPU models, ranges, ambiguity, fuzz."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.analyze.busbw import expected_link_for_gpu, match_link_class

RANGES = {"nvswitch": (222.1, 369.9), "nvlink": (47.45, 47.45), "pcie": (3.86, 3.86), "pcie_sys": (1.4, 1.4)}


def test_gpu_models() -> None:
    # Model strings as nccl-tests prints them (tests/data/comm/public, fixtures/comm, nccl-tests issues).
    cases = {
        "NVIDIA H100 80GB HBM3": "nvswitch",
        "NVIDIA A100-SXM4-40GB": "nvswitch",
        "Tesla V100-SXM2-32GB": "nvlink",
        "NVIDIA A100-PCIE-40GB": "pcie",
        "Tesla V100-PCIE-16GB": "pcie",
        "Tesla T4": "pcie",
        "NVIDIA A10G": "pcie",
        "NVIDIA GeForce RTX 4090": "pcie",
        "NVIDIA H100 NVL": "pcie",
    }
    for name, cls in cases.items():
        got = expected_link_for_gpu(name)
        assert got is not None and got[0] == cls, name
    assert expected_link_for_gpu("Some Future GPU") is None


def test_match_inside_a_range_and_near_a_point() -> None:
    assert match_link_class(300.0, RANGES, 2.0).cls == "nvswitch"
    m = match_link_class(5.2, RANGES, 2.0)
    assert m.cls == "pcie" and m.ambiguous_with is None
    assert match_link_class(1000.0, RANGES, 2.0).cls is None  # above everything by more than 2x
    amb = match_link_class(2.4, {"efa": (2.83, 2.83), "socket": (2.0, 2.0)}, 2.0)
    assert amb.cls in ("efa", "socket") and amb.ambiguous_with in ("efa", "socket")


@given(st.floats(0.01, 10_000), st.floats(1.1, 4.0))
def test_a_match_is_within_the_factor_and_nearest(busbw: float, factor: float) -> None:
    m = match_link_class(busbw, RANGES, factor)
    dists = {
        c: 0.0 if lo <= busbw <= hi else min(abs(math.log(busbw / lo)), abs(math.log(busbw / hi)))
        for c, (lo, hi) in RANGES.items()
    }
    best = min(dists.values())
    if m.cls is None:
        assert best > math.log(factor) - 1e-12
    else:
        assert dists[m.cls] == best and best <= math.log(factor) + 1e-12
