"""A learning-rate range test: how high can the peak learning rate go?

Leslie Smith's test (*Cyclical Learning Rates for Training Neural Networks*, 2017,
section 3.3; popularised by fastai's ``lr_find``): train from the run's initial
weights for a few hundred steps while the learning rate grows exponentially from
``lr_min`` to ``lr_max``, and record the loss of every step. The loss first barely
moves (the rate is too small to matter), then falls, then turns and explodes.
A budgeted schedule's peak belongs in the falling part, below the turn: the
rate at the smoothed loss's minimum is the point where training stops improving
within one step, so a whole run at that rate would diverge; a common choice is
a few times below it.

It runs the step training runs (the config's network, loss, Momentum with the
weight-decay groups and batch size), on the config's training pipeline (its
augmentation, held-out split and seed), so its answer is about that recipe::

    msresnet lr-range cpu --steps 200 --json results/budget/lr_range.json

(the command line is :mod:`msresnet.commands.lr_range`).

The result records every step (rate, loss, smoothed loss), the rate at the
smoothed minimum and at the steepest descent, and where the test stopped
(``diverged``: the smoothed loss passed ``diverge`` times its minimum).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from mindspore.train import Callback

from msresnet.training.callbacks import loss_value
from msresnet.config.profile import Config
from msresnet.experiments.range_inputs import RangeTestError, check_diverge, rates
from msresnet.training.factories import build_model, make_datasets, make_network, set_context

log = logging.getLogger("msresnet.experiments.lr_range")

SMOOTHING = 0.98
"""Weight of the previous value in the loss's moving average (fastai's choice)."""


def smooth(losses: Sequence[float], beta: float = SMOOTHING) -> list[float]:
    """Bias-corrected exponential moving average: one value per step, no lag at the start."""
    average, out = 0.0, []
    for i, loss in enumerate(losses, start=1):
        average = beta * average + (1 - beta) * loss
        out.append(average / (1 - beta ** i))
    return out


@dataclass
class RangeResult:
    """One range test: the rates tried, the losses seen and what they suggest."""

    lr: list[float]
    loss: list[float]
    smoothed: list[float]
    batch_size: int
    seconds: float
    diverged: bool
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def min_loss_lr(self) -> float:
        """The rate at the smoothed loss's minimum (the turn; too high for a whole run)."""
        return self.lr[int(np.argmin(self.smoothed))]

    @property
    def steepest_lr(self) -> float:
        """The rate where the smoothed loss falls fastest per factor of rate, before the minimum."""
        end = int(np.argmin(self.smoothed)) + 1
        if end < 3:
            return self.lr[0]
        slope = np.gradient(np.asarray(self.smoothed[:end]), np.log(np.asarray(self.lr[:end])))
        return self.lr[int(np.argmin(slope))]

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record.update(min_loss_lr=self.min_loss_lr, steepest_lr=self.steepest_lr)
        return record


class _Recorder(Callback):
    """Keep each step's loss; stop at ``steps`` or once the smoothed loss has exploded."""

    def __init__(self, steps: int, diverge: float) -> None:
        super().__init__()
        self.steps, self.diverge = steps, diverge
        self.losses: list[float] = []
        self.diverged = False

    def on_train_step_end(self, run_context: Any) -> None:
        loss = loss_value(run_context.original_args().net_outputs)
        self.losses.append(loss)
        smoothed = smooth(self.losses)
        if not math.isfinite(loss) or smoothed[-1] > self.diverge * min(smoothed):
            self.diverged = True
        if self.diverged or len(self.losses) >= self.steps:
            run_context.request_stop()


def range_test(config: Config, *, lr_min: float = 1e-3, lr_max: float = 10.0, steps: int = 200,
               diverge: float = 4.0) -> RangeResult:
    """Run the test on ``config``'s training step and pipeline (no checkpoints, no validation)."""
    lrs, diverge = rates(lr_min, lr_max, steps), check_diverge(diverge)
    set_context(config)
    train_ds, _ = make_datasets(config)
    per_epoch = train_ds.get_dataset_size()
    if per_epoch == 0:
        raise RangeTestError(f"no full batch of {config.batch_size} in the training images")
    net = make_network(config)
    _, model = build_model(config, net, lrs)  # training's step: loss scale, AMP, groups
    recorder = _Recorder(steps, diverge)
    started = time.perf_counter()
    model.train(math.ceil(steps / per_epoch), train_ds, callbacks=[recorder],
                dataset_sink_mode=False)
    seen = len(recorder.losses)
    return RangeResult(
        lr=[float(x) for x in lrs[:seen]], loss=[round(x, 6) for x in recorder.losses],
        smoothed=[round(x, 6) for x in smooth(recorder.losses)], batch_size=config.batch_size,
        seconds=round(time.perf_counter() - started, 3), diverged=recorder.diverged,
        settings={"profile": config.profile, "lr_min": lr_min, "lr_max": lr_max, "steps": steps,
                  "diverge": diverge, "weight_decay": config.weight_decay,
                  "momentum": config.momentum, "label_smoothing": config.label_smoothing,
                  "valid_split": getattr(config, "valid_split", 0), "seed": config.seed})
