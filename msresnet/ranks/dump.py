"""Per-rank evidence from a data-parallel run: what each rank trained on, and its weights.

A data-parallel job makes two promises that its logs alone do not prove: every
rank trains on a *different* part of the data, and after every step all ranks hold
the *same* weights (the gradients were averaged across ranks before the update).
With ``MSRESNET_RANK_DUMP=<folder>`` in the environment (``msresnet
launch --rank_dump`` sets it), ``msresnet train`` passes a
:class:`RankDump` callback to :func:`msresnet.training.train.train_and_evaluate` on every
rank, which writes to that folder:

* ``rank<R>_data.npz``: every training image the rank was fed (turned back into
  uint8 pixels), its label, epoch and step, and the rank's loss of every step;
* ``rank<R>_final.ckpt``: the rank's whole training network after the last step
  (weights, BatchNorm statistics, optimizer state);
* ``rank<R>.json``: a summary (steps, images and seconds per epoch).

It also logs one line per epoch with a fingerprint of the labels the rank saw.
This module is only the writing half, the part every training worker imports;
reading the files back and analysing them (which image came from where, shard
overlap, parameter comparison, single-process replays) is :mod:`msresnet.ranks.analysis`.

For debugging and teaching only: it copies every image to host memory, and the
image recovery assumes ``image_size`` 32 (no resize, no ``progressive_size``:
the stacked batches of one run must share a shape). In dataset sink mode
(GPU/Ascend) MindSpore does not hand the step's batch to callbacks, so only the
parameters and losses are recorded there.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore.train import Callback

from msresnet.atomic import atomic_path, write_json
from msresnet.training.callbacks import loss_value
from msresnet.training.distributed import rank_info
from msresnet.data.cifar10 import IMAGE_SHAPE, NUM_CLASSES
from msresnet.data.pipeline import CIFAR10_MEAN, CIFAR10_STD, CROP_PADDING

log = logging.getLogger("msresnet.training.train")


DATA_FILE = "rank{rank}_data.npz"
PARAMS_FILE = "rank{rank}_final.ckpt"
SUMMARY_FILE = "rank{rank}.json"

PAD = CROP_PADDING  # the training pipeline's RandomCrop padding
SIZE = IMAGE_SHAPE[0]


# --------------------------------------------------------------------------- recording
def to_uint8(images: np.ndarray) -> np.ndarray:
    """Undo ``Rescale(1/255) -> Normalize(mean, std) -> HWC2CHW``: float NCHW -> uint8 NHWC.

    The float32 round trip is off by far less than half a grey level, so rounding
    gives back the exact pixels the augmentation produced.
    """
    hwc = np.asarray(images, dtype=np.float64).transpose(0, 2, 3, 1)
    pixels = (hwc * np.asarray(CIFAR10_STD) + np.asarray(CIFAR10_MEAN)) * 255.0
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def label_fingerprint(labels: np.ndarray) -> str:
    """Short hash of a label sequence (order matters): equal only for the same stream."""
    return hashlib.sha256(np.asarray(labels, dtype=np.int32).tobytes()).hexdigest()[:12]


class StepRecorder(Callback):
    """Every training step's loss, its epoch and its wall time.

    A step's time runs from the end of the previous step (or the start of the
    epoch) to the end of this one, so it covers fetching the batch as well as
    computing it; what a subclass records in :meth:`record_step` is not counted.
    :class:`RankDump` is one per rank; chapter 7's one-worker replay uses this class
    itself, so both sides of its speed comparison are timed alike.
    """

    def __init__(self) -> None:
        super().__init__()
        self.losses: list[float] = []
        self.step_epochs: list[int] = []
        self.step_seconds: list[float] = []
        self._epoch_start = self._last_step = 0.0
        self._epoch = 0

    def on_train_epoch_begin(self, run_context: Any) -> None:
        self._epoch_start = self._last_step = time.perf_counter()
        self._epoch = int(run_context.original_args().cur_epoch_num)

    def on_train_step_end(self, run_context: Any) -> None:
        self.step_seconds.append(time.perf_counter() - self._last_step)
        cb_params = run_context.original_args()
        self.record_step(cb_params)
        self.losses.append(loss_value(cb_params.net_outputs))
        self.step_epochs.append(self._epoch)
        self._last_step = time.perf_counter()

    def record_step(self, cb_params: Any) -> None:
        """What a subclass keeps of each step besides its loss (untimed)."""


class RankDump(StepRecorder):
    """Records this rank's training batches, step losses and final parameters.

    ``msresnet train`` adds it on every rank when
    :data:`msresnet.training.distributed.DUMP_VARIABLE` is set. ``rank`` and ``group_size``
    default to this process's place in the job, read when training begins (the
    communication group is initialised by then). Files are written at the end of
    training.
    """

    def __init__(self, directory: str | os.PathLike[str], rank: int | None = None,
                 group_size: int | None = None) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.rank = -1 if rank is None else int(rank)
        self.group_size = -1 if group_size is None else int(group_size)
        self._ask_rank = rank is None or group_size is None
        self.images: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.image_epochs: list[np.ndarray] = []
        self.image_steps: list[np.ndarray] = []
        self.epochs: list[dict[str, Any]] = []
        self._epoch_first_step = 0

    def on_train_begin(self, run_context: Any) -> None:
        if self._ask_rank:
            info = rank_info()
            self.rank, self.group_size = info.rank, info.group_size

    def on_train_epoch_begin(self, run_context: Any) -> None:
        super().on_train_epoch_begin(run_context)
        self._epoch_first_step = len(self.losses)

    def record_step(self, cb_params: Any) -> None:
        """The step's batch (copied after its time was taken)."""
        element = getattr(cb_params, "train_dataset_element", None)
        if element is not None:  # None in sink mode
            images = element[0].asnumpy()
            labels = element[1].asnumpy().astype(np.int32)
            step = len(self.losses)
            self.images.append(to_uint8(images))
            self.labels.append(labels)
            self.image_epochs.append(np.full(len(labels), self._epoch, np.int32))
            self.image_steps.append(np.full(len(labels), step, np.int32))

    def on_train_epoch_end(self, run_context: Any) -> None:
        steps = len(self.losses) - self._epoch_first_step
        labels = [lab for lab, ep in zip(self.labels, self.image_epochs) if ep[0] == self._epoch]
        labels_seen = np.concatenate(labels) if labels else np.zeros(0, np.int32)
        record = {"epoch": self._epoch, "steps": steps, "images": int(labels_seen.size),
                  "seconds": round(self._last_step - self._epoch_start, 3),
                  "label_counts": np.bincount(labels_seen, minlength=NUM_CLASSES).tolist(),
                  "label_fingerprint": label_fingerprint(labels_seen)}
        self.epochs.append(record)
        log.info("rank %d of %d, epoch %d: %d steps, %d images, label counts %s, "
                 "label fingerprint %s", self.rank, self.group_size, self._epoch, steps,
                 record["images"], record["label_counts"], record["label_fingerprint"])

    def on_train_end(self, run_context: Any) -> None:
        cb_params = run_context.original_args()
        self.directory.mkdir(parents=True, exist_ok=True)
        names = {"rank": self.rank}

        def stack(parts: list[np.ndarray], shape: tuple[int, ...], dtype: Any) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(shape, dtype)

        # The data and the weights first, the summary last: load_rank reads the
        # summary as the sign that this rank finished.
        with atomic_path(self.directory / DATA_FILE.format(**names)) as partial:
            np.savez_compressed(
                partial,
                images=stack(self.images, (0, SIZE, SIZE, 3), np.uint8),
                labels=stack(self.labels, (0,), np.int32),
                image_epochs=stack(self.image_epochs, (0,), np.int32),
                image_steps=stack(self.image_steps, (0,), np.int32),
                losses=np.asarray(self.losses, np.float64),
                step_epochs=np.asarray(self.step_epochs, np.int32),
                step_seconds=np.asarray(self.step_seconds, np.float64))
        with atomic_path(self.directory / PARAMS_FILE.format(**names)) as partial:
            ms.save_checkpoint(cb_params.train_network, str(partial))
        summary = {"rank": self.rank, "group_size": self.group_size, "finished": True,
                   "steps": len(self.losses), "epochs": self.epochs}
        write_json(self.directory / SUMMARY_FILE.format(**names), summary)
        log.info("rank %d: wrote %s, %s and %s to %s", self.rank, DATA_FILE.format(**names),
                 PARAMS_FILE.format(**names), SUMMARY_FILE.format(**names), self.directory)
