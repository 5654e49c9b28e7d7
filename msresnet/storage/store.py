"""One side of a copy through fsspec: a local folder or an S3/OBS prefix.

What the copy and the small file-system API need to know about a location: does
the bucket exist, is it a file (size, ETag) or a folder, which files lie below it.
On a store a listing costs one request per 1,000 objects and gives sizes and
ETags with it, so nothing here asks per file when a listing can answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from msresnet.storage.errors import BucketNotFoundError, ObjectNotFoundError
from msresnet.storage.etag import FileInfo
from msresnet.storage.s3_errors import translate
from msresnet.storage.s3_filesystem import filesystem
from msresnet.storage.settings import StoreSettings
from msresnet.storage.temp_files import is_temp
from msresnet.storage.urls import Location


def walk_local(root: str) -> dict[str, FileInfo]:
    """Every file below a local folder, by relative posix name (temporary ones skipped)."""
    found: dict[str, FileInfo] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not is_temp(d))
        for name in files:
            if not is_temp(name):
                full = os.path.join(folder, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                found[rel] = FileInfo(os.path.getsize(full))
    return found


def _etag(entry: dict[str, Any]) -> str | None:
    return str(entry.get("ETag", "")).strip('"') or None


class Store:
    """What the copy needs from one side: listing, stat, and its filesystem."""

    def __init__(self, loc: Location, settings: StoreSettings) -> None:
        self.loc = loc
        self.settings = settings
        self.fs = filesystem(loc.scheme, settings) if loc.remote else None

    @classmethod
    def checked(cls, loc: Location, settings: StoreSettings) -> Store:
        """A store whose bucket answered (a local folder needs no check)."""
        store = cls(loc, settings)
        if loc.remote:
            store.check_bucket()
        return store

    def _list(self, prefix: str, delimiter: str | None = None,
              max_keys: int | None = None) -> Iterator[dict[str, Any]]:
        assert self.fs is not None
        kwargs: dict[str, Any] = {"Bucket": self.loc.bucket, "Prefix": prefix}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        if max_keys:
            kwargs["MaxKeys"] = max_keys
        while True:
            page = self.fs.call_s3("list_objects_v2", **kwargs)
            yield page
            if max_keys or not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def check_bucket(self) -> None:
        """One cheap request that fails clearly on bucket, credentials or network."""
        next(self._list(self.loc.key, max_keys=1))

    def bucket_exists(self) -> bool:
        """False for a missing bucket; other failures are raised."""
        try:
            self.check_bucket()
        except Exception as exc:  # noqa: BLE001 - only a missing bucket is an answer
            if isinstance(translate(exc, self.loc, self.settings.endpoint),
                          BucketNotFoundError):
                return False
            raise
        return True

    def create_bucket(self) -> None:
        assert self.fs is not None
        params: dict[str, Any] = {"Bucket": self.loc.bucket}
        if self.settings.region and self.settings.region != "us-east-1":
            params["CreateBucketConfiguration"] = {"LocationConstraint": self.settings.region}
        self.fs.call_s3("create_bucket", **params)

    def _folder_prefix(self) -> str:
        key = self.loc.key.rstrip("/")
        return f"{key}/" if key else ""

    def file_info(self) -> FileInfo | None:
        """Size (and ETag) of the file at this location; None if no file is there."""
        loc = self.loc
        if not loc.remote:
            return FileInfo(os.path.getsize(loc.path)) if os.path.isfile(loc.path) else None
        if not loc.key or loc.key.endswith("/"):
            return None
        assert self.fs is not None
        try:
            head = self.fs.call_s3("head_object", Bucket=loc.bucket, Key=loc.key)
        except Exception as exc:  # noqa: BLE001
            if isinstance(translate(exc, loc, self.settings.endpoint), ObjectNotFoundError):
                return None
            raise
        return FileInfo(int(head["ContentLength"]), _etag(head))

    def is_folder(self) -> bool:
        if not self.loc.remote:
            return os.path.isdir(self.loc.path)
        if not self.loc.key.strip("/"):
            self.check_bucket()
            return True
        page = next(self._list(self._folder_prefix(), max_keys=1))
        return bool(page.get("KeyCount") or page.get("Contents"))

    def walk_files(self) -> dict[str, FileInfo]:
        """Every file below the folder, by relative posix name."""
        if not self.loc.remote:
            return walk_local(self.loc.path)
        found: dict[str, FileInfo] = {}
        prefix = self._folder_prefix()
        for page in self._list(prefix):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if not key.endswith("/"):  # not a "folder" marker object made by consoles
                    found[key[len(prefix):]] = FileInfo(int(obj["Size"]), _etag(obj))
        return found

    def children(self) -> list[str]:
        """The names of the files and sub-folders directly in this folder."""
        if not self.loc.remote:
            return sorted(n for n in os.listdir(self.loc.path) if not is_temp(n))
        prefix = self._folder_prefix()
        names: set[str] = set()
        for page in self._list(prefix, delimiter="/"):
            names.update(p["Prefix"][len(prefix):].rstrip("/")
                         for p in page.get("CommonPrefixes", []))
            names.update(o["Key"][len(prefix):] for o in page.get("Contents", [])
                         if o["Key"] != prefix)
        return sorted(n for n in names if n)

    def same_store(self, other: Store) -> bool:
        """Both sides on one store: a server-side copy moves no bytes through here."""
        return (self.fs is not None and type(self.fs) is type(other.fs)
                and self.settings == other.settings)
