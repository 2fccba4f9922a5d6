"""INT4-weight + FP8 (E4M3) activation emulation and the precision scan."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clusterdoctor.training.qat import mixed  # noqa: E402
from clusterdoctor.training.qat.fakequant import QuantConv2d, QuantLinear, quantize_model  # noqa: E402
from tests.training.qat_fixtures import accuracy, digits, float_cnn  # noqa: E402

pytestmark = pytest.mark.torch


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-400, 400, allow_nan=False), min_size=1, max_size=50), st.floats(0.01, 100))
def test_fp8_round_trip_error_is_within_e4m3_precision(xs, scale):
    x = torch.tensor(xs, dtype=torch.float32) * scale
    y = mixed.fp8_e4m3_fake_quant(x, scale)
    # E4M3 has 3 mantissa bits: relative error <= 2^-4 for normal numbers; subnormals step 2^-9
    tol = torch.maximum(x.abs() * 2**-4, torch.full_like(x, 2**-9 * scale)) * 1.0001
    assert torch.all((y - x).abs() <= tol)


def test_fp8_values_on_the_grid_are_exact_and_saturate_at_448():
    grid = torch.tensor([0.0, 1.0, -1.5, 448.0, 0.015625, 240.0])
    assert torch.equal(mixed.fp8_e4m3_fake_quant(grid, 1.0), grid)
    assert torch.equal(
        mixed.fp8_e4m3_fake_quant(torch.tensor([1e6, -1e6]), 1.0), torch.tensor([448.0, -448.0])
    )


def test_fp8_quantizer_static_amax_and_straight_through_gradient():
    q = mixed.FP8FakeQuantize()
    q(torch.tensor([1.0, -2.0]))
    assert float(q.amax) == 2.0
    q(torch.tensor([12.0]))
    assert float(q.amax) == pytest.approx(2.0 + 0.01 * 10.0)
    x = torch.tensor([0.3, 7.0], requires_grad=True)
    q.observer_enabled[0] = 0
    q(x).sum().backward()
    assert torch.equal(x.grad, torch.ones(2))
    q.fake_quant_enabled[0] = 0
    z = torch.tensor([0.123456])
    assert torch.equal(q(z), z)


def test_w4a8fp8_model_keeps_accuracy_and_uses_16_weight_levels():
    _, _, _, xte, yte = digits()
    f = float_cnn()
    q = mixed.prepare_w4a8fp8(f)
    assert isinstance(q.conv1, QuantConv2d) and isinstance(q.fc2, QuantLinear)
    assert isinstance(q.conv1.input_quantizer, mixed.FP8FakeQuantize)
    with torch.no_grad():
        q.train()
        q(xte[:200])
        q.eval()
        wq = q.fc1.weight_quantizer(q.fc1.weight)
    for row in wq:
        assert len(torch.unique(row)) <= 16
    assert accuracy(q, xte, yte) >= accuracy(f, xte, yte) - 0.05


def test_scan_lists_every_gemm_with_casts_and_bytes():
    f = float_cnn()
    q = mixed.prepare_w4a8fp8(f)
    x = torch.rand(10, 1, 8, 8)
    scan = mixed.scan_precision(q, x)
    assert scan.method == "torch.fx"
    names = [e.name for e in scan.entries]
    assert names == ["conv1", "conv2", "fc1", "fc2"]
    c1 = scan.entries[0]
    assert (c1.weight_precision, c1.input_precision) == ("int4", "fp8_e4m3")
    assert c1.cast == "fp16->fp8_e4m3" and not c1.fallback_fp16
    assert c1.cast_bytes == 10 * 64 * 1.0  # 640 input elements, 1 byte each
    assert scan.entries[2].input_shape == [10, 256]
    assert scan.cast_count == 4 and scan.fallback_count == 0
    assert scan.cast_bytes == sum(e.cast_bytes for e in scan.entries)


class _Attn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = torch.nn.Linear(8, 8)
        self.k = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.matmul(self.q(x), self.k(x).transpose(-1, -2))


def test_scan_sees_matmul_and_unsupported_combinations_fall_back():
    m = quantize_model(_Attn(), weight="fp8_e4m3", act="int4")
    scan = mixed.scan_precision(m, torch.rand(2, 5, 8))
    ops = {e.name: e for e in scan.entries}
    assert ops["q"].fallback_fp16 and "falls back to fp16" in ops["q"].reason
    assert ops["q"].cast_bytes == 2 * (2 * 5 * 8) + 2 * 64  # fp16 input + dequantized fp8 weights
    mm = [e for e in scan.entries if e.op == "matmul"]
    assert len(mm) == 1 and mm[0].input_precision == "fp16"
    assert scan.fallback_count == 2


class _Untraceable(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow
            return self.fc(x)
        return self.fc(-x)


def test_scan_falls_back_to_hooks_when_fx_cannot_trace():
    m = quantize_model(_Untraceable(), weight="int8", act="int8")
    scan = mixed.scan_precision(m, torch.rand(3, 4))
    assert scan.method.startswith("forward hooks")
    assert [e.name for e in scan.entries] == ["fc"]
    assert scan.entries[0].kernel == "w:int8 a:int8"
    assert scan.as_dict()["cast_count"] == 1


def test_monitor_recalibrates_fp8_activation_scales():
    from clusterdoctor.training.qat import DriftMonitor
    from clusterdoctor.training.qat.fakequant import set_observers
    from tests.training.qat_fixtures import batches

    xtr, _, xca, xte, _ = digits()
    q = mixed.prepare_w4a8fp8(float_cnn())
    with torch.no_grad():
        q(xtr[:200])
    set_observers(q, False)
    mon = DriftMonitor(q)
    mon.calibrate(batches(xca))
    with torch.no_grad():
        q(xte[:100] * 4.0)
    e = next(e for e in mon.report() if e["layer"] == "conv1")
    assert e["precision"] == "fp8_e4m3" and e["action"] == "recalibrate"
    amax = float(q.conv1.input_quantizer.amax)
    res = mon.apply(batches(xte[100:200] * 4.0, 50))
    assert res[0]["taken"] and float(q.conv1.input_quantizer.amax) == pytest.approx(4 * amax, rel=0.1)
    mon.restore()
    assert float(q.conv1.input_quantizer.amax) == amax
