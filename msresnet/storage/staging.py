"""Copy data between object storage (OBS, S3) and local disk, the way ModelArts jobs do.

A ModelArts training job receives ``--data_url`` and ``--train_url`` pointing at OBS,
copies the dataset to the node's local ``/cache`` with ``mox.file.copy_parallel``,
trains from local disk and copies checkpoints and logs back. MoXing is not public;
this module offers the same small API, and hands each call to one backend:

``copy_parallel(src_url, dst_url)``  copy the files *inside* a folder into a folder
``copy(src_url, dst_url)``           copy one file
``exists``, ``is_directory``, ``list_directory(url, recursive=False)``,
``file_sizes``, ``make_dirs``, ``remove(url, recursive=False)``

URLs are local paths, ``file://`` URLs, ``s3://bucket/key`` or ``obs://bucket/key``
(:mod:`~msresnet.storage.urls`); ``obs://`` is the S3 protocol with the endpoint
taken from ``S3_ENDPOINT``. Configuration comes only from environment variables
(:data:`ENVIRONMENT`, :mod:`~msresnet.storage.settings`), so credentials never pass
through notebook parameters, command lines or config files, and nothing prints or
stores them.

Who does the work is decided in one place, :func:`backend_for`, from the
:data:`BACKENDS` registry (:class:`~msresnet.storage.backend.Backend` is what a
backend implements): URLs that are all local go to the open backend; remote ones to
the one ``MSRESNET_STAGING_BACKEND`` names, or with ``auto`` (the default) to the
first registered backend that works here, MoXing where ``import moxing`` works (on
ModelArts, where the platform has authorised it, so no AK/SK and no s3fs are
needed; :mod:`~msresnet.storage.moxing_backend`), else fsspec/s3fs
(:mod:`~msresnet.storage.fsspec_backend`). Copies are safe to repeat and to
interrupt (:mod:`~msresnet.storage.transfer` says why), and every failure is one
:class:`StagingError` subclass naming the URL (:mod:`~msresnet.storage.errors`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from msresnet.storage import moxing_backend
from msresnet.storage.backend import Backend, CopyResult, Registration
from msresnet.storage.errors import (AccessDeniedError, BucketNotFoundError, ConfigurationError,
                                     CredentialsError, EndpointUnreachableError,
                                     ObjectNotFoundError, ServerError, StagingError,
                                     TransferError)
from msresnet.storage.etag import UPLOAD_PART_SIZE, local_matches_etag, multipart_etag
from msresnet.storage.fsspec_backend import FsspecBackend
from msresnet.storage.s3_filesystem import filesystem
from msresnet.storage.settings import (BACKEND_VARIABLE, ENVIRONMENT, StoreSettings,
                                       describe_environment)
from msresnet.storage.transfer import default_progress
from msresnet.storage.urls import Location, parse_url

__all__ = [
    "ENVIRONMENT", "StagingError", "ConfigurationError", "CredentialsError",
    "AccessDeniedError", "BucketNotFoundError", "ObjectNotFoundError",
    "EndpointUnreachableError", "TransferError", "ServerError", "CopyResult",
    "StoreSettings", "ObsFileSystem", "copy", "copy_parallel", "exists", "is_directory",
    "list_directory", "file_sizes", "make_dirs", "remove", "filesystem", "backend",
    "BACKENDS", "backend_for", "parse_url", "describe_environment", "UPLOAD_PART_SIZE",
    "multipart_etag", "local_matches_etag",
]

#: The backends for remote URLs, in the order ``auto`` tries them; a new backend is
#: one entry here (its name is what ``MSRESNET_STAGING_BACKEND`` may be set to).
BACKENDS: dict[str, Registration] = {
    "moxing": Registration(moxing_backend.load, needs=moxing_backend.NEEDS),
    "open": Registration(FsspecBackend, needs="nothing"),
}
_LOCAL = FsspecBackend()  # copies between local folders never leave this process


def _remote_backend() -> Backend:
    """The backend for remote URLs that ``MSRESNET_STAGING_BACKEND`` asks for."""
    choice = os.environ.get(BACKEND_VARIABLE, "").strip().lower() or "auto"
    if choice == "auto":
        for registration in BACKENDS.values():
            if (found := registration.load()) is not None:
                return found
        raise ConfigurationError(f"no staging backend of {', '.join(BACKENDS)} works here")
    if choice not in BACKENDS:
        raise ConfigurationError(
            f"{BACKEND_VARIABLE} must be auto or one of {', '.join(BACKENDS)}, "
            f"got {choice!r}")
    found = BACKENDS[choice].load()
    if found is None:
        raise ConfigurationError(
            f"{BACKEND_VARIABLE}={choice}, but that backend needs {BACKENDS[choice].needs}")
    return found


def backend_for(*locations: Location) -> Backend:
    """The one backend that handles an operation on these locations."""
    return _remote_backend() if any(loc.remote for loc in locations) else _LOCAL


def backend() -> str:
    """Who handles obs:// and s3:// URLs here: ``"moxing"`` or ``"open"``."""
    return _remote_backend().name


def __getattr__(name: str) -> Any:
    """``staging.ObsFileSystem`` / ``staging.S3StagingFileSystem``, built lazily."""
    if name in ("ObsFileSystem", "S3StagingFileSystem"):
        from msresnet.storage import s3_filesystem

        return getattr(s3_filesystem, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextmanager
def _timed(src: Location, dst: Location) -> Iterator[CopyResult]:
    started = time.perf_counter()
    result = CopyResult(src.shown, dst.shown)
    yield result
    result.seconds = time.perf_counter() - started


def copy_parallel(src_url: str | os.PathLike[str], dst_url: str | os.PathLike[str], *,
                  threads: int = 8, retries: int = 3, progress: bool | None = None
                  ) -> CopyResult:
    """Copy every file inside folder ``src_url`` into folder ``dst_url`` (like
    ``mox.file.copy_parallel``), ``threads`` files at a time, skipping files the
    destination already holds. A file ``src_url`` is copied as :func:`copy` would.
    """
    src, dst = parse_url(src_url), parse_url(dst_url)
    with _timed(src, dst) as result:
        backend_for(src, dst).copy_parallel(
            src, dst, result, threads=threads, retries=retries,
            progress=default_progress() if progress is None else progress)
    return result


def copy(src_url: str | os.PathLike[str], dst_url: str | os.PathLike[str], *,
         progress: bool | None = False, retries: int = 3) -> CopyResult:
    """Copy one file to ``dst_url`` (a file name, not a folder); skip it if identical."""
    src, dst = parse_url(src_url), parse_url(dst_url)
    with _timed(src, dst) as result:
        backend_for(src, dst).copy(
            src, dst, result, retries=retries,
            progress=default_progress() if progress is None else progress)
    return result


def exists(url: str | os.PathLike[str]) -> bool:
    """True if a file or folder is at ``url`` (False for a missing bucket)."""
    loc = parse_url(url)
    return backend_for(loc).exists(loc)


def is_directory(url: str | os.PathLike[str]) -> bool:
    """True for a local folder, a bucket, or a key prefix with objects below it."""
    loc = parse_url(url)
    return backend_for(loc).is_directory(loc)


def list_directory(url: str | os.PathLike[str], recursive: bool = False) -> list[str]:
    """Sorted names relative to ``url``: its files and sub-folders, or with
    ``recursive=True`` every file below it (``a/b.bin``)."""
    loc = parse_url(url)
    return backend_for(loc).list_directory(loc, recursive)


def file_sizes(url: str | os.PathLike[str]) -> dict[str, int]:
    """``{relative name: bytes}`` for every file below folder ``url`` (one listing
    request per 1,000 objects on a store; no per-file requests; with MoXing, one
    size request per file)."""
    loc = parse_url(url)
    return backend_for(loc).file_sizes(loc)


def make_dirs(url: str | os.PathLike[str]) -> None:
    """Create a local folder (with parents), or a bucket for ``s3://bucket``.

    Object stores have no folders below the bucket: for ``s3://bucket/prefix`` this
    only checks that the bucket exists (raising :class:`BucketNotFoundError`).
    """
    loc = parse_url(url)
    backend_for(loc).make_dirs(loc)


def remove(url: str | os.PathLike[str], recursive: bool = False) -> None:
    """Delete a file, or with ``recursive=True`` a folder and everything below it."""
    loc = parse_url(url)
    backend_for(loc).remove(loc, recursive)
