"""Resuming a run: which checkpoint, what may differ from the recording, restoring.

``resume_from: auto`` continues the newest periodic checkpoint of the output folder;
a path continues that file. The recording of the run (``config.yaml``) must match
the resumed config but for :data:`RESUME_FREE_KEYS`, and :func:`restore` puts back
weights, BatchNorm statistics and the optimizer's state, returning the epoch to
continue from (:func:`msresnet.training.train.train_and_evaluate` fast-forwards the
data pipeline to it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mindspore as ms
from mindspore import nn

from msresnet.config.profile import Config
from msresnet.data.source import same_data_dir
from msresnet.training.checkpoints import (CheckpointError, check_fits, checkpoint_meta,
                                           latest_checkpoint, list_checkpoints, read_checkpoint)
from msresnet.training.factories import TrainError


# Optimizer entries that are recomputed from the config instead of restored:
# the learning-rate array (its length depends on epoch_size).
NOT_RESTORED = ("learning_rate",)


def resolve_resume(config: Config, output_dir: Path) -> Path | None:
    """The checkpoint to resume from, or None to start fresh.

    ``auto`` picks the newest ``resnet50-<epoch>_<step>.ckpt`` in the output folder
    (none yet: start fresh). A fresh start refuses an output folder that already
    holds checkpoints, so two runs never mix their files. In a multi-device job
    every rank resumes from the same file, so ``output_dir`` (or the explicit
    checkpoint) must be visible to all ranks.
    """
    choice = config.resume_from
    if choice is None or choice.strip().lower() in ("", "none", "null"):
        existing = list_checkpoints(output_dir)
        if existing:
            raise TrainError(
                f"output_dir {output_dir} already holds checkpoints of an earlier run "
                f"({existing[-1].name}, ...); pass resume_from='auto' to continue it, "
                f"or use an empty output folder")
        return None
    if choice.strip().lower() == "auto":
        return latest_checkpoint(output_dir)
    path = Path(choice)
    if not path.is_file():
        raise TrainError(f"resume_from: checkpoint not found: {choice}")
    return path


# Keys that may differ between a run's recording and the command that resumes it
# without changing what the run trains on.
RESUME_FREE_KEYS = ("resume_from", "output_dir", "epoch_size", "num_workers")


def config_differences(recorded: Config, current: Config,
                       ignore: Sequence[str] = ()) -> dict[str, tuple[Any, Any]]:
    """``{key: (recorded, current)}`` for the keys whose values differ.

    ``data_dir`` is compared as the folder it names
    (:func:`msresnet.data.source.same_data_dir`: a path recorded from another working
    directory, or through a link, can name the same folder).
    """
    differences = {}
    for key, old in recorded.to_dict().items():
        new = getattr(current, key)
        if key in ignore:
            continue
        if key == "data_dir":
            same = same_data_dir(old, new)
        else:
            same = old == new
        if not same:
            differences[key] = (old, new)
    return differences


def restore(path: Path, net: nn.Cell, optimizer: nn.Optimizer, steps_per_epoch: int) -> int:
    """Load weights and optimizer state strictly; return the epoch to continue from."""
    params = read_checkpoint(path)
    meta = checkpoint_meta(params)
    if meta["epoch"] is None or meta["step"] is None:
        raise CheckpointError(f"checkpoint {path.name} has no epoch_num/step_num record; "
                              "it was not written by msresnet.training.train and cannot be resumed")
    if meta["step"] != meta["epoch"] * steps_per_epoch:
        raise CheckpointError(
            f"checkpoint {path.name}: global step {meta['step']} is not epoch {meta['epoch']} x "
            f"{steps_per_epoch} steps per epoch; train_samples, batch_size or the number of "
            "devices changed since it was written")
    check_fits(net, params, f"checkpoint {path.name}")
    check_fits(optimizer, params, f"checkpoint {path.name} (optimizer state)", ignore=NOT_RESTORED)
    for cell in (net, optimizer):
        wanted = {p.name: p for p in cell.get_parameters()}
        # The recomputed entries keep their current values (loaded onto themselves, which
        # also spares MindSpore's "not loaded" warning for them).
        values = {name: (param if name in NOT_RESTORED else params[name])
                  for name, param in wanted.items()}
        not_loaded, _ = ms.load_param_into_net(cell, values)
        if not_loaded:
            raise CheckpointError(f"checkpoint {path.name}: not loaded: {sorted(not_loaded)}")
    restored_step = int(optimizer.global_step.asnumpy().item())
    if restored_step != meta["step"]:
        raise CheckpointError(f"checkpoint {path.name}: optimizer global_step {restored_step} "
                              f"!= recorded step {meta['step']}")
    return int(meta["epoch"])
