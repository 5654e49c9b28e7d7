"""Per-rank evidence from a data-parallel run: what each rank trained on, and its weights.

A data-parallel job makes two promises that its logs alone do not prove: every
rank trains on a *different* part of the data, and after every step all ranks hold
the *same* weights (the gradients were averaged across ranks before the update).
With ``MSRESNET_RANK_DUMP=<folder>`` in the environment (``python -m
msresnet.launch --rank_dump`` sets it), :func:`msresnet.train.train` adds a
:class:`RankDump` callback on every rank, which writes to that folder:

* ``rank<R>_data.npz``: every training image the rank was fed (turned back into
  uint8 pixels), its label, epoch and step, and the rank's loss of every step;
* ``rank<R>_final.ckpt``: the rank's whole training network after the last step
  (weights, BatchNorm statistics, optimizer state);
* ``rank<R>.json``: a summary (steps, images and seconds per epoch).

It also logs one line per epoch with a fingerprint of the labels the rank saw.
The helpers below read the files back: :class:`SampleIndex` finds which CIFAR-10
training image an *augmented* image came from (random crop and flip move pixels,
they do not change them), :func:`shard_overlap` counts shared images between ranks,
and :func:`compare_parameters` compares two ranks' parameters, group by group.

For debugging and teaching only: it copies every image to host memory, and the
image recovery assumes ``image_size`` 32 (no resize). In dataset sink mode
(GPU/Ascend) MindSpore does not hand the step's batch to callbacks, so only the
parameters and losses are recorded there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore.train import Callback

from msresnet.callbacks import loss_value
from msresnet.cifar10 import TRAIN_FILES, read_records
from msresnet.launch import DUMP_VARIABLE  # the launcher's --rank_dump sets it
from msresnet.pipeline import CIFAR10_MEAN, CIFAR10_STD

log = logging.getLogger("msresnet.train")


DATA_FILE = "rank{rank}_data.npz"
PARAMS_FILE = "rank{rank}_final.ckpt"
SUMMARY_FILE = "rank{rank}.json"

PAD = 4  # RandomCrop(32, padding=4) in msresnet.pipeline
SIZE = 32


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


class RankDump(Callback):
    """Records this rank's training batches, step losses and final parameters.

    ``train`` adds it on every rank when :data:`DUMP_VARIABLE` is set (see
    :func:`callbacks_from_environment`). Files are written at the end of training.
    """

    def __init__(self, directory: str | os.PathLike[str], rank: int = 0,
                 group_size: int = 1) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.rank = int(rank)
        self.group_size = int(group_size)
        self.images: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.image_epochs: list[np.ndarray] = []
        self.image_steps: list[np.ndarray] = []
        self.losses: list[float] = []
        self.step_epochs: list[int] = []
        self.step_seconds: list[float] = []
        self.epochs: list[dict[str, Any]] = []
        self._epoch_start = self._last_step = 0.0
        self._epoch_first_step = 0
        self._epoch = 0

    def on_train_epoch_begin(self, run_context: Any) -> None:
        cb_params = run_context.original_args()
        self._epoch_start = self._last_step = time.perf_counter()
        self._epoch_first_step = len(self.losses)
        self._epoch = int(cb_params.cur_epoch_num)

    def on_train_step_end(self, run_context: Any) -> None:
        # This step's wall time, since the previous step ended (or the epoch began),
        # not counting this callback's own copying below.
        self.step_seconds.append(time.perf_counter() - self._last_step)
        cb_params = run_context.original_args()
        step = len(self.losses)
        element = getattr(cb_params, "train_dataset_element", None)
        if element is not None:  # None in sink mode
            images = element[0].asnumpy()
            labels = element[1].asnumpy().astype(np.int32)
            self.images.append(to_uint8(images))
            self.labels.append(labels)
            self.image_epochs.append(np.full(len(labels), self._epoch, np.int32))
            self.image_steps.append(np.full(len(labels), step, np.int32))
        self.losses.append(loss_value(cb_params.net_outputs))
        self.step_epochs.append(self._epoch)
        self._last_step = time.perf_counter()

    def on_train_epoch_end(self, run_context: Any) -> None:
        steps = len(self.losses) - self._epoch_first_step
        labels = [lab for lab, ep in zip(self.labels, self.image_epochs) if ep[0] == self._epoch]
        labels_seen = np.concatenate(labels) if labels else np.zeros(0, np.int32)
        record = {"epoch": self._epoch, "steps": steps, "images": int(labels_seen.size),
                  "seconds": round(self._last_step - self._epoch_start, 3),
                  "label_counts": np.bincount(labels_seen, minlength=10).tolist(),
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

        np.savez_compressed(
            self.directory / DATA_FILE.format(**names),
            images=stack(self.images, (0, SIZE, SIZE, 3), np.uint8),
            labels=stack(self.labels, (0,), np.int32),
            image_epochs=stack(self.image_epochs, (0,), np.int32),
            image_steps=stack(self.image_steps, (0,), np.int32),
            losses=np.asarray(self.losses, np.float64),
            step_epochs=np.asarray(self.step_epochs, np.int32),
            step_seconds=np.asarray(self.step_seconds, np.float64))
        ms.save_checkpoint(cb_params.train_network,
                           str(self.directory / PARAMS_FILE.format(**names)))
        summary = {"rank": self.rank, "group_size": self.group_size, "finished": True,
                   "steps": len(self.losses), "epochs": self.epochs}
        (self.directory / SUMMARY_FILE.format(**names)).write_text(
            json.dumps(summary, indent=2) + "\n")
        log.info("rank %d: wrote %s, %s and %s to %s", self.rank, DATA_FILE.format(**names),
                 PARAMS_FILE.format(**names), SUMMARY_FILE.format(**names), self.directory)


def callbacks_from_environment(rank: Any, environ: dict[str, str] | None = None) -> list[Callback]:
    """``[RankDump(...)]`` when :data:`DUMP_VARIABLE` is set, else ``[]``.

    ``rank`` is a :class:`msresnet.distributed.RankInfo` (``rank``, ``group_size``).
    This is the hook :func:`msresnet.train.train` calls.
    """
    env = os.environ if environ is None else environ
    folder = env.get(DUMP_VARIABLE, "").strip()
    if not folder:
        return []
    return [RankDump(folder, rank.rank, rank.group_size)]


# --------------------------------------------------------------------------- reading
@dataclass
class RankRecord:
    """What one rank wrote (see the module docstring)."""

    rank: int
    group_size: int
    images: np.ndarray          # (N, 32, 32, 3) uint8, augmented, in training order
    labels: np.ndarray          # (N,) int32
    image_epochs: np.ndarray    # (N,) epoch of each image
    image_steps: np.ndarray     # (N,) step index (from 0) of each image
    losses: np.ndarray          # (steps,) this rank's loss of every step
    step_epochs: np.ndarray     # (steps,) epoch of every step
    step_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (steps,) wall time
    summary: dict[str, Any] = field(default_factory=dict)
    params_path: Path | None = None

    def epoch_losses(self) -> dict[int, np.ndarray]:
        """Step losses grouped by epoch."""
        return {int(e): self.losses[self.step_epochs == e] for e in np.unique(self.step_epochs)}


def load_rank(directory: str | os.PathLike[str], rank: int) -> RankRecord:
    """Read the files rank ``rank`` wrote to ``directory``."""
    directory = Path(directory)
    summary_path = directory / SUMMARY_FILE.format(rank=rank)
    if not summary_path.is_file():
        raise FileNotFoundError(f"{summary_path}: no summary for rank {rank} (did it finish, "
                                f"and was {DUMP_VARIABLE} set?)")
    summary = json.loads(summary_path.read_text())
    with np.load(directory / DATA_FILE.format(rank=rank)) as data:
        arrays = {key: data[key] for key in data.files}
    return RankRecord(rank=rank, group_size=int(summary["group_size"]), summary=summary,
                      params_path=directory / PARAMS_FILE.format(rank=rank), **arrays)


def step_times(records: Sequence[RankRecord], first_epoch: int = 2) -> np.ndarray:
    """Wall time of every step from epoch ``first_epoch`` on (epoch 1 includes graph
    compilation), the slowest rank's for each step: the job moves at its pace."""
    chosen = records[0].step_epochs >= first_epoch
    return np.max([r.step_seconds[chosen] for r in records], axis=0)


def load_ranks(directory: str | os.PathLike[str]) -> list[RankRecord]:
    """All ranks found in ``directory``, by rank."""
    ranks = sorted(int(p.stem[4:]) for p in Path(directory).glob("rank*.json")
                   if p.stem[4:].isdigit())
    if not ranks:
        raise FileNotFoundError(f"{directory}: no rank*.json files")
    return [load_rank(directory, r) for r in ranks]


def _key(pixels: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(pixels).tobytes(), digest_size=16).digest()


class SampleIndex:
    """Finds which training image an augmented 32x32 image was cut from.

    ``RandomCrop(32, padding=4)`` shifts the image by ``dy, dx`` in -4..4 (filling the
    border with zeros) and ``RandomHorizontalFlip`` may mirror it, so the central
    24x24 pixels of the original always appear, unchanged, somewhere in the augmented
    image. The index keys every training image by that centre; an augmented image is
    looked up under its 81 possible shifts, mirrored and not.
    """

    def __init__(self, folder: str | os.PathLike[str], files: Sequence[str] = TRAIN_FILES) -> None:
        self.keys: dict[bytes, list[int]] = {}
        offset = 0
        for name in files:
            images, _ = read_records(Path(folder) / name)
            for i, image in enumerate(images):
                self.keys.setdefault(_key(image[PAD:SIZE - PAD, PAD:SIZE - PAD]), []).append(offset + i)
            offset += len(images)
        self.size = offset

    def identify(self, image: np.ndarray) -> int:
        """Index (0..49,999 over ``data_batch_1..5``) of the source image, or -1."""
        inner = SIZE - 2 * PAD
        for candidate in (image, image[:, ::-1]):
            for oy in range(2 * PAD + 1):
                for ox in range(2 * PAD + 1):
                    y, x = 2 * PAD - oy, 2 * PAD - ox
                    hits = self.keys.get(_key(candidate[y:y + inner, x:x + inner]))
                    if hits:
                        return hits[0]
        return -1

    def identify_all(self, images: Iterable[np.ndarray]) -> np.ndarray:
        return np.asarray([self.identify(image) for image in images], dtype=np.int64)


@dataclass
class EpochShards:
    """Which training images each rank saw in one epoch."""

    epoch: int
    seen: dict[int, np.ndarray]     # rank -> source indices, in training order

    @property
    def unidentified(self) -> int:
        return int(sum((s < 0).sum() for s in self.seen.values()))

    @property
    def repeats_within_rank(self) -> dict[int, int]:
        return {r: int(len(s) - len(np.unique(s))) for r, s in self.seen.items()}

    @property
    def shared(self) -> int:
        """Images seen by more than one rank this epoch."""
        sets = [set(s.tolist()) for s in self.seen.values()]
        counts: dict[int, int] = {}
        for items in sets:
            for item in items:
                counts[item] = counts.get(item, 0) + 1
        return sum(1 for c in counts.values() if c > 1)

    @property
    def union(self) -> int:
        return len(set().union(*(set(s.tolist()) for s in self.seen.values())))


def shard_overlap(records: Sequence[RankRecord], index: SampleIndex) -> list[EpochShards]:
    """Per epoch: the source image of every image each rank trained on."""
    epochs = sorted({int(e) for r in records for e in np.unique(r.image_epochs)})
    result = []
    for epoch in epochs:
        seen = {r.rank: index.identify_all(r.images[r.image_epochs == epoch]) for r in records}
        result.append(EpochShards(epoch, seen))
    return result


# --------------------------------------------------------------------------- parameters
PARAM_GROUPS = ("weights", "batchnorm statistics", "optimizer state")
NOT_PARAMETERS = ("epoch_num", "step_num")  # bookkeeping entries of msresnet checkpoints


def parameter_group(name: str) -> str:
    """``weights`` (trained by the gradients), ``batchnorm statistics`` (running
    mean/variance, updated from each rank's own batches) or ``optimizer state``."""
    if "moving_mean" in name or "moving_variance" in name:
        return "batchnorm statistics"
    if name.startswith("moments.") or name in ("global_step", "learning_rate", "momentum"):
        return "optimizer state"
    return "weights"


@dataclass
class ParameterComparison:
    """Largest absolute difference per parameter, and per group."""

    max_abs_diff: dict[str, float]
    only_in_a: list[str]
    only_in_b: list[str]

    def by_group(self) -> dict[str, dict[str, float]]:
        """``{group: {"tensors", "identical", "max_abs_diff"}}``."""
        out: dict[str, dict[str, float]] = {}
        for group in PARAM_GROUPS:
            diffs = [d for n, d in self.max_abs_diff.items() if parameter_group(n) == group]
            out[group] = {"tensors": len(diffs), "identical": sum(d == 0.0 for d in diffs),
                          "max_abs_diff": max(diffs, default=0.0)}
        return out


def _load(source: str | os.PathLike[str] | dict[str, Any]) -> dict[str, np.ndarray]:
    params = ms.load_checkpoint(str(source)) if not isinstance(source, dict) else source
    return {name: np.asarray(value.asnumpy() if hasattr(value, "asnumpy") else value)
            for name, value in params.items() if name not in NOT_PARAMETERS}


def compare_parameters(a: str | os.PathLike[str] | dict[str, Any],
                       b: str | os.PathLike[str] | dict[str, Any]) -> ParameterComparison:
    """Compare two checkpoints (paths or loaded dicts) tensor by tensor."""
    pa, pb = _load(a), _load(b)
    common = [n for n in pa if n in pb]
    diffs = {}
    for name in common:
        x, y = pa[name].astype(np.float64), pb[name].astype(np.float64)
        if x.shape != y.shape:
            raise ValueError(f"parameter {name}: shape {x.shape} vs {y.shape}")
        diffs[name] = float(np.max(np.abs(x - y))) if x.size else 0.0
    return ParameterComparison(diffs, sorted(set(pa) - set(pb)), sorted(set(pb) - set(pa)))


# --------------------------------------------------------------------------- replay
def global_batches(records: Sequence[RankRecord]) -> tuple[np.ndarray, np.ndarray]:
    """The images and labels of a data-parallel run as global batches, in step order:
    step t is rank 0's batch t, then rank 1's batch t, and so on."""
    records = sorted(records, key=lambda r: r.rank)
    steps = len(records[0].losses)
    images, labels = [], []
    for step in range(steps):
        for record in records:
            chosen = record.image_steps == step
            images.append(record.images[chosen])
            labels.append(record.labels[chosen])
    return np.concatenate(images), np.concatenate(labels)


def global_losses(records: Sequence[RankRecord]) -> np.ndarray:
    """Per step, the mean of the ranks' losses: the loss of the whole global batch
    (every rank's loss is the mean over the same number of images)."""
    return np.mean([r.losses for r in records], axis=0)


class _StepLosses(Callback):
    def __init__(self) -> None:
        super().__init__()
        self.losses: list[float] = []

    def on_train_step_end(self, run_context: Any) -> None:
        self.losses.append(loss_value(run_context.original_args().net_outputs))


@dataclass
class Replay:
    """One process training on exactly the global batches of a data-parallel run."""

    losses: np.ndarray
    parameters: dict[str, Any]
    batch_size: int


def _pipeline_inputs(images: np.ndarray) -> np.ndarray:
    """uint8 NHWC images -> the float32 NCHW network inputs, computed by MindSpore's
    own ``Rescale``/``Normalize``/``HWC2CHW`` (so bit for bit what training fed)."""
    import mindspore.dataset as ds

    from msresnet.pipeline import image_transforms

    data = ds.NumpySlicesDataset({"image": images}, shuffle=False, num_parallel_workers=1)
    data = data.map(image_transforms(training=False), input_columns="image",
                    num_parallel_workers=1).batch(256)
    return np.concatenate([row[0] for row in
                           data.create_tuple_iterator(num_epochs=1, output_numpy=True)])


def replay_one_worker(records: Sequence[RankRecord], config: Any) -> Replay:
    """Train one process with batch ``batch_size x ranks`` on the images the ranks saw.

    Same initial weights (``config.seed``), same learning-rate array (indexed by
    global step), same optimizer: the only difference to the data-parallel run is
    that BatchNorm normalises each step over the whole global batch instead of
    over each rank's part of it. Runs in this process (it sets the device).
    """
    import dataclasses

    import mindspore.dataset as ds

    from msresnet.train import make_model, set_context

    images, labels = global_batches(records)
    batch = config.batch_size * len(records)
    steps = len(records[0].losses)
    epochs = int(max(r.step_epochs.max() for r in records))
    one = dataclasses.replace(config, batch_size=batch, train_samples=None)
    set_context(one)
    data = ds.NumpySlicesDataset({"image": _pipeline_inputs(images),
                                  "label": labels.astype(np.int32)},
                                 shuffle=False, num_parallel_workers=1).batch(batch)
    net, _, model, _ = make_model(one, steps // epochs)
    recorder = _StepLosses()
    # All steps in one pass: the learning rate is looked up by global step, so one
    # "epoch" of `steps` batches follows the same schedule as `epochs` x steps/epoch.
    model.train(1, data, callbacks=[recorder], dataset_sink_mode=False)
    return Replay(np.asarray(recorder.losses), {p.name: p.asnumpy() for p in
                                                model.train_network.get_parameters()}, batch)


def replay_averaged(records: Sequence[RankRecord], config: Any, steps: int | None = None,
                    reduce: str = "mean", nudge: float = 0.0) -> Replay:
    """Do in one process what the ranks did together, step by step: each rank's
    batch goes through the network on its own (so BatchNorm normalises over that
    batch, as on the rank), the gradients are combined, and the optimizer makes one
    update. ``reduce="mean"`` is ``gradients_mean=True``; ``"sum"`` is what
    ``gradients_mean=False`` would do. ``losses`` are the per-step means of the
    per-batch losses; ``steps`` (default: all) limits the replay. ``nudge``
    multiplies every combined gradient by ``1 + nudge`` (e.g. ``2**-23``, one
    float32 rounding step), to see how far such a tiny difference carries.
    """
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce: must be 'mean' or 'sum', got {reduce!r}")
    from mindspore import nn

    from msresnet.train import make_loss, make_model, set_context

    records = sorted(records, key=lambda r: r.rank)
    total_steps = len(records[0].losses)
    epochs = int(max(r.step_epochs.max() for r in records))
    steps = total_steps if steps is None else min(steps, total_steps)
    set_context(config)
    net, optimizer, _, _ = make_model(config, total_steps // epochs)
    with_loss = nn.WithLossCell(net, make_loss(config))
    with_loss.set_train(True)
    grad_fn = ms.value_and_grad(with_loss, None, optimizer.parameters)

    # Every rank's images through the same per-image operations as the training
    # pipeline (after its random crop and flip), once, in one fully read pipeline.
    inputs = {record.rank: _pipeline_inputs(record.images) for record in records}

    def tensors(record: RankRecord, step: int) -> tuple[ms.Tensor, ms.Tensor]:
        chosen = record.image_steps == step
        return (ms.Tensor(inputs[record.rank][chosen]),
                ms.Tensor(record.labels[chosen].astype(np.int32)))

    losses = []
    for step in range(steps):
        total, step_losses = None, []
        for record in records:
            loss, grads = grad_fn(*tensors(record, step))
            step_losses.append(float(loss.asnumpy()))
            total = grads if total is None else tuple(a + b for a, b in zip(total, grads))
        divisor = len(records) if reduce == "mean" else 1
        optimizer(tuple(g / divisor * (1.0 + nudge) if nudge else g / divisor for g in total))
        losses.append(float(np.mean(step_losses)))
    return Replay(np.asarray(losses), {p.name: p.asnumpy() for p in
                                       with_loss.get_parameters()} |
                  {p.name: p.asnumpy() for p in optimizer.get_parameters()},
                  config.batch_size)
