"""Shared pieces of the QAT tests: scikit-learn's bundled digits and a small CNN trained on them.

The digits ship inside the scikit-learn wheel (``sklearn/datasets/data/digits.csv.gz``), so this
is real data available offline. Training is a few hundred small steps (about a second).
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional


class DigitsCNN(nn.Module):
    """conv(1→8) → conv(8→16) → pool → fc(256→32) → fc(32→10)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 16, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


@functools.lru_cache(maxsize=1)
def digits():
    """(train x, train y, calib x, held-out x, held-out y) as tensors, pixels scaled to [0, 1]."""
    sk = pytest.importorskip("sklearn.datasets")
    d = sk.load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(0))
    tr, ca, te = perm[:800], perm[800:1000], perm[1000:1400]
    return x[tr], y[tr], x[ca], x[te], y[te]


def _train(model, x, y, epochs: int, lr: float) -> None:
    g = torch.Generator().manual_seed(1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(x.shape[0], generator=g)
        for i in range(0, x.shape[0], 100):
            idx = perm[i : i + 100]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    model.eval()


@functools.lru_cache(maxsize=1)
def float_cnn() -> DigitsCNN:
    """The float CNN trained on the digits (cached; callers must not modify it)."""
    torch.manual_seed(0)
    xtr, ytr, *_ = digits()
    m = DigitsCNN()
    _train(m, xtr, ytr, epochs=8, lr=5e-3)
    return m


def qat_cnn(weight: str | None = "int8", act: str | None = "int8", skip: tuple[str, ...] = ()):
    """A fresh fake-quantized copy of :func:`float_cnn`, observers run once then frozen."""
    from clusterdoctor.training.qat.fakequant import quantize_model, set_observers

    xtr, *_ = digits()
    q = quantize_model(float_cnn(), weight=weight, act=act, skip=skip)
    q.train()
    with torch.no_grad():
        for i in range(0, 400, 100):
            q(xtr[i : i + 100])
    q.eval()
    set_observers(q, False)
    return q


def accuracy(model, x, y) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def batches(x, size: int = 25) -> list:
    return [x[i : i + size] for i in range(0, x.shape[0], size)]
