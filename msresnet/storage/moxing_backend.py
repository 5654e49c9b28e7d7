"""The MoXing backend: remote work handed to ``moxing.file`` on ModelArts.

On ModelArts, ``moxing`` is installed in the training images and authorised by the
platform: the job's environment holds no AK/SK and needs no s3fs (nothing here
imports it). MoXing has functions of the same names and meanings as the public API;
two of the package's promises are kept on top of it rather than assumed from it: a
download lands in a hidden folder (or file) and is renamed into place, and MoXing's
exceptions become :class:`~msresnet.storage.errors.StagingError` classes naming the
URL and the operation. MoXing moves the bytes itself, so the ``threads``,
``retries`` and ``progress`` options of a copy do not apply.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from msresnet.storage.backend import CopyResult
from msresnet.storage.errors import (ObjectNotFoundError, StagingError, TransferError,
                                     is_a_folder, not_found)
from msresnet.storage.store import walk_local
from msresnet.storage.temp_files import scratch_beside, written_in_place
from msresnet.storage.urls import Location

NEEDS = "`import moxing` to work (MoXing is installed on ModelArts only)"


def load() -> MoxingBackend | None:
    """The backend where ``import moxing`` works, else None."""
    try:
        import moxing
    except ImportError:
        return None
    return MoxingBackend(moxing.file)


def _local_sizes(root: str) -> dict[str, int]:
    return {rel: info.size for rel, info in walk_local(root).items()}


class MoxingBackend:
    """``moxing.file`` for remote URLs: the ``moxing`` backend."""

    name = "moxing"

    def __init__(self, mox: ModuleType) -> None:
        self.mox = mox

    def _call(self, operation: str, loc: Location, *args: Any, **kwargs: Any) -> Any:
        """``mox.file.<operation>(<loc's URL>, *args)``; its errors become
        StagingErrors naming the URL."""
        try:
            return getattr(self.mox, operation)(loc.scheme_url, *args, **kwargs)
        except StagingError:
            raise
        except Exception as exc:  # noqa: BLE001 - MoXing's own exception classes
            name = type(exc).__name__
            text = f"MoXing {operation} failed for {loc.shown}: {name}: {exc}"
            if isinstance(exc, FileNotFoundError) or "NotExist" in name or "NotFound" in name:
                raise ObjectNotFoundError(text, loc.shown) from exc
            raise TransferError(text, loc.shown) from exc

    def copy_parallel(self, src: Location, dst: Location, result: CopyResult, *,
                      threads: int, retries: int, progress: bool) -> None:
        if not self._call("is_directory", src):
            self._copy_file(src, dst, result)
            return
        files = self._download(src, dst) if not dst.remote else self._upload(src, dst, result)
        result.copied = len(files)
        result.bytes = result.bytes or sum(files.values())
        result.copied_files = sorted(files)

    def _download(self, src: Location, dst: Location) -> dict[str, int]:
        """Into a hidden folder in ``dst`` first, then each file renamed into place."""
        with scratch_beside(os.path.join(dst.path, "moxing")) as scratch:
            self._call("copy_parallel", src, scratch)
            files = _local_sizes(scratch)
            for rel in sorted(files):
                target = os.path.join(dst.path, *rel.split("/"))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.replace(os.path.join(scratch, *rel.split("/")), target)
        return files

    def _upload(self, src: Location, dst: Location, result: CopyResult) -> dict[str, int]:
        """To a remote folder; the files' sizes, or (from a remote one) their names."""
        files = {} if src.remote else _local_sizes(src.path)
        self._call("copy_parallel", src, dst.scheme_url)
        if src.remote:
            files = {name: 0 for name in self._call("list_directory", dst, recursive=True)}
            result.bytes = int(self._call("get_size", src, recursive=True))
        return files

    def copy(self, src: Location, dst: Location, result: CopyResult, *,
             retries: int, progress: bool) -> None:
        if self._call("is_directory", src):
            raise is_a_folder(src.url, "use copy_parallel()")
        self._copy_file(src, dst, result)

    def _copy_file(self, src: Location, dst: Location, result: CopyResult) -> None:
        """``mox.file.copy`` of one file; a local destination appears only when complete."""
        if not self._call("exists", src):
            raise not_found(src.shown)
        if dst.remote:
            self._call("copy", src, dst.scheme_url)
            result.bytes = (int(self._call("get_size", src)) if src.remote
                            else os.path.getsize(src.path))
        else:
            with written_in_place(dst.path) as temp:
                self._call("copy", src, temp)
            result.bytes = os.path.getsize(dst.path)
        result.copied, result.copied_files = 1, [""]

    def exists(self, loc: Location) -> bool:
        return bool(self._call("exists", loc))

    def is_directory(self, loc: Location) -> bool:
        return bool(self._call("is_directory", loc))

    def list_directory(self, loc: Location, recursive: bool) -> list[str]:
        if not self.is_directory(loc):
            raise not_found(loc.shown, "folder")
        return sorted(self._call("list_directory", loc, recursive=recursive))

    def file_sizes(self, loc: Location) -> dict[str, int]:
        """One size request per file (MoXing lists names only)."""
        sizes = {}
        for name in self.list_directory(loc, recursive=True):
            child = loc.child(name)
            if not self.is_directory(child):
                sizes[name] = int(self._call("get_size", child))
        return sizes

    def make_dirs(self, loc: Location) -> None:
        self._call("make_dirs", loc)

    def remove(self, loc: Location, recursive: bool) -> None:
        if not recursive and self.is_directory(loc):
            raise is_a_folder(loc.url, "pass recursive=True")
        if not self.exists(loc):
            raise not_found(loc.shown)
        self._call("remove", loc, recursive=recursive)
