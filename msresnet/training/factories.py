"""The pieces a training or evaluation run is assembled from, built from a Config.

:mod:`msresnet.training.train` (the training loop), :mod:`msresnet.training.sweep` (checkpoint
evaluation) and :mod:`msresnet.ranks.analysis` (single-process replays of a
data-parallel run) all need the same network, loss, metrics, device setting and
datasets. They live here, below all three, so none of them has to import another
one (and with it the other's callbacks or evidence code) to get them.
"""

from __future__ import annotations

from typing import Any

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import nn, ops
from mindspore.train import Loss, Metric, Model, Top1CategoricalAccuracy, Top5CategoricalAccuracy

from msresnet.compile_cache import refuse as refuse_compile_cache
from msresnet.config.profile import Config
from msresnet.data.cifar10 import (  # dataset_folder re-exported: the chapters import it here
    DatasetError, dataset_folder)  # noqa: F401
from msresnet.data.pipeline import create_dataset
from msresnet.data.source import DataSource, open_data_source
from msresnet.model.losses import CrossEntropySmooth, SparseCrossEntropy
from msresnet.model.lr_schedule import lr_for_config
from msresnet.model.nesterov import NesterovMomentum
from msresnet.model.resnet import param_groups, resnet50
from msresnet.training.callbacks import TOP1, TOP5
from msresnet.training.device import device_policy
from msresnet.training.distributed import RankInfo


class TrainError(RuntimeError):
    """Training cannot start as asked (the message says why and what to do)."""


def make_loss(config: Config) -> nn.Cell:
    """Plain sparse cross-entropy, or label smoothing when ``label_smoothing > 0``."""
    if config.label_smoothing > 0:
        return CrossEntropySmooth(config.num_classes, config.label_smoothing)
    return SparseCrossEntropy()


def make_metrics() -> dict[str, Metric]:
    """Top-1, top-5 and loss, under the names the callbacks read."""
    return {TOP1: Top1CategoricalAccuracy(), TOP5: Top5CategoricalAccuracy(),
            "loss": Loss()}


def uses_mixed_precision(config: Config) -> bool:
    """float16 + loss scaling on GPU/Ascend; CPU always trains in float32
    (:mod:`msresnet.training.device`)."""
    return device_policy(config.device_target).mixed_precision


def select_device(target: str) -> None:
    """``mindspore.set_device(target)``, or nothing when this process already runs on
    ``target``: MindSpore refuses the call once its runtime has started (an earlier
    cell, test or call ran an operator), which is fine for the same device. Another
    device is a RuntimeError that names both: only a new process can change it."""
    try:
        ms.set_device(target)
    except RuntimeError:
        current = ms.get_context("device_target")
        if current != target:
            raise RuntimeError(f"device_target {target!r} requested but this process "
                               f"already runs on {current!r}; restart it") from None


def set_context(config: Config) -> None:
    """Device and execution mode (graph compiles the whole step; pynative runs eagerly).
    MindSpore's compile cache is refused first (:mod:`msresnet.compile_cache`)."""
    refuse_compile_cache()
    try:
        select_device(config.device_target)
    except RuntimeError as err:
        raise TrainError(str(err)) from None
    ms.set_context(mode=ms.GRAPH_MODE if config.mode == "graph" else ms.PYNATIVE_MODE,
                   **speed_context(config))
    if config.jit_level is not None:
        ms.set_context(jit_config={"jit_level": config.jit_level})


def speed_context(config: Config) -> dict[str, bool]:
    """The MindSpore context settings that the profile's speed keys ask for.

    ``amp_batchnorm: float16`` also turns off the GPU backend's automatic move of
    float16 convolutions and BatchNorm to NHWC: there MindSpore 2.10 fuses each
    BatchNorm with the ReLU (and residual add) after it, and on an H100 that fused
    step's input gradient was 70 % off a float64 reference while BatchNorm alone
    was right, and training went to NaN (``results/gpu/h100-2026-12-06-fusion/``).
    In NCHW the same graph trained, 1.9x faster than float32 BatchNorm. Both keys are
    GPU-only values that the config refuses on other devices (``config.GPU_ONLY``).
    """
    options = {}
    if config.graph_kernel:
        options["enable_graph_kernel"] = True
    if config.amp_batchnorm == "float16":
        options["disable_format_transform"] = True
    return options


def make_datasets(config: Config, rank: RankInfo = RankInfo(), source: DataSource | None = None,
                  ) -> tuple[ds.Dataset, ds.Dataset]:
    """The training pipeline (sharded by rank) and the validation pipeline (whole).

    With ``valid_split`` N > 0, N training images are held out
    (:func:`msresnet.data.splits.hold_out`): training reads the others and validation
    reads those N, so checkpoints are chosen on images that are neither trained on
    nor the test set. With 0, validation reads the test set (the recipe's way).
    ``source``: the run's data (:func:`msresnet.data.source.open_data_source`), opened
    here from ``config`` when not given.
    """
    source = source or open_data_source(config)
    train_ds = create_dataset(source.folder, "train", config.batch_size, training=True,
                              num_samples=config.train_samples, seed=config.seed,
                              indices=source.train_indices, image_size=config.image_size,
                              num_workers=config.num_workers, checked=True,
                              progressive=progressive(config),
                              **rank.shard_kwargs())
    if not source.valid_split:
        return train_ds, make_test_dataset(config, source=source)
    return train_ds, make_valid_dataset(config, source=source)


def progressive(config: Config) -> tuple[int, int] | None:
    """The pipeline's ``(size, epochs)`` of progressive resizing, or None."""
    if config.progressive_size is None:
        return None
    return config.progressive_size, config.progressive_epochs


def make_valid_dataset(config: Config, batch_size: int | None = None, *,
                       source: DataSource | None = None) -> ds.Dataset:
    """The held-out validation images, in index order, cut to ``eval_samples``
    (``source``'s; opened from ``config`` when not given)."""
    source = source or open_data_source(config)
    if source.valid_indices is None:
        raise DatasetError("valid_split is 0: no training images are held out to validate "
                           "on (validation reads the test set)")
    return create_dataset(source.folder, "train", batch_size or config.batch_size,
                          training=False, num_samples=source.eval_samples,
                          image_size=config.image_size, num_workers=config.num_workers,
                          indices=source.valid_indices, checked=True)


def make_test_dataset(config: Config, batch_size: int | None = None, *,
                      source: DataSource | None = None) -> ds.Dataset:
    """The test set, in file order, cut to ``eval_samples`` (what the final scores use;
    ``source``'s, opened from ``config`` when not given)."""
    source = source or open_data_source(config)
    return create_dataset(source.folder, "test", batch_size or config.batch_size,
                          training=False, num_samples=source.eval_samples,
                          image_size=config.image_size, num_workers=config.num_workers,
                          checked=True)


def validation_images(config: Config, source: DataSource | None = None) -> dict[str, Any]:
    """Which images validation scores (:attr:`msresnet.data.source.DataSource.evaluated_on`)."""
    return (source or open_data_source(config)).evaluated_on


def make_network(config: Config) -> nn.Cell:
    """ResNet50 (or the config's ``depth``) as the config describes it, its weights drawn
    from ``config.seed``."""
    ms.set_seed(config.seed)  # the weight initialisers draw from MindSpore's global seed
    return resnet50(num_classes=config.num_classes, stem=config.stem,
                    zero_init_residual=config.zero_init_residual,
                    bn_momentum=config.bn_momentum, data_format=data_format(config),
                    depth=config.depth)


def data_format(config: Config) -> str:
    """The layout the network runs in here: the config's ``data_format`` on a GPU, NCHW
    elsewhere (an export or a CPU evaluation of a run trained in NHWC: the
    checkpoints are the same, :class:`msresnet.model.resnet.ConvNHWC`)."""
    on_gpu = ms.get_context("device_target") == "GPU"
    return config.data_format if on_gpu else "NCHW"


class OutputTo32(nn.Cell):
    """The network's logits in float32 for the loss (what MindSpore's O2 wraps it in);
    no name prefix, so checkpoints keep the network's parameter names."""

    def __init__(self, net: nn.Cell) -> None:
        super().__init__(auto_prefix=False)
        self.net = net

    def construct(self, x):
        return ops.cast(self.net(x), ms.float32)


def float16_with_batchnorm_inputs(net: nn.Cell) -> nn.Cell:
    """``amp_batchnorm: float16``: every cell computes in float16 except that BatchNorm
    keeps float32 parameters and statistics and reads float16 activations.

    MindSpore's O2 wraps each BatchNorm in casts (float16 -> float32 in, float32 ->
    float16 out) and runs it in float32: three passes over every activation instead
    of one, on a step that is mostly memory traffic at 32x32. O3 casts BatchNorm's
    parameters too, which the GPU kernel refuses (the doctor's O3 check). Here the
    whole network is marked float16 as O3 does, then each BatchNorm's marks are
    cleared, so nothing is cast around it: its kernel gets the float16 activations
    with its float32 parameters, the signature cuDNN's batch normalisation takes.
    """
    net.to_float(ms.float16)
    for _, cell in net.cells_and_names():
        if isinstance(cell, nn.BatchNorm2d):
            cell.add_flags_recursive(fp16=False, fp32=False, bf16=False)
    return OutputTo32(net)


def make_optimizer(config: Config, net: nn.Cell, lr: np.ndarray) -> nn.Optimizer:
    """Momentum SGD with the weight-decay groups and the per-step rates ``lr``.

    ``nesterov: true`` uses :class:`msresnet.model.nesterov.NesterovMomentum` where the
    device's kernel ignores ``nn.Momentum(use_nesterov=True)`` (the CPU:
    :mod:`msresnet.training.device`).
    """
    groups = param_groups(net, config.weight_decay)
    scale = config.loss_scale if uses_mixed_precision(config) else 1.0
    if config.nesterov and device_policy(config.device_target).own_nesterov:
        return NesterovMomentum(groups, learning_rate=ms.Tensor(lr), momentum=config.momentum,
                                loss_scale=scale)
    return nn.Momentum(groups, learning_rate=ms.Tensor(lr), momentum=config.momentum,
                       use_nesterov=config.nesterov, loss_scale=scale)


def build_model(config: Config, net: nn.Cell,
                lr: np.ndarray) -> tuple[nn.Optimizer, Model]:
    """The one place a training step is assembled around ``net`` for the rates
    ``lr``: the optimizer with its weight-decay groups, the device's mixed
    precision and loss scale, the loss and the metrics. Training and the
    learning-rate range test both build theirs here, so the range test's updates
    are training's (on a GPU: float16, the loss scaled by 1024 and the optimizer
    dividing by it again)."""
    amp = uses_mixed_precision(config)
    optimizer = make_optimizer(config, net, lr)
    kwargs: dict[str, Any] = {}
    trained = net
    if amp:
        scale = ms.FixedLossScaleManager(config.loss_scale,
                                         drop_overflow_update=False)
        kwargs = {"amp_level": config.amp_level, "loss_scale_manager": scale}
        if config.amp_batchnorm == "float16":
            trained = float16_with_batchnorm_inputs(net)
            kwargs["amp_level"] = "O0"  # casts set: Model adds the loss scale
    model = Model(trained, loss_fn=make_loss(config), optimizer=optimizer,
                  metrics=make_metrics(), **kwargs)
    return optimizer, model


def make_model(config: Config, steps_per_epoch: int,
               ) -> tuple[nn.Cell, nn.Optimizer, Model, np.ndarray]:
    """Network, Momentum optimizer, ``Model`` and the per-step learning
    rates."""
    net = make_network(config)
    lr = lr_for_config(config, steps_per_epoch)
    optimizer, model = build_model(config, net, lr)
    return net, optimizer, model, lr
