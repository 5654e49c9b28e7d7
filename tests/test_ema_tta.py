"""The weight average (``msresnet.training.ema``) and flip test-time augmentation (``msresnet.model.tta``).

Small networks stand in for ResNet50: the average is arithmetic on parameters and
the flip is one operator, so their correctness does not depend on the network.
The averaged checkpoints of a real (smoke) training run are checked in
``test_train.py``.
"""

from __future__ import annotations

import types

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import mindspore as ms
import mindspore.dataset as ds
import numpy as np
import pytest
from mindspore import nn
from mindspore.common.initializer import Normal

from msresnet.training import checkpoints as ck
from msresnet.config.profile import ConfigError, load_config
from msresnet.training.ema import EMA_PREFIX, WeightAverage, decay_at
from msresnet.training.sweep import CheckpointEvaluator
from msresnet.model.tta import FlipAverage


def context(step: int, epoch: int = 1) -> types.SimpleNamespace:
    params = types.SimpleNamespace(cur_step_num=step, cur_epoch_num=epoch)
    return types.SimpleNamespace(original_args=lambda: params)


def test_decay_warms_up_then_holds():
    assert decay_at(0.999, 0) == pytest.approx(0.1)
    assert decay_at(0.999, 90) == pytest.approx(0.91)
    assert decay_at(0.999, 100_000) == pytest.approx(0.999)
    assert decay_at(0.99, 10_000, every=10) == pytest.approx(0.99 ** 10)


def test_the_average_follows_the_formula_and_is_saved_loadable(tmp_path):
    ms.set_seed(0)
    net = nn.Dense(3, 2)
    average = WeightAverage(net, tmp_path, decay=0.9, steps_per_epoch=4, every=2, keep=1)
    average.on_train_begin(context(0))
    expected = {p.name: p.asnumpy().astype(np.float64) for p in net.get_parameters()}
    for step in range(1, 9):
        for p in net.get_parameters():  # stand-in for an optimizer step
            p.set_data(ms.Tensor(p.asnumpy() + step, ms.float32))
        if step % 2 == 0:
            d = decay_at(0.9, step, 2)
            for p in net.get_parameters():
                expected[p.name] = d * expected[p.name] + (1 - d) * p.asnumpy()
        average.on_train_step_end(context(step))
        if step % 4 == 0:
            average.on_train_epoch_end(context(step, epoch=step // 4))
    files = ck.list_checkpoints(tmp_path, EMA_PREFIX)
    assert [f.name for f in files] == ["ema-2_4.ckpt"]  # keep=1 pruned epoch 1's
    fresh = nn.Dense(3, 2)
    params = ck.load_strict(fresh, files[0].path)
    assert ck.checkpoint_meta(params) == {"epoch": 2, "step": 8}
    for p in fresh.get_parameters():
        np.testing.assert_allclose(p.asnumpy(), expected[p.name], rtol=1e-6)
        assert not np.allclose(p.asnumpy(), net.parameters_dict()[p.name].asnumpy())


def test_weight_average_refuses_a_decay_outside_0_1(tmp_path):
    with pytest.raises(ValueError, match="decay must be between 0 and 1, got 1.0"):
        WeightAverage(nn.Dense(2, 2), tmp_path, decay=1.0, steps_per_epoch=1)


class Column(nn.Cell):
    """Logits from the image's first and last columns: a mirror swaps them."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Dense(2, 10, weight_init=Normal(1.0), bias_init="zeros")

    def construct(self, x):
        return self.dense(ms.ops.stack((x[:, 0, 0, 0], x[:, 0, 0, -1]), axis=1))


def test_flip_average_is_the_mean_of_both_views_and_keeps_names():
    ms.set_seed(1)
    net = Column()
    x = np.random.default_rng(0).normal(size=(5, 1, 2, 4)).astype(np.float32)
    both = FlipAverage(net)(ms.Tensor(x)).asnumpy()
    by_hand = (net(ms.Tensor(x)).asnumpy() + net(ms.Tensor(x[..., ::-1].copy())).asnumpy()) / 2
    np.testing.assert_allclose(both, by_hand, rtol=1e-6)
    assert not np.allclose(both, net(ms.Tensor(x)).asnumpy())
    assert [p.name for p in FlipAverage(net).get_parameters()] == \
        [p.name for p in net.get_parameters()]


def test_the_evaluator_scores_flipped_views_when_asked(tmp_path):
    ms.set_seed(2)
    net = Column()
    ck.save_atomic(net, tmp_path / ck.checkpoint_name(1, 1), {"epoch_num": 1, "step_num": 1})
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 1, 2, 4)).astype(np.float32)
    y = rng.integers(0, 10, 64).astype(np.int32)
    data = ds.NumpySlicesDataset({"image": x, "label": y}, shuffle=False).batch(16)
    path = tmp_path / ck.checkpoint_name(1, 1)
    plain = CheckpointEvaluator(Column(), data)
    flipped = CheckpointEvaluator(Column(), data, flip=True)
    _, preds = flipped.predict(path)
    _, plain_preds = plain.predict(path)
    ms.load_param_into_net(net, ck.read_checkpoint(path))
    logits = (net(ms.Tensor(x)).asnumpy() + net(ms.Tensor(x[..., ::-1].copy())).asnumpy()) / 2
    np.testing.assert_array_equal(preds, logits.argmax(1))
    assert flipped.evaluate(path).top1 == pytest.approx(float((logits.argmax(1) == y).mean()))
    assert not np.array_equal(preds, plain_preds)


@pytest.mark.parametrize("key, value, message", [
    ("bn_momentum", 0, "bn_momentum: must be a number > 0 and < 1, got 0"),
    ("ema_decay", 1.0, "ema_decay: must be a number >= 0 and < 1, got 1.0"),
    ("nesterov", "yes", "nesterov: must be true or false, got 'yes'"),
])
def test_the_budget_keys_are_checked(key, value, message):
    with pytest.raises(ConfigError, match=message):
        load_config("smoke", {key: value})


def test_bn_momentum_reaches_every_batchnorm():
    from msresnet.model.resnet import resnet50

    net = resnet50(bn_momentum=0.97)
    norms = [c for _, c in net.cells_and_names() if isinstance(c, nn.BatchNorm2d)]
    assert len(norms) == 53
    # nn.BatchNorm2d keeps 1 - momentum in its ``momentum`` attribute (the weight of
    # the new batch, PyTorch's meaning), so the argument 0.97 is stored as 0.03.
    assert {round(1 - float(c.momentum), 6) for c in norms} == {0.97}
