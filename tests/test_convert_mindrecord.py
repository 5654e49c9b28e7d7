"""Tests of msresnet.data.mindrecord: CIFAR-10 binary files to MindRecord.

A tiny CIFAR-10 folder of random pictures (a few records per file) is converted in a
temporary folder; MindSpore's own ``MindDataset`` + ``vision.Decode`` must give back
every pixel and label, in order. Then: running again changes nothing, changed input
or a file the converter did not write is refused without ``overwrite``, a crash in
the middle leaves no file under the final name, and :func:`check_file` names what
is wrong with a file that is not the book's. A few seconds in all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import msresnet  # noqa: F401  (first: CPU speed setting before MindSpore)
import mindspore.dataset as ds
import mindspore.dataset.vision as vision
from mindspore.mindrecord import FileWriter

from msresnet.commands import convert_mindrecord as command
from msresnet.data import cifar10, mindrecord as convert_mindrecord
from msresnet.data.cifar10 import CLASSES, META_FILE, RECORD_BYTES, TEST_FILES, TRAIN_FILES
from msresnet.data.mindrecord import MindRecordError, check_file, convert, mindrecord_path

RECORDS = 12  # per file


@pytest.fixture(autouse=True)
def any_record_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny files hold 12 records each, not the 10,000 MindSpore's binary reader needs."""
    monkeypatch.setattr(cifar10, "RECORDS_PER_FILE", None)


def write_random_cifar(folder: Path, seed: int = 0) -> Path:
    """A cifar-10-batches-bin of random pictures (every pixel value matters for a lossless check)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META_FILE).write_text("\n".join(CLASSES) + "\n")
    for name in (*TRAIN_FILES, *TEST_FILES):
        data = rng.integers(0, 256, size=(RECORDS, RECORD_BYTES), dtype=np.uint8)
        data[:, 0] = rng.integers(0, 10, size=RECORDS)
        (folder / name).write_bytes(data.tobytes())
    return folder


@pytest.fixture
def cifar(tmp_path: Path) -> Path:
    return write_random_cifar(tmp_path / cifar10.FOLDER_NAME)


def read_back(path: Path) -> tuple[np.ndarray, np.ndarray]:
    data = ds.MindDataset(str(path), columns_list=["image", "label"], shuffle=False)
    data = data.map(operations=vision.Decode(), input_columns="image")
    rows = list(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
    return np.stack([r[0] for r in rows]), np.array([int(r[1]) for r in rows])


def expected(folder: Path, usage: str) -> tuple[np.ndarray, np.ndarray]:
    parts = [cifar10.read_records(folder / n) for n in convert_mindrecord.SPLIT_FILES[usage]]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


@pytest.mark.parametrize("usage", ["train", "test"])
def test_every_pixel_and_label_comes_back_in_order(cifar: Path, tmp_path: Path, usage: str) -> None:
    done = convert(cifar, tmp_path / "mr", usage)
    assert done.written and done.records == RECORDS * len(convert_mindrecord.SPLIT_FILES[usage])
    images, labels = read_back(Path(done.path))
    want_images, want_labels = expected(cifar, usage)
    assert images.dtype == np.uint8 and images.shape == want_images.shape
    assert np.array_equal(images, want_images)  # PNG: lossless, unlike Cifar10ToMR's JPEG
    assert np.array_equal(labels, want_labels)
    assert check_file(done.path) == done.records


def test_running_again_changes_nothing(cifar: Path, tmp_path: Path) -> None:
    first = convert(cifar, tmp_path, "test")
    path = Path(first.path)
    stamp = path.stat().st_mtime_ns, path.read_bytes()
    again = convert(cifar, tmp_path, "test")
    assert not again.written and again.records == first.records
    assert (path.stat().st_mtime_ns, path.read_bytes()) == stamp


def test_changed_input_is_refused_then_replaced_with_overwrite(cifar: Path, tmp_path: Path) -> None:
    path = Path(convert(cifar, tmp_path, "test").path)
    before = path.read_bytes()
    data = bytearray((cifar / "test_batch.bin").read_bytes())
    data[5] ^= 0xFF  # one pixel of the first record
    (cifar / "test_batch.bin").write_bytes(bytes(data))
    with pytest.raises(MindRecordError, match="converted from other files"):
        convert(cifar, tmp_path, "test")
    assert path.read_bytes() == before  # nothing lost
    assert convert(cifar, tmp_path, "test", overwrite=True).written
    images, _ = read_back(path)
    assert np.array_equal(images, expected(cifar, "test")[0])


def test_a_file_the_converter_did_not_write_is_kept(cifar: Path, tmp_path: Path) -> None:
    path = mindrecord_path(tmp_path, "test")
    path.write_bytes(b"somebody's own file")
    with pytest.raises(MindRecordError, match=f"{path}: exists and has no conversion record"):
        convert(cifar, tmp_path, "test")
    assert path.read_bytes() == b"somebody's own file"


def test_a_crash_leaves_no_file_under_the_final_name(cifar: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = convert_mindrecord.encode_png

    def failing(image: np.ndarray) -> bytes:
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError("disk full (simulated)")
        return real(image)

    monkeypatch.setattr(convert_mindrecord, "encode_png", failing)
    with pytest.raises(OSError, match="simulated"):
        convert(cifar, tmp_path, "train")
    assert sorted(p.name for p in tmp_path.iterdir()) == [cifar10.FOLDER_NAME]  # no partial left
    monkeypatch.setattr(convert_mindrecord, "encode_png", real)
    assert convert(cifar, tmp_path, "train").written  # and a later run succeeds


def test_check_file_names_what_is_wrong(cifar: Path, tmp_path: Path) -> None:
    missing = tmp_path / "none.mindrecord"
    with pytest.raises(MindRecordError, match="none.mindrecord: no such file"):
        check_file(missing)
    garbage = tmp_path / "garbage.mindrecord"
    garbage.write_bytes(b"x" * 100)
    (tmp_path / "garbage.mindrecord.db").write_bytes(b"y")
    with pytest.raises(MindRecordError, match="garbage.mindrecord: not a readable MindRecord file"):
        check_file(garbage)
    other = tmp_path / "other.mindrecord"
    writer = FileWriter(str(other), shard_num=1, overwrite=True)
    writer.add_schema({"data": {"type": "bytes"}, "label": {"type": "int64"}}, "another schema")
    writer.write_raw_data([{"data": b"abc", "label": 1}])
    writer.commit()
    with pytest.raises(MindRecordError, match="other.mindrecord: schema .* is not the book's"):
        check_file(other)
    done = convert(cifar, tmp_path / "mr", "test")
    with pytest.raises(MindRecordError, match=f"{RECORDS} records, expected 13"):
        check_file(done.path, RECORDS + 1)
    Path(done.path + ".db").unlink()
    with pytest.raises(MindRecordError, match=r"\.mindrecord\.db: no such file"):
        check_file(done.path)


def test_unknown_usage(tmp_path: Path) -> None:
    with pytest.raises(MindRecordError, match="usage must be one of"):
        mindrecord_path(tmp_path, "valid")


def test_command_line(cifar: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mr"
    assert command.main([str(cifar), "--out", str(out)]) == 0
    assert command.main([str(cifar), "--out", str(out), "--usage", "test"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("wrote ") and "cifar10_train.mindrecord (60 records)" in lines[0]
    assert lines[1].startswith("wrote ") and "(12 records)" in lines[1]
    assert lines[2].startswith("up to date: ")
    with pytest.raises(SystemExit, match="--usage"):
        command.main([str(cifar), "--out", str(out), "--usage", "valid"])
