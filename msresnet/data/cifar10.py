"""CIFAR-10's facts and its binary format: what every other module reads about the data.

The archive's URL, MD5 and size, the file names, the record layout, the image counts,
the class names, the normalisation's mean and std: stated once here, read everywhere
else (the config's default URL and limits, the results page, the pipelines, the
benchmarks). This module imports nothing of the package, so any layer may read it. And the format itself: reading records by hand
and validating a ``cifar-10-batches-bin`` folder.

MindSpore's ``Cifar10Dataset`` reads the extracted folder directly, but on a
truncated or corrupt file it fails deep inside its C++ reader with a message that
does not say which file is wrong. So before training the book checks the files
itself (:func:`validate`) and raises a :class:`DatasetError` that names the file
and the problem. Making a ready folder from an archive is
:mod:`msresnet.data.prepare`; the held-out split is :mod:`msresnet.data.splits`.

Record layout (per file, repeated): 1 label byte (0-9), then 1,024 red,
1,024 green and 1,024 blue bytes of a 32x32 image, row-major.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

OFFICIAL_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
OFFICIAL_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
OFFICIAL_BYTES = 170_052_171
# The copy MindSpore's own tutorials download (mindspore-ai/docs,
# tutorials/source_en/dataset/sampler.md). Those docs show it as 162.2 MB, the size of
# the official archive, with the same members, so it is checked against the official MD5
# (not verified byte for byte here: this project's machines have no internet).
MINDSPORE_MIRROR_URL = ("https://mindspore-website.obs.cn-north-4.myhuaweicloud.com/"
                        "notebook/datasets/cifar-10-binary.tar.gz")
KNOWN_MD5 = {OFFICIAL_URL: OFFICIAL_MD5, MINDSPORE_MIRROR_URL: OFFICIAL_MD5}

CLASSES = ("airplane", "automobile", "bird", "cat", "deer",
           "dog", "frog", "horse", "ship", "truck")
NUM_CLASSES = len(CLASSES)  # 10
IMAGE_SHAPE = (32, 32, 3)
RECORD_BYTES = 1 + 32 * 32 * 3  # 3073
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILES = ("test_batch.bin",)
META_FILE = "batches.meta.txt"
REQUIRED_FILES = (META_FILE, *TRAIN_FILES, *TEST_FILES)
OPTIONAL_FILES = ("readme.html",)
FOLDER_NAME = "cifar-10-batches-bin"
IMAGES_PER_FILE = 10_000
TRAIN_IMAGES = IMAGES_PER_FILE * len(TRAIN_FILES)  # 50,000
TEST_IMAGES = IMAGES_PER_FILE * len(TEST_FILES)  # 10,000
# MindSpore's Cifar10Dataset reads every .bin as exactly 10,000 records (its C++ reader,
# cifar_op.cc, has num_cifar10_records = 10000 and says "exactly 10K images" per file).
# Measured on 2.10 with 9,000 (and with 100) records per file: get_dataset_size() says
# 50000, then iterating fails with "Invalid cifar10 file ... re-download dataset".
# So validate() requires it; the unit tests' tiny fake folders set it to None (any
# whole number of records) for their run.
RECORDS_PER_FILE: int | None = IMAGES_PER_FILE

# Per-channel mean and std used by the MindSpore models repo (and many CIFAR-10
# codebases). The means are the true per-channel pixel means of the training set;
# the stds are smaller than the true per-pixel stds (~0.247, 0.243, 0.261), see
# chapter 1 for the computation. We keep them so results compare with the repo.
CIFAR10_MEAN: tuple[float, float, float] = (0.4914, 0.4822, 0.4465)
CIFAR10_STD: tuple[float, float, float] = (0.2023, 0.1994, 0.2010)
CROP_PADDING = 4
"""Pixels of zeros around each training image before its random 32x32 crop (the
standard CIFAR augmentation; the MindSpore pipeline and the PyTorch twin both read it)."""


class DatasetError(ValueError):
    """The dataset files are missing or wrong; the message names the file and the problem."""


# --------------------------------------------------------------------------- reading

def record_count(path: str | os.PathLike[str]) -> int:
    """Number of records in a ``.bin`` file; raises if it is not whole records."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0 or size % RECORD_BYTES:
        raise DatasetError(
            f"{path.name}: {size} bytes is not a whole number of {RECORD_BYTES}-byte records"
            + (" (truncated?)" if size else " (empty file)"))
    return size // RECORD_BYTES


def read_records(path: str | os.PathLike[str], start: int = 0,
                 count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read records ``start .. start+count`` of one ``.bin`` file, by hand.

    Returns ``(images, labels)``: images uint8 of shape (N, 32, 32, 3) in
    height-width-channel order (what matplotlib shows), labels uint8 of shape (N,).
    The file stores each image channel by channel (CHW), hence the transpose.
    """
    path = Path(path)
    total = record_count(path)
    if not 0 <= start < total:
        raise DatasetError(f"{path.name}: start={start} is outside the {total} records")
    count = total - start if count is None else min(count, total - start)
    if count < 1:
        raise DatasetError(f"{path.name}: count={count} must be at least 1")
    raw = np.fromfile(path, dtype=np.uint8, count=count * RECORD_BYTES,
                      offset=start * RECORD_BYTES).reshape(count, RECORD_BYTES)
    labels = raw[:, 0].copy()
    images = raw[:, 1:].reshape(count, 3, 32, 32).transpose(0, 2, 3, 1).copy()
    return images, labels


# --------------------------------------------------------------------------- validation

def check_bin(path: str | os.PathLike[str]) -> int:
    """Check one ``.bin`` file (whole records, every label 0-9); return its record count."""
    path = Path(path)
    count = record_count(path)
    labels = np.memmap(path, dtype=np.uint8, mode="r").reshape(count, RECORD_BYTES)[:, 0]
    bad = np.flatnonzero(labels >= len(CLASSES))
    if bad.size:
        first = int(bad[0])
        raise DatasetError(
            f"{path.name}: record {first} has label {int(labels[first])}, expected 0-9"
            f" ({bad.size} bad label{'s' if bad.size > 1 else ''} in {count} records)")
    return count


def check_meta(path: str | os.PathLike[str]) -> None:
    """Check that ``batches.meta.txt`` lists CIFAR-10's ten class names in order.

    The book trains CIFAR-10 itself: its figures, per-class tables and chapters name
    these classes, so a reader's own 10-class data in the same layout is refused
    here, naming the first name that differs, rather than trained under wrong names.
    """
    path = Path(path)
    lines = path.read_text(errors="replace").splitlines()
    names = tuple(line.strip() for line in lines if line.strip())
    if names == CLASSES:
        return
    expected = f"the book trains CIFAR-10's classes {', '.join(CLASSES)}"
    for index, (found, wanted) in enumerate(zip(names, CLASSES)):
        if found != wanted:
            raise DatasetError(f"{path.name}: class {index} is {found!r}, expected {wanted!r}"
                               f" ({expected})")
    raise DatasetError(f"{path.name}: {len(names)} class names, expected {len(CLASSES)}"
                       f" ({expected})")


def validate(folder: str | os.PathLike[str]) -> dict[str, int]:
    """Check a ``cifar-10-batches-bin`` folder; return the record count of each ``.bin``.

    Every file must be present, every ``.bin`` whole records with labels 0-9, and
    then (after every file is known to be whole) exactly :data:`RECORDS_PER_FILE`
    records, because MindSpore's reader fails on anything else with a misleading
    "re-download" message. A cut that ends on a record boundary is caught here.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetError(f"no dataset folder at {folder}")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise DatasetError(f"missing {', '.join(missing)} in {folder}")
    check_meta(folder / META_FILE)
    counts = {name: check_bin(folder / name) for name in (*TRAIN_FILES, *TEST_FILES)}
    required = RECORDS_PER_FILE  # read at call time: the unit tests change it
    for name, count in counts.items():
        if required is not None and count != required:
            raise DatasetError(f"{name}: {count} records, MindSpore's Cifar10Dataset needs exactly"
                               f" {required} per file (a cut, or other data in the CIFAR-10"
                               " layout?)")
    return counts


def dataset_folder(data_dir: str | os.PathLike[str]) -> Path:
    """``data_dir/cifar-10-batches-bin`` (``data_dir`` may also be that folder itself)."""
    data_dir = Path(data_dir)
    if data_dir.name == FOLDER_NAME or (data_dir / "data_batch_1.bin").is_file():
        return data_dir
    return data_dir / FOLDER_NAME


def split_counts(counts: dict[str, int]) -> tuple[int, int]:
    """(train records, test records) from the per-file counts of :func:`validate`."""
    return sum(counts[n] for n in TRAIN_FILES), sum(counts[n] for n in TEST_FILES)
