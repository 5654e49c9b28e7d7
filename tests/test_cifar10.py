"""Tests of msresnet.data.cifar10: CIFAR-10's facts, reading records, validating a folder.

Fake datasets (tests/fake_cifar10.py) are a few records per file, built in tmp_path.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from msresnet.data import cifar10
from msresnet.data.cifar10 import (CLASSES, FOLDER_NAME, RECORD_BYTES, TEST_FILES, TRAIN_FILES,
                                   DatasetError, read_records, validate)
from msresnet.paths import REPO_ROOT

from fake_cifar10 import COUNTS, fake_files, write_folder
from fake_cifar10 import any_record_count  # noqa: F401 - autouse: the fakes have a few records


# ---------------------------------------------------------------------------- reading

def test_read_records_returns_hwc_images_and_labels(tmp_path: Path) -> None:
    record = np.zeros(RECORD_BYTES, dtype=np.uint8)
    record[0] = 7
    planes = record[1:].reshape(3, 32, 32)
    planes[0], planes[1], planes[2] = 10, 20, 30        # R, G, B planes
    planes[0, 1, 2] = 255                               # red at row 1, column 2
    other = np.full(RECORD_BYTES, 5, dtype=np.uint8)
    path = tmp_path / "data_batch_1.bin"
    path.write_bytes(other.tobytes() + record.tobytes() + other.tobytes())

    images, labels = read_records(path, start=1, count=1)
    assert images.shape == (1, 32, 32, 3) and images.dtype == np.uint8
    assert labels.tolist() == [7] and labels.dtype == np.uint8
    assert images[0, 0, 0].tolist() == [10, 20, 30]
    assert images[0, 1, 2].tolist() == [255, 20, 30]
    assert images[0, 2, 1].tolist() == [10, 20, 30]

    images, labels = read_records(path)
    assert images.shape == (3, 32, 32, 3) and labels.tolist() == [5, 7, 5]
    with pytest.raises(DatasetError, match=r"data_batch_1\.bin: start=3 is outside the 3 records"):
        read_records(path, start=3)


# ---------------------------------------------------------------------------- validation

def test_validate_reports_counts_per_file(tmp_path: Path) -> None:
    counts = validate(write_folder(tmp_path / FOLDER_NAME))
    assert counts == COUNTS
    assert cifar10.split_counts(counts) == (2 + 3 + 4 + 5 + 6, 7)


def test_truncated_file_is_named(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / FOLDER_NAME)
    path = folder / "data_batch_3.bin"
    path.write_bytes(path.read_bytes()[:-1])
    size = path.stat().st_size
    with pytest.raises(DatasetError,
                       match=rf"^data_batch_3\.bin: {size} bytes is not a whole number"
                                           r" of 3073-byte records \(truncated\?\)$"):
        validate(folder)


def test_bad_label_is_named_with_its_record(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / FOLDER_NAME)
    path = folder / "test_batch.bin"
    raw = bytearray(path.read_bytes())
    raw[5 * RECORD_BYTES] = 12
    path.write_bytes(bytes(raw))
    with pytest.raises(DatasetError,
                       match=r"^test_batch\.bin: record 5 has label 12, expected 0-9"):
        validate(folder)


def test_missing_file_is_named(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / FOLDER_NAME)
    (folder / "data_batch_4.bin").unlink()
    with pytest.raises(DatasetError, match=rf"^missing data_batch_4\.bin in {folder}$"):
        validate(folder)


def test_wrong_class_list_is_named(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / FOLDER_NAME)
    (folder / "batches.meta.txt").write_text("cat\ndog\n")
    with pytest.raises(DatasetError, match=r"^batches\.meta\.txt: class 0 is .cat., expected"
                                           r" .airplane. \(the book trains CIFAR-10.s classes"
                                           r" airplane,"):
        validate(folder)


def test_own_class_names_name_the_first_that_differs(tmp_path: Path) -> None:
    """A reader's own 10-class data in the CIFAR-10 layout is refused, not trained under
    CIFAR-10's names: the line names the file, the first differing name and the expected one."""
    folder = write_folder(tmp_path / FOLDER_NAME)
    names = list(CLASSES)
    names[3] = "kitten"
    (folder / "batches.meta.txt").write_text("\n".join(names) + "\n")
    with pytest.raises(DatasetError) as info:
        validate(folder)
    assert str(info.value).startswith("batches.meta.txt: class 3 is 'kitten', expected 'cat' (")
    assert "\n" not in str(info.value)
    (folder / "batches.meta.txt").write_text("\n".join(CLASSES[:9]) + "\n")
    with pytest.raises(DatasetError, match=r"^batches\.meta\.txt: 9 class names, expected 10 \("):
        validate(folder)


# ---------------------------------------------------------------------------- the facts

def test_the_facts_add_up() -> None:
    assert cifar10.NUM_CLASSES == len(CLASSES) == 10
    assert (cifar10.TRAIN_IMAGES, cifar10.TEST_IMAGES) == (50_000, 10_000)
    assert cifar10.IMAGES_PER_FILE == 10_000  # what validate() requires (RECORDS_PER_FILE)
    assert RECORD_BYTES == 1 + int(np.prod(cifar10.IMAGE_SHAPE))
    assert cifar10.KNOWN_MD5[cifar10.OFFICIAL_URL] == cifar10.OFFICIAL_MD5


def _fact_literals(tree: ast.AST, facts: set[object]) -> list[tuple[int, object]]:
    """(line, value) of each literal in ``tree`` that is one of ``facts``, and of each
    literal ``num_classes`` (keyword, default or field)."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and type(node.value) in (int, float, str)
                and node.value in facts):
            found.append((node.lineno, node.value))
        pairs: list[tuple[str, ast.AST]] = []
        if isinstance(node, ast.keyword) and node.arg:
            pairs = [(node.arg, node.value)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            positional = node.args.posonlyargs + node.args.args
            pairs = list(zip([a.arg for a in positional[-len(node.args.defaults):]],
                             node.args.defaults)) if node.args.defaults else []
            pairs += [(a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            pairs = [(node.target.id, node.value)]
        found += [(value.lineno, f"num_classes={value.value}") for name, value in pairs
                  if name == "num_classes" and isinstance(value, ast.Constant)]
    return found


def test_cifar10s_facts_are_stated_once_in_the_package() -> None:
    """URL, MD5, image counts, mean, std and the number of classes are written in
    ``msresnet.data.cifar10`` only; every other module reads them from there."""
    facts = {cifar10.OFFICIAL_URL, cifar10.OFFICIAL_MD5, cifar10.MINDSPORE_MIRROR_URL,
             cifar10.TRAIN_IMAGES, cifar10.TEST_IMAGES, *cifar10.CIFAR10_MEAN, *cifar10.CIFAR10_STD}
    # Not CIFAR-10's: cuDNN's version number is 10000 * major + ...
    other_meaning = {("doctor/software.py", 10_000)}
    package = REPO_ROOT / "msresnet"
    found = [f"{path.relative_to(package)}:{line}: {value!r}"
             for path in sorted(package.rglob("*.py")) if path != package / "data" / "cifar10.py"
             for line, value in _fact_literals(ast.parse(path.read_text()), facts)
             if (path.relative_to(package).as_posix(), value) not in other_meaning]
    assert not found, f"CIFAR-10's facts written again instead of read from data.cifar10: {found}"


def test_the_in_browser_page_reads_cifar10s_facts_from_model_json() -> None:
    """Issue 37: web/classify/classify.js kept its own class names, mean and std; it reads
    them from model.json, which export writes from ``msresnet.data.cifar10``."""
    script = (REPO_ROOT / "web" / "classify" / "classify.js").read_text()
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", script, flags=re.S)  # the comments may name them
    written = [name for name in cifar10.CLASSES if re.search(rf"[\"']{name}[\"']", code)]
    written += [value for value in (*cifar10.CIFAR10_MEAN, *cifar10.CIFAR10_STD)
                if str(value) in code]
    assert not written, f"classify.js writes CIFAR-10's facts itself: {written}"
    assert "input.classes" in code and "input.mean" in code and "input.std" in code


def test_the_fact_finder_sees_each_kind_of_literal() -> None:
    source = ('URL = "%s"\ndef f(num_classes=10, *, n=50000): pass\n'
              'class S:\n    num_classes: int = 10\nnet(num_classes=10, mean=0.4914)\n'
              % cifar10.OFFICIAL_URL)
    found = _fact_literals(ast.parse(source), {cifar10.OFFICIAL_URL, 50_000, 0.4914})
    assert sorted(found, key=str) == sorted([(1, cifar10.OFFICIAL_URL), (2, 50_000),
                                             (2, "num_classes=10"), (4, "num_classes=10"),
                                             (5, "num_classes=10"), (5, 0.4914)], key=str)


def test_records_per_file_must_be_what_mindspore_reads(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """MindSpore's reader needs 10,000 records per file; the fakes have 2 to 7."""
    monkeypatch.setattr(cifar10, "RECORDS_PER_FILE", 10_000)
    assert cifar10.RECORDS_PER_FILE == 10_000
    folder = write_folder(tmp_path / FOLDER_NAME)
    with pytest.raises(DatasetError, match=r"^data_batch_1\.bin: 2 records, MindSpore.s"
                                           r" Cifar10Dataset needs exactly 10000 per file"):
        validate(folder)


def test_a_cut_on_a_record_boundary_is_rejected(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    files = fake_files()
    for name in (*TRAIN_FILES, *TEST_FILES):  # 5 records in every file: the "full" size here
        files[name] = (files["test_batch.bin"] * 2)[: 5 * RECORD_BYTES]
    folder = write_folder(tmp_path / FOLDER_NAME, files)
    monkeypatch.setattr(cifar10, "RECORDS_PER_FILE", 5)
    assert set(validate(folder).values()) == {5}
    path = folder / "data_batch_4.bin"
    path.write_bytes(path.read_bytes()[: 4 * RECORD_BYTES])  # whole records, one fewer
    with pytest.raises(DatasetError, match=r"^data_batch_4\.bin: 4 records, MindSpore.s"
                                           r" Cifar10Dataset needs exactly 5 per file"
                                           r" \(a cut, or other data"):
        validate(folder)
    path.write_bytes(path.read_bytes()[:-1])  # not whole records: named as truncated first
    with pytest.raises(DatasetError, match=r"^data_batch_4\.bin: .* \(truncated\?\)$"):
        validate(folder)


def test_empty_file_is_named(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / FOLDER_NAME)
    (folder / "data_batch_2.bin").write_bytes(b"")
    with pytest.raises(DatasetError, match=r"^data_batch_2\.bin: 0 bytes .* \(empty file\)"):
        validate(folder)
