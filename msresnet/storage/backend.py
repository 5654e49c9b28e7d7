"""What a staging backend does: the operations behind the public API, and a copy's result.

:mod:`msresnet.storage.staging` parses the URLs, picks one backend for them (from
its ``BACKENDS`` registry) and hands over; a backend never chooses another. Two
exist: :class:`~msresnet.storage.fsspec_backend.FsspecBackend` (local paths, and
S3/OBS through s3fs with the credentials of the environment) and
:class:`~msresnet.storage.moxing_backend.MoxingBackend` (``moxing.file`` on
ModelArts, authorised by the platform). A new one implements :class:`Backend` and
is registered with one :class:`Registration` entry.

Locations arrive parsed; the copy operations fill the :class:`CopyResult` they are
given (the caller times them). Whatever a backend's library raises leaves it as a
:class:`~msresnet.storage.errors.StagingError` naming the URL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from msresnet.storage.urls import Location


@dataclass
class CopyResult:
    """What a copy did. ``bytes`` counts transferred bytes only (skips are free)."""

    src: str
    dst: str
    copied: int = 0
    skipped: int = 0
    bytes: int = 0
    skipped_bytes: int = 0
    retried: int = 0
    seconds: float = 0.0
    copied_files: list[str] = field(default_factory=list, repr=False)

    @property
    def files(self) -> int:
        return self.copied + self.skipped

    @property
    def megabytes_per_second(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """One deterministic line (no timing) for logs and notebooks."""
        return (f"{self.copied} copied, {self.skipped} skipped, "
                f"{self.bytes:,} bytes transferred")


@runtime_checkable
class Backend(Protocol):
    """The operations of the public API, on parsed locations."""

    name: str  # what ``staging.backend()`` reports, and its key in ``staging.BACKENDS``

    def copy_parallel(self, src: Location, dst: Location, result: CopyResult, *,
                      threads: int, retries: int, progress: bool) -> None:
        """The files inside folder ``src`` into folder ``dst`` (a file: as :meth:`copy`)."""

    def copy(self, src: Location, dst: Location, result: CopyResult, *,
             retries: int, progress: bool) -> None:
        """One file to the file name ``dst``."""

    def exists(self, loc: Location) -> bool:
        """A file or folder is there (False for a missing bucket)."""

    def is_directory(self, loc: Location) -> bool:
        """A folder, a bucket, or a key prefix with objects below it."""

    def list_directory(self, loc: Location, recursive: bool) -> list[str]:
        """Sorted names below the folder: children, or every file (``recursive``)."""

    def file_sizes(self, loc: Location) -> dict[str, int]:
        """``{relative name: bytes}`` for every file below the folder."""

    def make_dirs(self, loc: Location) -> None:
        """A local folder with its parents, or a bucket."""

    def remove(self, loc: Location, recursive: bool) -> None:
        """A file, or with ``recursive`` a folder and everything below it."""


@dataclass(frozen=True)
class Registration:
    """How the registry opens a backend: ``load`` gives it, or None where it cannot
    work here; ``needs`` says what it needs, for the error when it is insisted on."""

    load: Callable[[], Backend | None]
    needs: str
