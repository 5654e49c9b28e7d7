"""Is the copy already there? Sizes, MD5s and S3 ETags, compared without a transfer.

A copy skips a file when the destination has the same size and, where a hash is
offered, the same content. S3 stores report an ETag: the MD5 of the object for a
single PUT, and for a multipart upload the MD5 of the parts' MD5s followed by
``-<parts>``. That is recomputed here from the local file, trying the part sizes of
common uploaders whose part count matches.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass

from msresnet.storage.urls import Location

#: Parts of multipart uploads; also used to recompute multipart ETags locally.
UPLOAD_PART_SIZE = 16 * 2**20
# Part sizes of common uploaders, tried when a multipart ETag has another part count:
# this package, aws cli / boto3 (8 MiB), s3fs (50 MiB), 5 MiB minimum, obsutil-like 9 MiB.
_KNOWN_PART_SIZES = (UPLOAD_PART_SIZE, 8 * 2**20, 50 * 2**20, 5 * 2**20, 9 * 2**20,
                     64 * 2**20, 100 * 2**20)
_PLAIN_MD5 = re.compile(r"[0-9a-f]{32}")
_MULTIPART = re.compile(r"[0-9a-f]{32}-(\d+)")


@dataclass(frozen=True)
class FileInfo:
    """What a listing tells about one file."""

    size: int
    etag: str | None = None  # remote only, without quotes


def file_md5(path: str, start: int = 0, length: int | None = None) -> bytes:
    """MD5 of ``length`` bytes of a file from ``start`` (all of it by default)."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        handle.seek(start)
        remaining = length
        while remaining is None or remaining > 0:
            block = handle.read(4 * 2**20 if remaining is None else min(4 * 2**20, remaining))
            if not block:
                break
            digest.update(block)
            if remaining is not None:
                remaining -= len(block)
    return digest.digest()


def multipart_etag(path: str, part_size: int) -> str:
    """The ETag S3 gives a multipart upload: md5(concat(part md5s)) + "-" + parts."""
    size = os.path.getsize(path)
    parts = max(1, math.ceil(size / part_size))
    digests = b"".join(file_md5(path, i * part_size, part_size) for i in range(parts))
    return f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{parts}"


def local_matches_etag(path: str, etag: str | None) -> bool | None:
    """True/False when the ETag can be checked against the local file, else None."""
    if not etag:
        return None
    if _PLAIN_MD5.fullmatch(etag):
        return file_md5(path).hex() == etag
    match = _MULTIPART.fullmatch(etag)
    if not match:
        return None  # e.g. SSE-KMS or a store with its own ETag scheme
    parts, size = int(match.group(1)), os.path.getsize(path)
    candidates = [p for p in _KNOWN_PART_SIZES if max(1, math.ceil(size / p)) == parts]
    if not candidates:
        return None
    return any(multipart_etag(path, p) == etag for p in dict.fromkeys(candidates))


def md5_differs(path: str, etag: str | None) -> bool:
    """True when ``etag`` is a single-part MD5 and the file's MD5 is another.

    What a download checks before it renames the file into place; a multipart ETag
    is not checked there (its part size is a guess)."""
    return bool(etag and _PLAIN_MD5.fullmatch(etag) and file_md5(path).hex() != etag)


def same_content(src: Location, src_info: FileInfo,
                 dst: Location, dst_info: FileInfo) -> bool:
    """Size must match; then compare hashes wherever one side offers one."""
    if src_info.size != dst_info.size:
        return False
    if src.remote and dst.remote:
        if src_info.etag and dst_info.etag:
            return src_info.etag == dst_info.etag
        return True
    if not src.remote and not dst.remote:
        return file_md5(src.path) == file_md5(dst.path)
    local, remote_info = (dst, src_info) if src.remote else (src, dst_info)
    verdict = local_matches_etag(local.path, remote_info.etag)
    return True if verdict is None else verdict
