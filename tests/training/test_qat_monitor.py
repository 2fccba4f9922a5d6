"""DriftMonitor on a real (small, digits-trained) CNN, plus property tests of the drift metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.training.qat import metrics, thresholds

# --------------------------------------------------------------------------- metrics (no torch)

counts = st.lists(st.integers(min_value=0, max_value=1000), min_size=2, max_size=40)


@given(counts, st.data())
def test_kl_is_nonnegative(p, data):
    q = data.draw(st.lists(st.integers(0, 1000), min_size=len(p), max_size=len(p)))
    kl = metrics.kl_divergence(p, q)
    if sum(p) == 0 or sum(q) == 0:
        assert kl is None
    else:
        assert kl is not None and kl >= 0


@given(counts, st.integers(min_value=1, max_value=50))
def test_kl_is_zero_for_identical_and_proportional_histograms(p, k):
    if sum(p) == 0:
        assert metrics.kl_divergence(p, p) is None
        return
    assert metrics.kl_divergence(p, p) == pytest.approx(0.0, abs=1e-12)
    assert metrics.kl_divergence([k * c for c in p], p) == pytest.approx(0.0, abs=1e-9)


def test_kl_grows_with_mass_moved_out_of_range():
    ref = [0, 10, 80, 10, 0]
    small = metrics.kl_divergence([0, 10, 70, 10, 10], ref)
    big = metrics.kl_divergence([0, 10, 40, 10, 40], ref)
    assert 0 < small < big


def test_kl_rejects_mismatched_or_bad_histograms():
    assert metrics.kl_divergence([1, 2], [1, 2, 3]) is None
    assert metrics.kl_divergence([1, -2], [1, 2]) is None
    assert metrics.kl_divergence([1, float("nan")], [1, 2]) is None


def test_kurtosis_of_known_distributions():
    rng = np.random.default_rng(0)
    assert metrics.kurtosis(rng.normal(size=400_000)) == pytest.approx(3.0, abs=0.05)
    assert metrics.kurtosis(rng.uniform(size=400_000)) == pytest.approx(1.8, abs=0.02)
    assert metrics.kurtosis(rng.laplace(size=400_000)) == pytest.approx(6.0, abs=0.3)
    assert metrics.kurtosis([-1.0, 1.0] * 50) == pytest.approx(1.0)
    assert metrics.kurtosis([5.0] * 10) is None
    assert metrics.kurtosis([1.0]) is None


finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


@settings(max_examples=60)
@given(
    st.lists(finite, min_size=4, max_size=60),
    st.floats(min_value=0.1, max_value=10),
    st.floats(min_value=-100, max_value=100),
)
def test_kurtosis_is_location_and_scale_invariant(xs, a, b):
    k = metrics.kurtosis(xs)
    if k is None or np.std(xs) < 1e-3 * (np.abs(xs).max() + 1):
        return
    k2 = metrics.kurtosis([a * x + b for x in xs])
    assert k2 == pytest.approx(k, rel=1e-5, abs=1e-6)


@settings(max_examples=60)
@given(st.lists(finite, min_size=1, max_size=40), st.lists(finite, min_size=1, max_size=40))
def test_moments_add_like_concatenation(a, b):
    c = float(np.mean(a))
    both = metrics.Moments.of(a, c) + metrics.Moments.of(b, c)
    direct = metrics.Moments.of(a + b, c)
    for x, y in zip((both.n, both.s1, both.s2), (direct.n, direct.s1, direct.s2)):
        assert x == pytest.approx(y, rel=1e-9, abs=1e-6)
    assert (both - metrics.Moments.of(b, c)).n == pytest.approx(len(a))


def test_kurtosis_from_moments_matches_direct_and_ignores_nonfinite():
    rng = np.random.default_rng(1)
    x = rng.gamma(2.0, size=10_000) + 100.0  # offset: raw moments about 0 would cancel badly
    m = metrics.Moments.of(np.concatenate([x, [np.nan, np.inf]]), centre=100.0)
    assert m.n == 10_000
    assert metrics.kurtosis_from_moments(m) == pytest.approx(metrics.kurtosis(x), rel=1e-9)


@given(
    st.one_of(st.none(), st.floats(0, 100)),
    st.one_of(st.none(), st.floats(-20, 20)),
    st.floats(0, 1),
)
def test_drift_score_weights(kl, ks, w):
    s = metrics.drift_score(kl, ks, (w, 1 - w))
    if kl is None:
        assert s is None
    else:
        assert s == pytest.approx(w * kl + (1 - w) * (abs(ks) if ks is not None else 0.0))
        assert s >= 0


def test_default_score_is_07_kl_plus_03_abs_kurtosis_shift():
    assert metrics.drift_score(1.0, -2.0) == pytest.approx(0.7 + 0.6)


def test_amax_ratio_clipped_fraction_and_sqnr():
    assert metrics.amax_ratio(5.0, 2.0) == 2.5
    assert metrics.amax_ratio(1.0, 0.0) is None
    assert metrics.clipped_fraction(3, 12) == 0.25
    assert metrics.clipped_fraction(0, 0) is None
    assert metrics.sqnr_db(100.0, 1.0) == pytest.approx(20.0)
    assert metrics.sqnr_db(1.0, 0.0) == math.inf


@given(st.lists(st.floats(0, 5), min_size=0, max_size=30), st.floats(0, 5), st.floats(0, 5))
def test_learned_thresholds_are_ordered_and_above_mean(scores, k1, dk):
    t = thresholds.learn(scores, k1, k1 + dk)
    assert t.low <= t.high
    if len(scores) >= thresholds.MIN_BATCHES:
        assert t.source == "learned"
        assert t.low >= float(np.mean(scores)) - 1e-12
    else:
        assert t.source.startswith("fixed (fallback")
        assert (t.low, t.high) == (thresholds.FIXED_LOW, thresholds.FIXED_HIGH)


def test_fixed_thresholds_defaults():
    t = thresholds.fixed()
    assert (t.low, t.high, t.source) == (0.15, 0.30, "fixed")
    with pytest.raises(ValueError):
        thresholds.fixed(0.5, 0.1)


# --------------------------------------------------------------------------- monitor on a real CNN

torch = pytest.importorskip("torch")

from clusterdoctor.training.qat import DriftMonitor  # noqa: E402
from clusterdoctor.training.qat.recalibrate import snapshot  # noqa: E402
from tests.training.qat_fixtures import accuracy, batches, digits, qat_cnn  # noqa: E402

pytestmark_torch = pytest.mark.torch
REQUIRED = {"layer", "score", "kl", "kurtosis_shift", "threshold_low", "threshold_high", "action", "reason"}


def _calibrated(**kw):
    q = qat_cnn()
    _, _, xca, _, _ = digits()
    mon = DriftMonitor(q, **kw)
    mon.calibrate(batches(xca))
    return q, mon


def _observe(model, x) -> None:
    with torch.no_grad():
        for b in batches(x, 50):
            model(b)


def _entries(mon):
    return {e["layer"]: e for e in mon.report()}


@pytest.mark.torch
def test_undrifted_data_keeps_every_layer():
    q, mon = _calibrated()
    _, _, _, xte, _ = digits()
    _observe(q, xte)
    rep = mon.report()
    assert [e["layer"] for e in rep] == ["conv1", "conv2", "fc1", "fc2"]
    for e in rep:
        assert REQUIRED <= e.keys()
        assert e["threshold_source"] == "learned"
        assert e["action"] == "keep", e["reason"]
        assert e["score"] < e["threshold_low"]
    assert mon.apply(batches(xte[:100])) == []


@pytest.mark.torch
def test_gain_drift_is_recalibrated_with_downstream_layers_and_restored():
    q, mon = _calibrated()
    _, _, _, xte, yte = digits()
    drifted = xte * 2.5
    _observe(q, drifted)
    e = _entries(mon)["conv1"]
    assert e["action"] == "recalibrate"
    assert e["amax_ratio"] == pytest.approx(2.5, rel=0.01)
    assert e["clipped_fraction"] > 0.1
    assert e["downstream"] == ["conv2", "fc1", "fc2"]
    before = {n: snapshot(m) for n, m in q.named_modules() if n.endswith("input_quantizer")}
    out_before = q(drifted)
    stale = accuracy(q, drifted, yte)
    res = mon.apply(batches(xte[:200] * 2.5, 50))
    first = res[0]
    assert first["layer"] == "conv1" and first["taken"] and first["action"] == "recalibrate"
    assert first["layers"][0] == "conv1" and set(first["layers"]) <= {"conv1", "conv2", "fc1", "fc2"}
    assert first["sqnr_after_db"] > first["sqnr_before_db"]
    assert accuracy(q, drifted, yte) > stale
    restored = mon.restore()
    assert "conv1.input_quantizer" in restored
    for n, m in q.named_modules():
        if n in before:
            for k, v in snapshot(m).items():
                assert torch.equal(v, before[n][k]), (n, k)
    assert torch.equal(q(drifted), out_before)


@pytest.mark.torch
def test_fine_tune_branch_moves_one_quantizer_when_it_helps():
    q, mon = _calibrated(threshold_mode="fixed", fixed_thresholds=(1e-9, 1e9))
    _, _, _, xte, _ = digits()
    _observe(q, xte * 1.6)
    rep = _entries(mon)
    assert all(rep[n]["action"] == "fine_tune_scale" for n in ("conv1", "conv2", "fc1", "fc2"))
    res = mon.apply(batches(xte[:200] * 1.6, 50))
    conv1 = next(r for r in res if r["layer"] == "conv1")
    assert conv1["action"] == "fine_tune_scale" and conv1["layers"] == ["conv1"]
    assert conv1["taken"], conv1["reason"]
    assert conv1["sqnr_after_db"] > conv1["sqnr_before_db"]
    mon.restore()


@pytest.mark.torch
def test_action_that_would_lower_fidelity_is_not_taken_and_said():
    # The window saw gain x2.5, but the batch the action is judged on is undrifted: moving the
    # range toward the window's would hurt fidelity there, so the gate refuses.
    q, mon = _calibrated(threshold_mode="fixed", fixed_thresholds=(1e-9, 1e9))
    _, _, _, xte, _ = digits()
    _observe(q, xte * 2.5)
    state = {n: snapshot(m) for n, m in q.named_modules() if n.endswith("input_quantizer")}
    res = mon.apply(batches(xte[:200], 50))
    conv1 = next(r for r in res if r["layer"] == "conv1")
    assert not conv1["taken"]
    assert "not taken: would lower fidelity" in conv1["reason"]
    assert conv1["sqnr_after_db"] < conv1["sqnr_before_db"]
    for n, m in q.named_modules():
        if n == "conv1.input_quantizer":
            for k, v in snapshot(m).items():
                assert torch.equal(v, state[n][k])


@pytest.mark.torch
def test_nan_and_inf_activations_are_reported_never_acted_on():
    q, mon = _calibrated()
    _, _, _, xte, _ = digits()
    bad = (xte[:50] * 2.5).clone()
    bad[0, 0, 0, 0] = float("nan")
    bad[1, 0, 3, 3] = float("inf")
    with torch.no_grad():
        q(bad)
    e = _entries(mon)["conv1"]
    assert e["nonfinite"] >= 2
    assert e["action"] == "keep"
    assert "NaN/Inf" in e["reason"]
    res = mon.apply(batches(xte[:100] * 2.5, 50))
    assert all(r["layer"] != "conv1" for r in res)


@pytest.mark.torch
def test_layers_without_observers_are_listed_not_monitored():
    from clusterdoctor.training.qat.fakequant import quantize_model

    q = qat_cnn(skip=("fc2",))
    mon = DriftMonitor(q)
    rep = _entries(mon)
    assert rep["fc2"]["monitored"] is False
    assert "no activation quantizer" in rep["fc2"]["reason"] and rep["fc2"]["action"] == "keep"
    wonly = quantize_model(q, weight="int4", act=None)
    rep2 = {e["layer"]: e for e in DriftMonitor(wonly).report()}
    assert "weights quantized but no activation quantizer" in rep2["fc2"]["reason"]


@pytest.mark.torch
def test_uncalibrated_and_empty_input_are_reported():
    q = qat_cnn()
    mon = DriftMonitor(q)
    mon.calibrate([])
    for e in mon.report():
        assert e["action"] == "keep" and "not calibrated" in e["reason"]
    _, _, xca, xte, _ = digits()
    empty = xca[:0]
    mon.calibrate([empty, *batches(xca)])
    with torch.no_grad():
        q(empty)
    e = _entries(mon)["conv1"]
    assert e["empty_passes"] >= 1 and any("empty" in n for n in e["notes"])
    assert e["action"] == "keep" and "no activations observed" in e["reason"]
    _observe(q, xte * 2.5)
    res = mon.apply([empty])
    assert res and all(not r["taken"] and "no non-empty batch" in r["reason"] for r in res)


class _Pooled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        if x.shape[-1] > 10:  # data-dependent shape logic: torch.fx cannot trace this
            x = x[..., :10, :10]
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1).flatten(1))


@pytest.mark.torch
def test_dynamic_shapes_and_untraceable_models_use_forward_order():
    from clusterdoctor.training.qat.fakequant import quantize_model

    torch.manual_seed(0)
    q = quantize_model(_Pooled())
    mon = DriftMonitor(q)
    mon.calibrate([torch.rand(8, 1, 8, 8) for _ in range(4)])
    with torch.no_grad():
        q(torch.rand(3, 1, 6, 6))
        q(torch.rand(5, 1, 12, 12))
    rep = _entries(mon)
    assert rep["conv"]["dynamic_shapes"] is True
    assert any("dynamic input shapes" in n for n in rep["conv"]["notes"])
    assert rep["conv"]["downstream"] == ["fc"]
    assert mon.state()["config"]["downstream_method"] == "forward order"


@pytest.mark.torch
def test_torch_ao_eager_qat_model_is_discovered():
    import warnings

    from torch.ao import quantization as tq

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant = tq.QuantStub()
            self.fc = torch.nn.Linear(8, 4)
            self.dequant = tq.DeQuantStub()

        def forward(self, x):
            return self.dequant(self.fc(self.quant(x)))

    m = M().train()
    m.qconfig = tq.get_default_qat_qconfig("fbgemm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.prepare_qat(m, inplace=True)
    mon = DriftMonitor(m)
    mon.calibrate([torch.randn(16, 8) for _ in range(4)])
    with torch.no_grad():
        m(torch.randn(16, 8) * 3)
    rep = _entries(mon)
    assert {"quant", "fc"} <= rep.keys()
    assert rep["fc"]["role"] == "output"
    assert rep["quant"]["amax_ratio"] > 2


@pytest.mark.torch
def test_save_writes_a_state_the_cli_reads(tmp_path):
    from clusterdoctor.training.qat.state import load_state

    q, mon = _calibrated()
    _, _, _, xte, _ = digits()
    _observe(q, xte * 2.5)
    mon.apply(batches(xte[:100] * 2.5, 50))
    mon.save(tmp_path / "s.json")
    st_ = load_state(tmp_path / "s.json")
    assert [e["layer"] for e in st_["layers"]] == ["conv1", "conv2", "fc1", "fc2"]
    assert len(st_["layers"][0]["hist_ref"]) == mon.bins + 2
    assert any(a["taken"] for a in st_["actions"])
    mon.close()
    with torch.no_grad():
        q(xte[:10])  # no hooks left: nothing observed, nothing raised


@pytest.mark.torch
def test_weights_outside_a_frozen_weight_range_are_noted():
    q, mon = _calibrated()
    _, _, _, xte, _ = digits()
    _observe(q, xte)
    assert _entries(mon)["fc1"]["weight_clipped_fraction"] == 0.0
    with torch.no_grad():
        q.fc1.weight.mul_(3.0)  # weights move, the frozen weight scale does not
    e = _entries(mon)["fc1"]
    assert e["weight_clipped_fraction"] > 0.05
    assert any("outside the weight quantizer's range" in n for n in e["notes"])
