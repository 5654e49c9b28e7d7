"""Tests of msresnet.data.splits (training records by index) and of the identity
(msresnet.data.identity) of a held-out split's images, on tiny fake folders.

The split itself on the real data is tested in tests/test_pipeline.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from msresnet.data import identity, splits
from msresnet.data.cifar10 import FOLDER_NAME, RECORD_BYTES, TRAIN_FILES, DatasetError

from fake_cifar10 import COUNTS, fake_files, write_folder
from fake_cifar10 import any_record_count  # noqa: F401 - autouse: the fakes have a few records


def test_training_records_by_index_and_labels_agree_with_whole_files(tmp_path: Path) -> None:
    files = fake_files(seed=3)
    folder = write_folder(tmp_path / FOLDER_NAME, files)
    whole = np.concatenate([np.frombuffer(files[name], dtype=np.uint8).reshape(-1, RECORD_BYTES)
                            for name in TRAIN_FILES])
    assert np.array_equal(splits.training_records(folder), whole)
    assert np.array_equal(splits.training_labels(folder), whole[:, 0])
    last = len(whole) - 1
    picked = np.array([last, 0, COUNTS[TRAIN_FILES[0]], 0, COUNTS[TRAIN_FILES[0]] - 1])
    assert np.array_equal(splits.training_records(folder, picked), whole[picked])
    with pytest.raises(DatasetError, match=rf"record indices must be 0\.\.{last}$"):
        splits.training_records(folder, [last + 1])


def test_evaluation_images_of_a_split_drawn_once_are_those_of_drawing_it(tmp_path: Path) -> None:
    """A run draws its held-out split once and hands the indices over: the identity is
    the one :func:`hold_out` with the same count and seed gives, held-out count included."""
    folder = write_folder(tmp_path / FOLDER_NAME, fake_files(seed=4))
    _, valid = splits.hold_out(folder, 6, seed=1)
    given = identity.evaluation_images(folder, 4, valid=valid, seed=1)
    assert given == identity.evaluation_images(folder, 4, valid_split=6, seed=1)
    assert given["held_out"] == 6 and given["images"] == 4 and given["split"] == "valid"
    records = splits.training_records(folder, valid[:4])
    assert given["sha256"] == hashlib.sha256(records.tobytes()).hexdigest()
    assert identity.same_images_as(given, identity.evaluation_images(folder, valid=valid, seed=1))
