"""A ready CIFAR-10 folder from any source: :func:`prepare_dataset` and its marker.

:func:`prepare_dataset` turns any of the usual sources (the official URL, MindSpore's
mirror, another URL, a local ``.tar.gz`` or an already extracted folder) into a
ready folder. It is safe to call at the top of every notebook and from every
rank of a distributed job: a ready folder carries a small marker file
(:data:`MARKER_NAME`) and the second call returns at once; extraction happens in a
temporary folder that is renamed into place, so an interrupted run never leaves
half a dataset; and a lock keeps concurrent callers from extracting twice. The
marker is also what :func:`provenance` reads: which archive a folder came from.
The format and its facts are :mod:`msresnet.data.cifar10`.

The command line, ``msresnet prepare`` (:mod:`msresnet.commands.prepare`)::

    msresnet prepare                                   # official URL into data/
    msresnet prepare --source auto                     # $MSRESNET_LOCAL_MIRROR if set
    msresnet prepare --source mindspore                # MindSpore's mirror
    msresnet prepare --source path/to/cifar-10-binary.tar.gz --md5 HEX --root data

``--source auto`` (what ``make data`` runs) takes the local mirror of the archive that
the environment variable ``MSRESNET_LOCAL_MIRROR`` names
(:func:`msresnet.paths.local_mirror`; the ``Makefile`` sets it), checked against the
mirror's own MD5, when it is set, and the official archive when it is not, and says
which one it took; set to a file that does not exist, it is refused. It prints what it did
(source, checksum used, folder, seconds) and, on a problem, one clear line and exit
status 2 instead of a stack trace (``--debug`` shows it), because it is meant for
shell scripts and CI.
"""

from __future__ import annotations

import contextlib
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

from msresnet.atomic import write_json
from msresnet.data.cifar10 import (FOLDER_NAME, KNOWN_MD5, MINDSPORE_MIRROR_URL, OFFICIAL_MD5,
                                   OFFICIAL_URL,
                                   OPTIONAL_FILES, REQUIRED_FILES, DatasetError, dataset_folder,
                                   split_counts, validate)
from msresnet.data.download import ChecksumError, download, md5sum
from msresnet.paths import DATA_ROOT, LOCAL_MIRROR_MD5, LOCAL_MIRROR_VARIABLE, local_mirror

log = logging.getLogger(__name__)

MARKER_NAME = ".prepared.json"
ALREADY_PREPARED = "already prepared"  # the action of a ready folder's fast path
# The official members are 30.7 MB; anything far bigger is not CIFAR-10 (or is a zip bomb).
MAX_MEMBER_BYTES = 64 * 1024 * 1024
_PARTIAL_PREFIX = f".{FOLDER_NAME}.partial-"
LOCK_NAME = f".{FOLDER_NAME}.lock"


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
                "prepared_at": None,
                "note": f"no {MARKER_NAME}: not prepared by msresnet.data.prepare"}
    except (OSError, ValueError) as err:
        raise DatasetError(f"{folder / MARKER_NAME}: unreadable ({err})") from err
    return {"folder": str(folder), "source": marker.get("source"), "md5": marker.get("md5"),
            "checksum": marker.get("checksum"), "prepared_at": marker.get("prepared_at")}



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
        raise DatasetError(f"{archive.name}: refusing link member {member.name!r}"
                           f" -> {member.linkname!r}")
    if member.isdir() and parts == [FOLDER_NAME]:
        return None
    if not (member.isfile() or member.isdir()):
        raise DatasetError(f"{archive.name}: refusing special member {member.name!r}"
                           " (device, fifo, ...)")
    known = (*REQUIRED_FILES, *OPTIONAL_FILES)
    if member.isdir() or len(parts) != 2 or parts[0] != FOLDER_NAME or parts[1] not in known:
        raise DatasetError(f"{archive.name}: unexpected member {member.name!r}; a CIFAR-10 binary"
                           f" archive holds only {FOLDER_NAME}/{{{', '.join(known)}}}")
    if member.size > MAX_MEMBER_BYTES:
        raise DatasetError(f"{archive.name}: member {member.name!r} is {member.size} bytes,"
                           " too big for CIFAR-10")
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
    def validated(self) -> bool:
        """This call read and validated every file (all but a ready folder, whose
        marker only vouches for the files' sizes)."""
        return self.action != ALREADY_PREPARED

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
                f"folder:   {self.folder} ({self.train_records} train"
                f" + {self.test_records} test records)\n"
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
    (The command line around it is :func:`msresnet.commands.prepare.main`.)

    Raises :class:`DatasetError` for anything wrong with the files (checksum,
    archive members, validation) and :class:`~msresnet.data.download.DownloadError`
    when a URL cannot be fetched.
    """
    started = time.monotonic()
    root = Path(root)
    dest = root / FOLDER_NAME
    source_text = os.fspath(source)
    md5 = md5.lower() if md5 else None

    def done(action: str, checksum: str, records: dict[str, int],
             src: str = source_text) -> Prepared:
        report = Prepared(dest, action, src, checksum, records, time.monotonic() - started)
        log.info("CIFAR-10 %s: %s (%s)", action, dest, checksum)
        return report

    ready = _ready_marker(dest)
    if ready is not None:  # the fast path, without taking the lock
        return done(ALREADY_PREPARED, _recorded(ready), ready["records"],
                    ready.get("source", source_text))

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
            return done(ALREADY_PREPARED, _recorded(ready), ready["records"],
                        ready.get("source", source_text))
        if dest.exists():
            records = _validate_existing(dest)
            checksum = "none (folder was already there; its files were validated)"
            try:
                _write_marker(dest, source="existing folder", checksum=checksum, md5=None,
                              records=records)
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
                # validated where it is, so an error names the reader's folder, not our
                # copy; the copy holds the same bytes and is not read again
                found = validate(folder)
                copied = "none (copied from a folder)"
                records = _install(dest, lambda tmp: _copy_folder(folder, tmp),
                                   source=str(folder), checksum=copied, md5=None, records=found)
                return done("copied from folder", copied, records, str(folder))
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


def _install(dest: Path, fill: Callable[[Path], object], *, source: str, checksum: str,
             md5: str | None, records: dict[str, int] | None = None) -> dict[str, int]:
    """Fill a temporary folder beside ``dest``, validate it (unless ``records`` says
    what a validation of the very files being copied found), then rename it into place.

    ``os.rename`` of a folder is atomic on one file system, so ``dest`` either
    does not exist or is complete; a failure removes the temporary folder, and
    one left by a killed process is removed by the next run (under the lock).
    """
    # Not tempfile.mkdtemp: its 0700 mode would make the dataset private to this user.
    tmp = dest.parent / f"{_PARTIAL_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        fill(tmp)
        records = records if records is not None else validate(tmp)
        _write_marker(tmp, source=source, checksum=checksum, md5=md5, records=records)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return records


def _copy_folder(folder: Path, tmp: Path) -> None:
    """Copy the known CIFAR-10 files of an extracted folder (validated before)."""
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
    when = marker.get('prepared_at', '?')
    return f"{marker.get('checksum', 'unknown')} [recorded when prepared, {when}]"


def _remove_partials(root: Path) -> None:
    """Delete temporary folders that an interrupted earlier run left behind."""
    for leftover in root.glob(_PARTIAL_PREFIX + "*"):
        log.info("removing leftover %s from an interrupted run", leftover)
        shutil.rmtree(leftover, ignore_errors=True)


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


# Short names for the two well-known URLs, so nobody has to type the mirror's address.
SOURCE_ALIASES = {"official": OFFICIAL_URL, "mindspore": MINDSPORE_MIRROR_URL}
AUTO = "auto"


def resolve_source(source: str, md5: str | None) -> tuple[str, str | None, str | None]:
    """``(source, md5, note)`` for a ``--source`` value: aliases expanded, and ``auto``
    turned into the local mirror that ``MSRESNET_LOCAL_MIRROR`` names
    (:func:`msresnet.paths.local_mirror`; path relative to the current folder, its MD5
    unless ``md5`` is given) when the variable is set, else the official URL. ``note``
    says what ``auto`` chose (None for any other source). The variable set to a path
    that is not a file is bad input, not a reason to download something else:
    :class:`DatasetError` naming the variable and the path."""
    if source != AUTO:
        return SOURCE_ALIASES.get(source, source), md5, None
    mirror = local_mirror()
    if mirror is None:
        return (OFFICIAL_URL, md5, f"--source auto: {LOCAL_MIRROR_VARIABLE} is not set"
                " (no local mirror); using the official archive")
    if not mirror.is_file():
        raise DatasetError(f"--source auto: {LOCAL_MIRROR_VARIABLE}={mirror}: no such file"
                           " (the local mirror); name the archive, or unset the variable"
                           " for the official one")
    return (os.path.relpath(mirror), md5 or LOCAL_MIRROR_MD5,
            f"--source auto: the local mirror {mirror} ({LOCAL_MIRROR_VARIABLE}); using it")
