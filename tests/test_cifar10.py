"""Tests of msresnet.data.cifar10 (format, validation), .preparation (safe extraction, prepare)
and .splits (training records by index), and the `msresnet prepare` command.

Fake datasets are a few records per file, built in tmp_path, so everything but
the two tests on the real local mirror runs in well under a second.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from msresnet.data import cifar10, identity, preparation, splits
from msresnet.data.cifar10 import (CLASSES, FOLDER_NAME, RECORD_BYTES, TEST_FILES, TRAIN_FILES,
                                   DatasetError, read_records, validate)
from msresnet.data.preparation import MARKER_NAME, prepare_dataset
from msresnet.data import prepare as prepare_cli
from msresnet.paths import LOCAL_MIRROR as MIRROR
from msresnet.paths import LOCAL_MIRROR_MD5 as MIRROR_MD5
from msresnet.paths import REPO_ROOT
from msresnet.cli import main as msresnet_main


def cli_main(argv):
    return msresnet_main(["prepare", *argv])

from prerequisites import needs_mirror  # noqa: E402  (skipped without it; CI=true: failed)

# Different record counts per file, so a count mix-up shows.
COUNTS = {name: 2 + i for i, name in enumerate((*TRAIN_FILES, *TEST_FILES))}


# ---------------------------------------------------------------------------- fixtures

def fake_files(seed: int = 0) -> dict[str, bytes]:
    """The members of a tiny CIFAR-10 archive: right format, few records."""
    rng = np.random.default_rng(seed)
    files = {cifar10.META_FILE: ("\n".join(CLASSES) + "\n\n").encode(), "readme.html": b"<html></html>"}
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
    with pytest.raises(DatasetError, match=rf"^data_batch_3\.bin: {size} bytes is not a whole number"
                                           r" of 3073-byte records \(truncated\?\)$"):
        validate(folder)


def test_bad_label_is_named_with_its_record(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / FOLDER_NAME)
    path = folder / "test_batch.bin"
    raw = bytearray(path.read_bytes())
    raw[5 * RECORD_BYTES] = 12
    path.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match=r"^test_batch\.bin: record 5 has label 12, expected 0-9"):
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
                                           r" .airplane. \(the book trains CIFAR-10.s classes airplane,"):
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
    other_meaning = {("jobs/doctor.py", 10_000)}
    package = REPO_ROOT / "msresnet"
    found = [f"{path.relative_to(package)}:{line}: {value!r}"
             for path in sorted(package.rglob("*.py")) if path != package / "data" / "cifar10.py"
             for line, value in _fact_literals(ast.parse(path.read_text()), facts)
             if (path.relative_to(package).as_posix(), value) not in other_meaning]
    assert not found, f"CIFAR-10's facts written again instead of read from data.cifar10: {found}"


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
    with pytest.raises(DatasetError, match=r"^data_batch_1\.bin: 2 records, MindSpore.s Cifar10Dataset"
                                           r" needs exactly 10000 per file"):
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
    with pytest.raises(DatasetError, match=r"^data_batch_4\.bin: 4 records, MindSpore.s Cifar10Dataset"
                                           r" needs exactly 5 per file \(a cut, or other data"):
        validate(folder)
    path.write_bytes(path.read_bytes()[:-1])  # not whole records: named as truncated first
    with pytest.raises(DatasetError, match=r"^data_batch_4\.bin: .* \(truncated\?\)$"):
        validate(folder)


def test_empty_file_is_named(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / FOLDER_NAME)
    (folder / "data_batch_2.bin").write_bytes(b"")
    with pytest.raises(DatasetError, match=r"^data_batch_2\.bin: 0 bytes .* \(empty file\)"):
        validate(folder)


# ---------------------------------------------------------------------------- prepare: sources

def test_prepare_extracts_a_local_archive(archive: Path, root: Path) -> None:
    report = prepare_dataset(archive, root, progress=False)
    folder = root / FOLDER_NAME
    assert report.folder == folder and report.action == "extracted"
    assert validate(folder) == COUNTS == report.records
    actual = hashlib.md5(archive.read_bytes()).hexdigest()
    assert report.checksum == f"md5 {actual} computed; check skipped (local archive, no md5 given)"
    assert (folder / "readme.html").is_file()
    marker = json.loads((folder / MARKER_NAME).read_text())
    assert marker["source"] == str(archive) and marker["md5"] == actual
    assert leftovers(root) == []
    probe = root / "probe"
    probe.mkdir()  # the folder gets the usual permissions (umask), not mkdtemp's private 0700
    assert folder.stat().st_mode & 0o777 == probe.stat().st_mode & 0o777


def test_provenance_reads_the_marker_of_the_folder(archive: Path, root: Path) -> None:
    from msresnet.data.preparation import provenance
    report = prepare_dataset(archive, root, progress=False)
    for given in (root, root / FOLDER_NAME):  # data_dir or the folder itself
        record = provenance(given)
        assert record["source"] == str(archive) and record["checksum"] == report.checksum
        assert record["folder"] == str(root / FOLDER_NAME) and record["prepared_at"]
    (root / FOLDER_NAME / MARKER_NAME).unlink()
    bare = provenance(root)
    assert bare["source"] is None and "not prepared by msresnet.data.prepare" in bare["note"]
    (root / FOLDER_NAME / MARKER_NAME).write_text("{not json")
    with pytest.raises(DatasetError, match=f"{MARKER_NAME}: unreadable"):
        provenance(root)


def test_prepare_verifies_a_given_md5(archive: Path, root: Path) -> None:
    actual = hashlib.md5(archive.read_bytes()).hexdigest()
    report = prepare_dataset(archive, root, md5=actual.upper(), progress=False)
    assert report.checksum == f"md5 {actual} verified (given by caller)"


def test_prepare_wrong_md5_names_expected_and_actual(archive: Path, root: Path) -> None:
    actual = hashlib.md5(archive.read_bytes()).hexdigest()
    with pytest.raises(DatasetError) as info:
        prepare_dataset(archive, root, md5="0123456789abcdef0123456789abcdef", progress=False)
    assert str(info.value) == (f"{archive}: MD5 mismatch: expected 0123456789abcdef0123456789abcdef,"
                               f" got {actual}")
    assert archive.exists()  # the user's own file is never deleted
    assert not (root / FOLDER_NAME).exists()


def test_prepare_copies_an_extracted_folder(tmp_path: Path, root: Path) -> None:
    source = write_folder(tmp_path / "elsewhere" / FOLDER_NAME)
    for given in (source.parent, source):  # the folder that contains it, or the folder itself
        report = prepare_dataset(given, root, progress=False)
        assert report.action == "copied from folder" and report.records == COUNTS
        assert (root / FOLDER_NAME / "data_batch_5.bin").read_bytes() == (source / "data_batch_5.bin").read_bytes()
        (root / FOLDER_NAME / MARKER_NAME).unlink()
        for path in (root / FOLDER_NAME).iterdir():
            path.unlink()
        (root / FOLDER_NAME).rmdir()


def test_prepare_broken_source_folder_names_it(tmp_path: Path, root: Path) -> None:
    source = write_folder(tmp_path / "elsewhere" / FOLDER_NAME)
    (source / "test_batch.bin").unlink()
    with pytest.raises(DatasetError, match=rf"^missing test_batch\.bin in {source}$"):
        prepare_dataset(source, root, progress=False)
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []


def test_prepare_missing_source(tmp_path: Path, root: Path) -> None:
    with pytest.raises(DatasetError, match="source not found: .*nope.tar.gz"):
        prepare_dataset(tmp_path / "nope.tar.gz", root, progress=False)


def test_truncated_archive_is_reported(archive: Path, root: Path) -> None:
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match=r"cifar-10-binary\.tar\.gz: not a readable \.tar\.gz archive"):
        prepare_dataset(archive, root, progress=False)
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []


def test_archive_missing_a_member_is_reported(tmp_path: Path, root: Path) -> None:
    files = fake_files()
    del files["data_batch_4.bin"]
    archive = write_archive(tmp_path / "a.tar.gz", files)
    with pytest.raises(DatasetError, match=r"^a\.tar\.gz: missing data_batch_4\.bin in the archive$"):
        prepare_dataset(archive, root, progress=False)
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []


# ---------------------------------------------------------------------------- extraction safety

def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize(("member", "message"), [
    (_member(f"{FOLDER_NAME}/../evil"), r"refusing unsafe member path 'cifar-10-batches-bin/\.\./evil'"),
    (_member("../evil"), r"refusing unsafe member path '\.\./evil'"),
    (_member("/tmp/evil"), r"refusing unsafe member path '/tmp/evil'"),
    (_member(f"{FOLDER_NAME}/data_batch_1.bin", tarfile.SYMTYPE, "/etc/passwd"),
     r"refusing link member 'cifar-10-batches-bin/data_batch_1\.bin' -> '/etc/passwd'"),
    (_member(f"{FOLDER_NAME}/evil", tarfile.LNKTYPE, "/etc/passwd"), "refusing link member"),
    (_member(f"{FOLDER_NAME}/evil", tarfile.CHRTYPE), "refusing special member"),
    (_member(f"{FOLDER_NAME}/evil", tarfile.FIFOTYPE), "refusing special member"),
    (_member(f"{FOLDER_NAME}/evil.sh"), r"unexpected member 'cifar-10-batches-bin/evil\.sh'"),
    (_member(f"{FOLDER_NAME}/sub", tarfile.DIRTYPE), "unexpected member 'cifar-10-batches-bin/sub'"),
])
def test_unsafe_members_are_refused_and_nothing_is_left(tmp_path: Path, root: Path,
                                                        member: tarfile.TarInfo, message: str) -> None:
    archive = write_archive(tmp_path / "evil.tar.gz", extra=[member])
    with tarfile.open(archive) as tar:  # the crafted name really is in the archive
        assert member.name in tar.getnames()
    with pytest.raises(DatasetError, match=rf"^evil\.tar\.gz: {message}"):
        prepare_dataset(archive, root, progress=False)
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []
    assert not list(tmp_path.rglob("evil")) and not Path("/tmp/evil").exists()


def test_duplicate_member_is_refused(tmp_path: Path, root: Path) -> None:
    duplicate = _member(f"{FOLDER_NAME}/test_batch.bin")
    archive = write_archive(tmp_path / "dup.tar.gz", extra=[duplicate])
    with pytest.raises(DatasetError, match="appears twice"):
        prepare_dataset(archive, root, progress=False)
    assert not (root / FOLDER_NAME).exists()


# ---------------------------------------------------------------------------- atomicity, idempotence

def test_crash_mid_extraction_leaves_nothing(archive: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_copy = preparation._copy_member
    calls: list[Path] = []

    def crash_on_third(source, target: Path) -> None:  # type: ignore[no-untyped-def]
        calls.append(target)
        if len(calls) == 3:
            raise OSError("simulated crash: disk full")
        real_copy(source, target)

    monkeypatch.setattr(preparation, "_copy_member", crash_on_third)
    with pytest.raises(OSError, match="simulated crash"):
        prepare_dataset(archive, root, progress=False)
    assert len(calls) == 3
    assert not (root / FOLDER_NAME).exists() and leftovers(root) == []


@pytest.mark.parametrize("failure", ["corrupt archive", "interrupted copy", "wrong record count"])
def test_a_failed_prepare_leaves_the_root_as_it_was(archive: Path, root: Path, failure: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """No lock file, partial folder or marker: the root holds what it held before."""
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    if failure == "corrupt archive":
        data = archive.read_bytes()
        archive.write_bytes(data[: len(data) // 2])
        expected: type[BaseException] = DatasetError
    elif failure == "interrupted copy":
        real_copy, calls = preparation._copy_member, []

        def interrupt_on_fourth(source, target: Path) -> None:  # type: ignore[no-untyped-def]
            calls.append(target)
            if len(calls) == 4:
                assert leftovers(root) and (root / preparation.LOCK_NAME).exists()  # mid-way
                raise KeyboardInterrupt
            real_copy(source, target)

        monkeypatch.setattr(preparation, "_copy_member", interrupt_on_fourth)
        expected = KeyboardInterrupt
    else:
        monkeypatch.setattr(cifar10, "RECORDS_PER_FILE", 10_000)
        expected = DatasetError
    with pytest.raises(expected):
        prepare_dataset(archive, root, progress=False)
    assert contents(root) == ["notes.txt"]
    assert archive.exists()  # the reader's own archive is never deleted


def test_a_successful_prepare_leaves_only_the_dataset(archive: Path, root: Path) -> None:
    prepare_dataset(archive, root, progress=False)
    assert contents(root) == [FOLDER_NAME]  # the lock file is gone too
    assert prepare_dataset(archive, root, progress=False).action == "already prepared"
    assert contents(root) == [FOLDER_NAME]


def test_an_unusable_download_is_removed(archive: Path, root: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Reused as it is (no MD5 for an unknown URL), a broken download would fail every rerun."""
    url = "http://127.0.0.1:9/cifar-10-binary.tar.gz"

    def fake_fetch(source: str, into: Path, md5: str | None, progress: bool):  # type: ignore[no-untyped-def]
        target = into / "cifar-10-binary.tar.gz"
        target.write_bytes(archive.read_bytes()[:1000])
        return target, "md5 computed; check skipped", "0" * 32

    monkeypatch.setattr(preparation, "_fetch", fake_fetch)
    with pytest.raises(DatasetError, match=r"not a readable \.tar\.gz archive .* \(downloaded from"
                                           rf" {url}; removed .*, the next run downloads it again\)$"):
        prepare_dataset(url, root, progress=False)
    assert contents(root) == []


def test_the_lock_excludes_while_its_file_comes_and_goes(tmp_path: Path) -> None:
    """Each holder deletes the lock file; a waiter that locked the deleted file locks again."""
    active, most, errors = [0], [0], []
    guard = threading.Lock()

    def worker() -> None:
        try:
            for _ in range(30):
                with preparation._lock(tmp_path):
                    with guard:
                        active[0] += 1
                        most[0] = max(most[0], active[0])
                    time.sleep(0.0005)
                    with guard:
                        active[0] -= 1
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and most[0] == 1
    assert contents(tmp_path) == []


def test_leftover_from_a_killed_run_is_cleaned(archive: Path, root: Path) -> None:
    killed = root / f".{FOLDER_NAME}.partial-999-deadbeef"
    write_folder(killed)
    (killed / "data_batch_1.bin").write_bytes(b"half")
    prepare_dataset(archive, root, progress=False)
    assert leftovers(root) == []
    assert validate(root / FOLDER_NAME) == COUNTS


def test_second_call_does_nothing(archive: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = prepare_dataset(archive, root, progress=False).folder
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the second call re-did the work")

    for name in ("extract_archive", "validate", "md5sum", "_lock"):
        monkeypatch.setattr(preparation, name, must_not_run)  # _lock too: read-only mounts work
    for name in ("validate", "check_bin"):
        monkeypatch.setattr(cifar10, name, must_not_run)
    report = prepare_dataset(archive, root, progress=False)
    assert report.action == "already prepared" and report.records == COUNTS
    assert "[recorded when prepared," in report.checksum
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_ready_folder_damaged_later_is_not_trusted(archive: Path, root: Path) -> None:
    folder = prepare_dataset(archive, root, progress=False).folder
    path = folder / "data_batch_2.bin"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DatasetError, match=r"^data_batch_2\.bin: .* \(truncated\?\) \(the folder .* remove it"):
        prepare_dataset(archive, root, progress=False)
    assert path.exists()  # reported, not deleted


def test_folder_extracted_by_hand_is_accepted_and_marked(root: Path, archive: Path) -> None:
    folder = write_folder(root / FOLDER_NAME)
    report = prepare_dataset(archive, root, progress=False)
    assert report.action == "validated existing folder" and report.records == COUNTS
    assert json.loads((folder / MARKER_NAME).read_text())["source"] == "existing folder"
    assert prepare_dataset(archive, root, progress=False).action == "already prepared"


def test_concurrent_callers_extract_once(archive: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_extract = preparation.extract_archive
    extractions: list[Path] = []

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        extractions.append(args[0])
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(preparation, "extract_archive", counting)
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(
        prepare_dataset(archive, root, progress=False).action)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["already prepared"] * 3 + ["extracted"]
    assert len(extractions) == 1


# ---------------------------------------------------------------------------- command line

def test_cli_error_is_one_clear_line(archive: Path, root: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MSRESNET_DEBUG", raising=False)
    status = cli_main(["--source", str(archive), "--root", str(root), "--md5", "0" * 32, "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"msresnet prepare: error: {archive}: MD5 mismatch:"
                          f" expected {'0' * 32}, got ")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert contents(root) == []  # the root it made for this call is gone again


def test_cli_interrupted_says_so_and_leaves_nothing(archive: Path, root: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupt(source, target: Path) -> None:  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(preparation, "_copy_member", interrupt)
    assert cli_main(["--source", str(archive), "--root", str(root), "--quiet"]) == 130
    assert "interrupted; nothing half-done is left" in capsys.readouterr().err
    assert contents(root) == []


def test_cli_source_auto_takes_the_local_mirror_when_it_exists(
        archive: Path, root: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    monkeypatch.setattr(prepare_cli, "LOCAL_MIRROR", archive)
    monkeypatch.setattr(prepare_cli, "LOCAL_MIRROR_MD5", md5)
    assert cli_main(["--source", "auto", "--root", str(root), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"--source auto: the local mirror {archive} exists; using it"
    assert lines[1] == f"source:   {os.path.relpath(archive)}"
    assert lines[2] == f"checksum: md5 {md5} verified (given by caller)"
    # a wrong mirror checksum is caught: auto passes the mirror's MD5 on
    monkeypatch.setattr(prepare_cli, "LOCAL_MIRROR_MD5", "0" * 32)
    assert cli_main(["--source", "auto", "--root", str(root / "again"), "--quiet"]) == 2


def test_source_auto_without_the_mirror_is_the_official_archive(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepare_cli, "LOCAL_MIRROR", tmp_path / "absent.tar.gz")
    source, md5, note = prepare_cli.resolve_source("auto", None)
    assert (source, md5) == (cifar10.OFFICIAL_URL, None)  # prepare_dataset checks the official MD5
    assert note == f"--source auto: no local mirror at {tmp_path / 'absent.tar.gz'}; using the official archive"
    assert prepare_cli.resolve_source("official", None) == (cifar10.OFFICIAL_URL, None, None)
    assert prepare_cli.resolve_source("x.tar.gz", "ab") == ("x.tar.gz", "ab", None)


def test_the_local_mirror_is_named_in_one_place() -> None:
    """The Makefile, the tests and the chapters' cells take the mirror from
    msresnet.paths, not a copy (stored outputs may show it: they print records)."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert MIRROR.name not in makefile and MIRROR_MD5 not in makefile
    assert "--source $(CIFAR10_SOURCE)" in makefile and "CIFAR10_SOURCE ?= auto" in makefile
    folder = str(MIRROR.parent.relative_to(REPO_ROOT.parent))  # shared/data
    for path in sorted(REPO_ROOT.glob("notebooks/*.ipynb")) + [REPO_ROOT / "book" / "troubleshooting.ipynb"]:
        for index, cell in enumerate(json.loads(path.read_text())["cells"]):
            source = "".join(cell["source"])
            assert folder not in source and MIRROR_MD5 not in source, \
                f"{path.name} cell {index} names the local mirror; use msresnet.paths"


@needs_mirror
def test_cli_on_the_local_mirror(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "msresnet", "prepare", "--source", str(MIRROR), "--root", str(tmp_path),
               "--md5", MIRROR_MD5, "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        f"source:   {MIRROR}",
        f"checksum: md5 {MIRROR_MD5} verified (given by caller)",
        f"folder:   {tmp_path / FOLDER_NAME} (50000 train + 10000 test records)",
        first.stdout.splitlines()[3],
    ]
    assert first.stdout.splitlines()[3].startswith("action:   extracted in ")
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0 and "action:   already prepared" in second.stdout


@needs_mirror
def test_prepare_on_the_local_mirror(tmp_path: Path) -> None:
    folder = prepare_dataset(MIRROR, tmp_path, md5=MIRROR_MD5, progress=False).folder
    counts = validate(folder)
    assert cifar10.split_counts(counts) == (50_000, 10_000)
    assert all(count == 10_000 for count in counts.values())
