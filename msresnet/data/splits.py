"""The held-out validation split of CIFAR-10's training records, and reading them by index.

:func:`hold_out` draws a class-balanced validation set from the 50,000 training
records, fixed by a seed, so every process that rebuilds it gets the same one;
:func:`training_records` and :func:`training_labels` read the training files in the
order MindSpore's ``Cifar10Dataset`` numbers them, touching only the pages asked for.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from msresnet.data.cifar10 import RECORD_BYTES, TRAIN_FILES, DatasetError, record_count


def _training_files(folder: str | os.PathLike[str]) -> list[np.ndarray]:
    """``data_batch_1..5.bin`` mapped read-only as (N, 3073) record arrays: a reader
    of a few columns or rows touches only those pages, not the 150 MB."""
    files = []
    for name in TRAIN_FILES:
        path = Path(folder) / name
        files.append(np.memmap(path, dtype=np.uint8, mode="r")
                     .reshape(record_count(path), RECORD_BYTES))
    return files


def training_records(folder: str | os.PathLike[str],
                     indices: np.ndarray | None = None) -> np.ndarray:
    """All training records (N, 3073) of ``data_batch_1..5.bin``, in file order, or
    only the records at ``indices`` (in that order).

    File order is the order MindSpore's ``Cifar10Dataset`` numbers them in (its
    sampler indices), so index ``i`` here is index ``i`` of ``usage="train"``.
    """
    files = _training_files(folder)
    if indices is None:
        return np.concatenate(files)
    starts = np.cumsum([0] + [len(f) for f in files])
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size and not (0 <= indices.min() and indices.max() < starts[-1]):
        raise DatasetError(f"{folder}: record indices must be 0..{starts[-1] - 1}")
    owner = np.searchsorted(starts, indices, side="right") - 1
    out = np.empty((len(indices), RECORD_BYTES), dtype=np.uint8)
    for number, records in enumerate(files):
        mine = owner == number
        out[mine] = records[indices[mine] - starts[number]]
    return out


def training_labels(folder: str | os.PathLike[str]) -> np.ndarray:
    """The labels (N,) of all training records, in file order (what :func:`hold_out`
    splits by): one byte per record read, not the whole files."""
    return np.concatenate([records[:, 0] for records in _training_files(folder)])


def hold_out(folder: str | os.PathLike[str], count: int, seed: int,
             ) -> tuple[np.ndarray, np.ndarray]:
    """Split the training records into ``(train, valid)`` index arrays (sorted, disjoint).

    ``valid`` is a class-balanced draw of ``count`` records (``count // 10`` per
    class, the remainder one each to the first classes), fixed by ``seed``: the
    same folder, count and seed give the same split in every process, which is what
    lets a sweep, a resumed run or another machine rebuild it. Balanced, because a
    validation set that happens to hold fewer cats scores a different mixture than
    the balanced test set it stands in for.
    """
    labels = training_labels(folder).astype(np.int64)
    classes = int(labels.max()) + 1
    if isinstance(count, bool) or not isinstance(count, int) or not 0 < count < len(labels):
        raise DatasetError(f"valid_split must be from 1 to {len(labels) - 1}, got {count!r}")
    rng = np.random.RandomState(seed)
    chosen = []
    for label in range(classes):
        members = np.flatnonzero(labels == label)
        quota = count // classes + (1 if label < count % classes else 0)
        if quota > len(members):
            raise DatasetError(f"valid_split={count}: class {label} has only {len(members)} "
                               "training images")
        chosen.append(rng.permutation(members)[:quota])
    valid = np.sort(np.concatenate(chosen))
    train = np.setdiff1d(np.arange(len(labels)), valid, assume_unique=True)
    return train, valid
