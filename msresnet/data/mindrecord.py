"""CIFAR-10 binary files to MindRecord, MindSpore's own dataset format (chapter 9).

``msresnet convert-mindrecord BATCHES_DIR --out DIR [--usage train,test]``
writes ``DIR/cifar10_<usage>.mindrecord`` (and the ``.db`` index MindSpore keeps
beside it) with :class:`mindspore.mindrecord.FileWriter`, to be read back with
``mindspore.dataset.MindDataset`` (``msresnet.data.pipeline.create_dataset(...,
source="mindrecord")``).

Why a converter of our own rather than MindSpore's ``Cifar10ToMR``: that tool reads
the *Python* version of CIFAR-10 (pickles) and stores every image as a JPEG, so the
pixels a network sees change (lossy). Here each image is stored as a PNG (lossless:
``vision.Decode`` gives back the binary file's pixels exactly, which the tests and
chapter 9 check) with its label as int32, in the binary files' record order.

The conversion is

* schema checked: the files written have :data:`SCHEMA` and :func:`check_file`
  refuses a MindRecord file with another schema or record count, naming the file;
* atomic: both files are written in a hidden temporary folder next to the target
  and moved into place only when MindSpore has committed them, then a small JSON
  record (``.json`` beside them) is written last, atomically; a crash leaves either
  the old files or none, never a half-written file under the final name;
* idempotent: the JSON record holds the SHA-256 of every input file, so running
  the command again on the same data does nothing; a target that this converter
  did not write (no record, or another source) is replaced only with ``--overwrite``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mindspore.mindrecord import FileReader, FileWriter
from PIL import Image

from msresnet import atomic
from msresnet.data.cifar10 import TEST_FILES, TRAIN_FILES, DatasetError, read_records, validate
from msresnet.data.download import sha256

SCHEMA = {"image": {"type": "bytes"}, "label": {"type": "int32"}}
"""Each record: a PNG-encoded 32x32 RGB image and its class index."""
SCHEMA_DESCRIPTION = "CIFAR-10, PNG images (lossless) and int32 labels, binary record order"
FORMAT_VERSION = 1
SPLIT_FILES = {"train": TRAIN_FILES, "test": TEST_FILES}
INDEX_SUFFIX = ".db"
RECORD_SUFFIX = ".json"
BATCH_RECORDS = 1000  # records handed to FileWriter per write_raw_data call


class MindRecordError(DatasetError):
    """A MindRecord file is missing, foreign or not what the book expects; names the file."""


@dataclass
class Conversion:
    """What :func:`convert` did for one split."""

    path: str
    records: int
    written: bool  # False: an identical conversion was already there


def mindrecord_path(out_dir: str | os.PathLike[str], usage: str) -> Path:
    """Where the ``usage`` split's MindRecord file lives inside ``out_dir``."""
    if usage not in SPLIT_FILES:
        raise MindRecordError(f"usage must be one of {tuple(SPLIT_FILES)}, got {usage!r}")
    return Path(out_dir) / f"cifar10_{usage}.mindrecord"


def encode_png(image: np.ndarray) -> bytes:
    """One HWC uint8 image as PNG bytes (lossless; compress level 1: fast, ~10 % larger)."""
    buffer = io.BytesIO()
    Image.fromarray(image, mode="RGB").save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def source_digest(dataset_dir: str | os.PathLike[str], usage: str) -> dict[str, str]:
    """SHA-256 of each binary file the split is made of: what the record compares."""
    folder = Path(dataset_dir)
    return {name: sha256(folder / name) for name in SPLIT_FILES[usage]}


def _record_of(path: Path) -> dict | None:
    record = path.with_name(path.name + RECORD_SUFFIX)
    try:
        return json.loads(record.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise MindRecordError(f"{record}: unreadable conversion record ({err})") from err


def check_file(path: str | os.PathLike[str], records: int | None = None) -> int:
    """Check that ``path`` is a MindRecord file with :data:`SCHEMA`; return its record count.

    Raises :class:`MindRecordError` naming the file if it or its ``.db`` index is
    missing, if MindSpore cannot open it, if its schema differs, or if it does not
    hold ``records`` records (when given).
    """
    path = Path(path)
    for needed in (path, path.with_name(path.name + INDEX_SUFFIX)):
        if not needed.is_file():
            raise MindRecordError(f"{needed}: no such file (msresnet convert-mindrecord "
                                  "writes it)")
    try:
        reader = FileReader(str(path))
    except Exception as err:  # MindSpore raises its own error types with long texts
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise MindRecordError(f"{path}: not a readable MindRecord file ({first})") from err
    try:
        schema, count = reader.schema(), int(reader.len())
    finally:
        reader.close()
    if schema != SCHEMA:
        raise MindRecordError(f"{path}: schema {json.dumps(schema, sort_keys=True)} is not the "
                              f"book's CIFAR-10 schema {json.dumps(SCHEMA, sort_keys=True)}")
    if records is not None and count != records:
        raise MindRecordError(f"{path}: {count} records, expected {records}")
    return count


def _write(path: Path, dataset_dir: Path, usage: str) -> int:
    """Write the split with FileWriter in a temporary folder, then move both files into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
    try:
        staged = temp / path.name
        writer = FileWriter(str(staged), shard_num=1, overwrite=True)
        writer.add_schema(SCHEMA, SCHEMA_DESCRIPTION)
        total = 0
        for name in SPLIT_FILES[usage]:
            images, labels = read_records(dataset_dir / name)
            for start in range(0, len(labels), BATCH_RECORDS):
                rows = [{"image": encode_png(image), "label": int(label)}
                        for image, label in zip(images[start:start + BATCH_RECORDS],
                                                labels[start:start + BATCH_RECORDS])]
                writer.write_raw_data(rows)
                total += len(rows)
        writer.commit()
        check_file(staged, total)
        index = staged.with_name(staged.name + INDEX_SUFFIX)
        for file in (staged, index):
            atomic.fsync_file(file)
        # The index names the data file by its base name, which stays the same.
        os.replace(index, path.with_name(path.name + INDEX_SUFFIX))
        os.replace(staged, path)
        atomic.fsync_folder(path.parent)
        return total
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def convert(dataset_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str],
            usage: str = "train", overwrite: bool = False) -> Conversion:
    """Convert one split (``"train"``: 50,000 records, ``"test"``: 10,000) to MindRecord.

    Does nothing when ``out_dir`` already holds this converter's output for the same
    input files (same SHA-256). Raises :class:`MindRecordError` when the target
    exists but was not written from these files, unless ``overwrite``.
    """
    folder = Path(dataset_dir)
    counts = validate(folder)
    path = mindrecord_path(out_dir, usage)
    expected = sum(counts[name] for name in SPLIT_FILES[usage])
    wanted = {"format_version": FORMAT_VERSION, "schema": SCHEMA, "usage": usage,
              "records": expected, "sources": source_digest(folder, usage)}
    exists = path.exists() or path.with_name(path.name + INDEX_SUFFIX).exists()
    if exists:
        recorded = _record_of(path)
        if recorded == wanted:
            check_file(path, expected)
            return Conversion(str(path), expected, written=False)
        if not overwrite:
            why = ("has no conversion record" if recorded is None
                   else "was converted from other files or by another format version")
            raise MindRecordError(f"{path}: exists and {why}; pass --overwrite "
                                  "(overwrite=True) to replace it")
    record = path.with_name(path.name + RECORD_SUFFIX)
    record.unlink(missing_ok=True)  # stale until the new files are in place
    total = _write(path, folder, usage)
    atomic.write_json(record, wanted)
    return Conversion(str(path), total, written=True)
