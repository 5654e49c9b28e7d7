"""The CIFAR-10 binary files: their format, a validator, and :func:`prepare_dataset`.

MindSpore's ``Cifar10Dataset`` reads the extracted ``cifar-10-batches-bin``
folder directly, but on a truncated or corrupt file it fails deep inside its C++
reader with a message that does not say which file is wrong. So before training
the book checks the files itself (:func:`validate`) and raises a
:class:`DatasetError` that names the file and the problem.

:func:`prepare_dataset` turns any of the usual sources (the official URL, MindSpore's
mirror, another URL, a local ``.tar.gz`` or an already extracted folder) into a
ready folder. It is safe to call at the top of every notebook and from every
rank of a distributed job: a ready folder carries a small marker file and the
second call returns at once; extraction happens in a temporary folder that is
renamed into place, so an interrupted run never leaves half a dataset; and a
lock keeps concurrent callers from extracting twice.

Record layout (per file, repeated): 1 label byte (0-9), then 1,024 red,
1,024 green and 1,024 blue bytes of a 32x32 image, row-major.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import tarfile
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from msresnet.atomic import write_json
from msresnet.data.download import ChecksumError, DownloadError, download, md5sum
from msresnet.paths import DATA_ROOT

log = logging.getLogger(__name__)

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
IMAGE_SHAPE = (32, 32, 3)
RECORD_BYTES = 1 + 32 * 32 * 3  # 3073
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILES = ("test_batch.bin",)
META_FILE = "batches.meta.txt"
REQUIRED_FILES = (META_FILE, *TRAIN_FILES, *TEST_FILES)
OPTIONAL_FILES = ("readme.html",)
FOLDER_NAME = "cifar-10-batches-bin"
# MindSpore's Cifar10Dataset reads every .bin as exactly 10,000 records (its C++ reader,
# cifar_op.cc, has num_cifar10_records = 10000 and says "exactly 10K images" per file).
# Measured on 2.10 with 9,000 (and with 100) records per file: get_dataset_size() says
# 50000, then iterating fails with "Invalid cifar10 file ... re-download dataset".
# So validate() requires it; the unit tests' tiny fake folders set it to None (any
# whole number of records) for their run.
RECORDS_PER_FILE: int | None = 10_000
MARKER_NAME = ".prepared.json"
# The official members are 30.7 MB; anything far bigger is not CIFAR-10 (or is a zip bomb).
MAX_MEMBER_BYTES = 64 * 1024 * 1024
_PARTIAL_PREFIX = f".{FOLDER_NAME}.partial-"


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
    names = tuple(line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip())
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
                               f" {required} per file (a cut, or other data in the CIFAR-10 layout?)")
    return counts


def dataset_folder(data_dir: str | os.PathLike[str]) -> Path:
    """``data_dir/cifar-10-batches-bin`` (``data_dir`` may also be that folder itself)."""
    data_dir = Path(data_dir)
    if data_dir.name == FOLDER_NAME or (data_dir / "data_batch_1.bin").is_file():
        return data_dir
    return data_dir / FOLDER_NAME


def provenance(data_dir: str | os.PathLike[str]) -> dict[str, object]:
    """Which archive a prepared folder came from and how it was checked (its marker).

    What run records keep, so a result names the copy of CIFAR-10 it was computed
    on rather than the config's default URL. A folder without a marker (not made
    by :func:`prepare_dataset`) is recorded as such, with ``source`` None.
    """
    folder = dataset_folder(data_dir)
    try:
        marker = json.loads((folder / MARKER_NAME).read_text())
    except FileNotFoundError:
        return {"folder": str(folder), "source": None, "md5": None, "checksum": None,
                "prepared_at": None, "note": f"no {MARKER_NAME}: not prepared by msresnet.data.prepare"}
    except (OSError, ValueError) as err:
        raise DatasetError(f"{folder / MARKER_NAME}: unreadable ({err})") from err
    return {"folder": str(folder), "source": marker.get("source"), "md5": marker.get("md5"),
            "checksum": marker.get("checksum"), "prepared_at": marker.get("prepared_at")}


def split_counts(counts: dict[str, int]) -> tuple[int, int]:
    """(train records, test records) from the per-file counts of :func:`validate`."""
    return sum(counts[n] for n in TRAIN_FILES), sum(counts[n] for n in TEST_FILES)


# --------------------------------------------------------------------------- extraction

def _member_name(member: tarfile.TarInfo, archive: Path) -> str | None:
    """The file name a safe member extracts to, ``None`` for the top folder; else raise."""
    name = member.name
    while name.startswith("./"):
        name = name[2:]
    parts = name.rstrip("/").split("/")
    if name.startswith("/") or "\\" in name or ".." in parts:
        raise DatasetError(f"{archive.name}: refusing unsafe member path {member.name!r}")
    if member.issym() or member.islnk():
        raise DatasetError(f"{archive.name}: refusing link member {member.name!r} -> {member.linkname!r}")
    if member.isdir() and parts == [FOLDER_NAME]:
        return None
    if not (member.isfile() or member.isdir()):
        raise DatasetError(f"{archive.name}: refusing special member {member.name!r} (device, fifo, ...)")
    if member.isdir() or len(parts) != 2 or parts[0] != FOLDER_NAME or parts[1] not in (*REQUIRED_FILES, *OPTIONAL_FILES):
        raise DatasetError(f"{archive.name}: unexpected member {member.name!r}; a CIFAR-10 binary archive"
                           f" holds only {FOLDER_NAME}/{{{', '.join(REQUIRED_FILES + OPTIONAL_FILES)}}}")
    if member.size > MAX_MEMBER_BYTES:
        raise DatasetError(f"{archive.name}: member {member.name!r} is {member.size} bytes, too big for CIFAR-10")
    return parts[1]


def _copy_member(source: IO[bytes], target: Path) -> None:
    """Write one archive member to ``target`` (a seam tests use to simulate a crash)."""
    with open(target, "wb") as out:
        shutil.copyfileobj(source, out, 1 << 20)


def extract_archive(archive: str | os.PathLike[str], folder: str | os.PathLike[str]) -> list[str]:
    """Extract the CIFAR-10 members of ``archive`` flat into ``folder``; return their names.

    Member names are checked against the known list before anything is written,
    and files are written by name, never by the archive's path, so a crafted
    archive cannot write outside ``folder`` (no absolute paths, ``..``, links or
    devices). The caller owns ``folder`` and deletes it on failure.
    """
    archive, folder = Path(archive), Path(folder)
    written: list[str] = []
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                name = _member_name(member, archive)
                if name is None:
                    continue
                if name in written:
                    raise DatasetError(f"{archive.name}: member {member.name!r} appears twice")
                source = tar.extractfile(member)
                assert source is not None  # a regular file, checked above
                with source:
                    _copy_member(source, folder / name)
                written.append(name)
    except (tarfile.TarError, EOFError, zlib.error) as err:
        raise DatasetError(f"{archive.name}: not a readable .tar.gz archive ({err});"
                           " the file may be truncated or corrupt") from err
    missing = [name for name in REQUIRED_FILES if name not in written]
    if missing:
        raise DatasetError(f"{archive.name}: missing {', '.join(missing)} in the archive")
    return written


# --------------------------------------------------------------------------- prepare

@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare_dataset` did, for logs, the CLI and notebooks."""

    folder: Path
    action: str        # "already prepared", "validated existing folder", "extracted", ...
    source: str
    checksum: str      # which checksum was used and how it turned out, in words
    records: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def train_records(self) -> int:
        return split_counts(self.records)[0]

    @property
    def test_records(self) -> int:
        return split_counts(self.records)[1]

    def summary(self) -> str:
        """Four lines: source, checksum, folder with record counts, action and time."""
        return (f"source:   {self.source}\n"
                f"checksum: {self.checksum}\n"
                f"folder:   {self.folder} ({self.train_records} train + {self.test_records} test records)\n"
                f"action:   {self.action} in {self.seconds:.1f} s")


def prepare_dataset(source: str | os.PathLike[str] = OFFICIAL_URL,
                    root: str | os.PathLike[str] = DATA_ROOT, md5: str | None = None, *,
                    progress: bool = True) -> Prepared:
    """Make ``root/cifar-10-batches-bin`` ready and validated; report what happened.

    ``source`` is an http(s) URL (default: the official archive), a local
    ``.tar.gz``, or an extracted folder. ``md5`` is the archive's expected MD5;
    by default the official MD5 for the official and MindSpore URLs, and no
    check (MD5 computed and reported) for anything else. The returned
    :class:`Prepared` says what was done; its ``folder`` is the ready folder.
    (The command line around it is the module :mod:`msresnet.data.prepare`.)

    Raises :class:`DatasetError` for anything wrong with the files (checksum,
    archive members, validation) and :class:`~msresnet.data.download.DownloadError`
    when a URL cannot be fetched.
    """
    started = time.monotonic()
    root = Path(root)
    dest = root / FOLDER_NAME
    source_text = os.fspath(source)
    md5 = md5.lower() if md5 else None

    def done(action: str, checksum: str, records: dict[str, int], src: str = source_text) -> Prepared:
        report = Prepared(dest, action, src, checksum, records, time.monotonic() - started)
        log.info("CIFAR-10 %s: %s (%s)", action, dest, checksum)
        return report

    ready = _ready_marker(dest)
    if ready is not None:  # the fast path, without taking the lock
        return done("already prepared", _recorded(ready), ready["records"], ready.get("source", source_text))

    created_root = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    try:
        return _prepare_locked(source_text, root, dest, md5, progress, done)
    except BaseException:
        if created_root:  # a failure leaves no empty data root it made (rmdir: only if empty)
            with contextlib.suppress(OSError):
                root.rmdir()
        raise


def _prepare_locked(source_text: str, root: Path, dest: Path, md5: str | None, progress: bool,
                    done: Callable[..., Prepared]) -> Prepared:
    """The part of :func:`prepare_dataset` that writes into ``root``, under its lock."""
    with _lock(root):
        _remove_partials(root)
        ready = _ready_marker(dest)
        if ready is not None:  # another process finished while we waited
            return done("already prepared", _recorded(ready), ready["records"], ready.get("source", source_text))
        if dest.exists():
            records = _validate_existing(dest)
            checksum = "none (folder was already there; its files were validated)"
            try:
                _write_marker(dest, source="existing folder", checksum=checksum, md5=None, records=records)
            except OSError as err:  # read-only folder: fine, we just validate again next time
                log.warning("could not write %s: %s", dest / MARKER_NAME, err)
            return done("validated existing folder", checksum, records, "existing folder")

        downloaded = _is_url(source_text)
        if downloaded:
            archive, checksum, actual = _fetch(source_text, root, md5, progress)
            action = "downloaded and extracted"
        else:
            path = Path(source_text).expanduser()
            if path.is_dir():
                folder = path / FOLDER_NAME if (path / FOLDER_NAME).is_dir() else path
                validate(folder)  # first, so an error names the user's folder, not our temporary one
                records = _install(dest, lambda tmp: _copy_folder(folder, tmp),
                                   source=str(folder), checksum="none (copied from a folder)", md5=None)
                return done("copied from folder", "none (copied from a folder)", records, str(folder))
            if not path.is_file():
                raise DatasetError(f"source not found: {source_text} (expected an http(s) URL,"
                                   " a .tar.gz file or an extracted folder)")
            archive = path
            checksum, actual = _check_local(path, md5)
            action = "extracted"

        try:
            records = _install(dest, lambda tmp: extract_archive(archive, tmp),
                               source=source_text, checksum=checksum, md5=actual)
        except DatasetError as err:
            if not downloaded:
                raise  # the reader's own file: reported, never deleted
            # Our download is unusable: reused as it is, every rerun would fail the same way.
            archive.unlink(missing_ok=True)
            raise DatasetError(f"{err} (downloaded from {source_text}; removed {archive},"
                               " the next run downloads it again)") from err
        return done(action, checksum, records)


def _is_url(text: str) -> bool:
    return urllib.parse.urlsplit(text).scheme in {"http", "https"}


def _fetch(url: str, root: Path, md5: str | None, progress: bool) -> tuple[Path, str, str]:
    """Download ``url`` into ``root``; return (archive, checksum words, actual MD5)."""
    expected = md5 or KNOWN_MD5.get(url)
    name = Path(urllib.parse.urlsplit(url).path).name or "cifar-10-binary.tar.gz"
    try:
        archive = download(url, root / name, md5=expected, progress=progress)
    except ChecksumError as err:
        raise DatasetError(str(err)) from err
    if expected is None:
        actual = md5sum(archive)
        return archive, f"md5 {actual} computed; check skipped (no md5 given for this URL)", actual
    origin = "given by caller" if md5 else "official CIFAR-10 MD5"
    return archive, f"md5 {expected} verified ({origin})", expected


def _check_local(path: Path, md5: str | None) -> tuple[str, str]:
    """Verify (or just compute) a local archive's MD5; return (checksum words, actual MD5).

    A local file is the user's own, so a mismatch raises but never deletes it.
    """
    actual = md5sum(path)
    if md5 is None:
        note = ", matches the official archive" if actual == OFFICIAL_MD5 else ""
        return f"md5 {actual} computed; check skipped (local archive, no md5 given{note})", actual
    if actual != md5:
        raise DatasetError(f"{path}: MD5 mismatch: expected {md5}, got {actual}")
    return f"md5 {md5} verified (given by caller)", actual


def _install(dest: Path, fill: Callable[[Path], object], *, source: str, checksum: str, md5: str | None) -> dict[str, int]:
    """Fill a temporary folder beside ``dest``, validate it, then rename it into place.

    ``os.rename`` of a folder is atomic on one file system, so ``dest`` either
    does not exist or is complete; a failure removes the temporary folder, and
    one left by a killed process is removed by the next run (under the lock).
    """
    # Not tempfile.mkdtemp: its 0700 mode would make the dataset private to this user.
    tmp = dest.parent / f"{_PARTIAL_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        fill(tmp)
        records = validate(tmp)
        _write_marker(tmp, source=source, checksum=checksum, md5=md5, records=records)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return records


def _copy_folder(folder: Path, tmp: Path) -> None:
    """Copy the known CIFAR-10 files of an extracted folder (validated afterwards)."""
    for name in (*REQUIRED_FILES, *OPTIONAL_FILES):
        if (folder / name).is_file():
            shutil.copyfile(folder / name, tmp / name)


def _validate_existing(dest: Path) -> dict[str, int]:
    """Validate a folder found in place; add advice, since we never delete it ourselves."""
    try:
        return validate(dest)
    except DatasetError as err:
        raise DatasetError(f"{err} (the folder {dest} was already there and is not a valid CIFAR-10"
                           " folder; remove it and run prepare again)") from err


def _file_sizes(folder: Path) -> dict[str, int]:
    return {name: (folder / name).stat().st_size for name in REQUIRED_FILES}


def _write_marker(folder: Path, *, source: str, checksum: str, md5: str | None,
                  records: dict[str, int]) -> None:
    """Record where a ready folder came from, and the file sizes for the fast check."""
    marker = {"source": source, "md5": md5, "checksum": checksum,
              "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "records": records, "sizes": _file_sizes(folder)}
    write_json(folder / MARKER_NAME, marker)


def _ready_marker(dest: Path) -> dict | None:
    """The marker of a ready folder whose files still have their recorded sizes, else None."""
    try:
        marker = json.loads((dest / MARKER_NAME).read_text())
        if marker["sizes"] == _file_sizes(dest) and isinstance(marker["records"], dict):
            return marker
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _recorded(marker: dict) -> str:
    """The checksum words of a ready folder, marked as history, not a new check."""
    return f"{marker.get('checksum', 'unknown')} [recorded when prepared, {marker.get('prepared_at', '?')}]"


def _remove_partials(root: Path) -> None:
    """Delete temporary folders that an interrupted earlier run left behind."""
    for leftover in root.glob(_PARTIAL_PREFIX + "*"):
        log.info("removing leftover %s from an interrupted run", leftover)
        shutil.rmtree(leftover, ignore_errors=True)


LOCK_NAME = f".{FOLDER_NAME}.lock"


@contextlib.contextmanager
def _lock(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``root/.cifar-10-batches-bin.lock`` (POSIX; no-op elsewhere).

    Every rank of a distributed job may call prepare at once; the lock makes one
    extract while the others wait and then take the fast path. The lock file is
    deleted when released, however the block ends, so the data root keeps only the
    dataset. That is safe because a waiter that wakes up holding the lock of a file
    already deleted (its path now missing or another file) drops it and locks again.
    """
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        yield
        return
    path = root / LOCK_NAME
    while True:
        try:
            handle = open(path, "a")
        except OSError:  # a read-only dataset mount: nothing will be written there anyway
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(handle.fileno()).st_ino:
            break
        handle.close()  # the holder before us deleted that file: lock the new one
    with handle:
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- identity

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


def evaluation_images(folder: str | os.PathLike[str], count: int | None = None, *,
                      valid_split: int = 0, seed: int = 0) -> dict[str, object]:
    """Which images an evaluation scores, and their SHA-256.

    With ``valid_split`` 0: the first ``count`` records of the test file (the
    evaluation pipeline reads ``test_batch.bin`` in file order, so those *are* the
    images scored; all 10,000 when None). Otherwise the first ``count`` images of
    the held-out validation split (:func:`hold_out` with ``valid_split`` and
    ``seed``), in index order. The hash says exactly which images those were: two
    copies of CIFAR-10 (the official archive, a mirror, a reader's own data) give
    different hashes, and a selection recorded with this identity can be checked
    before it is replaced (:func:`msresnet.training.sweep.promote_best`).
    """
    if valid_split:
        _, valid = hold_out(folder, valid_split, seed)
        picked = valid if count is None else valid[:int(count)]
        digest = hashlib.sha256(training_records(folder, picked).tobytes())
        return {"split": "valid", "images": len(picked), "sha256": digest.hexdigest(),
                "folder": str(Path(folder).resolve()), "held_out": valid_split, "seed": seed}
    path = Path(folder) / TEST_FILES[0]
    total = record_count(path)
    images = total if count is None else min(int(count), total)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        remaining = images * RECORD_BYTES
        while remaining:
            block = handle.read(min(remaining, 1 << 22))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
    return {"split": "test", "images": images, "sha256": digest.hexdigest(),
            "folder": str(Path(folder).resolve())}


def same_images_as(recorded: dict[str, object], current: dict[str, object]) -> bool:
    """True when ``current`` scores the images ``recorded`` scored, and maybe more.

    Both are :func:`evaluation_images` records of the same split (and, for a
    validation split, the same held-out count and seed). The recorded images must be
    the first ``recorded['images']`` of ``current``'s, byte for byte.
    """
    try:
        images = int(recorded["images"])  # type: ignore[arg-type]
        if recorded.get("split") != current.get("split") or images > int(current["images"]):  # type: ignore[arg-type]
            return False
        held = {}
        if recorded.get("split") == "valid":
            if (recorded.get("held_out"), recorded.get("seed")) != (current.get("held_out"),
                                                                   current.get("seed")):
                return False
            held = {"valid_split": int(recorded["held_out"]), "seed": int(recorded["seed"])}  # type: ignore[arg-type]
        again = evaluation_images(str(current["folder"]), images, **held)
        return again["sha256"] == recorded["sha256"]
    except (KeyError, TypeError, ValueError, OSError, DatasetError):
        return False


__all__ = [
    "CLASSES", "DatasetError", "DownloadError", "FOLDER_NAME", "MARKER_NAME", "MINDSPORE_MIRROR_URL",
    "OFFICIAL_MD5", "OFFICIAL_URL", "Prepared", "RECORD_BYTES", "TEST_FILES", "TRAIN_FILES",
    "prepare_dataset", "read_records", "validate", "split_counts", "extract_archive",
    "evaluation_images", "same_images_as", "hold_out", "training_records",
]
