"""Download one large file so that a flaky network costs minutes, not the whole file.

The CIFAR-10 archive is 170 MB. On a slow or unstable link a plain
``urlretrieve`` that dies at 90 % starts again from zero, and a half-written
file left under the final name looks like a finished one. So this module:

* writes to ``<name>.part`` and renames it to ``<name>`` only when it is whole
  and its checksum matches, so the final name always means "complete";
* resumes a ``.part`` file with an HTTP ``Range`` request (servers that ignore
  ``Range`` are detected and the download restarts cleanly);
* retries network errors and 5xx/429 answers with exponential backoff, but not
  permanent errors such as 404;
* shows a tqdm progress bar, and uses only :mod:`urllib` (no extra dependency).

A download whose MD5 differs from the expected one is moved aside to
``<name>.bad`` (kept for inspection, replaced next time) so the next run
downloads it afresh instead of trusting it.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

CHUNK_BYTES = 1 << 20
# First wait between attempts; it doubles after each failed attempt (2, 4, 8, 16, 32 s).
RETRY_BACKOFF_SECONDS = 2.0
USER_AGENT = "msresnet-download/0.1 (+urllib)"
# HTTP answers worth another try: the server or a proxy is busy, not wrong.
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class DownloadError(OSError):
    """The file could not be fetched (after retries); the message names the URL."""


class ChecksumError(ValueError):
    """A file's MD5 is not the expected one; the message names file, expected and actual."""


class _Retryable(Exception):
    """Internal: this attempt failed in a way another attempt may fix."""


def md5sum(path: str | os.PathLike[str], chunk_bytes: int = CHUNK_BYTES) -> str:
    """Hex MD5 of a file, read in chunks so a 170 MB archive needs 1 MB of memory."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while block := handle.read(chunk_bytes):
            digest.update(block)
    return digest.hexdigest()


def sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file (provenance records: exported models, MindRecord inputs)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def verify_md5(path: str | os.PathLike[str], expected: str, *, what: str | None = None) -> str:
    """Return the actual MD5 of ``path``; raise :class:`ChecksumError` if it differs.

    ``what`` names the file in the message (for example the URL it came from).
    """
    actual = md5sum(path)
    if actual != expected.lower():
        raise ChecksumError(
            f"{what or path}: MD5 mismatch: expected {expected.lower()}, got {actual}")
    return actual


def part_path(dest: Path) -> Path:
    """Where the unfinished download of ``dest`` lives."""
    return dest.with_name(dest.name + ".part")


def quarantine_path(dest: Path) -> Path:
    """Where a download that failed its checksum is moved."""
    return dest.with_name(dest.name + ".bad")


def download(url: str, dest: str | os.PathLike[str], *, md5: str | None = None,
             retries: int = 5, backoff: float | None = None, timeout: float = 60.0,
             progress: bool = True, chunk_bytes: int = CHUNK_BYTES,
             sleep: Callable[[float], None] = time.sleep) -> Path:
    """Fetch ``url`` to ``dest``, resuming and retrying; verify ``md5`` when given.

    An existing ``dest`` is reused when it matches ``md5`` (or when no ``md5`` is
    given); one that does not match is quarantined and fetched again.
    ``retries`` counts consecutive failed attempts: an attempt that made progress
    resets it, so a long download over a link that drops every few minutes still
    finishes. Waits between attempts are ``backoff * 2**n`` seconds (``backoff``
    defaults to :data:`RETRY_BACKOFF_SECONDS`, read at call time).
    Raises :class:`DownloadError` or :class:`ChecksumError`.
    """
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in {"http", "https"}:
        raise DownloadError(f"{url}: only http(s) URLs can be downloaded, not {scheme or 'a bare path'!r}")
    backoff = RETRY_BACKOFF_SECONDS if backoff is None else backoff
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        if md5 is None:
            return dest
        try:
            verify_md5(dest, md5, what=dest)
            return dest
        except ChecksumError:
            os.replace(dest, quarantine_path(dest))

    part = part_path(dest)
    failures = 0
    while True:
        before = part.stat().st_size if part.exists() else 0
        try:
            _attempt(url, part, timeout=timeout, progress=progress, chunk_bytes=chunk_bytes)
            break
        except _Retryable as err:
            after = part.stat().st_size if part.exists() else 0
            failures = 0 if after > before else failures + 1
            if failures > retries:
                kept = (f"the partial file {part} is kept; run again to resume"
                        if part.is_file() else "nothing was downloaded")
                raise DownloadError(
                    f"{url}: giving up after {retries + 1} attempts without progress: {err}"
                    f" ({kept})") from err
            sleep(backoff * 2 ** max(failures - 1, 0))

    if md5 is not None:
        try:
            verify_md5(part, md5, what=url)
        except ChecksumError as err:
            bad = quarantine_path(dest)
            os.replace(part, bad)
            raise ChecksumError(f"{err}; moved the download to {bad}, the next run downloads it again") from err
    os.replace(part, dest)
    return dest


def _attempt(url: str, part: Path, *, timeout: float, progress: bool, chunk_bytes: int) -> None:
    """One HTTP request that appends to ``part``; raises _Retryable when worth retrying."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (scheme checked)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:
            total = _total_from_content_range(err.headers.get("Content-Range", ""))
            if total == offset:
                return  # the .part file is already complete
            part.unlink()  # the .part is longer than the file: start over
            raise _Retryable(f"HTTP 416 for a {offset}-byte partial file; restarting") from err
        if err.code in RETRYABLE_STATUS:
            raise _Retryable(f"HTTP {err.code} {err.reason}") from err
        raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from err
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        raise _Retryable(f"{type(err).__name__}: {getattr(err, 'reason', err)}") from err

    with response:
        if offset and response.status == 206:
            content_range = response.headers.get("Content-Range", "")
            if not content_range.startswith(f"bytes {offset}-"):
                part.unlink()
                raise _Retryable(f"asked for bytes {offset}- but got {content_range!r}; restarting")
            mode = "ab"
            total = _total_from_content_range(content_range)
        else:  # 200: a fresh start, or a server that ignores Range
            mode, offset = "wb", 0
            total = None
        length = response.headers.get("Content-Length")
        if total is None and length is not None:
            total = offset + int(length)
        written = offset
        bar = tqdm(total=total, initial=offset, unit="B", unit_scale=True, unit_divisor=1024,
                   desc=part.name.removesuffix(".part"), disable=not progress, leave=False)
        try:
            with open(part, mode) as out:
                while True:
                    try:
                        block = response.read(chunk_bytes)
                    except (OSError, http.client.HTTPException) as err:
                        raise _Retryable(f"connection lost after {written} bytes: {err}") from err
                    if not block:
                        break
                    out.write(block)
                    written += len(block)
                    bar.update(len(block))
        finally:
            bar.close()
    if total is not None and written != total:
        raise _Retryable(f"connection closed after {written} of {total} bytes")


def _total_from_content_range(value: str) -> int | None:
    """The full size from ``Content-Range: bytes a-b/total`` (or ``bytes */total``)."""
    match = re.search(r"/(\d+)\s*$", value)
    return int(match.group(1)) if match else None
