"""Decision rules per layer and the downstream-layer graph."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.training.qat import decide as dec


def test_three_bands():
    assert dec.decide(0.1, 0.2, 0.4, observed=10).action == dec.KEEP
    assert dec.decide(0.2, 0.2, 0.4, observed=10).action == dec.FINE_TUNE
    assert dec.decide(0.39, 0.2, 0.4, observed=10).action == dec.FINE_TUNE
    d = dec.decide(0.4, 0.2, 0.4, observed=10, kl=0.5, amax_ratio=2.5, clipped=0.3)
    assert d.action == dec.RECALIBRATE
    assert "amax ×2.5" in d.reason and "clipped 30.00%" in d.reason


@given(st.floats(0, 10), st.floats(0, 5), st.floats(0, 5))
def test_bands_are_monotone_in_score(score, low, dh):
    high = low + dh
    a = dec.decide(score, low, high, observed=1).action
    rank = dec.ACTIONS.index(a)
    assert rank == (0 if score < low else 1 if score < high else 2)


def test_untrustworthy_metrics_never_act():
    nan = dec.decide(9.0, 0.1, 0.2, nonfinite=3, observed=10)
    assert nan.action == dec.KEEP and "NaN/Inf" in nan.reason
    assert dec.decide(9.0, 0.1, 0.2, observed=0).action == dec.KEEP
    assert "not calibrated" in dec.decide(9.0, 0.1, 0.2, calibrated=False).reason
    assert dec.decide(None, 0.1, 0.2, observed=5).action == dec.KEEP
    blocked = dec.decide(9.0, 0.1, 0.2, observed=5, settable_reason="per-channel activation quantizer")
    assert blocked.action == dec.KEEP
    assert "would recalibrate" in blocked.reason and "per-channel" in blocked.reason


def test_downstream_by_forward_order():
    assert dec.downstream_by_order(["a", "b", "c"]) == {"a": ["b", "c"], "b": ["c"], "c": []}


torch = pytest.importorskip("torch")


class _Branchy(torch.nn.Module):
    """Two branches: 'left' does not feed 'right'; both feed 'head'."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Linear(4, 4)
        self.left = torch.nn.Linear(4, 4)
        self.right = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        return self.head(self.left(h) + self.right(h))


@pytest.mark.torch
def test_downstream_from_fx_follows_the_graph_not_the_order():
    from clusterdoctor.training.qat.fakequant import quantize_model

    q = quantize_model(_Branchy())
    names = {n: n for n in ("stem", "left", "right", "head")}
    down = dec.downstream_fx(q, names)
    assert down is not None
    assert down["stem"] == ["head", "left", "right"]
    assert down["left"] == ["head"]  # forward order would also (wrongly) list 'right'
    assert down["head"] == []
