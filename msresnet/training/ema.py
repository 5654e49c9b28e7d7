"""An exponential moving average (EMA) of the weights, kept beside training.

Averaging the weights of the last few hundred steps evaluates a point between the
iterates SGD bounces around, which often scores better than the last iterate when
the learning rate stays high; when the rate decays to zero (the budgeted recipe)
the last iterates already settle, and the average can only lag behind. The book
measures which case its recipe is (``results/budget/ablation``) instead of assuming.

:class:`WeightAverage` is a ``Model.fit`` callback. Every ``every`` steps it folds
the network's parameters (weights *and* BatchNorm moving statistics, as timm's
``ModelEmaV2`` does) into NumPy copies:

    ema = d * ema + (1 - d) * weights,   d = min(decay, (1 + t) / (10 + t)) ** every

where ``t`` is the global step: the warm-up ``(1 + t) / (10 + t)`` (TensorFlow's
``ExponentialMovingAverage`` with ``num_updates``) keeps the random initial weights
from dominating a short run. Updating every few steps with the decay raised to that
power is the same average sampled less often; it keeps the copy's cost (two NumPy
passes over 23.5 M floats) below 1 % of a training step on a CPU. At each epoch end
the average is written atomically as ``ema-<epoch>_<step in epoch>.ckpt``: the same
parameter names as the network, so any evaluator loads it like a checkpoint.
Training never reads it back: the run's trajectory is the same with or without it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.train import Callback

from msresnet.training.checkpoints import (checkpoint_name, list_checkpoints, prune_checkpoints,
                                  read_checkpoint, save_atomic)

log = logging.getLogger("msresnet.training.train")

EMA_PREFIX = "ema"
"""File-name prefix of the averaged checkpoints (``ema-3_703.ckpt``)."""


def decay_at(decay: float, step: int, every: int = 1) -> float:
    """The factor applied to the average at global ``step`` for an update every ``every`` steps."""
    return min(decay, (1.0 + step) / (10.0 + step)) ** every


class WeightAverage(Callback):
    """Keep an EMA of ``net``'s parameters; save it as ``ema-*.ckpt`` every epoch.

    ``decay`` is per step (0.999: an average over roughly the last 1,000 steps).
    ``step_offset``: steps done before this run (a resumed run continues the saved
    average of its starting epoch when that file exists, else starts a new one from
    the restored weights and says so). ``keep``: newest files kept (None: all).
    """

    def __init__(self, net: nn.Cell, directory: str | os.PathLike[str], decay: float,
                 steps_per_epoch: int, every: int = 10, step_offset: int = 0,
                 keep: int | None = None) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay must be between 0 and 1, got {decay!r}")
        if every < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        self.net = net
        self.directory = Path(directory)
        self.decay = float(decay)
        self.steps_per_epoch = int(steps_per_epoch)
        self.every = int(every)
        self.step_offset = int(step_offset)
        self.keep = keep
        self.params = list(net.get_parameters())
        self.average: list[np.ndarray] | None = None
        self.pending = 0  # steps since the last update

    def start(self) -> None:
        """Start the average from the network's current weights (or the saved average)."""
        if self.step_offset:
            epoch = self.step_offset // self.steps_per_epoch
            saved = [c for c in list_checkpoints(self.directory, EMA_PREFIX) if c.epoch == epoch]
            if saved:
                values = read_checkpoint(saved[-1].path)
                self.average = [values[p.name].asnumpy().astype(np.float64) for p in self.params]
                log.info("weight average continues from %s", saved[-1].name)
                return
            log.warning("no %s-%d_*.ckpt in %s: the weight average restarts from the "
                        "resumed weights", EMA_PREFIX, epoch, self.directory)
        self.average = [p.asnumpy().astype(np.float64) for p in self.params]

    def update(self, step: int, steps: int) -> None:
        """Fold the current weights in, for ``steps`` steps ending at global ``step``."""
        if self.average is None:
            self.start()
        d = decay_at(self.decay, step, steps)
        for average, param in zip(self.average, self.params):  # type: ignore[arg-type]
            average *= d
            average += (1.0 - d) * param.asnumpy()

    def save(self, epoch: int, step: int) -> Path:
        """Write the average as ``ema-<epoch>_<step in epoch>.ckpt`` (atomically)."""
        if self.average is None:
            self.start()
        in_epoch = (step - 1) % self.steps_per_epoch + 1
        path = self.directory / checkpoint_name(epoch, in_epoch, EMA_PREFIX)
        data = [{"name": p.name, "data": ms.Tensor(a.astype(p.asnumpy().dtype))}
                for p, a in zip(self.params, self.average)]  # type: ignore[arg-type]
        save_atomic(data, path, {"epoch_num": epoch, "step_num": step})
        if self.keep:
            prune_checkpoints(self.directory, self.keep, EMA_PREFIX)
        return path

    def on_train_begin(self, run_context: Any) -> None:
        self.start()

    def on_train_step_end(self, run_context: Any) -> None:
        self.pending += 1
        if self.pending >= self.every:
            step = self.step_offset + int(run_context.original_args().cur_step_num)
            self.update(step, self.pending)
            self.pending = 0

    def on_train_epoch_end(self, run_context: Any) -> None:
        cb_params = run_context.original_args()
        step = self.step_offset + int(cb_params.cur_step_num)
        if self.pending:
            self.update(step, self.pending)
            self.pending = 0
        path = self.save(int(cb_params.cur_epoch_num), step)
        log.info("saved weight average %s", path.name)
