"""The MindSpore data pipeline that feeds ResNet50 with CIFAR-10.

It follows ``create_dataset1`` of the MindSpore models repository
(``official/cv/ResNet/src/dataset.py``): ``Cifar10Dataset`` -> for training
``RandomCrop(32, padding 4)`` + ``RandomHorizontalFlip`` -> ``Resize`` ->
``Rescale(1/255)`` -> ``Normalize(mean, std)`` -> ``HWC2CHW``, labels cast to
int32, then ``batch``. Where this module differs, and why:

* ``usage="train"/"test"`` picks the files inside one ``cifar-10-batches-bin``
  folder; the models repo instead points at two folders (a train folder and a
  ``cifar-10-verify-bin`` folder holding only ``test_batch.bin``).
* Evaluation is not shuffled and keeps its last partial batch, so all 10,000 test
  images are scored exactly once; the models repo shuffles and drops the remainder
  for both (the 16 test images of the last batch of 32 never count).
* ``Resize`` is applied only when ``image_size != 32`` (the seed recipe resizes to
  224; smoke runs stay at 32 where a resize would be a costly identity), and the
  evaluation pipeline uses the same size as training (the models repo also does,
  through ``train_image_size``).
* Worker threads are capped at the usable cores and default to a count whose sum
  over the pipeline's operations stays within them, 1 per stage on small machines,
  measured on a 2-core machine (see :func:`worker_count`), instead of 12/8 capped
  at the core count; ``ds.config.set_prefetch_size(64)`` is not set (the default of 16
  rows is enough when the network, not the pipeline, is the bottleneck).
* A seed makes the pipeline repeatable, ``num_samples`` cuts it short for smoke
  runs, and sharding is explicit (``num_shards``, ``shard_id``) instead of being
  read from the communication group inside the function.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import mindspore as ms
import mindspore.dataset as ds
import mindspore.dataset.transforms as transforms
import mindspore.dataset.vision as vision
import numpy as np

# The normalisation constants are CIFAR-10's facts (the MindSpore-free image code a
# deployed model uses reads the same); re-exported here for the chapters.
from msresnet.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD, CROP_PADDING, read_records
from msresnet.data.images import NATIVE_SIZE
from msresnet.data.mindrecord import SPLIT_FILES, check_file, mindrecord_path
from msresnet.data.source import check_folder  # the one check with its advice

USAGES = ("train", "test")
SOURCES = ("binary", "mindrecord", "numpy")
"""The three ways to feed the same images (chapter 9): ``Cifar10Dataset`` on the
binary files, ``MindDataset`` on a MindRecord file of PNG images
(:mod:`msresnet.data.mindrecord`), ``GeneratorDataset`` over NumPy arrays in memory."""

# Worker threads per pipeline stage when the caller does not choose (see
# worker_count for the rule and the measurements behind it).
STAGES = 4  # operations that get workers: the reader, the label map, the image map, batch
MAX_AUTO_WORKERS = 8  # the models repo's map-worker count, for big hosts


class PipelineError(ValueError):
    """A pipeline argument is invalid; the message names the argument and value."""


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, ``msrun
    --bind_core``, a container's cpuset), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def worker_count(requested: int | None = None) -> int:
    """Worker threads for one pipeline stage, never more than :func:`usable_cores`.

    MindSpore's own default (8 per operation) is refused on machines with fewer
    cores, so every stage of :func:`create_dataset` gets an explicit count. An
    explicit request above the usable cores is capped (more threads than cores only
    adds contention); 0, negative and non-integer requests raise
    :class:`PipelineError`.

    ``None`` means "auto", the book's rule: the workers of the :data:`STAGES`
    operations together stay within the usable cores, as MindSpore's guide to
    pipeline performance asks (the sum of ``num_parallel_workers`` over all
    operations no greater than the cores), with at least 1 and at most
    :data:`MAX_AUTO_WORKERS` per operation: 1 up to 7 cores, 2 from 8, 4 from 16,
    8 from 32. Pinning the process (or ``msrun --bind_core``) lowers it, so the
    processes of one host share its cores instead of each taking all of them.

    Why 1 is enough on small machines, measured on the book's idle 2-core machine
    (chapter 9, ``results/pipeline/``): alone, the pipeline with 1 worker per stage
    delivers about 19,000 training images/s at 32x32 while ResNet50 trains at
    about 75; trained from it, the network runs as fast as on a fixed synthetic
    batch (72 against 72 images/s, median of two runs, and the same pinned to one
    core: 37 against 37), and the step waits for data 0.05 % of its time. A second
    worker per stage starts 4 more threads and changes nothing beyond the
    run-to-run spread. One worker also gives the same augmentation stream on every
    small machine (the worker count is part of what a seed reproduces). Big hosts
    feed GPUs or Ascend cards that consume thousands of 224x224 images/s, more than
    one thread makes, hence more workers there (not measured: no such machine).
    """
    cores = usable_cores()
    if requested is None:
        return max(1, min(MAX_AUTO_WORKERS, cores // STAGES))
    if isinstance(requested, bool) or not isinstance(requested, int):
        raise PipelineError(f"num_workers must be a positive int or None, got {requested!r}")
    if requested < 1:
        raise PipelineError(f"num_workers must be at least 1, got {requested}")
    return min(requested, cores)


def _positive(name: str, value: int | None, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PipelineError(f"{name} must be a positive int, got {value!r}")


def image_transforms(training: bool, image_size: int = NATIVE_SIZE) -> list:
    """The per-image operations, in order (exposed so chapter 1 can show them)."""
    ops: list = []
    if training:
        ops += [vision.RandomCrop(NATIVE_SIZE, padding=CROP_PADDING),
                vision.RandomHorizontalFlip(prob=0.5)]
    if image_size != NATIVE_SIZE:
        ops.append(vision.Resize((image_size, image_size)))
    ops += [
        vision.Rescale(1.0 / 255.0, 0.0),
        vision.Normalize(mean=list(CIFAR10_MEAN), std=list(CIFAR10_STD)),
        vision.HWC2CHW(),
    ]
    return ops


@dataclass(frozen=True)
class PipelineOptions:
    """What :func:`create_dataset` takes besides the folder, the split and the batch size.

    Checked when made: a wrong value raises :class:`PipelineError` naming the argument,
    before any file is read. Every field has the default :func:`create_dataset` uses.
    """

    training: bool | None = None
    """Augment (crop + flip), shuffle and drop the last partial batch; None:
    ``usage == "train"``."""
    image_size: int = NATIVE_SIZE
    """Output height and width; anything but 32 adds a bilinear ``Resize``."""
    num_samples: int | None = None
    """Read at most this many images (per shard), for smoke runs."""
    num_shards: int | None = None
    """Data parallelism: shard ``shard_id`` of ``num_shards`` disjoint, equal-sized
    shards (both or neither)."""
    shard_id: int | None = None
    """See ``num_shards``."""
    num_workers: int | None = None
    """Threads per stage; None: the :func:`worker_count` default."""
    shuffle: bool | None = None
    """None: as ``training``."""
    seed: int | None = None
    """If given, ``mindspore.dataset.config.set_seed(seed)``. The seed is global and
    MindSpore reads it when an iterator is created, so the same seed and worker count
    give the same images, crops and flips run to run (the worker count is part of the
    recipe: 1 and 2 workers give different, each repeatable, augmentation streams)."""
    source: str = "binary"
    """Where the images come from, one of :data:`SOURCES` (see :func:`source_dataset`);
    the transforms and batches are the same."""
    mindrecord_dir: str | os.PathLike | None = None
    """The folder of ``cifar10_<usage>.mindrecord`` for ``source="mindrecord"``."""
    indices: Sequence[int] | np.ndarray | None = None
    """Read only these records of the split (their positions in file order), e.g. one
    side of :func:`msresnet.data.splits.hold_out`: shuffled afresh each epoch when
    shuffling, else in the given order; with shards, shard ``k`` takes every
    ``num_shards``-th index from ``k`` (cut to equal sizes). See :func:`subset_sampler`."""
    progressive: tuple[int, int] | None = None
    """Progressive resizing, ``(size, epochs)``: the batches of the first ``epochs``
    epochs are averaged down to ``size`` x ``size`` (:func:`shrink_batch`; ``size``
    a whole fraction of ``image_size``); later epochs keep ``image_size``. None: every
    epoch at ``image_size``."""
    checked: bool = False
    """The folder was validated already (a run's :class:`msresnet.data.source.DataSource`
    did, once), so it is not again."""

    def __post_init__(self) -> None:
        _positive("image_size", self.image_size, allow_none=False)
        _positive("num_samples", self.num_samples)
        shards, shard = self.num_shards, self.shard_id
        if (shards is None) != (shard is None):
            raise PipelineError(f"give both num_shards and shard_id or neither "
                                f"(got num_shards={shards!r}, shard_id={shard!r})")
        if shards is not None:
            _positive("num_shards", shards, allow_none=False)
            if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < shards:
                raise PipelineError(f"shard_id must be in 0..{shards - 1}, got {shard!r}")
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise PipelineError(f"seed must be a non-negative int or None, got {seed!r}")
        if self.source not in SOURCES:
            raise PipelineError(f"source must be one of {SOURCES}, got {self.source!r}")
        if self.progressive is not None:
            size, epochs = self.progressive
            _positive("progressive size", size, allow_none=False)
            _positive("progressive epochs", epochs, allow_none=False)
            if size >= self.image_size or self.image_size % size:
                raise PipelineError(f"progressive size must be a whole fraction of image_size "
                                    f"{self.image_size}, got {size}")


OPTION_NAMES = tuple(option.name for option in fields(PipelineOptions))


def create_dataset(dataset_dir: str | os.PathLike, usage: str = "train", batch_size: int = 32,
                   **options: Any) -> ds.Dataset:
    """Batched CIFAR-10 with columns ``image`` (float32, N,3,H,W) and ``label`` (int32).

    ``dataset_dir`` is the ``cifar-10-batches-bin`` folder, ``usage`` ``"train"``
    (50,000 images) or ``"test"`` (10,000), ``batch_size`` the images per batch. The
    keyword arguments are the fields of :class:`PipelineOptions` (augmentation, size,
    which and how many records, shards, workers, seed, source), all checked before
    the folder is; then the stages: read (:func:`source_dataset`), cast the labels,
    transform the images (:func:`image_transforms`), batch.
    """
    if usage not in USAGES:
        raise PipelineError(f"usage must be one of {USAGES}, got {usage!r}")
    _positive("batch_size", batch_size, allow_none=False)
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise TypeError(f"create_dataset() got an unexpected keyword argument {unknown[0]!r}"
                        f" (it takes {', '.join(OPTION_NAMES)})")
    chosen = PipelineOptions(**options)
    folder = Path(dataset_dir)
    if not chosen.checked:
        check_folder(folder)
    training = usage == "train" if chosen.training is None else bool(chosen.training)
    shuffle = training if chosen.shuffle is None else bool(chosen.shuffle)
    workers = worker_count(chosen.num_workers)
    cap_global_workers(workers)
    if chosen.seed is not None:
        ds.config.set_seed(chosen.seed)

    sampler = None
    if chosen.indices is not None:
        sampler = subset_sampler(chosen.indices, shuffle=shuffle, num_samples=chosen.num_samples,
                                 num_shards=chosen.num_shards, shard_id=chosen.shard_id)
    data = source_dataset(chosen.source, folder, usage, shuffle=shuffle,
                          num_samples=chosen.num_samples, num_shards=chosen.num_shards,
                          shard_id=chosen.shard_id, num_workers=workers,
                          mindrecord_dir=chosen.mindrecord_dir, sampler=sampler)
    data = cast_labels(data, workers)
    data = data.map(operations=image_transforms(training, chosen.image_size),
                    input_columns="image", num_parallel_workers=workers)
    if chosen.progressive is None:
        return data.batch(batch_size, drop_remainder=training, num_parallel_workers=workers)
    return data.batch(batch_size, drop_remainder=training, num_parallel_workers=workers,
                      per_batch_map=_ProgressiveBatches(*chosen.progressive),
                      input_columns=["image", "label"])


def shrink_batch(images: np.ndarray, size: int) -> np.ndarray:
    """``(N, C, H, W)`` images averaged down to ``size`` x ``size`` by whole blocks of
    pixels (area downsampling: each output pixel the mean of an ``H/size`` square), the
    same as ``Resize`` with ``Inter.AREA`` for a whole factor, in one NumPy reshape."""
    n, c, h, w = images.shape
    if h % size or w % size:
        raise PipelineError(f"cannot average {h}x{w} images down to {size}x{size}: "
                            "not a whole factor")
    blocks = images.reshape(n, c, size, h // size, size, w // size)
    return blocks.mean(axis=(3, 5), dtype=np.float32)


class _ProgressiveBatches:
    """``batch``'s per-batch map for progressive resizing: shrinks the batches of the
    first ``epochs`` epochs. MindSpore passes the epoch in ``BatchInfo``, counted from
    0 and kept right when a resumed run fast-forwards with ``set_init_step``, so the
    size follows the epoch wherever the run starts (measured with MindSpore 2.10)."""

    def __init__(self, size: int, epochs: int) -> None:
        self.size, self.epochs = size, epochs

    def __call__(self, images: list[np.ndarray], labels: list[np.ndarray],
                 info: Any) -> tuple[np.ndarray, np.ndarray]:
        batch = np.stack(images)
        if info.get_epoch_num() < self.epochs:
            batch = shrink_batch(batch, self.size)
        return batch, np.stack(labels)


def cap_global_workers(workers: int) -> None:
    """Stages created without an explicit count (batch, the iterator's helpers) use the
    global default, which must not exceed the cores either: lower it to ``workers``."""
    if ds.config.get_num_parallel_workers() > workers:
        ds.config.set_num_parallel_workers(workers)


def cast_labels(data: ds.Dataset, workers: int) -> ds.Dataset:
    """The ``label`` column as int32, what the losses and metrics take."""
    return data.map(operations=transforms.TypeCast(ms.int32), input_columns="label",
                    num_parallel_workers=workers)


def subset_sampler(indices: Sequence[int] | np.ndarray, *, shuffle: bool,
                   num_samples: int | None = None, num_shards: int | None = None,
                   shard_id: int | None = None) -> ds.Sampler:
    """A sampler over some records of a split: random each epoch, or in order.

    ``SubsetRandomSampler`` draws from MindSpore's global dataset seed (set by
    :func:`create_dataset`'s ``seed``), so a seeded run sees the same order every
    time; ``SubsetSampler`` keeps the given order (evaluation). Shard ``k`` of
    ``n`` gets ``indices[k::n]``, all shards cut to the same length, so every
    device runs the same number of steps and no record is seen by two devices.
    """
    chosen = np.asarray(indices, dtype=np.int64).ravel()
    if chosen.size == 0:
        raise PipelineError("indices is empty: no record to read")
    if num_shards is not None and shard_id is not None:
        per_shard = chosen.size // num_shards
        if per_shard == 0:
            raise PipelineError(f"{chosen.size} indices cannot fill {num_shards} shards")
        chosen = chosen[shard_id::num_shards][:per_shard]
    kind = ds.SubsetRandomSampler if shuffle else ds.SubsetSampler
    return kind(chosen.tolist(), num_samples=num_samples)


class CifarArrays:
    """A split of CIFAR-10 held in memory, for ``GeneratorDataset`` (random access).

    ``GeneratorDataset`` samples a source that has ``__getitem__`` and ``__len__``
    like it samples files: shuffling, ``num_samples`` and sharding work unchanged.
    ~150 MB for the 50,000 training images (uint8, HWC, binary record order).
    """

    def __init__(self, dataset_dir: str | os.PathLike, usage: str = "train") -> None:
        if usage not in USAGES:
            raise PipelineError(f"usage must be one of {USAGES}, got {usage!r}")
        parts = [read_records(Path(dataset_dir) / name) for name in SPLIT_FILES[usage]]
        self.images = np.concatenate([images for images, _ in parts])
        self.labels = np.concatenate([labels for _, labels in parts]).astype(np.int32)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.images[index], self.labels[index]

    def __len__(self) -> int:
        return len(self.labels)


def source_dataset(source: str, dataset_dir: str | os.PathLike, usage: str, *,
                   shuffle: bool, num_samples: int | None = None,
                   num_shards: int | None = None, shard_id: int | None = None,
                   num_workers: int = 1,
                   mindrecord_dir: str | os.PathLike | None = None,
                   sampler: ds.Sampler | None = None) -> ds.Dataset:
    """Undecoded CIFAR-10 from one of :data:`SOURCES`: columns ``image`` (HWC uint8) and ``label``.

    Every source yields the same pixels in the same (binary file) order when not
    shuffled; ``mindrecord`` decodes its PNGs with ``vision.Decode`` (a real cost of
    that format, part of what chapter 9 measures). ``mindrecord_dir`` defaults to
    ``dataset_dir``'s parent folder's ``mindrecord`` folder.
    """
    folder = Path(dataset_dir)
    shard: dict[str, Any] = {"num_shards": num_shards, "shard_id": shard_id,
                             "shuffle": shuffle, "num_samples": num_samples}
    if sampler is not None:  # the sampler decides order, count and shard
        shard = {"sampler": sampler}
    if source == "binary":
        return ds.Cifar10Dataset(str(folder), usage=usage, num_parallel_workers=num_workers,
                                 **shard)
    if source == "mindrecord":
        where = folder.parent / "mindrecord" if mindrecord_dir is None else Path(mindrecord_dir)
        path = mindrecord_path(where, usage)
        check_file(path)
        data = ds.MindDataset(str(path), columns_list=["image", "label"],
                              num_parallel_workers=num_workers, **shard)
        return data.map(operations=vision.Decode(), input_columns="image",
                        num_parallel_workers=num_workers)
    if source == "numpy":
        return ds.GeneratorDataset(CifarArrays(folder, usage), column_names=["image", "label"],
                                   num_parallel_workers=num_workers,
                                   python_multiprocessing=False, **shard)
    raise PipelineError(f"source must be one of {SOURCES}, got {source!r}")
