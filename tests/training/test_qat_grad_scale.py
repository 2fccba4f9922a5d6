"""LSQ gradient scaling, scale-ratio rescaling and scale sync across ranks (gloo, 2 processes)."""

from __future__ import annotations

import math
import os
import socket
import tempfile

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clusterdoctor.training.qat import grad_scale as gs  # noqa: E402

pytestmark = pytest.mark.torch


@given(st.integers(1, 10**7), st.integers(1, 2**15))
def test_lsq_factor_is_inverse_sqrt_n_qp(n, qp):
    g = gs.lsq_grad_factor(n, qp)
    assert g * math.sqrt(n * qp) == pytest.approx(1.0)
    assert 0 < g <= 1


def test_lsq_factor_rejects_nonsense():
    with pytest.raises(ValueError):
        gs.lsq_grad_factor(0, 127)


def test_grad_scale_is_identity_forward_and_scales_backward():
    x = torch.tensor([1.5, -2.0], requires_grad=True)
    y = gs.grad_scale(x, 0.25)
    assert torch.equal(y, x.detach())
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 0.25))


def test_lsq_quantizer_scale_gradient_has_the_lsq_factor():
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    q = gs.LSQFakeQuantize(bits=4, signed=True, role="activation")
    q(x)  # initialise s = 2·mean|x|/sqrt(Qp)
    assert float(q.scale.detach()) == pytest.approx(float(2 * x.abs().mean() / math.sqrt(7)), rel=1e-5)
    q.scale.grad = None
    q(x).sum().backward()
    scaled = q.scale.grad.clone()
    # the same computation without grad scaling
    s = q.scale.detach().clone().requires_grad_(True)
    gs.round_pass((x / s).clamp(-8, 7)).mul(s).sum().backward()
    assert float(scaled) == pytest.approx(float(s.grad) / math.sqrt(32 * 7), rel=1e-5)


def test_attach_scales_learnable_fake_quantize_grads():
    from torch.ao.quantization import MovingAverageMinMaxObserver
    from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize

    def make():
        torch.manual_seed(0)
        return _LearnableFakeQuantize(
            observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=15, use_grad_scaling=False
        )

    x = torch.rand(8, 16) * 3
    plain, hooked = make(), make()
    plain.enable_param_learning()
    hooked.enable_param_learning()
    att = gs.attach_lsq_grad_scaling(torch.nn.Sequential(hooked))
    assert att.scaled == ["0"]
    plain(x).sum().backward()
    hooked(x).sum().backward()
    assert float(hooked.scale.grad) == pytest.approx(float(plain.scale.grad) / math.sqrt(16 * 15), rel=1e-5)
    att.remove()
    already = gs.attach_lsq_grad_scaling(torch.nn.Sequential(gs.LSQFakeQuantize()))
    assert already.scaled == [] and "already" in already.skipped["0"]


@given(
    st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=32),
    st.floats(1e-4, 1e2),
    st.floats(1e-4, 1e2),
    st.floats(0.01, 10),
)
def test_rescaled_weight_gradient_is_ratio_times_gradient_then_clipped(g, a, w, c):
    grad = torch.tensor(g, dtype=torch.float64)
    ratio = gs.scale_ratio(torch.tensor(a), torch.tensor(w), grad)
    out = gs.rescale_weight_grad(grad, ratio, c)
    assert float(out.abs().max()) <= c + 1e-12  # the clip bounds the rescaled gradient
    expect = (grad * (a / w)).clamp(-c, c)
    assert torch.allclose(out, expect, rtol=1e-5, atol=1e-9)


def test_scale_ratio_is_per_output_channel_and_one_where_undefined():
    weight = torch.ones(3, 4)
    r = gs.scale_ratio(torch.tensor(0.2), torch.tensor([0.1, 0.0, float("nan")]), weight)
    assert r.shape == (3, 1)
    assert r.reshape(-1).tolist() == pytest.approx([2.0, 1.0, 1.0])
    with pytest.raises(ValueError):
        gs.scale_ratio(torch.tensor([0.1, 0.2]), torch.tensor(0.1), weight)
    with pytest.raises(ValueError):
        gs.rescale_weight_grad(weight, r, 0.0)


def test_attached_rescaling_changes_the_weight_gradient_of_a_quantized_layer():
    from clusterdoctor.training.qat import quantize_model

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(8, 4))
    x = torch.randn(32, 8)
    plain, hooked = quantize_model(base), quantize_model(base)
    for m in (plain, hooked):
        m(x)  # observers set the scales
    att = gs.attach_weight_grad_rescaling(hooked, grad_clip_max=0.05)
    assert att.scaled == ["0"] and not att.skipped
    plain(x).pow(2).sum().backward()
    hooked(x).pow(2).sum().backward()
    layer = hooked[0]
    ratio = gs.scale_ratio(layer.input_quantizer.scale, layer.weight_quantizer.scale, layer.weight)
    expect = (plain[0].weight.grad * ratio).clamp(-0.05, 0.05)
    assert torch.allclose(layer.weight.grad, expect, atol=1e-7)
    assert att.norms_before["0"] == pytest.approx(float(plain[0].weight.grad.norm()), rel=1e-5)
    assert att.norms_after["0"] == pytest.approx(float(expect.norm()), rel=1e-5)
    assert 0.0 <= att.clipped_share["0"] <= 1.0
    assert plain[0].bias.grad is not None and torch.equal(plain[0].bias.grad, layer.bias.grad)  # only weights
    att.remove()
    skipped = gs.attach_weight_grad_rescaling(quantize_model(base, act=None))  # weights only: no ratio
    assert skipped.scaled == [] and "scale" in skipped.skipped["0"]


def test_scale_sync_without_process_group_does_nothing_and_says_so():
    sync = gs.ScaleSync(torch.nn.Linear(2, 2), every=2)
    assert sync.step() is False
    assert sync.step() is False
    assert "not initialised" in sync.reason
    with pytest.raises(ValueError):
        gs.ScaleSync(torch.nn.Linear(2, 2), every=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    from clusterdoctor.training.qat.fakequant import int_activation_quantizer
    from clusterdoctor.training.qat.mixed import FP8FakeQuantize

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        model = torch.nn.Sequential(int_activation_quantizer(8), FP8FakeQuantize(), gs.LSQFakeQuantize())
        model[0](torch.rand(64) * (1 + rank))  # rank 0 range [0,1], rank 1 [0,2]
        model[1](torch.full((4,), 1.0 + 3 * rank))  # amax 1 / 4
        with torch.no_grad():
            model[2].scale.fill_(0.1 * (rank + 1))
        sync = gs.ScaleSync(model, every=5)
        log = []
        for _ in range(5):
            did = sync.step()
            log.append([did, float(model[0].scale), float(model[1].amax), float(model[2].scale)])
        torch.save(log, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_scale_sync_gloo_two_ranks_every_5_steps():
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_rank_main, args=(_free_port(), d), nprocs=2, join=True)
        logs = [torch.load(os.path.join(d, f"rank{r}.pt")) for r in (0, 1)]
    for r in (0, 1):
        assert [row[0] for row in logs[r]] == [False, False, False, False, True]
    # before the sync the ranks differ, after it they agree
    assert logs[0][3][1:] != logs[1][3][1:]
    assert logs[0][4][1:] == pytest.approx(logs[1][4][1:])
    assert logs[0][4][3] == pytest.approx(0.15)  # mean of 0.1 and 0.2
    assert logs[0][4][2] == pytest.approx(4.0)  # FP8 amax: max over ranks


def test_qat_finetune_with_and_without_rescaling_and_hooks_removed_after():
    from clusterdoctor.training.qat import qat_finetune, quantize_model

    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
    base = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    plain, hooked = quantize_model(base), quantize_model(base)
    a = qat_finetune(plain, x, y, epochs=2, lr=1e-3, batch=16)
    b = qat_finetune(hooked, x, y, epochs=2, lr=1e-3, batch=16, rescale=True, grad_clip_max=2.0)
    assert a["steps"] == b["steps"] == 8
    assert "ratio_mean" not in a and b["ratio_mean"] > 0 and b["layers"] == ["0", "2"]
    assert b["grad_norm_mean"] != pytest.approx(a["grad_norm_mean"])
    from clusterdoctor.training.qat.fakequant import set_observers

    ref = quantize_model(base)
    ref.load_state_dict(hooked.state_dict())
    for m in (hooked, ref):
        set_observers(m, False)
        m.zero_grad()
        m(x).sum().backward()  # the rescaling hooks are gone: gradients are the plain ones again
    assert torch.allclose(hooked[0].weight.grad, ref[0].weight.grad)
    with pytest.raises(ValueError):
        qat_finetune(plain, x, y, epochs=1, lr=0.0)
