"""The callbacks that make a ``Model.fit`` run observable, resumable and safe.

``Model.fit`` calls each callback at fixed points: ``on_train_epoch_begin``,
``on_train_step_end`` after every step, ``on_eval_begin``/``on_eval_end`` around
the validation pass it runs *inside* the epoch, then ``on_train_epoch_end`` (where
``cb_params.eval_results`` holds the validation metrics) and ``on_train_end``.

* :class:`Progress`: loss, learning rate and images/s: a tqdm bar on a terminal,
  one line per epoch in notebooks and logs.
* :class:`AtomicCheckpoint`: ``ModelCheckpoint``'s job (same ``CheckpointConfig``,
  same file names) with atomic writes and the epoch/global step recorded in the file.
* :class:`BestCheckpoint`: ``best.ckpt`` + ``best.json`` whenever validation
  improves under the choice rule of :mod:`msresnet.training.selection` (and only then).
* :class:`EpochHistory`: per-epoch train loss, validation metrics, LR, seconds and
  images/s, written to ``history.json`` and ``history.csv`` after every epoch.
* :class:`StopAfterEpoch`: ends training after an epoch, to simulate an interruption.

A resumed run starts ``Model.fit`` at ``initial_epoch`` but MindSpore counts
``cb_params.cur_step_num`` from 0 again, so every callback that reports a global
step takes ``step_offset`` (the steps done before this run).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mindspore.train import Callback, CheckpointConfig
from tqdm import tqdm

from msresnet.atomic import write_csv, write_json
from msresnet.training.checkpoints import (BEST_CKPT, PREFIX, checkpoint_name, prune_checkpoints,
                                           save_atomic)
from msresnet.training.selection import (keep_previous_best, rank_key, read_best, same_images,
                                         write_best)

log = logging.getLogger("msresnet.training.train")

HISTORY_JSON = "history.json"
HISTORY_CSV = "history.csv"
HISTORY_FIELDS = ("epoch", "step", "lr", "train_loss", "val_loss", "val_top1", "val_top5",
                  "train_seconds", "eval_seconds", "images_per_second")
"""Columns of ``history.csv`` (and keys of each ``history.json`` record)."""

# Names of the metrics passed to Model (see msresnet.training.factories.make_metrics).
TOP1, TOP5, LOSS = "top1", "top5", "loss"


def loss_value(net_outputs: Any) -> float:
    """The scalar loss from a train step's output (a Tensor, or (loss, overflow, scale))."""
    if isinstance(net_outputs, (tuple, list)):
        net_outputs = net_outputs[0]
    if hasattr(net_outputs, "asnumpy"):
        net_outputs = net_outputs.asnumpy()
    return float(np.mean(net_outputs))


def eval_metrics(cb_params: Mapping[str, Any]) -> dict[str, float] | None:
    """``{"top1", "top5", "loss"}`` from the validation ``fit`` ran this epoch, or None."""
    results = cb_params.get("eval_results") or cb_params.get("metrics")
    if not results:
        return None
    loss = results.get(LOSS, results.get("eval_loss"))
    return {"top1": float(results[TOP1]), "top5": float(results[TOP5]),
            "loss": float(loss) if loss is not None else math.nan}


def _rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else float(round(value, digits))


class _StepCounter(Callback):
    """Shared bookkeeping: global step = ``step_offset`` + MindSpore's step count."""

    def __init__(self, step_offset: int = 0) -> None:
        super().__init__()
        self.step_offset = int(step_offset)

    def global_step(self, cb_params: Any) -> int:
        return self.step_offset + int(cb_params.cur_step_num)


class Progress(_StepCounter):
    """Training progress: a live tqdm bar on a terminal, one line per epoch elsewhere.

    Each epoch ends with ``loss`` (the last step's), ``lr``, ``img/s`` (training
    images per second) and, after validation, the epoch's validation top-1. On a
    terminal a bar redraws as the steps run; written to a notebook, a log file or
    a pipe, the redraws would pile up as hundreds of stale lines (and differ on
    every run), so there only the epoch's final line is written. ``bars`` forces
    either form (None: a bar exactly when ``file`` is a terminal).

    The first step of a run includes graph compilation, so the first epoch's rate
    is lower than the steady rate of later epochs.
    """

    def __init__(self, epoch_size: int, steps_per_epoch: int, batch_size: int,
                 lr: Sequence[float] | np.ndarray, step_offset: int = 0, file: Any = None,
                 disable: bool = False, bars: bool | None = None) -> None:
        super().__init__(step_offset)
        self.epoch_size = epoch_size
        self.steps_per_epoch = steps_per_epoch
        self.batch_size = batch_size
        self.lr = np.asarray(lr)
        self.file = file
        self.disable = disable
        self.bars = bars
        self._bar: tqdm | None = None
        self._epoch: int | None = None
        self._desc = ""
        self._steps = 0
        self._start = self._seconds = 0.0
        self._postfix: dict[str, str] = {}

    @property
    def _out(self) -> Any:
        return self.file if self.file is not None else sys.stderr

    def _use_bars(self) -> bool:
        if self.bars is not None:
            return self.bars
        isatty = getattr(self._out, "isatty", None)
        try:
            return bool(isatty()) if callable(isatty) else False
        except (ValueError, OSError):  # a closed or detached stream
            return False

    def on_train_epoch_begin(self, run_context: Any) -> None:
        if self.disable:
            return
        self._epoch = int(run_context.original_args().cur_epoch_num)
        self._desc = f"epoch {self._epoch}/{self.epoch_size}"
        self._steps = 0
        self._start = time.perf_counter()
        self._seconds = 0.0
        self._postfix = {}
        if self._use_bars():
            self._bar = tqdm(total=self.steps_per_epoch, desc=self._desc, unit="step",
                             file=self._out, leave=True, mininterval=0.5)

    def on_train_step_end(self, run_context: Any) -> None:
        if self._epoch is None:
            return
        cb_params = run_context.original_args()
        in_epoch = (int(cb_params.cur_step_num) - 1) % self.steps_per_epoch + 1
        self._steps = in_epoch
        step = self.global_step(cb_params)
        seconds = self._seconds = time.perf_counter() - self._start
        self._postfix = {
            "loss": f"{loss_value(cb_params.net_outputs):.4f}",
            "lr": f"{float(self.lr[min(step, len(self.lr)) - 1]):.5f}",
            "img/s": f"{in_epoch * self.batch_size / max(seconds, 1e-9):.1f}",
        }
        if self._bar is not None:
            self._bar.update(max(in_epoch - self._bar.n, 0))  # sink mode: several steps at once
            self._bar.set_postfix(self._postfix, refresh=False)

    def on_eval_begin(self, run_context: Any) -> None:
        if self._bar is not None:
            self._bar.set_description_str(f"{self._desc} validating")

    def on_train_epoch_end(self, run_context: Any) -> None:
        if self._epoch is None:
            return
        metrics = eval_metrics(run_context.original_args())
        if metrics:
            self._postfix["val_top1"] = f"{metrics['top1']:.4f}"
        self._finish()

    def on_train_end(self, run_context: Any) -> None:
        if self._epoch is not None:
            self._finish()

    def _finish(self) -> None:
        """Close the bar, or write the epoch's one line."""
        if self._bar is not None:
            self._bar.set_postfix(self._postfix, refresh=False)
            self._bar.close()
        else:
            fields = ", ".join(f"{k}={v}" for k, v in self._postfix.items())
            line = (f"{self._desc}: {self._steps}/{self.steps_per_epoch} steps "
                    f"in {self._seconds:.1f} s" + (f", {fields}" if fields else ""))
            print(line, file=self._out, flush=True)
        self._bar = None
        self._epoch = None


class AtomicCheckpoint(_StepCounter):
    """Periodic checkpoints like ``ModelCheckpoint``, written atomically.

    Takes the same :class:`mindspore.train.CheckpointConfig`: a checkpoint is saved
    at the end of every epoch whose global step is a multiple of
    ``save_checkpoint_steps`` (the train function sets it to
    ``save_checkpoint_epochs * steps_per_epoch``), and only the newest
    ``keep_checkpoint_max`` files are kept. Files are named
    ``<prefix>-<epoch>_<step in epoch>.ckpt`` and hold the whole training network:
    weights, BatchNorm statistics and the optimizer state (momentum accumulators,
    ``global_step``), plus ``epoch_num`` and ``step_num`` (global step), which is
    everything resume needs. The last epoch of a run (or the epoch a stop was
    requested after) is always saved, so a run can be resumed where it ended.
    Older files are deleted only *after* the new one is complete.
    """

    def __init__(self, directory: str | os.PathLike[str], config: CheckpointConfig,
                 steps_per_epoch: int, prefix: str = PREFIX, step_offset: int = 0) -> None:
        super().__init__(step_offset)
        self.directory = Path(directory)
        self.config = config
        self.steps_per_epoch = int(steps_per_epoch)
        self.prefix = prefix
        self.latest: Path | None = None
        self.latest_epoch: int | None = None
        self.saved: list[Path] = []

    def _due(self, step: int) -> bool:
        every = self.config.save_checkpoint_steps or self.steps_per_epoch
        return step % every == 0

    def save(self, cb_params: Any) -> Path:
        """Write this epoch's checkpoint now (atomically) and prune old ones."""
        step = self.global_step(cb_params)
        epoch = int(cb_params.cur_epoch_num)
        in_epoch = (step - 1) % self.steps_per_epoch + 1
        path = self.directory / checkpoint_name(epoch, in_epoch, self.prefix)
        save_atomic(cb_params.train_network, path, {"epoch_num": epoch, "step_num": step})
        self.latest, self.latest_epoch = path, epoch
        self.saved.append(path)
        prune_checkpoints(self.directory, self.config.keep_checkpoint_max or 0, self.prefix)
        log.info("saved checkpoint %s", path.name)
        return path

    def on_train_epoch_end(self, run_context: Any) -> None:
        cb_params = run_context.original_args()
        if self._due(self.global_step(cb_params)):
            self.save(cb_params)

    def on_train_end(self, run_context: Any) -> None:
        cb_params = run_context.original_args()
        step = self.global_step(cb_params)
        if self.latest_epoch == cb_params.cur_epoch_num or step == self.step_offset:
            return
        if step % self.steps_per_epoch:
            log.warning("training stopped inside epoch %s (global step %s): no checkpoint "
                        "written for the partial epoch", cb_params.cur_epoch_num, step)
            return
        self.save(cb_params)


class TrainingDiverged(RuntimeError):
    """The training loss stopped being a number; the message names the epoch."""


class LossGuard(Callback):
    """Stop the run at the end of the first epoch whose training loss is not finite.

    A loss of NaN or infinity never comes back: every later step trains on NaN
    weights, and validation scores them at chance. On one H100, float16 BatchNorm
    gave NaN from the first steps and an unguarded run spent 110 epochs on it
    (``results/gpu/h100-2026-12-06-levers/``). The guard reads the step losses the
    run's :class:`EpochHistory` already collects (no second read of each loss) and,
    placed before the checkpoints, raises before that epoch's periodic or best
    checkpoint is written, so the last ones saved are the last good ones and
    ``--resume`` starts from them.
    """

    def __init__(self, history: EpochHistory) -> None:
        super().__init__()
        self.history = history

    def on_train_epoch_end(self, run_context: Any) -> None:
        bad = [loss for loss in self.history.epoch_losses if not math.isfinite(loss)]
        if bad:
            epoch = int(run_context.original_args().cur_epoch_num)
            raise TrainingDiverged(
                f"epoch {epoch}: the training loss is {bad[0]}; stopped before this "
                "epoch's checkpoints (the ones saved before it are kept). Lower lr_max, "
                "or on a GPU check amp_level, amp_batchnorm and loss_scale")


class BestCheckpoint(_StepCounter):
    """``best.ckpt`` and ``best.json`` whenever validation improves, under the sweep's
    rule (:func:`msresnet.training.selection.rank_key`: a higher top-1, or the same
    top-1 at a lower loss; a full tie keeps the earlier epoch).

    The record (:func:`msresnet.training.selection.write_best`) names the epoch,
    global step, scores, the periodic checkpoint saved at the same epoch (``source``,
    or null when that epoch had none) and the validation images (``evaluated_on``,
    from :func:`msresnet.data.identity.evaluation_images`), so that a later selection
    can tell whether it scored the same images. An existing ``best.json`` (a resumed
    run) sets the bar to beat when it was chosen on the same images
    (:func:`msresnet.training.selection.same_images`), so a resumed run never
    replaces a better earlier model with a worse one; one chosen on other images is
    no bar (its top-1 measures something else) and is kept as
    ``best.previous.json``/``.ckpt`` when replaced.
    """

    def __init__(self, directory: str | os.PathLike[str], step_offset: int = 0,
                 checkpoints: AtomicCheckpoint | None = None,
                 evaluated_on: Mapping[str, Any] | None = None) -> None:
        super().__init__(step_offset)
        self.directory = Path(directory)
        self.checkpoints = checkpoints
        self.evaluated_on = dict(evaluated_on) if evaluated_on else None
        self.best: dict[str, Any] | None = read_best(self.directory)
        self._keep_previous = False
        if self.best is not None and not same_images(self.best.get("evaluated_on"),
                                                     self.evaluated_on):
            self.best, self._keep_previous = None, True

    def _beats_best(self, epoch: int, step: int, metrics: Mapping[str, float]) -> bool:
        """The choice rule against the bar (a bar without a loss keeps a tied top-1)."""
        if self.best is None:
            return True
        best = self.best
        return rank_key(metrics["top1"], metrics["loss"], epoch, step) > rank_key(
            float(best["top1"]), best.get("loss"), best.get("epoch") or 0, best.get("step") or 0)

    def on_train_epoch_end(self, run_context: Any) -> None:
        cb_params = run_context.original_args()
        metrics = eval_metrics(cb_params)
        if metrics is None:
            return
        epoch, step = int(cb_params.cur_epoch_num), self.global_step(cb_params)
        if not self._beats_best(epoch, step, metrics):
            return
        source = None
        if self.checkpoints is not None and self.checkpoints.latest_epoch == epoch:
            source = self.checkpoints.latest.name
        if self._keep_previous:
            keep_previous_best(self.directory)
            self._keep_previous = False
        save_atomic(cb_params.network, self.directory / BEST_CKPT,
                    {"epoch_num": epoch, "step_num": step})
        self.best = write_best(self.directory, epoch=epoch, step=step, **metrics, source=source,
                               selected_by="validation during training",
                               evaluated_on=self.evaluated_on)
        log.info("new best top-1 %.4f at epoch %s -> %s", metrics["top1"], epoch, BEST_CKPT)


class EpochHistory(_StepCounter):
    """One record per epoch, kept in memory and (with ``directory``) written as JSON + CSV.

    ``train_loss`` is the mean of the epoch's step losses (the per-step loss is noisy),
    ``lr`` the rate of the epoch's last step, ``train_seconds`` the time of the
    training steps only (validation excluded; the first epoch of a run includes graph
    compilation), ``images_per_second`` training images over ``train_seconds`` for
    this process. Validation fields are null in epochs without validation.
    Files are rewritten after every epoch, so an interrupted run keeps its history;
    ``records`` seeds it with the history of the run being resumed.

    (Not called ``History``: ``Model.fit`` recognises its own callbacks by class name
    and does not run a ``History`` during validation, so ``on_eval_*`` would be lost.)
    """

    def __init__(self, directory: str | os.PathLike[str] | None, lr: Sequence[float] | np.ndarray,
                 batch_size: int, step_offset: int = 0,
                 records: list[dict[str, Any]] | None = None) -> None:
        super().__init__(step_offset)
        self.directory = Path(directory) if directory is not None else None
        self.lr = np.asarray(lr)
        self.batch_size = int(batch_size)
        self.records: list[dict[str, Any]] = list(records or [])
        self._losses: list[float] = []
        self._epoch_start = self._last_step = self._eval_start = 0.0
        self._eval_seconds = 0.0
        self._first_step = 0

    def on_train_epoch_begin(self, run_context: Any) -> None:
        self._losses = []
        self._epoch_start = self._last_step = time.perf_counter()
        self._eval_seconds = 0.0
        self._first_step = int(run_context.original_args().cur_step_num)

    def on_train_step_end(self, run_context: Any) -> None:
        self._losses.append(loss_value(run_context.original_args().net_outputs))
        self._last_step = time.perf_counter()

    @property
    def epoch_losses(self) -> list[float]:
        """The losses of the current epoch's steps so far (what :class:`LossGuard` reads)."""
        return self._losses

    def on_eval_begin(self, run_context: Any) -> None:
        self._eval_start = time.perf_counter()

    def on_eval_end(self, run_context: Any) -> None:
        self._eval_seconds += time.perf_counter() - self._eval_start

    def on_train_epoch_end(self, run_context: Any) -> None:
        cb_params = run_context.original_args()
        step = self.global_step(cb_params)
        steps = int(cb_params.cur_step_num) - self._first_step
        seconds = self._last_step - self._epoch_start
        metrics = eval_metrics(cb_params)
        record = {
            "epoch": int(cb_params.cur_epoch_num),
            "step": step,
            "lr": _rounded(float(self.lr[step - 1]), 8) if 0 < step <= len(self.lr) else None,
            "train_loss": _rounded(float(np.mean(self._losses))) if self._losses else None,
            "val_loss": _rounded(metrics["loss"]) if metrics else None,
            "val_top1": _rounded(metrics["top1"]) if metrics else None,
            "val_top5": _rounded(metrics["top5"]) if metrics else None,
            "train_seconds": round(seconds, 3),
            "eval_seconds": round(self._eval_seconds, 3) if metrics else None,
            "images_per_second": round(steps * self.batch_size / seconds, 2) if seconds > 0 else None,
        }
        self.records = [r for r in self.records if r["epoch"] < record["epoch"]] + [record]
        self.write()
        val = (f", val_loss {record['val_loss']:.4f}, top-1 {record['val_top1']:.4f}, "
               f"top-5 {record['val_top5']:.4f} ({record['eval_seconds']:.1f} s)") if metrics else ""
        log.info("epoch %s: step %s, lr %.6f, train_loss %.4f, %.1f s, %.1f img/s%s",
                 record["epoch"], step, record["lr"] or math.nan, record["train_loss"] or math.nan,
                 seconds, record["images_per_second"] or math.nan, val)

    def write(self) -> None:
        """Rewrite ``history.json`` and ``history.csv`` (atomically) from ``records``."""
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        write_json(self.directory / HISTORY_JSON, self.records)
        write_csv(self.directory / HISTORY_CSV, HISTORY_FIELDS, self.records)


def read_history(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of ``directory/history.json`` (empty when there is none)."""
    path = Path(directory) / HISTORY_JSON
    return json.loads(path.read_text()) if path.is_file() else []


class StopAfterEpoch(Callback):
    """Request a stop at the end of epoch ``epoch`` (simulates an interrupted job).

    The stop is clean: the epoch's validation, checkpoint and history are written
    first, exactly as a job killed right after its checkpoint would leave them.
    """

    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.epoch = int(epoch)

    def on_train_epoch_end(self, run_context: Any) -> None:
        if run_context.original_args().cur_epoch_num >= self.epoch:
            run_context.request_stop()
