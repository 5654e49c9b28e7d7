"""Tiny fake CIFAR-10 folders and archives for the data tests.

The right format with a few records per file (a different count in each, so a
count mix-up shows), built in tmp_path, so the tests that use them run in well
under a second. A test module imports the fixtures it uses from here: ``archive``,
``root``, and the autouse ``any_record_count``.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from msresnet.data import cifar10
from msresnet.data.cifar10 import CLASSES, FOLDER_NAME, RECORD_BYTES, TEST_FILES, TRAIN_FILES

# Different record counts per file, so a count mix-up shows.
COUNTS = {name: 2 + i for i, name in enumerate((*TRAIN_FILES, *TEST_FILES))}


# ---------------------------------------------------------------------------- fixtures

def fake_files(seed: int = 0) -> dict[str, bytes]:
    """The members of a tiny CIFAR-10 archive: right format, few records."""
    rng = np.random.default_rng(seed)
    files = {cifar10.META_FILE: ("\n".join(CLASSES) + "\n\n").encode(),
             "readme.html": b"<html></html>"}
    for name, count in COUNTS.items():
        raw = rng.integers(0, 256, (count, RECORD_BYTES), dtype=np.uint8)
        raw[:, 0] = np.arange(count) % 10
        files[name] = raw.tobytes()
    return files


def write_folder(folder: Path, files: dict[str, bytes] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (files or fake_files()).items():
        (folder / name).write_bytes(data)
    return folder


def write_archive(path: Path, files: dict[str, bytes] | None = None,
                  extra: list[tarfile.TarInfo] | None = None) -> Path:
    """A .tar.gz with ``files`` under cifar-10-batches-bin/ plus any ``extra`` members."""
    with tarfile.open(path, "w:gz") as tar:
        top = tarfile.TarInfo(FOLDER_NAME)
        top.type = tarfile.DIRTYPE
        tar.addfile(top)
        for info in extra or []:
            data = b"evil" if info.isfile() else None
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
        for name, data in (files or fake_files()).items():
            info = tarfile.TarInfo(f"{FOLDER_NAME}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / "cifar-10-binary.tar.gz")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


def leftovers(root: Path) -> list[str]:
    """Temporary extraction folders left in ``root``."""
    return sorted(p.name for p in root.glob(".*partial*"))


def contents(folder: Path) -> list[str]:
    """Every name in ``folder`` (hidden ones too); [] when it does not exist."""
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.fixture(autouse=True)
def any_record_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake files hold a few records each; the 10,000 per file that MindSpore needs
    (cifar10.RECORDS_PER_FILE) is switched back on by the tests about it."""
    monkeypatch.setattr(cifar10, "RECORDS_PER_FILE", None)
