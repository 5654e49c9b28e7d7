"""The differing copy of CIFAR-10 that the test command runs the chapters on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from msresnet.data import cifar10
from msresnet.data import prepare as preparation
from cifar10_variant import write_variant
from fake_cifar10 import write_folder
from fake_cifar10 import any_record_count  # noqa: F401 - autouse: the fakes have a few records


def _records(folder: Path, name: str) -> np.ndarray:
    return np.fromfile(folder / name, dtype=np.uint8).reshape(-1, cifar10.RECORD_BYTES)


def test_variant_reorders_records_and_nudges_pixels_but_keeps_labels(tmp_path: Path) -> None:
    source = write_folder(tmp_path / "source")
    folder = write_variant(source, tmp_path / "variant")

    assert cifar10.validate(folder) == cifar10.validate(source)
    marker = json.loads((folder / preparation.MARKER_NAME).read_text())
    assert marker["records"] == cifar10.validate(source)
    for name in (*cifar10.TRAIN_FILES, *cifar10.TEST_FILES):
        old, new = _records(source, name), _records(folder, name)
        assert not np.array_equal(old, new), f"{name} is unchanged"
        # Same multiset of labels (class balance and split kept), order changed.
        assert sorted(old[:, 0]) == sorted(new[:, 0])
        # Every varied record is one of the source's, each pixel within 1 of it.
        for row in new[:5]:
            diffs = np.abs(old[:, 1:].astype(int) - row[1:].astype(int)).max(axis=1)
            match = int(np.argmin(diffs))
            assert diffs[match] <= 1 and old[match, 0] == row[0]
    assert not list((tmp_path / "variant").glob(".variant-*")), "temporary folder left behind"


def test_variant_is_the_same_on_every_run(tmp_path: Path) -> None:
    source = write_folder(tmp_path / "source")
    first = write_variant(source, tmp_path / "a")
    second = write_variant(source, tmp_path / "b")
    for name in cifar10.TRAIN_FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes()
