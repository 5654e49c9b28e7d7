"""The fsspec copy: skip what is there, move the rest in parallel, retry what fails.

Why a copy is safe to repeat or interrupt:

* a file is skipped when the destination has the same size and content hash
  (:func:`~msresnet.storage.etag.same_content`);
* a local destination is written under a temporary name and renamed when complete
  (:func:`~msresnet.storage.temp_files.written_in_place`);
* uploads are single PUTs or multipart uploads, which S3 stores make visible only
  when complete; an interrupted multipart upload leaves invisible parts behind
  (s3fs aborts it on errors, and a bucket lifecycle rule "abort incomplete
  multipart uploads after N days" cleans up after killed processes);
* botocore retries each request (``S3_MAX_ATTEMPTS``), :func:`run_copy` each file
  (``retries``, exponential backoff), but not the errors no retry can mend
  (:data:`~msresnet.storage.errors.PERMANENT`); a file that keeps failing ends the
  copy with a :class:`~msresnet.storage.errors.TransferError` (a
  :class:`~msresnet.storage.errors.ServerError` for HTTP 5xx) naming both URLs.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from fsspec.callbacks import Callback
from tqdm import tqdm

from msresnet.storage.backend import CopyResult
from msresnet.storage.errors import PERMANENT, ServerError, TransferError
from msresnet.storage.etag import UPLOAD_PART_SIZE, FileInfo, md5_differs, same_content
from msresnet.storage.s3_errors import translated_errors
from msresnet.storage.store import Store
from msresnet.storage.temp_files import written_in_place
from msresnet.storage.urls import Location


def default_progress() -> bool:
    """Progress bars by default only when someone watches (stderr is a terminal)."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class Progress(Callback):
    """fsspec callback feeding one shared tqdm bar; can undo a failed attempt."""

    def __init__(self, bar: tqdm, lock: threading.Lock) -> None:
        super().__init__()
        self.bar, self.lock, self.sent = bar, lock, 0

    def relative_update(self, inc: int = 1) -> None:
        with self.lock:
            self.sent += inc
            self.bar.update(inc)

    def call(self, *args: Any, **kwargs: Any) -> None:  # absolute updates unused
        return None

    def undo(self) -> None:
        with self.lock:
            self.bar.update(-self.sent)
            self.sent = 0


def _copy_local(src: str, dst: str, progress: Progress) -> None:
    with open(src, "rb") as reader, open(dst, "wb") as writer:
        while block := reader.read(4 * 2**20):
            writer.write(block)
            progress.relative_update(len(block))


def _fetch(src: Store, src_loc: Location, src_info: FileInfo, target: str,
           progress: Progress) -> None:
    """Copy one file to a local path; it appears there only when complete and checked."""
    with written_in_place(target) as temp:
        if src_loc.remote:
            assert src.fs is not None
            src.fs.get_file(src_loc.path, temp, callback=progress)
        else:
            _copy_local(src_loc.path, temp, progress)
        got = os.path.getsize(temp)
        if got != src_info.size:
            raise TransferError(f"{src_loc.url}: got {got} of {src_info.size} bytes",
                                src_loc.url)
        if md5_differs(temp, src_info.etag):
            raise TransferError(f"{src_loc.url}: MD5 differs from the ETag", src_loc.url)


def transfer_file(src: Store, src_loc: Location, src_info: FileInfo,
                  dst: Store, dst_loc: Location, progress: Progress) -> None:
    """Copy one file, whichever sides are local or remote."""
    if not dst_loc.remote:
        _fetch(src, src_loc, src_info, dst_loc.path, progress)
        return
    assert dst.fs is not None
    if not src_loc.remote:
        dst.fs.put_file(src_loc.path, dst_loc.path, callback=progress,
                        chunksize=UPLOAD_PART_SIZE)
        return
    assert src.fs is not None
    if src.same_store(dst):
        dst.fs.copy(src_loc.path, dst_loc.path)  # server-side copy, no bytes through here
    else:  # different stores: go through a local temporary file
        with tempfile.TemporaryDirectory(prefix="msresnet-staging-") as scratch:
            temp = os.path.join(scratch, "object")
            src.fs.get_file(src_loc.path, temp)
            dst.fs.put_file(temp, dst_loc.path, chunksize=UPLOAD_PART_SIZE)
    progress.relative_update(src_info.size)


@dataclass(frozen=True)
class _File:
    """One file to copy: its name below the folders, what is known of it, both ends."""

    rel: str
    info: FileInfo
    src: Location
    dst: Location


def _gave_up(file: _File, exc: Exception, attempts: int) -> TransferError:
    what = f"copying {file.src.shown} to {file.dst.shown} failed after {attempts} attempts"
    if isinstance(exc, ServerError):
        return ServerError(f"{what}: {exc}", exc.url, operation=exc.operation,
                           status=exc.status, server_message=exc.server_message)
    return TransferError(f"{what}: {type(exc).__name__}: {exc}", file.src.url)


def _copy_with_retries(file: _File, src: Store, dst: Store, meter: Progress, retries: int,
                       on_retry: Callable[[], None]) -> None:
    for attempt in range(retries + 1):
        try:
            with translated_errors(file.src if file.src.remote else file.dst, dst.settings):
                transfer_file(src, file.src, file.info, dst, file.dst, meter)
            return
        except PERMANENT:
            meter.undo()
            raise
        except Exception as exc:  # noqa: BLE001 - transient: retry with backoff
            meter.undo()
            if attempt == retries:
                raise _gave_up(file, exc, retries + 1) from exc
            on_retry()
            time.sleep(min(0.5 * 2**attempt, 8.0))


def _to_copy(pairs: list[tuple[str, FileInfo]], src: Store, dst: Store,
             existing: dict[str, FileInfo], result: CopyResult, single: bool) -> list[_File]:
    """The files the destination lacks; the others are counted as skipped."""
    todo = []
    for rel, info in pairs:
        file = _File(rel, info, src.loc if single else src.loc.child(rel),
                     dst.loc if single else dst.loc.child(rel))
        have = existing.get(rel)
        if have is not None and same_content(file.src, info, file.dst, have):
            result.skipped += 1
            result.skipped_bytes += info.size
        else:
            todo.append(file)
    return todo


def _run_all(task: Callable[[_File], None], files: list[_File], threads: int) -> None:
    """``task`` for every file, ``threads`` at a time; the first error stops the rest."""
    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="staging") as pool:
        futures = [pool.submit(task, file) for file in files]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for future in pending:
            future.cancel()
        for future in done:
            if future.exception() is not None:
                raise future.exception()  # type: ignore[misc]


def run_copy(pairs: list[tuple[str, FileInfo]], src: Store, dst: Store,
             existing: dict[str, FileInfo], result: CopyResult, *, threads: int,
             retries: int, progress: bool, single: bool) -> None:
    """Copy ``pairs`` (relative name, info) from ``src`` to ``dst``, skipping the
    ones ``existing`` already holds; ``single``: one file, the stores' own names."""
    todo = _to_copy(pairs, src, dst, existing, result, single)
    lock = threading.Lock()
    bar = tqdm(total=sum(file.info.size for file in todo), unit="B", unit_scale=True,
               unit_divisor=1024, desc=f"copy {len(todo)} files",
               disable=not progress or not todo, file=sys.stderr, mininterval=0.5)

    def count_retry() -> None:
        with lock:
            result.retried += 1

    def one(file: _File) -> None:
        _copy_with_retries(file, src, dst, Progress(bar, lock), retries, count_retry)
        with lock:
            result.copied += 1
            result.bytes += file.info.size
            result.copied_files.append(file.rel)
            bar.set_postfix_str(f"{result.copied}/{len(todo)} files", refresh=False)

    try:
        _run_all(one, todo, threads)
    finally:
        bar.close()
    result.copied_files.sort()
