"""Nesterov momentum: MindSpore's CPU kernel ignores the flag; ours applies it.

A small network, three steps, by hand against the optimizers, in both modes.
"""

from __future__ import annotations

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from msresnet.model.resnet import param_groups
from msresnet.model.nesterov import NesterovMomentum

LR, MU, STEPS = 0.1, 0.9, 3


def by_hand(nesterov: bool) -> list[np.ndarray]:
    ms.set_seed(0)
    net = nn.Dense(3, 1)
    x, y = data()
    w = [p.asnumpy().astype(np.float64) for p in net.trainable_params()]
    v = [np.zeros_like(a) for a in w]
    for _ in range(STEPS):
        err = x @ w[0].T + w[1] - y  # MSE loss: mean of err**2
        grads = [2 * err.T @ x / len(x), 2 * err.sum(0) / len(x)]
        for i, g in enumerate(grads):
            v[i] = MU * v[i] + g
            w[i] = w[i] - LR * (g + MU * v[i] if nesterov else v[i])
    return w


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    return (rng.normal(size=(16, 3)).astype(np.float32),
            rng.normal(size=(16, 1)).astype(np.float32))


def trained(make_optimizer) -> list[np.ndarray]:
    ms.set_seed(0)
    net = nn.Dense(3, 1)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), make_optimizer(net))
    x, y = (ms.Tensor(a) for a in data())
    for _ in range(STEPS):
        step(x, y)
    return [p.asnumpy() for p in net.trainable_params()]


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_ours_is_nesterov_and_mindsporess_cpu_kernel_is_plain_momentum(mode):
    ms.set_context(mode=mode)
    try:
        ours = trained(lambda net: NesterovMomentum(net.trainable_params(), LR, MU))
        flagged = trained(lambda net: nn.Momentum(net.trainable_params(), LR, MU,
                                                  use_nesterov=True))
        plain = trained(lambda net: nn.Momentum(net.trainable_params(), LR, MU))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    for got, want in zip(ours, by_hand(nesterov=True)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(plain, by_hand(nesterov=False)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # MindSpore 2.10 on CPU: the flag changes nothing (if this fails, MindSpore fixed
    # it: factories.make_model can then use nn.Momentum(use_nesterov=True) again)
    assert all(np.array_equal(a, b) for a, b in zip(flagged, plain))


def test_weight_decay_groups_and_schedules_work_as_in_momentum():
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(3, 4), nn.BatchNorm1d(4), nn.Dense(4, 1)])
    lr = ms.Tensor(np.array([0.1, 0.05, 0.01], np.float32))
    opt = NesterovMomentum(param_groups(net, 5e-4), lr, MU)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    x, y = (ms.Tensor(np.repeat(a, 2, axis=0)) for a in data())
    for _ in range(3):
        step(x, y)
    assert int(opt.global_step.asnumpy().item()) == 3
    assert [p.name for p in opt.moments][:1] == ["moments.0.weight"]


def test_per_group_learning_rates_are_refused():
    net = nn.Dense(3, 1)
    groups = [{"params": [net.weight], "lr": 0.1}, {"params": [net.bias]}]
    with pytest.raises(ValueError, match="per-group learning rates are not supported"):
        NesterovMomentum(groups, 0.1, MU)
