"""histogram_quantile with PromQL semantics, on real dumps and as properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.quantile import (
    bucket_delta,
    fraction_above,
    histogram_quantile,
    merge_histograms,
    quantile_of,
    validate_histogram,
)
from clusterdoctor.model import Histogram
from clusterdoctor.observe.control.prom_text import parse_prom_text
from tests.conftest import shared_fixture

INF = math.inf


def _hist(rel: str, name: str) -> Histogram:
    (h,) = parse_prom_text(shared_fixture(rel).read_bytes()).histograms(name)
    return h


def test_etcd_fsync_p99_from_file():
    h = _hist("ctrl/etcd_v3.6.6_minikube_metrics.prom", "etcd_disk_wal_fsync_duration_seconds")
    # file: count 855; le=0.004 -> 842, le=0.008 -> 848; rank 0.99*855 = 846.45
    expected = 0.004 + (0.008 - 0.004) * (0.99 * 855 - 842) / (848 - 842)
    assert histogram_quantile(0.99, h) == pytest.approx(expected)
    assert 0.006 < expected < 0.008
    assert validate_histogram(h) == []


def test_etcd_commit_p99_from_file():
    h = _hist("ctrl/etcd_v3.6.6_minikube_metrics.prom", "etcd_disk_backend_commit_duration_seconds")
    # file: count 262; le=0.008 -> 259, le=0.016 -> 260; rank 259.38
    expected = 0.008 + 0.008 * (0.99 * 262 - 259) / (260 - 259)
    assert histogram_quantile(0.99, h) == pytest.approx(expected)


def test_kubelet_negative_sum_flagged_and_quantiles_from_file():
    h = _hist("ctrl/kubelet_pod_start_sli_aks_after_110pods.prom", "kubelet_pod_start_sli_duration_seconds")
    problems = validate_histogram(h)
    assert any("negative _sum" in p for p in problems)
    # file: le=6 -> 37, le=8 -> 52 (p50 rank 55 is in (8,10]: le=10 -> 66); le=45 -> 104, le=60 -> 110
    assert histogram_quantile(0.5, h) == pytest.approx(8 + 2 * (55 - 52) / (66 - 52))
    assert histogram_quantile(0.99, h) == pytest.approx(45 + 15 * (108.9 - 104) / 6)
    # 30 s is a bucket edge: le=30 -> 104 of 110, so exactly 6/110 above
    assert fraction_above(30, h) == pytest.approx(6 / 110)


def test_kubelet_before_all_in_45_60():
    h = _hist("ctrl/kubelet_pod_start_sli_aks_before.prom", "kubelet_pod_start_sli_duration_seconds")
    assert histogram_quantile(0.99, h) == pytest.approx(45 + 15 * 0.99)
    assert fraction_above(45, h) == 1.0
    assert validate_histogram(h) == []


def test_promql_edge_cases():
    b = [(0.1, 5), (1, 10), (INF, 20)]
    assert histogram_quantile(-0.1, b) == -INF
    assert histogram_quantile(1.1, b) == INF
    assert math.isnan(histogram_quantile(float("nan"), b))
    assert histogram_quantile(0.99, b) == 1  # rank in the +Inf bucket -> second-highest bound
    assert math.isnan(histogram_quantile(0.5, [(0.1, 5), (1, 10)]))  # no +Inf bucket
    assert math.isnan(histogram_quantile(0.5, [(INF, 10)]))  # fewer than two buckets
    assert math.isnan(histogram_quantile(0.5, [(1, 0), (INF, 0)]))  # no observations
    assert histogram_quantile(0.25, b) == pytest.approx(0.1 * 5 / 5)  # lowest bucket starts at 0
    assert histogram_quantile(0.1, [(-1, 5), (0, 5), (INF, 10)]) == -1  # bound <= 0: no interpolation


def test_monotonicity_repair_flagged():
    r = quantile_of(0.5, [(1, 10), (2, 8), (4, 20), (INF, 20)])
    assert r.forced_monotonic and r.problems
    assert r.value == pytest.approx(histogram_quantile(0.5, [(1, 10), (2, 10), (4, 20), (INF, 20)]))
    tiny = quantile_of(0.5, [(1, 10), (2, 10 - 1e-13), (INF, 20)])
    assert tiny.fixed_precision and not tiny.forced_monotonic


def test_bucket_delta_and_reset():
    d, reset = bucket_delta([(1, 15), (INF, 30)], [(1, 10), (INF, 20)])
    assert d == [(1, 5), (INF, 10)] and not reset
    d, reset = bucket_delta([(1, 2), (INF, 3)], [(1, 10), (INF, 20)])
    assert reset and d == [(1, 2), (INF, 3)]


def test_merge_reads_layouts_from_data():
    a = Histogram("x", {"i": "a"}, [(0.1, 1), (1, 2), (INF, 3)], 3, 1.0)
    b = Histogram("x", {"i": "b"}, [(0.5, 4), (INF, 4)], 4, 1.0)
    m = merge_histograms([a, b])
    assert [u for u, _ in m.buckets] == [0.1, 0.5, 1, INF]
    assert dict(m.buckets) == {0.1: 1, 0.5: 1 + 4, 1: 2 + 4, INF: 7}
    assert m.count == 7


bounds_st = st.lists(st.floats(0.001, 1000), min_size=1, max_size=12, unique=True).map(sorted)


@st.composite
def hist_st(draw):
    bounds = draw(bounds_st)
    incs = draw(st.lists(st.integers(0, 50), min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    counts, c = [], 0
    for inc in incs:
        c += inc
        counts.append(c)
    return list(zip([*bounds, INF], counts))


@settings(max_examples=200, deadline=None)
@given(hist_st(), st.floats(0, 1), st.floats(0, 1))
def test_quantile_monotone_in_q(b, q1, q2):
    lo, hi = sorted((q1, q2))
    a, z = histogram_quantile(lo, b), histogram_quantile(hi, b)
    if not math.isnan(a):
        assert a <= z + 1e-9


@settings(max_examples=200, deadline=None)
@given(hist_st(), st.floats(0, 1), st.integers(2, 7))
def test_quantile_within_bounds_and_scale_invariant(b, q, k):
    v = histogram_quantile(q, b)
    if b[-1][1] == 0:
        assert math.isnan(v)
        return
    if math.isnan(v):  # only q = 0 with an empty first bucket (Go's 0/0)
        assert q == 0 and b[0][1] == 0
        return
    finite = [u for u, _ in b if not math.isinf(u)]
    assert 0 <= v <= (max(finite) if finite else 0) + 1e-9
    scaled = [(u, c * k) for u, c in b]
    assert histogram_quantile(q, scaled) == pytest.approx(v, rel=1e-9, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(hist_st(), st.floats(0, 1), st.randoms())
def test_quantile_ignores_bucket_order(b, q, rnd):
    shuffled = list(b)
    rnd.shuffle(shuffled)
    v1, v2 = histogram_quantile(q, b), histogram_quantile(q, shuffled)
    assert (math.isnan(v1) and math.isnan(v2)) or v1 == v2


@settings(max_examples=200, deadline=None)
@given(hist_st())
def test_fraction_above_consistent_with_buckets(b):
    total = b[-1][1]
    for u, c in b[:-1]:
        f = fraction_above(u, b)
        if total == 0:
            assert math.isnan(f)
        else:
            assert f == pytest.approx((total - c) / total)
