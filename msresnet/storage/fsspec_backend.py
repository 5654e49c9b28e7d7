"""The open backend: local paths, and ``s3://``/``obs://`` through fsspec and s3fs.

It works off ModelArts with any S3-compatible store, signing requests with the
credentials of the environment (:mod:`msresnet.storage.settings`); copies go through
:func:`msresnet.storage.transfer.run_copy`, which skips what is there, writes local
files whole or not at all and retries what fails. It handles every copy between two
local folders too, whichever backend handles remote URLs.
"""

from __future__ import annotations

import os
import shutil

from msresnet.storage.backend import CopyResult
from msresnet.storage.errors import ConfigurationError, is_a_folder, not_found
from msresnet.storage.etag import FileInfo
from msresnet.storage.s3_errors import translated_errors
from msresnet.storage.settings import StoreSettings
from msresnet.storage.store import Store
from msresnet.storage.transfer import run_copy
from msresnet.storage.urls import Location


def _source_file(loc: Location, settings: StoreSettings) -> tuple[Store, FileInfo]:
    with translated_errors(loc, settings):
        store = Store.checked(loc, settings)
        info = store.file_info()
        if info is None:
            if store.is_folder():
                raise is_a_folder(loc.url, "use copy_parallel()")
            raise not_found(loc.shown)
    return store, info


def _target_file(loc: Location, settings: StoreSettings) -> tuple[Store, FileInfo | None]:
    with translated_errors(loc, settings):
        store = Store.checked(loc, settings)
        if not loc.remote and os.path.isdir(loc.path):
            raise ConfigurationError(
                f"destination {loc.url} is a folder: give the file name", loc.url)
        return store, store.file_info()


def _target_folder(loc: Location, settings: StoreSettings) -> tuple[Store, dict[str, FileInfo]]:
    with translated_errors(loc, settings):
        store = Store.checked(loc, settings)
        if not loc.remote and os.path.isfile(loc.path):
            raise ConfigurationError(f"destination {loc.url} is a file, not a folder", loc.url)
        return store, store.walk_files() if (loc.remote or os.path.isdir(loc.path)) else {}


def _folder(loc: Location, settings: StoreSettings) -> Store:
    """The store of a folder that must exist (a file there is named as such)."""
    store = Store(loc, settings)
    if not store.is_folder():
        if store.file_info() is not None:
            raise ConfigurationError(f"{loc.url} is a file, not a folder", loc.url)
        raise not_found(loc.shown, "folder")
    return store


class FsspecBackend:
    """Local paths, and S3/OBS through s3fs: the ``open`` backend."""

    name = "open"

    def copy_parallel(self, src: Location, dst: Location, result: CopyResult, *,
                      threads: int, retries: int, progress: bool) -> None:
        settings = StoreSettings.from_env()
        with translated_errors(src, settings):
            source = Store.checked(src, settings)
            is_folder = source.is_folder()
        if not is_folder:
            self.copy(src, dst, result, retries=retries, progress=progress)
            return
        target, existing = _target_folder(dst, settings)
        with translated_errors(src, settings):
            files = source.walk_files()
        run_copy(sorted(files.items()), source, target, existing, result, threads=threads,
                 retries=retries, single=False, progress=progress)

    def copy(self, src: Location, dst: Location, result: CopyResult, *,
             retries: int, progress: bool) -> None:
        settings = StoreSettings.from_env()
        source, info = _source_file(src, settings)
        target, have = _target_file(dst, settings)
        existing = {"": have} if have is not None else {}
        run_copy([("", info)], source, target, existing, result, threads=1, retries=retries,
                 single=True, progress=progress)

    def exists(self, loc: Location) -> bool:
        if not loc.remote:
            return os.path.exists(loc.path)
        settings = StoreSettings.from_env()
        with translated_errors(loc, settings):
            store = Store(loc, settings)
            if not store.bucket_exists():
                return False
            return store.file_info() is not None or store.is_folder()

    def is_directory(self, loc: Location) -> bool:
        settings = StoreSettings.from_env()
        with translated_errors(loc, settings):
            return Store(loc, settings).is_folder()

    def list_directory(self, loc: Location, recursive: bool) -> list[str]:
        settings = StoreSettings.from_env()
        with translated_errors(loc, settings):
            store = _folder(loc, settings)
            return sorted(store.walk_files()) if recursive else store.children()

    def file_sizes(self, loc: Location) -> dict[str, int]:
        settings = StoreSettings.from_env()
        with translated_errors(loc, settings):
            store = Store(loc, settings)
            if not store.is_folder():
                raise not_found(loc.shown, "folder")
            return {name: info.size for name, info in sorted(store.walk_files().items())}

    def make_dirs(self, loc: Location) -> None:
        if not loc.remote:
            try:
                os.makedirs(loc.path, exist_ok=True)
            except FileExistsError:
                raise ConfigurationError(f"{loc.url} exists and is a file", loc.url) from None
            return
        settings = StoreSettings.from_env()
        with translated_errors(loc, settings):
            store = Store(loc, settings)
            if loc.key.strip("/"):  # no folders below a bucket: it must exist, that is all
                store.check_bucket()
            elif not store.bucket_exists():
                store.create_bucket()

    def remove(self, loc: Location, recursive: bool) -> None:
        settings = StoreSettings.from_env()
        with translated_errors(loc, settings):
            if not loc.remote:
                _remove_local(loc, recursive)
                return
            store = Store.checked(loc, settings)
            assert store.fs is not None
            if store.file_info() is not None:
                store.fs.rm_file(loc.path)
            elif not store.is_folder():
                raise not_found(loc.shown)
            elif not recursive:
                raise is_a_folder(loc.url, "pass recursive=True")
            else:
                store.fs.rm(loc.path, recursive=True)


def _remove_local(loc: Location, recursive: bool) -> None:
    if not os.path.isdir(loc.path):
        os.remove(loc.path)
    elif not recursive:
        raise is_a_folder(loc.url, "pass recursive=True")
    else:
        shutil.rmtree(loc.path)
