"""Reading back and analysing the per-rank evidence of a data-parallel run.

:mod:`msresnet.ranks.dump` writes, on every rank of a job launched with ``msresnet
launch --rank_dump``, what the rank trained on and its final weights. This
module reads those files (:func:`load_rank`, :func:`load_ranks`) and checks the two
promises of data parallelism with them:

* :class:`SampleIndex` finds which CIFAR-10 training image an *augmented* image came
  from (random crop and flip move pixels, they do not change them), and
  :func:`shard_overlap` counts the images ranks shared in an epoch;
* :func:`compare_parameters` compares two ranks' (or a rank's and a checkpoint's)
  parameters, group by group;
* :class:`AveragedReplay` and :func:`replay_one_worker` redo the run in one process
  (per-rank batches with averaged gradients, or one worker on the global batch).

It is chapter 7's analysis code; no training worker imports it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn

from msresnet.training.checkpoints import read_checkpoint
from msresnet.data.cifar10 import TRAIN_FILES, read_records
from msresnet.training.distributed import DUMP_VARIABLE
from msresnet.ranks.dump import DATA_FILE, PAD, PARAMS_FILE, SIZE, SUMMARY_FILE, StepRecorder


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


def step_times(records: Sequence[Any], first_epoch: int = 2) -> np.ndarray:
    """Wall time of every step from epoch ``first_epoch`` on (epoch 1 includes graph
    compilation), the slowest rank's for each step: the job moves at its pace.
    ``records`` are the ranks' :class:`RankRecord` or a one-worker :class:`Replay`
    (anything with ``step_epochs`` and ``step_seconds``).

    A job shorter than that (one epoch) gives its steps after the first, which
    compiled; a job of one step gives that step, compilation included.
    """
    epochs = records[0].step_epochs
    chosen = epochs >= first_epoch
    if not chosen.any():
        chosen = np.arange(len(epochs)) >= 1
    if not chosen.any():
        chosen = np.ones(len(epochs), dtype=bool)
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
    params = read_checkpoint(source) if not isinstance(source, dict) else source
    return {name: np.asarray(value.asnumpy() if hasattr(value, "asnumpy") else value)
            for name, value in params.items() if name not in NOT_PARAMETERS}


def compare_parameters(a: str | os.PathLike[str] | dict[str, Any],
                       b: str | os.PathLike[str] | dict[str, Any]) -> ParameterComparison:
    """Compare two checkpoints (paths or loaded dicts) tensor by tensor.

    Only the names both hold are compared (the rest are listed); none in common is an
    error, not an empty comparison that reads as "no difference"."""
    pa, pb = _load(a), _load(b)
    common = [n for n in pa if n in pb]
    if not common:
        raise ValueError(f"no parameter name in common (e.g. {next(iter(pa), None)!r} "
                         f"against {next(iter(pb), None)!r}): nothing to compare")
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


class _GradientStep(nn.Cell):
    """Loss and gradients of one batch as a cell: under graph mode (the CPU profiles)
    it is compiled once and then runs at training speed. The same
    ``ms.value_and_grad`` called from Python runs op by op: chapter 7's three replays
    of its 8-step job took 56 s that way and 36 s compiled, with the same losses to
    the last bit (idle 2-core Xeon, 2026-12-02)."""

    def __init__(self, with_loss: Any, parameters: Any) -> None:
        super().__init__(auto_prefix=False)  # the parameters keep their names
        self.with_loss = with_loss
        self.value_and_grad = ms.value_and_grad(with_loss, None, parameters)

    def construct(self, images: Any, labels: Any) -> Any:
        return self.value_and_grad(images, labels)


@dataclass
class Replay:
    """One process training on exactly the global batches of a data-parallel run."""

    losses: np.ndarray
    parameters: dict[str, Any]
    batch_size: int
    step_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (steps,) wall time
    step_epochs: np.ndarray = field(default_factory=lambda: np.zeros(0))   # (steps,) job epoch


def _pipeline_inputs(images: np.ndarray) -> np.ndarray:
    """uint8 NHWC images -> the float32 NCHW network inputs, computed by MindSpore's
    own ``Rescale``/``Normalize``/``HWC2CHW`` (so bit for bit what training fed)."""
    import mindspore.dataset as ds

    from msresnet.data.pipeline import image_transforms

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
    over each rank's part of it. Runs in this process (it sets the device). It
    times every step as the ranks do, so it is also the one-worker side of a speed
    comparison at the same global batch: the first step includes compiling.
    """
    import dataclasses

    import mindspore.dataset as ds

    from msresnet.training.factories import make_model, set_context

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
    recorder = StepRecorder()
    # All steps in one pass: the learning rate is looked up by global step, so one
    # "epoch" of `steps` batches follows the same schedule as `epochs` x steps/epoch.
    model.train(1, data, callbacks=[recorder], dataset_sink_mode=False)
    return Replay(np.asarray(recorder.losses), {p.name: p.asnumpy() for p in
                                                model.train_network.get_parameters()}, batch,
                  np.asarray(recorder.step_seconds), records[0].step_epochs.copy())


class AveragedReplay:
    """Do in one process what the ranks did together, step by step: each rank's batch
    goes through the network on its own (so BatchNorm normalises over that batch, as
    on the rank), the gradients are combined, and the optimizer makes one update.

    The network, its gradient step and the optimizer are built and compiled once;
    every :meth:`run` first puts back the initial weights and optimizer state (the
    profile's seed), so replays that differ only in how the gradients are combined
    start alike and pay for one compile (chapter 7 makes three).
    """

    def __init__(self, records: Sequence[RankRecord], config: Any) -> None:
        from msresnet.training.factories import make_loss, make_model, set_context

        self.records = sorted(records, key=lambda r: r.rank)
        self.total_steps = len(self.records[0].losses)
        epochs = int(max(r.step_epochs.max() for r in self.records))
        self.batch_size = config.batch_size
        set_context(config)
        net, self.optimizer, _, _ = make_model(config, self.total_steps // epochs)
        self.with_loss = nn.WithLossCell(net, make_loss(config))
        self.with_loss.set_train(True)
        self.grad_fn = _GradientStep(self.with_loss, self.optimizer.parameters)
        # Every rank's images through the same per-image operations as the training
        # pipeline (after its random crop and flip), once, in one fully read pipeline.
        self.inputs = {r.rank: _pipeline_inputs(r.images) for r in self.records}
        state = {id(p): p for p in [*self.with_loss.get_parameters(),
                                    *self.optimizer.get_parameters()]}
        self.start = [(p, p.asnumpy().copy()) for p in state.values()]

    def _batch(self, record: RankRecord, step: int) -> tuple[ms.Tensor, ms.Tensor]:
        chosen = record.image_steps == step
        return (ms.Tensor(self.inputs[record.rank][chosen]),
                ms.Tensor(record.labels[chosen].astype(np.int32)))

    def run(self, steps: int | None = None, reduce: str = "mean",
            nudge: float = 0.0) -> Replay:
        """One replay from the initial state. ``reduce="mean"`` is
        ``gradients_mean=True``; ``"sum"`` is what ``gradients_mean=False`` would do.
        ``losses`` are the per-step means of the per-batch losses; ``steps``
        (default: all) limits the replay. ``nudge`` multiplies every combined
        gradient by ``1 + nudge`` (e.g. ``2**-23``, one float32 rounding step), to
        see how far such a tiny difference carries."""
        if reduce not in ("mean", "sum"):
            raise ValueError(f"reduce: must be 'mean' or 'sum', got {reduce!r}")
        steps = self.total_steps if steps is None else min(steps, self.total_steps)
        for parameter, value in self.start:
            parameter.set_data(ms.Tensor(value))
        divisor = len(self.records) if reduce == "mean" else 1
        losses = []
        for step in range(steps):
            total, step_losses = None, []
            for record in self.records:
                loss, grads = self.grad_fn(*self._batch(record, step))
                step_losses.append(float(loss.asnumpy()))
                total = grads if total is None else tuple(a + b for a, b in zip(total, grads))
            self.optimizer(tuple(g / divisor * (1.0 + nudge) if nudge else g / divisor
                                 for g in total))
            losses.append(float(np.mean(step_losses)))
        return Replay(np.asarray(losses), {p.name: p.asnumpy() for p in
                                           self.with_loss.get_parameters()} |
                      {p.name: p.asnumpy() for p in self.optimizer.get_parameters()},
                      self.batch_size)

