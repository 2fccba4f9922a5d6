"""Precision decision (ROI) and runtime triggers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.training.qat import precision as pr


def test_roi_formula():
    # +2 points worth 1.0 each, for +50% latency and +50% memory: ROI 2
    assert pr.roi(2.0, 0.5, 0.5) == pytest.approx(2.0)
    assert pr.roi(2.0, 0.5, 0.5, value=3.0) == pytest.approx(6.0)
    assert pr.roi(1.0, 0.0, 0.0) == math.inf
    assert pr.roi(-1.0, -0.2, 0.0) == 0.0


@given(st.floats(0, 10), st.floats(0, 10), st.floats(0.01, 5), st.floats(0, 5))
def test_roi_grows_with_gain_and_falls_with_cost(g1, dg, cost, dc):
    assert pr.roi(g1 + dg, cost, 0) >= pr.roi(g1, cost, 0)
    assert pr.roi(g1, cost + dc, 0) <= pr.roi(g1, cost, 0)


def _v(name, acc, lat, mem):
    return pr.VariantResult(name, acc, lat, "supplied", mem, 0.0)


def test_choose_upgrades_only_when_roi_reaches_threshold():
    cheap = _v("int4_weight", 0.90, 1.0, 100)
    mid = _v("int8", 0.93, 1.2, 200)  # +3 pts for +20% lat +100% mem: ROI 2.5 -> upgrade
    top = _v("fp16", 0.935, 2.0, 400)  # +0.5 pts for +67% +100%: ROI 0.3 -> stay
    d = pr.choose([top, mid, cheap])
    assert d.choice == "int8"
    assert mid.roi_vs_previous == pytest.approx(3.0 / 1.2)
    assert top.roi_vs_previous < 1.8
    assert mid.chosen and not top.chosen
    assert "upgrade" in d.reason and "stay" in d.reason
    assert pr.choose([top, mid, cheap], roi_threshold=3.0).choice == "int4_weight"
    with pytest.raises(ValueError):
        pr.choose([])


def test_triggers_qps_three_consecutive_windows():
    t = pr.PrecisionTriggers(qps_floor=100)
    fired = [t.observe(i, qps=q) for i, q in enumerate([90, 95, 120, 90, 80, 70, 60])]
    assert [bool(f) for f in fired] == [False, False, False, False, False, True, False]
    assert "3 consecutive windows" in fired[5][0]


def test_triggers_gpu_utilisation_two_minutes():
    t = pr.PrecisionTriggers()
    assert t.observe(0, gpu_util=0.2) == []
    assert t.observe(60, gpu_util=0.3) == []
    assert t.observe(119, gpu_util=0.1) == []
    assert t.observe(120, gpu_util=0.1)
    assert t.observe(180, gpu_util=0.1) == []  # fires once per low period
    assert t.observe(200, gpu_util=0.9) == []
    assert t.observe(210, gpu_util=0.2) == []  # new period starts


def test_triggers_roi_drop_below_running_mean():
    t = pr.PrecisionTriggers()
    for i, r in enumerate([2.0, 2.0, 2.0]):
        assert t.observe(i, roi_value=r) == []
    assert t.observe(3, roi_value=1.75) == []  # 12.5% below
    fired = t.observe(4, roi_value=1.5)  # mean 1.9375, 22.6% below
    assert fired and "15%" in fired[0]


torch = pytest.importorskip("torch")


@pytest.mark.torch
def test_compare_precisions_on_the_digits_cnn():
    from tests.training.qat_fixtures import accuracy, batches, digits, float_cnn

    _, _, xca, xte, yte = digits()
    f = float_cnn()
    lat = {"fp16": 1.0, "fp8": 0.55, "int8": 0.55, "int4_weight": 0.6}  # H100-like ratios, supplied
    d = pr.compare_precisions(f, lambda m: accuracy(m, xte, yte), batches(xca, 100), xte[:8], latency=lat)
    by = {v.name: v for v in d.variants}
    assert set(by) == {"fp16", "fp8", "int8", "int4_weight"}
    assert (
        by["int4_weight"].memory_bytes
        < by["int8"].memory_bytes
        == by["fp8"].memory_bytes
        < by["fp16"].memory_bytes
    )
    assert all(v.latency_source == "supplied" for v in d.variants)
    assert by["int8"].calibration_s > 0 and by["fp16"].calibration_s == 0
    assert abs(by["fp16"].accuracy - accuracy(f, xte, yte)) <= 0.01
    assert d.choice in by and sum(v.chosen for v in d.variants) == 1
    measured = pr.compare_precisions(f, lambda m: 0.5, [], xte[:8], variants=("int8",), reps=2)
    assert measured.variants[0].latency_source.startswith("measured here")
