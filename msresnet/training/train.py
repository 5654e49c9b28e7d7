"""Train and validate ResNet50 on CIFAR-10: the one training function of the book.

The notebook of chapter 4 and the command line (:mod:`msresnet.commands.train`) run
the same :func:`train_and_evaluate`, so a remote job runs exactly what the book
teaches::

    msresnet train --profile configs/smoke.yaml --output_dir runs/smoke
    msresnet train smoke --epoch_size 3 --train_samples 256
    msresnet train cpu --resume_from auto        # continue runs/cpu

What it does, following ``official/cv/ResNet/train.py`` of the MindSpore models
repository where the book has no reason to differ:

* ``Model.fit`` trains and validates in one job (``valid_frequency`` from the
  config; the last epoch is always validated), on ``eval_samples`` images of the
  held-out validation split (``valid_split`` > 0: the best checkpoint is chosen
  there, then the chosen and the last checkpoint are scored once on the test set,
  ``test.json``, :mod:`msresnet.training.selection`), or of the test set (``valid_split``
  0, the recipe's way).
* ``nn.Momentum`` with the weight-decay parameter groups
  (:func:`msresnet.model.resnet.param_groups`) and the per-step learning rates of
  :func:`msresnet.model.lr_schedule.lr_for_config`, given as one Tensor.
* Precision: float32 on CPU; on GPU/Ascend the config's ``amp_level`` with
  ``FixedLossScaleManager(loss_scale, drop_overflow_update=False)`` and the same
  ``loss_scale`` in the optimizer, as the models repo does.
* Loss: sparse cross-entropy averaged over the batch, or the repo's label-smoothed
  cross-entropy when ``label_smoothing > 0`` (:mod:`msresnet.model.losses`).
  Metrics: top-1, top-5 and loss. Network, optimizer, loss, metrics, device setting
  and datasets are built by :mod:`msresnet.training.factories`.
* Callbacks (:mod:`msresnet.training.callbacks`): progress bar, atomic periodic checkpoints,
  best checkpoint, history; plus ``config.yaml``, ``train.log`` and ``result.json``.
* Data: one :class:`~msresnet.data.source.DataSource` per run, opened before anything
  else (the folder validated once, the held-out split drawn once, the scored images
  identified); every pipeline and record of the run takes it, and ``config.yaml``
  records its folder. A run that fails removes the output folder it created while
  that is still empty.
* Resume (``resume_from``: a checkpoint or ``auto``) restores weights, BatchNorm
  statistics and optimizer state, restarts ``fit`` at the saved epoch, and
  fast-forwards the data pipeline to the same place (``set_init_step`` with
  MindSpore's exact, non-"fast" recovery), so interrupted + resumed equals straight.
* Distributed-ready: with ``mindspore.communication`` initialised (msrun), the data
  is sharded by rank and only rank 0 writes files. Extra callbacks come in through
  ``extra_callbacks``; the command line adds chapter 7's per-rank evidence
  (:class:`msresnet.ranks.dump.RankDump`) when the launcher's ``--rank_dump`` asked,
  so this module never imports :mod:`msresnet.ranks`.

Graph mode is the default because it is faster on the CPU: on the 2-core test
machine (shared with other jobs at the time), the smoke profile cut to 512 training
images trained at 50.4 images/s in graph mode against 42.7 in PyNative mode (second
epoch, after compilation), with identical losses; the first epoch, which includes
compiling the graph, was still faster in graph mode (35.0 against 29.1 images/s).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mindspore as ms
import mindspore.dataset as ds
from mindspore import nn
from mindspore.train import Callback, CheckpointConfig

from msresnet.atomic import output_folder, write_json, write_text
from msresnet.config.profile import Config
from msresnet.data.source import DataSource, open_data_source
from msresnet.config.run import (CONFIG_FILE, build_run_config, for_devices, lr_rule,
                                 recorded_config, recording)
from msresnet.training.callbacks import (AtomicCheckpoint, BestCheckpoint, EpochHistory,
                                         LossGuard, Progress, StopAfterEpoch, read_history)
from msresnet.training.checkpoints import (PREFIX, list_checkpoints)
from msresnet.training.distributed import RankInfo, init_if_launched, rank_info
from msresnet.training.device import device_policy
from msresnet.training.ema import WeightAverage
from msresnet.training.factories import (TrainError, make_datasets, make_model,
                                         make_test_dataset, set_context, uses_mixed_precision)
from msresnet.training.resume import RESUME_FREE_KEYS, config_differences, resolve_resume, restore
from msresnet.training.selection import final_test, read_best

log = logging.getLogger("msresnet.training.train")

LOG_FILE = "train.log"
RESULT_FILE = "result.json"

# --------------------------------------------------------------------------- pieces
def validation_epochs(epoch_size: int, valid_frequency: int) -> list[int]:
    """Epochs to validate after: every ``valid_frequency``-th, and always the last."""
    epochs = [e for e in range(1, epoch_size + 1) if e % valid_frequency == 0]
    return epochs if epochs and epochs[-1] == epoch_size else epochs + [epoch_size]


# --------------------------------------------------------------------------- result
@dataclass
class TrainResult:
    """What a training run produced."""

    output_dir: Path
    history: list[dict[str, Any]]
    best: dict[str, Any] | None
    steps: int                      # global steps done when the run ended (resume included)
    seconds: float                  # wall time of this call
    epochs: int                     # epochs completed
    steps_per_epoch: int
    resumed_from: str | None = None
    first_step_seconds: float | None = None  # includes graph compilation
    checkpoints: list[str] = field(default_factory=list)
    # Settings that differ from the run's recorded config.yaml on resume: {key: [recorded, now]}
    changed_on_resume: dict[str, Any] = field(default_factory=dict)
    # valid_split > 0: the chosen and the last checkpoint on the test set (test.json)
    test: dict[str, Any] | None = None
    seconds_test: float | None = None  # scoring them (not part of ``seconds``)

    @property
    def final_loss(self) -> float | None:
        """Mean training loss of the last completed epoch."""
        return self.history[-1]["train_loss"] if self.history else None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["output_dir"] = str(self.output_dir)
        data["final_loss"] = self.final_loss
        return data


class _FirstStepTimer(Callback):
    """Measures the first step of a run (graph compilation + one step)."""

    def __init__(self) -> None:
        super().__init__()
        self.start = time.perf_counter()
        self.seconds: float | None = None

    def on_train_begin(self, run_context: Any) -> None:
        self.start = time.perf_counter()

    def on_train_step_end(self, run_context: Any) -> None:
        if self.seconds is None:
            self.seconds = time.perf_counter() - self.start


class _StepTracker(Callback):
    """Remembers the last global step and completed epoch (for the result)."""

    def __init__(self, step_offset: int, epoch_offset: int) -> None:
        super().__init__()
        self.step = step_offset
        self.epoch = epoch_offset
        self._offset = step_offset

    def on_train_step_end(self, run_context: Any) -> None:
        self.step = self._offset + int(run_context.original_args().cur_step_num)

    def on_train_epoch_end(self, run_context: Any) -> None:
        self.epoch = int(run_context.original_args().cur_epoch_num)


@dataclass(frozen=True)
class _Run:
    """What the steps of one training run share: its settings, data, rank and folder."""

    config: Config
    source: DataSource
    rank: RankInfo
    output_dir: Path
    resume_path: Path | None
    lr_rule: str = ""  # the rate it trains at and why (msresnet.config.run.lr_rule)


@dataclass(frozen=True)
class _Position:
    """Where the run starts: its steps per epoch and the epoch it continues from."""

    steps_per_epoch: int
    initial_epoch: int

    @property
    def step_offset(self) -> int:
        return self.initial_epoch * self.steps_per_epoch


def _config_and_data(config: Config | str | os.PathLike[str],
                     overrides: Mapping[str, Any] | None,
                     validated: bool = False) -> tuple[Config, DataSource]:
    """The run's Config and its data, opened once (validated, split, identified).

    A :class:`Config` is taken as built (its ``data_dir`` chosen by whoever built it,
    e.g. a chapter's parameters); a profile name or YAML path goes through
    :func:`msresnet.config.run.build_run_config`. The returned Config names the data
    folder as the source resolved it, which is what ``config.yaml`` records and a resume
    compares.
    """
    if not isinstance(config, Config):
        config = build_run_config(config, overrides)
    elif overrides:
        config = dataclasses.replace(config, **dict(overrides))  # the new values checked
    source = open_data_source(config, validated=validated)
    return dataclasses.replace(config, data_dir=str(source.data_dir)), source


def _start_runtime(config: Config) -> RankInfo:
    """Device, communication (under msrun), data parallelism and exact pipeline recovery."""
    set_context(config)  # device first: MindSpore wants it set before communication.init()
    init_if_launched()
    rank = rank_info()
    if rank.distributed:
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                     gradients_mean=True, device_num=rank.group_size)
    # Exact (not "fast") pipeline recovery: a resumed run replays the skipped epochs'
    # shuffles and augmentations, so it sees exactly the images a straight run sees.
    ds.config.set_fast_recovery(False)
    return rank


@contextlib.contextmanager
def _run_log(output_dir: Path | None) -> Iterator[None]:
    """Log to ``train.log`` in ``output_dir`` while the run lasts (None: no file)."""
    if output_dir is None:
        yield
        return
    handler = logging.FileHandler(output_dir / LOG_FILE)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("msresnet")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()


def _changes_since_recording(run: _Run) -> dict[str, tuple[Any, Any]]:
    """On resume, the settings that differ from the run's ``config.yaml``, each logged."""
    if run.resume_path is None or (recorded := recorded_config(run.output_dir)) is None:
        return {}
    # Said, not refused: a longer run (epoch_size) is the usual reason to resume.
    changed = config_differences(recorded, run.config, RESUME_FREE_KEYS)
    for key, (old, new) in changed.items():
        log.warning("resuming with %s=%r, but %s recorded %r", key, new,
                    run.output_dir / CONFIG_FILE, old)
    return changed


def _steps_per_epoch(config: Config, train_ds: ds.Dataset) -> int:
    """Full batches per epoch on this device; none is an error that says why."""
    steps = train_ds.get_dataset_size()
    if steps == 0:
        raise TrainError(f"no full batch: {config.train_samples} training images per device "
                         f"and batch_size {config.batch_size}")
    return steps


def _resume_position(run: _Run, net: nn.Cell, optimizer: nn.Optimizer, train_ds: ds.Dataset,
                     steps_per_epoch: int) -> _Position:
    """Epoch 0, or the resumed checkpoint's weights, optimizer state and epoch, with the
    training pipeline fast-forwarded to the same place."""
    if run.resume_path is None:
        return _Position(steps_per_epoch, 0)
    at = _Position(steps_per_epoch, restore(run.resume_path, net, optimizer, steps_per_epoch))
    train_ds.set_init_step(at.step_offset)
    return at


def _record_start(run: _Run, at: _Position) -> None:
    """``config.yaml`` (rank 0) and the run's first log lines, the learning rate's
    among them (a comment on top of ``config.yaml`` too: the profile's ``lr_max``
    and ``lr_devices`` beside the scaled values the file records).

    The recorded ``data_dir`` is the folder the data source resolved (absolute, links
    resolved): the sweep and the other tools that take the run folder read the same
    data from it, from whatever folder they run in.
    """
    config = run.config
    if run.rank.is_main:
        write_text(run.output_dir / CONFIG_FILE, f"# {run.lr_rule}\n" + recording(config))
    log.info("profile %s on %s (%s mode, %s), %d steps/epoch x %d epochs, rank %d of %d",
             config.profile, config.device_target, config.mode,
             "mixed precision " + config.amp_level if uses_mixed_precision(config) else "float32",
             at.steps_per_epoch, config.epoch_size, run.rank.rank, run.rank.group_size)
    log.info("%s", run.lr_rule)
    if run.resume_path is not None:
        log.info("resumed from %s at epoch %d (global step %d)", run.resume_path.name,
                 at.initial_epoch, at.step_offset)


def _callbacks(run: _Run, at: _Position, net: nn.Cell, lr: Any, progress: bool,
               progress_file: Any) -> tuple[EpochHistory, _StepTracker, _FirstStepTimer,
                                            list[Callback]]:
    """The book's callbacks, in order: first-step timer, step tracker, the loss guard,
    progress bar, and on rank 0 the periodic and best checkpoints and the weight
    average; history last."""
    config, output_dir, main = run.config, run.output_dir, run.rank.is_main
    previous = [r for r in read_history(output_dir) if r["epoch"] <= at.initial_epoch] \
        if run.resume_path is not None else []
    history = EpochHistory(output_dir if main else None, lr, config.batch_size,
                           at.step_offset, previous)
    tracker, timer = _StepTracker(at.step_offset, at.initial_epoch), _FirstStepTimer()
    cbs: list[Callback] = [timer, tracker, LossGuard(history)]  # before any checkpoint
    if progress and main:
        cbs.append(Progress(config.epoch_size, at.steps_per_epoch, config.batch_size, lr,
                            at.step_offset, file=progress_file))
    if main:
        ckpt_config = CheckpointConfig(
            save_checkpoint_steps=config.save_checkpoint_epochs * at.steps_per_epoch,
            keep_checkpoint_max=config.keep_checkpoint_max)
        ckpt = AtomicCheckpoint(output_dir, ckpt_config, at.steps_per_epoch, PREFIX,
                                at.step_offset)
        cbs += [ckpt, BestCheckpoint(output_dir, at.step_offset, ckpt,
                                     run.source.evaluated_on)]
        if config.ema_decay:
            cbs.append(WeightAverage(net, output_dir, config.ema_decay, at.steps_per_epoch,
                                     step_offset=at.step_offset,
                                     keep=config.keep_checkpoint_max))
    return history, tracker, timer, cbs + [history]


def _fit(config: Config, model: Any, train_ds: ds.Dataset, eval_ds: ds.Dataset,
         callbacks: list[Callback], initial_epoch: int) -> None:
    """``Model.fit`` from ``initial_epoch`` to ``epoch_size``, validating as configured."""
    if initial_epoch >= config.epoch_size:
        log.info("nothing to do: the checkpoint is at epoch %d of %d", initial_epoch,
                 config.epoch_size)
        return
    sink = device_policy(config.device_target).data_sink  # as the models repo
    model.fit(config.epoch_size, train_ds, valid_dataset=eval_ds,
              valid_frequency=validation_epochs(config.epoch_size, config.valid_frequency),
              callbacks=callbacks, dataset_sink_mode=sink, valid_dataset_sink_mode=False,
              initial_epoch=initial_epoch)


def _final_test(run: _Run, net: nn.Cell, model: Any) -> tuple[dict[str, Any] | None,
                                                               float | None]:
    """``(test, seconds)``: with ``valid_split`` > 0, the chosen and the last checkpoint
    scored once on the test set (``test.json``, rank 0); else ``(None, None)``."""
    config, output_dir = run.config, run.output_dir
    if not (config.valid_split and run.rank.is_main and list_checkpoints(output_dir)):
        return None, None
    # Chosen on the held-out split; the test set scores the choice (and the last).
    test_started = time.perf_counter()
    test = final_test(output_dir, net, model, make_test_dataset(config, source=run.source),
                      run.source.tested_on)
    seconds_test = round(time.perf_counter() - test_started, 3)
    log.info("test top-1: chosen %.4f (epoch %s), last %.4f (epoch %s)",
             test["chosen"]["top1"], test["chosen"]["epoch"], test["last"]["top1"],
             test["last"]["epoch"])
    return test, seconds_test


# --------------------------------------------------------------------------- train
def train_and_evaluate(config: Config | str | os.PathLike[str] = "smoke",
                       overrides: Mapping[str, Any] | None = None, *,
                       stop_after_epoch: int | None = None,
                       extra_callbacks: Sequence[Callback] = (), progress: bool = True,
                       progress_file: Any = None, data_validated: bool = False) -> TrainResult:
    """Train (and validate) the configured profile; see the module docstring.

    ``config``: a :class:`~msresnet.config.profile.Config`, a profile name or a YAML path;
    ``overrides``: Config fields to change (e.g. ``{"output_dir": "../runs/smoke"}``);
    ``stop_after_epoch``: stop cleanly after this epoch, as if the job were killed right
    after saving it (to demonstrate and test resume); ``extra_callbacks``: more
    MindSpore callbacks, after the book's own (``--rank_dump`` passes RankDump here);
    ``progress``: show the tqdm bar (``progress_file``: where, default stderr);
    ``data_validated``: the caller has just validated the data folder (a job's
    preparation), which is then not read again.
    Returns a :class:`TrainResult`; files go to ``config.output_dir`` (rank 0 only).
    """
    started = time.perf_counter()
    config, source = _config_and_data(config, overrides, data_validated)
    rank = _start_runtime(config)
    # The device-count rule, once, where the run learns its device count: lr_max
    # scaled from the profile's lr_devices to this job's group size.
    rule, config = lr_rule(config, rank.group_size), for_devices(config, rank.group_size)
    output_dir = Path(config.output_dir)
    run = _Run(config, source, rank, output_dir, resolve_resume(config, output_dir), rule)
    with output_folder(output_dir, create=rank.is_main):
        changed = _changes_since_recording(run)
        train_ds, eval_ds = make_datasets(config, rank, source)
        steps_per_epoch = _steps_per_epoch(config, train_ds)
        net, optimizer, model, lr = make_model(config, steps_per_epoch)
        at = _resume_position(run, net, optimizer, train_ds, steps_per_epoch)
        with _run_log(output_dir if rank.is_main else None):
            _record_start(run, at)
            history, tracker, timer, cbs = _callbacks(run, at, net, lr, progress, progress_file)
            if stop_after_epoch is not None:
                cbs.append(StopAfterEpoch(stop_after_epoch))
            _fit(config, model, train_ds, eval_ds, cbs + list(extra_callbacks), at.initial_epoch)
            seconds = round(time.perf_counter() - started, 3)
            test, seconds_test = _final_test(run, net, model)
            result = TrainResult(
                output_dir=output_dir, history=history.records,
                best=read_best(output_dir) if rank.is_main else None, steps=tracker.step,
                seconds=seconds, epochs=tracker.epoch, steps_per_epoch=steps_per_epoch,
                resumed_from=run.resume_path.name if run.resume_path is not None else None,
                first_step_seconds=None if timer.seconds is None else round(timer.seconds, 3),
                checkpoints=[c.name for c in list_checkpoints(output_dir)] if rank.is_main else [],
                changed_on_resume={key: list(pair) for key, pair in changed.items()},
                test=test, seconds_test=seconds_test)
            if rank.is_main:
                write_json(output_dir / RESULT_FILE, result.to_dict())
            log.info("done: %d epochs, %d steps, %.1f s", result.epochs, result.steps,
                     result.seconds)
            return result
