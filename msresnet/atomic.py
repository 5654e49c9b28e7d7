"""Write a file so that readers see the old complete file or the new one, never half.

Training jobs get killed (pre-emption, out of memory, a full disk) at any moment,
and other processes read the files while they are written (resume reads the newest
checkpoint, waiting nodes poll sync markers, the reproduction reads each chapter's
metrics). One recipe, used for every file the package writes for others to read:

1. write to a temporary name *in the same folder* (``os.replace`` is only atomic
   within one file system);
2. flush and ``fsync`` it, so the data is on disk before the name points at it;
3. ``os.replace`` it over the final name (atomic on POSIX and Windows);
4. ``fsync`` the folder, so the rename itself survives a power cut (where the
   platform allows it).

On any failure (including ``KeyboardInterrupt``) the temporary file is removed and
the exception re-raised; whatever was at the final name before is untouched.

:func:`write_bytes`, :func:`write_text`, :func:`write_json` and :func:`write_csv` cover the usual
cases; :func:`atomic_path` is the same recipe for writers that insist on a file
name of their own (``mindspore.save_checkpoint``, ``numpy.savez``), and
:func:`copy_file` copies with it. This module imports nothing outside the
standard library, so every layer of the package may use it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PARTIAL_TAG = ".part"
"""Temporary files are ``<stem>.part<suffix>``, e.g. ``resnet50-3_8.part.ckpt``: the
suffix stays last, so writers that append their own suffix (MindSpore adds
``.ckpt``) keep the name, and listings by suffix can tell them apart by the tag."""


def partial_path(path: str | os.PathLike[str], unique: bool = False) -> Path:
    """The temporary name used while ``path`` is being written.

    ``unique=True`` adds a random part (``<stem>.part-1a2b3c4d<suffix>``) for files
    that several processes may write at the same time (each gets its own temporary
    file; the last rename wins, and every version is complete).
    """
    path = Path(path)
    tag = f"{PARTIAL_TAG}-{uuid.uuid4().hex[:8]}" if unique else PARTIAL_TAG
    return path.with_name(f"{path.stem}{tag}{path.suffix}")


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush a closed file's data to disk (for files another library wrote)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make a rename in ``folder`` durable; a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. Windows: the rename is still atomic, just not fsync'ed
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike[str], unique: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` atomically.

    ::

        with atomic_path(folder / "model.ckpt") as partial:
            mindspore.save_checkpoint(net, str(partial))

    The folder must exist. If the block raises, the temporary file is removed and
    ``path`` keeps its old content (or stays absent).
    """
    path = Path(path)
    partial = partial_path(path, unique)
    try:
        yield partial
        fsync_file(partial)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def _write(path: str | os.PathLike[str], fill: Callable[[Any], None], mode: str,
           unique: bool, **open_kwargs: Any) -> Path:
    with atomic_path(path, unique) as partial:
        with open(partial, mode, **open_kwargs) as handle:
            fill(handle)
            handle.flush()
    return Path(path)


def write_bytes(path: str | os.PathLike[str], data: bytes, unique: bool = False) -> Path:
    """Atomically make ``path`` hold ``data``."""
    return _write(path, lambda handle: handle.write(data), "wb", unique)


def write_text(path: str | os.PathLike[str], text: str, unique: bool = False,
               encoding: str = "utf-8", newline: str | None = None) -> Path:
    """Atomically make ``path`` hold ``text`` (``newline=""`` for CSV writers)."""
    return _write(path, lambda handle: handle.write(text), "w", unique,
                  encoding=encoding, newline=newline)


def write_json(path: str | os.PathLike[str], data: Any, indent: int | None = 2,
               sort_keys: bool = False, default: Callable[[Any], Any] | None = None,
               unique: bool = False) -> Path:
    """Atomically write ``data`` as JSON (with a final newline).

    The data is serialised before any file is touched, so data that cannot be
    written as JSON leaves no trace at all.
    """
    text = json.dumps(data, indent=indent, sort_keys=sort_keys, default=default) + "\n"
    return write_text(path, text, unique)


def write_csv(path: str | os.PathLike[str], fields: Sequence[str],
              rows: Iterable[Mapping[str, Any]]) -> Path:
    """Atomically write ``rows`` as CSV: a header of ``fields``, then each row's values
    of those fields (other keys ignored, a missing or None value left empty)."""
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(fields))
    writer.writeheader()
    for row in rows:
        writer.writerow({name: row.get(name) for name in fields})
    return write_text(path, table.getvalue(), newline="")


def copy_file(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Atomically make ``target`` a copy of ``source``."""
    with atomic_path(target) as partial:
        shutil.copyfile(source, partial)
    return Path(target)


@contextmanager
def output_folder(folder: str | os.PathLike[str], create: bool = True) -> Iterator[Path]:
    """Create ``folder`` (unless ``create`` is False: a worker that writes nothing)
    for the work inside the block. Work that fails removes the folders this created
    while they are still empty, so a failed start leaves no empty folder behind; a
    folder that existed before, or that holds something already, is kept."""
    folder = Path(folder)
    created = [p for p in (folder, *folder.parents) if not p.exists()] if create else []
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    except BaseException:
        for made in created:  # the deepest first
            try:
                made.rmdir()  # refuses a folder that is not empty
            except OSError:
                break
        raise
