"""Setting, measuring and restoring quantizer ranges."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clusterdoctor.training.qat import recalibrate as rc  # noqa: E402
from clusterdoctor.training.qat.fakequant import int_activation_quantizer, int_weight_quantizer  # noqa: E402
from clusterdoctor.training.qat.mixed import FP8FakeQuantize  # noqa: E402
from tests.training.qat_fixtures import batches, digits, qat_cnn  # noqa: E402

pytestmark = pytest.mark.torch


@settings(max_examples=40, deadline=None)
@given(st.floats(-50, 0), st.floats(0.01, 50), st.sampled_from([4, 8]))
def test_set_range_int_covers_the_range(lo, hi, bits):
    q = int_activation_quantizer(bits)
    rc.set_range(q, lo, hi)
    r_lo, r_hi = rc.representable_range(q)
    step = float(q.scale)
    assert r_lo <= lo + step and r_hi >= hi - step
    assert step == pytest.approx((hi - lo) / (2**bits - 1), rel=1e-4, abs=1e-6)


def test_set_range_fp8_sets_amax_and_rejects_dynamic():
    q = FP8FakeQuantize()
    rc.set_range(q, -3.0, 2.0)
    assert rc.representable_range(q) == (-3.0, 3.0)
    assert rc.unsupported_reason(FP8FakeQuantize(dynamic=True)) is not None
    with pytest.raises(ValueError):
        rc.set_range(FP8FakeQuantize(dynamic=True), 0.0, 1.0)


def test_per_channel_quantizer_is_refused_with_reason():
    w = int_weight_quantizer(8)
    w(torch.randn(4, 3))
    assert "per-channel" in rc.unsupported_reason(w)
    with pytest.raises(ValueError):
        rc.set_range(w, -1.0, 1.0)
    with pytest.raises(ValueError):
        rc.set_range(int_activation_quantizer(), 1.0, float("nan"))


def test_snapshot_and_undo_restore_exactly():
    q = int_activation_quantizer(8)
    q(torch.rand(100) * 3)
    snap = rc.snapshot(q)
    log = rc.UndoLog()
    log.remember("q", q)
    rc.set_range(q, -1.0, 10.0)
    log.remember("q", q)  # second remember keeps the first state
    assert float(q.scale) != float(snap["scale"])
    assert log.restore() == ["q"]
    for k, v in rc.snapshot(q).items():
        assert torch.equal(v, snap[k])
    assert log.restore() == []


def test_measure_ranges_changes_nothing_and_sees_float_inputs():
    model = qat_cnn()
    _, _, xca, _, _ = digits()
    named = [(n, m) for n, m in model.named_modules() if n.endswith("input_quantizer")]
    allq = [m for n, m in model.named_modules() if n.endswith("_quantizer")]
    before = {n: rc.snapshot(m) for n, m in named}
    model.train()
    ranges = rc.measure_ranges(model, named, batches(xca * 2.0, 50), allq)
    assert model.training  # mode restored
    lo, hi = ranges["conv1.input_quantizer"]
    assert lo == 0.0 and hi == pytest.approx(2.0, rel=0.01)
    for n, m in named:
        for k, v in rc.snapshot(m).items():
            assert torch.equal(v, before[n][k])
    assert all(int(m.fake_quant_enabled[0]) == 1 for _, m in named)


def test_measure_ranges_reports_nonfinite_instead_of_a_range():
    model = qat_cnn()
    named = [(n, m) for n, m in model.named_modules() if n == "conv1.input_quantizer"]
    x = torch.full((4, 1, 8, 8), float("nan"))
    r = rc.measure_ranges(model, named, [x], [named[0][1]])
    assert isinstance(r["conv1.input_quantizer"], str) and "NaN/Inf" in r["conv1.input_quantizer"]


def test_mse_range_clips_a_heavy_tail_more_than_a_flat_one():
    torch.manual_seed(0)
    heavy = torch.relu(torch.randn(20000)).pow(3)
    q = int_activation_quantizer(4)
    lo, hi = rc.mse_range(q, heavy, 0.0, float(heavy.max()))
    assert lo == 0.0 and hi < 0.9 * float(heavy.max())
    flat = torch.rand(20000)
    assert rc.mse_range(q, flat, 0.0, 1.0)[1] >= 0.9  # uniform: at most a sliver is clipped
    with pytest.raises(ValueError):
        rc.measure_ranges(torch.nn.Identity(), [], [], [], method="median")
