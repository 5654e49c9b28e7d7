"""Copy data between object storage (OBS, S3) and local disk, the way ModelArts jobs do.

A ModelArts training job receives ``--data_url`` and ``--train_url`` pointing at OBS,
copies the dataset to the node's local ``/cache`` with ``mox.file.copy_parallel``,
trains from local disk and copies checkpoints and logs back. MoXing is not public;
this module offers the same small API on top of fsspec/s3fs, which speak the S3
protocol that OBS (and MinIO, Ceph, AWS S3, ...) implements. Where ``import moxing``
works (on ModelArts, where the platform has already authorised it), the functions
hand remote work to ``moxing.file`` instead, so a job on ModelArts needs no AK/SK
and no s3fs (see :func:`backend` and ``MSRESNET_STAGING_BACKEND``):

``copy_parallel(src_url, dst_url)``  copy the files *inside* a folder into a folder
``copy(src_url, dst_url)``           copy one file
``exists``, ``is_directory``, ``list_directory(url, recursive=False)``,
``make_dirs``, ``remove(url, recursive=False)``

URLs are local paths, ``file://`` URLs, ``s3://bucket/key`` or ``obs://bucket/key``.
``obs://`` is the S3 protocol with the endpoint taken from ``S3_ENDPOINT``.

Configuration comes only from environment variables (see :data:`ENVIRONMENT`), so
credentials never pass through notebook parameters, command lines or config files,
and nothing in this module prints or stores them: botocore reads them from the
environment when it signs a request, and the filesystem objects built here do not
hold them (their ``repr`` shows the endpoint only).

Why copies are safe to repeat or interrupt:

* Idempotent: a file is skipped when the destination already has the same size and,
  where the store reports one, the same content hash (S3 ETag = MD5 for single-part
  uploads; for multipart uploads the MD5 of the part MD5s, recomputed locally).
* Local files are written to a hidden temporary name in the destination folder and
  renamed when complete (``os.replace`` is atomic), so a killed copy never leaves a
  truncated file under the final name.
* Uploads are single PUTs or multipart uploads; S3 stores make an object visible only
  when the PUT body is complete or ``CompleteMultipartUpload`` succeeds, so readers
  see the old object or the whole new one, never a prefix. (An interrupted multipart
  upload leaves invisible parts behind; s3fs aborts it on errors, and a bucket
  lifecycle rule "abort incomplete multipart uploads after N days" cleans up after
  killed processes.)
* Each request is retried by botocore (``S3_MAX_ATTEMPTS``, exponential backoff) and
  each file again by :func:`copy_parallel` (``retries``), while a missing bucket or
  key, rejected credentials and an unreachable endpoint fail at once with their own
  :class:`StagingError` subclass naming the URL. A server that keeps answering with
  an internal error (HTTP 5xx) after those retries ends in :class:`ServerError`,
  naming the URL, the S3 operation and the server's own message.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from types import ModuleType
from typing import TYPE_CHECKING

import fsspec
from fsspec.callbacks import Callback
from tqdm import tqdm

if TYPE_CHECKING:  # s3fs (and botocore) are imported only when a store is opened
    from s3fs import S3FileSystem

__all__ = [
    "ENVIRONMENT", "StagingError", "ConfigurationError", "CredentialsError",
    "AccessDeniedError", "BucketNotFoundError", "ObjectNotFoundError",
    "EndpointUnreachableError", "TransferError", "ServerError", "CopyResult",
    "StoreSettings", "ObsFileSystem", "copy", "copy_parallel", "exists", "is_directory",
    "list_directory", "file_sizes", "make_dirs", "remove", "filesystem", "backend",
    "moxing_file",
]

#: Every environment variable this module reads, and what it is for.
ENVIRONMENT: dict[str, str] = {
    "AWS_ACCESS_KEY_ID": "access key (OBS: the AK of your access key pair). Required.",
    "AWS_SECRET_ACCESS_KEY": "secret key (OBS: the SK). Required.",
    "AWS_SESSION_TOKEN": "security token of temporary credentials (optional).",
    "AWS_REGION": "signing region, e.g. cn-north-4 for OBS in Beijing-4 "
                  "(AWS_DEFAULT_REGION is read too).",
    "S3_ENDPOINT": "endpoint URL, e.g. https://obs.cn-north-4.myhuaweicloud.com; "
                   "required for obs:// (AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL also read).",
    "S3_ADDRESSING_STYLE": "path | virtual | auto (default auto: virtual-hosted buckets, "
                           "path style for IP-address endpoints such as 127.0.0.1).",
    "S3_VERIFY_SSL": "0 to skip TLS certificate checks (default 1; AWS_CA_BUNDLE "
                     "names a private CA instead).",
    "S3_CONNECT_TIMEOUT": "seconds to wait for a TCP connection (default 3).",
    "S3_READ_TIMEOUT": "seconds to wait for response data (default 60).",
    "S3_MAX_ATTEMPTS": "attempts per request incl. the first, with backoff (default 3).",
    "S3_ANONYMOUS": "1 for unsigned requests to public buckets (no credentials needed).",
    "MSRESNET_STAGING_BACKEND": "auto (default: MoXing when importable, else "
                                "fsspec/s3fs), moxing, or open (always fsspec/s3fs).",
}

#: Parts of multipart uploads; also used to recompute multipart ETags locally.
UPLOAD_PART_SIZE = 16 * 2**20
# Part sizes of common uploaders, tried when a multipart ETag has another part count:
# this module, aws cli / boto3 (8 MiB), s3fs (50 MiB), 5 MiB minimum, obsutil-like 9 MiB.
_KNOWN_PART_SIZES = (UPLOAD_PART_SIZE, 8 * 2**20, 50 * 2**20, 5 * 2**20, 9 * 2**20,
                     64 * 2**20, 100 * 2**20)
_TEMP_PATTERN = re.compile(r"^\..+\.staging-[0-9a-f]{8}\.part$")
_REMOTE_SCHEMES = ("s3", "s3a", "obs")


# --------------------------------------------------------------------------- errors
class StagingError(Exception):
    """Base of every error raised here; ``url`` is the location concerned."""

    def __init__(self, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class ConfigurationError(StagingError):
    """A URL or environment variable is malformed or missing (no request was sent)."""


class CredentialsError(StagingError):
    """Credentials are missing from the environment or the server rejected them."""


class AccessDeniedError(StagingError):
    """The server accepted the credentials but refused the operation (permissions)."""


class BucketNotFoundError(StagingError):
    """The bucket does not exist (at this endpoint)."""


class ObjectNotFoundError(StagingError):
    """No file or folder at this URL (the bucket exists)."""


class EndpointUnreachableError(StagingError):
    """No connection to the endpoint within the timeouts (DNS, refused, firewall)."""


class TransferError(StagingError):
    """A transfer kept failing after its retries."""


class ServerError(TransferError):
    """The store answered with an internal error (HTTP 5xx) on every retry.

    ``operation`` is the S3 operation (``GetObject``, ``ListObjectsV2``, ...),
    ``status`` the HTTP status and ``server_message`` what the server said, so a
    support ticket can quote them; the message names the URL as well.
    """

    def __init__(self, message: str, url: str | None = None, *, operation: str = "",
                 status: int | None = None, server_message: str = "") -> None:
        super().__init__(message, url)
        self.operation, self.status, self.server_message = operation, status, server_message


# ------------------------------------------------------------------------ settings
def _redact(url: str) -> str:
    """Drop a user:password@ part from a URL before it goes into a message."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return url.replace(parts.netloc, "***@" + parts.netloc.rsplit("@", 1)[1], 1)
    return url


@dataclass(frozen=True)
class StoreSettings:
    """Connection settings read from the environment. Holds no credential values."""

    endpoint: str | None
    region: str | None
    addressing_style: str
    verify_ssl: bool
    connect_timeout: float
    read_timeout: float
    max_attempts: int
    anonymous: bool

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StoreSettings:
        env = os.environ if environ is None else environ
        endpoint = (env.get("S3_ENDPOINT") or env.get("AWS_ENDPOINT_URL_S3")
                    or env.get("AWS_ENDPOINT_URL") or None)
        if endpoint:
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigurationError(
                    f"S3_ENDPOINT must be an http(s) URL such as "
                    f"https://obs.cn-north-4.myhuaweicloud.com, got {_redact(endpoint)!r}")
        style = env.get("S3_ADDRESSING_STYLE", "auto").strip().lower() or "auto"
        if style not in ("auto", "path", "virtual"):
            raise ConfigurationError(
                f"S3_ADDRESSING_STYLE must be path, virtual or auto, got {style!r}")

        def number(name: str, default: float) -> float:
            raw = env.get(name, "").strip()
            try:
                value = float(raw) if raw else default
            except ValueError:
                raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None
            if value <= 0:
                raise ConfigurationError(f"{name} must be positive, got {raw!r}")
            return value

        return cls(
            endpoint=endpoint.rstrip("/") if endpoint else None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            addressing_style=style,
            verify_ssl=env.get("S3_VERIFY_SSL", "1").strip().lower()
            not in ("0", "false", "no", "off"),
            connect_timeout=number("S3_CONNECT_TIMEOUT", 3.0),
            read_timeout=number("S3_READ_TIMEOUT", 60.0),
            max_attempts=int(number("S3_MAX_ATTEMPTS", 3)),
            anonymous=env.get("S3_ANONYMOUS", "").strip().lower() in ("1", "true", "yes"),
        )

    def effective_addressing_style(self) -> str:
        if self.addressing_style != "auto" or not self.endpoint:
            return self.addressing_style
        host = urlsplit(self.endpoint).hostname or ""
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return "path" if host == "localhost" else "auto"
        return "path"  # bucket.127.0.0.1 is not a host name


class _SafeRepr:
    """Filesystems built here never hold secrets; say so in their repr too."""

    retries = 3  # s3fs's own retries (dropped connections mid-response), besides botocore's

    def __repr__(self) -> str:  # pragma: no cover - trivial
        endpoint = getattr(self, "endpoint_url", None) or "AWS default"
        return f"{type(self).__name__}(endpoint={endpoint!r})"


_S3_CLASSES: dict[str, type] = {}


def _s3_classes() -> dict[str, type]:
    """The two filesystem classes, built on first use: importing s3fs pulls in
    botocore and aiobotocore, which a ModelArts job that uses MoXing never needs."""
    if not _S3_CLASSES:
        from s3fs import S3FileSystem

        class S3StagingFileSystem(_SafeRepr, S3FileSystem):
            """s3fs with a credential-free repr (credentials come from the environment)."""

        class ObsFileSystem(_SafeRepr, S3FileSystem):
            """``obs://`` URLs: the S3 protocol under its own protocol name.

            A plain alias (``fsspec.register_implementation("obs", S3FileSystem)``)
            would keep ``S3FileSystem.protocol == ("s3", "s3a")``, so
            ``obs://bucket/key`` would not be stripped and ``obs:`` would end up in
            the bucket name.
            """

            protocol = ("obs",)

        for cls in (S3StagingFileSystem, ObsFileSystem):
            cls.__module__, cls.__qualname__ = __name__, cls.__name__
            _S3_CLASSES[cls.__name__] = cls
    return _S3_CLASSES


def __getattr__(name: str) -> Any:
    """``staging.ObsFileSystem`` / ``staging.S3StagingFileSystem``, built lazily."""
    if name in ("ObsFileSystem", "S3StagingFileSystem"):
        return _s3_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# by name, so fsspec imports it (and s3fs) only when an obs:// URL is opened
fsspec.register_implementation("obs", f"{__name__}.ObsFileSystem", clobber=True)


_FILESYSTEMS: dict[tuple[Any, ...], S3FileSystem] = {}
_FILESYSTEMS_LOCK = threading.Lock()


def filesystem(scheme: str = "s3", settings: StoreSettings | None = None) -> S3FileSystem:
    """An S3 filesystem for ``s3``/``obs`` configured from the environment.

    Credentials are checked for presence here but not passed in: botocore reads them
    from ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN`` itself.
    Instances are reused (setting up a client costs a few hundred ms) while the
    settings, the credentials (compared by a hash kept in memory only) and the
    process stay the same.
    """
    settings = settings or StoreSettings.from_env()
    fingerprint = hashlib.sha256("\0".join(
        os.environ.get(name, "") for name in
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")).encode()).digest()
    cache_key = (scheme, settings, fingerprint, os.getpid())
    with _FILESYSTEMS_LOCK:
        cached = _FILESYSTEMS.get(cache_key)
    if cached is not None:
        return cached
    fs = _new_filesystem(scheme, settings)
    with _FILESYSTEMS_LOCK:
        if len(_FILESYSTEMS) > 16:
            _FILESYSTEMS.clear()
        return _FILESYSTEMS.setdefault(cache_key, fs)


def _new_filesystem(scheme: str, settings: StoreSettings) -> S3FileSystem:
    if scheme == "obs" and not settings.endpoint:
        raise ConfigurationError(
            "obs:// URLs need S3_ENDPOINT, e.g. https://obs.cn-north-4.myhuaweicloud.com")
    if not settings.anonymous:
        missing = [name for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
                   if not os.environ.get(name)]
        if missing:
            raise CredentialsError(
                f"no credentials: set {' and '.join(missing)} in the environment "
                f"(OBS: your AK and SK), or S3_ANONYMOUS=1 for a public bucket")
    config: dict[str, Any] = {
        "connect_timeout": settings.connect_timeout,
        "read_timeout": settings.read_timeout,
        "retries": {"total_max_attempts": settings.max_attempts, "mode": "standard"},
        "s3": {"addressing_style": settings.effective_addressing_style()},
    }
    if settings.endpoint:
        # botocore >= 1.36 adds CRC checksums to every upload by default; many
        # S3-compatible stores (OBS, older MinIO/Ceph) reject or ignore them.
        config["request_checksum_calculation"] = os.environ.get(
            "AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
        config["response_checksum_validation"] = os.environ.get(
            "AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
    client: dict[str, Any] = {}
    if settings.region:
        client["region_name"] = settings.region
    if not settings.verify_ssl:
        client["verify"] = False
    cls = _s3_classes()["ObsFileSystem" if scheme == "obs" else "S3StagingFileSystem"]
    return cls(
        anon=settings.anonymous,
        endpoint_url=settings.endpoint,
        client_kwargs=client,
        config_kwargs=config,
        use_listings_cache=False,
        skip_instance_cache=True,
    )


# --------------------------------------------------------------------------- URLs
@dataclass(frozen=True)
class Location:
    """A parsed URL: ``scheme`` is "file", "s3" or "obs"."""

    scheme: str
    bucket: str
    key: str  # local: absolute path; remote: key without leading "/" ("" = bucket root)
    url: str  # as given, for messages

    @property
    def remote(self) -> bool:
        return self.scheme != "file"

    @property
    def path(self) -> str:
        """Local path, or the ``bucket/key`` path s3fs expects."""
        return self.key if not self.remote else f"{self.bucket}/{self.key}".rstrip("/")

    def child(self, relative: str) -> Location:
        """The file ``relative`` below this folder (its ``url`` names the file)."""
        if not self.remote:
            path = os.path.join(self.key, *relative.split("/"))
            return Location("file", "", path, path)
        key = f"{self.key.rstrip('/')}/{relative}" if self.key.strip("/") else relative
        return Location(self.scheme, self.bucket, key, f"{self.url.rstrip('/')}/{relative}")


def parse_url(url: str | os.PathLike[str]) -> Location:
    """Split a URL into scheme, bucket and key; local paths become absolute."""
    text = os.fspath(url)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        local = parts.path if scheme == "file" else text
        return Location("file", "", os.path.abspath(os.path.expanduser(local)), text)
    if scheme not in _REMOTE_SCHEMES:
        raise ConfigurationError(
            f"unsupported URL scheme {scheme!r} in {_redact(text)!r}: "
            "use a local path, file://, s3:// or obs://", _redact(text))
    if "@" in parts.netloc:
        raise ConfigurationError(
            f"credentials inside URLs are not supported ({_redact(text)}); "
            "set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY instead", _redact(text))
    if not parts.netloc:
        raise ConfigurationError(f"no bucket in {text!r}", text)
    return Location("s3" if scheme == "s3a" else scheme, parts.netloc,
                    parts.path.lstrip("/"), text)


# ----------------------------------------------------------------- error mapping
_CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
                     "ExpiredToken", "TokenRefreshRequired", "InvalidSecurity",
                     "AuthorizationHeaderMalformed"}


def _exception_chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _translate(exc: BaseException, loc: Location, endpoint: str | None) -> StagingError | None:
    """Map botocore/s3fs/OS exceptions to one StagingError subclass naming the URL."""
    from botocore.exceptions import (ClientError, ConnectTimeoutError,
                                     EndpointConnectionError, NoCredentialsError,
                                     PartialCredentialsError, ReadTimeoutError)

    url = _redact(loc.url)
    where = endpoint or "the default AWS endpoint"
    for err in _exception_chain(exc):
        if isinstance(err, StagingError):
            return err
        if isinstance(err, (NoCredentialsError, PartialCredentialsError)):
            return CredentialsError(f"no usable credentials for {url}: set "
                                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", url)
        if isinstance(err, (EndpointConnectionError, ConnectTimeoutError)):
            return EndpointUnreachableError(
                f"cannot reach {where} for {url} ({type(err).__name__}); check "
                "S3_ENDPOINT, the network and S3_CONNECT_TIMEOUT", url)
        if isinstance(err, ReadTimeoutError):
            return TransferError(f"{where} stopped answering for {url} "
                                 "(read timeout; see S3_READ_TIMEOUT)", url)
        if isinstance(err, ClientError):
            error = err.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "NoSuchBucket":
                return BucketNotFoundError(
                    f"bucket {loc.bucket!r} does not exist at {where} ({url})", url)
            if code in ("NoSuchKey", "404", "NotFound") or status == 404:
                return ObjectNotFoundError(f"no such file or folder: {url}", url)
            if code in _CREDENTIAL_CODES:
                return CredentialsError(
                    f"{where} rejected the credentials for {url} ({code}): check "
                    "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (OBS: AK / SK), "
                    "AWS_SESSION_TOKEN and AWS_REGION", url)
            if code in ("AccessDenied", "403", "AllAccessDisabled") or status == 403:
                return AccessDeniedError(
                    f"access denied to {url} by {where} ({code or status}): the "
                    "credentials lack permission, or were rejected", url)
            if isinstance(status, int) and status >= 500:
                return _server_error(err, url, where)
            return None
    if isinstance(exc, FileNotFoundError) and not loc.remote:
        return ObjectNotFoundError(f"no such file or folder: {url}", url)
    return None


def _server_error(err: Any, url: str, where: str) -> ServerError:
    """A 5xx answer that outlived botocore's retries (S3_MAX_ATTEMPTS)."""
    error = err.response.get("Error", {})
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = str(error.get("Code") or status)
    operation = str(getattr(err, "operation_name", "") or "request")
    said = str(error.get("Message") or "").strip() or "(no message)"
    return ServerError(
        f"{where} answered {operation} for {url} with HTTP {status} {code} on every "
        f"attempt: {said}", url, operation=operation, status=status, server_message=said)


@contextmanager
def _errors(loc: Location, settings: StoreSettings | None = None) -> Iterator[None]:
    try:
        yield
    except StagingError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated or re-raised
        translated = _translate(exc, loc, settings.endpoint if settings else None)
        if translated is None:
            raise
        raise translated from exc


# ----------------------------------------------------------------- file metadata
@dataclass(frozen=True)
class FileInfo:
    size: int
    etag: str | None = None  # remote only, without quotes


def _md5(path: str, start: int = 0, length: int | None = None) -> bytes:
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
    digests = b"".join(_md5(path, i * part_size, part_size) for i in range(parts))
    return f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{parts}"


def local_matches_etag(path: str, etag: str | None) -> bool | None:
    """True/False when the ETag can be checked against the local file, else None."""
    if not etag:
        return None
    if re.fullmatch(r"[0-9a-f]{32}", etag):
        return _md5(path).hex() == etag
    match = re.fullmatch(r"[0-9a-f]{32}-(\d+)", etag)
    if not match:
        return None  # e.g. SSE-KMS or a store with its own ETag scheme
    parts, size = int(match.group(1)), os.path.getsize(path)
    candidates = [p for p in _KNOWN_PART_SIZES if max(1, math.ceil(size / p)) == parts]
    if not candidates:
        return None
    return any(multipart_etag(path, p) == etag for p in dict.fromkeys(candidates))


def _same_content(src: Location, src_info: FileInfo, dst: Location, dst_info: FileInfo) -> bool:
    """Size must match; then compare hashes wherever one side offers one."""
    if src_info.size != dst_info.size:
        return False
    if src.remote and dst.remote:
        if src_info.etag and dst_info.etag:
            return src_info.etag == dst_info.etag
        return True
    if not src.remote and not dst.remote:
        return _md5(src.path) == _md5(dst.path)
    local, remote_info = (dst, src_info) if src.remote else (src, dst_info)
    verdict = local_matches_etag(local.path, remote_info.etag)
    return True if verdict is None else verdict


def _is_temp(name: str) -> bool:
    return bool(_TEMP_PATTERN.match(name))


# ---------------------------------------------------------------- store access
class _Store:
    """What the copy needs from one side: listing, stat, and its filesystem."""

    def __init__(self, loc: Location, settings: StoreSettings) -> None:
        self.loc = loc
        self.settings = settings
        self.fs = filesystem(loc.scheme, settings) if loc.remote else None

    # -- remote helpers
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

    def _folder_prefix(self) -> str:
        key = self.loc.key.rstrip("/")
        return f"{key}/" if key else ""

    # -- both kinds
    def file_info(self, loc: Location | None = None) -> FileInfo | None:
        loc = loc or self.loc
        if not loc.remote:
            try:
                st = os.stat(loc.path)
            except FileNotFoundError:
                return None
            return FileInfo(st.st_size) if os.path.isfile(loc.path) else None
        if not loc.key or loc.key.endswith("/"):
            return None
        assert self.fs is not None
        try:
            head = self.fs.call_s3("head_object", Bucket=loc.bucket, Key=loc.key)
        except Exception as exc:  # noqa: BLE001
            translated = _translate(exc, loc, self.settings.endpoint)
            if isinstance(translated, ObjectNotFoundError):
                return None
            raise
        return FileInfo(int(head["ContentLength"]), str(head.get("ETag", "")).strip('"') or None)

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
        found: dict[str, FileInfo] = {}
        if not self.loc.remote:
            root = self.loc.path
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not _is_temp(d))
                for name in files:
                    if _is_temp(name):
                        continue
                    full = os.path.join(folder, name)
                    rel = os.path.relpath(full, root).replace(os.sep, "/")
                    found[rel] = FileInfo(os.path.getsize(full))
            return found
        prefix = self._folder_prefix()
        for page in self._list(prefix):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key.endswith("/"):
                    continue  # "folder" marker objects made by consoles
                found[key[len(prefix):]] = FileInfo(
                    int(obj["Size"]), str(obj.get("ETag", "")).strip('"') or None)
        return found

    def children(self) -> list[str]:
        if not self.loc.remote:
            return sorted(n for n in os.listdir(self.loc.path) if not _is_temp(n))
        prefix = self._folder_prefix()
        names: set[str] = set()
        for page in self._list(prefix, delimiter="/"):
            names.update(p["Prefix"][len(prefix):].rstrip("/")
                         for p in page.get("CommonPrefixes", []))
            names.update(o["Key"][len(prefix):] for o in page.get("Contents", [])
                         if o["Key"] != prefix)
        return sorted(n for n in names if n)


# ------------------------------------------------------------------- transfers
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


class _Progress(Callback):
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


def _temp_name(target: str) -> str:
    """A hidden temporary name beside ``target`` that listings skip (``_is_temp``).

    Not :mod:`msresnet.atomic`'s recipe: a staged file must stay out of the folder
    listings an upload makes while it is written, and it is not ``fsync``'ed (a copy
    from object storage can be fetched again; what readers need is never to see
    half a file, which the rename gives)."""
    folder, name = os.path.split(target)
    return os.path.join(folder, f".{name}.staging-{uuid.uuid4().hex[:8]}.part")


def _clear_stale_temps(target: str) -> None:
    folder, name = os.path.split(target)
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.startswith(f".{name}.staging-") and _is_temp(entry):
            try:
                os.remove(os.path.join(folder, entry))
            except FileNotFoundError:
                pass


def _copy_local(src: str, dst: str, progress: _Progress) -> None:
    with open(src, "rb") as reader, open(dst, "wb") as writer:
        while block := reader.read(4 * 2**20):
            writer.write(block)
            progress.relative_update(len(block))


def _transfer(src: _Store, src_loc: Location, src_info: FileInfo,
              dst: _Store, dst_loc: Location, progress: _Progress) -> None:
    """Copy one file; local destinations appear only when complete."""
    if not dst_loc.remote:
        os.makedirs(os.path.dirname(dst_loc.path), exist_ok=True)
        _clear_stale_temps(dst_loc.path)
        temp = _temp_name(dst_loc.path)
        try:
            if src_loc.remote:
                assert src.fs is not None
                src.fs.get_file(src_loc.path, temp, callback=progress)
            else:
                _copy_local(src_loc.path, temp, progress)
            got = os.path.getsize(temp)
            if got != src_info.size:
                raise TransferError(f"{src_loc.url}: got {got} of {src_info.size} bytes",
                                    src_loc.url)
            if src_info.etag and re.fullmatch(r"[0-9a-f]{32}", src_info.etag):
                if _md5(temp).hex() != src_info.etag:
                    raise TransferError(f"{src_loc.url}: MD5 differs from the ETag",
                                        src_loc.url)
            os.replace(temp, dst_loc.path)  # atomic: the final name only ever holds a whole file
        finally:
            if os.path.exists(temp):
                os.remove(temp)
        return
    assert dst.fs is not None
    if not src_loc.remote:
        dst.fs.put_file(src_loc.path, dst_loc.path, callback=progress,
                        chunksize=UPLOAD_PART_SIZE)
    elif src.fs is not None and type(src.fs) is type(dst.fs) and src.settings == dst.settings:
        dst.fs.copy(src_loc.path, dst_loc.path)  # server-side copy, no bytes through here
        progress.relative_update(src_info.size)
    else:  # different stores: go through a local temporary file
        import tempfile

        with tempfile.TemporaryDirectory(prefix="msresnet-staging-") as scratch:
            temp = os.path.join(scratch, "object")
            assert src.fs is not None
            src.fs.get_file(src_loc.path, temp)
            dst.fs.put_file(temp, dst_loc.path, chunksize=UPLOAD_PART_SIZE)
        progress.relative_update(src_info.size)


_PERMANENT = (ConfigurationError, CredentialsError, AccessDeniedError,
              BucketNotFoundError, ObjectNotFoundError)


def _default_progress() -> bool:
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def _run_copy(pairs: list[tuple[str, FileInfo]], src: _Store, dst: _Store,
              existing: dict[str, FileInfo], result: CopyResult, *, threads: int,
              retries: int, progress: bool, single: bool) -> None:
    todo: list[tuple[str, FileInfo]] = []
    for rel, info in pairs:
        src_loc = src.loc if single else src.loc.child(rel)
        dst_loc = dst.loc if single else dst.loc.child(rel)
        have = existing.get(rel)
        if have is not None and _same_content(src_loc, info, dst_loc, have):
            result.skipped += 1
            result.skipped_bytes += info.size
        else:
            todo.append((rel, info))
    total = sum(info.size for _, info in todo)
    lock = threading.Lock()
    bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
               desc=f"copy {len(todo)} files", disable=not progress or not todo,
               file=sys.stderr, mininterval=0.5)

    def one(rel: str, info: FileInfo) -> None:
        src_loc = src.loc if single else src.loc.child(rel)
        dst_loc = dst.loc if single else dst.loc.child(rel)
        meter = _Progress(bar, lock)
        for attempt in range(retries + 1):
            try:
                with _errors(src_loc if src_loc.remote else dst_loc, dst.settings):
                    _transfer(src, src_loc, info, dst, dst_loc, meter)
                break
            except _PERMANENT:
                meter.undo()
                raise
            except Exception as exc:  # noqa: BLE001 - transient: retry with backoff
                meter.undo()
                if attempt == retries and isinstance(exc, ServerError):
                    raise ServerError(
                        f"copying {_redact(src_loc.url)} to {_redact(dst_loc.url)} failed "
                        f"after {retries + 1} attempts: {exc}", exc.url,
                        operation=exc.operation, status=exc.status,
                        server_message=exc.server_message) from exc
                if attempt == retries:
                    raise TransferError(
                        f"copying {_redact(src_loc.url)} to {_redact(dst_loc.url)} failed "
                        f"after {retries + 1} attempts: {type(exc).__name__}: {exc}",
                        src_loc.url) from exc
                with lock:
                    result.retried += 1
                time.sleep(min(0.5 * 2**attempt, 8.0))
        with lock:
            result.copied += 1
            result.bytes += info.size
            result.copied_files.append(rel)
            bar.set_postfix_str(f"{result.copied}/{len(todo)} files", refresh=False)

    try:
        with ThreadPoolExecutor(max_workers=max(1, threads),
                                thread_name_prefix="staging") as pool:
            futures = [pool.submit(one, rel, info) for rel, info in todo]
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for future in pending:
                future.cancel()
            for future in done:
                if future.exception() is not None:
                    raise future.exception()  # type: ignore[misc]
    finally:
        bar.close()
    result.copied_files.sort()


# ---------------------------------------------------------------------- MoXing
def moxing_file() -> ModuleType | None:
    """``moxing.file`` when remote work goes to MoXing, else None (fsspec/s3fs).

    ``MSRESNET_STAGING_BACKEND`` decides: ``auto`` (default) uses MoXing whenever
    ``import moxing`` works - on ModelArts, where the platform has authorised it,
    so no AK/SK is needed - ``moxing`` insists on it, ``open`` never uses it.
    """
    choice = os.environ.get("MSRESNET_STAGING_BACKEND", "").strip().lower() or "auto"
    if choice not in ("auto", "moxing", "open"):
        raise ConfigurationError(
            f"MSRESNET_STAGING_BACKEND must be auto, moxing or open, got {choice!r}")
    if choice == "open":
        return None
    try:
        import moxing
    except ImportError:
        if choice == "moxing":
            raise ConfigurationError(
                "MSRESNET_STAGING_BACKEND=moxing, but `import moxing` fails (MoXing "
                "is installed on ModelArts only)") from None
        return None
    return moxing.file  # type: ignore[no-any-return]


def backend() -> str:
    """``"moxing"`` or ``"open"``: who handles obs:// and s3:// URLs here."""
    return "open" if moxing_file() is None else "moxing"


def _mox_for(*locs: Location) -> ModuleType | None:
    """MoXing, if it is to be used and one of the locations is remote."""
    return moxing_file() if any(loc.remote for loc in locs) else None


def _mox_url(loc: Location) -> str:
    return f"{loc.scheme}://{loc.path}" if loc.remote else loc.path


def _mox_call(mox: ModuleType, operation: str, loc: Location, *args: Any,
              **kwargs: Any) -> Any:
    """Call ``mox.file.<operation>``; its errors become StagingErrors naming the URL."""
    try:
        return getattr(mox, operation)(*args, **kwargs)
    except StagingError:
        raise
    except Exception as exc:  # noqa: BLE001 - MoXing's own exception classes
        url = _redact(loc.url)
        name = type(exc).__name__
        text = f"MoXing {operation} failed for {url}: {name}: {exc}"
        if isinstance(exc, FileNotFoundError) or "NotExist" in name or "NotFound" in name:
            raise ObjectNotFoundError(text, url) from exc
        raise TransferError(text, url) from exc


def _local_files(root: str) -> dict[str, int]:
    return {rel: info.size for rel, info in
            _Store(Location("file", "", root, root), StoreSettings.from_env({})).walk_files().items()}


def _mox_copy_parallel(mox: ModuleType, src: Location, dst: Location,
                       result: CopyResult) -> CopyResult:
    """``mox.file.copy_parallel`` with this module's guarantee kept for local
    destinations: files land in a hidden folder first and are renamed into place."""
    if not dst.remote:
        os.makedirs(dst.path, exist_ok=True)
        for entry in os.listdir(dst.path):  # left by a killed earlier download
            if entry.startswith(".moxing.staging-") and _is_temp(entry):
                shutil.rmtree(os.path.join(dst.path, entry), ignore_errors=True)
        scratch = os.path.join(dst.path, f".moxing.staging-{uuid.uuid4().hex[:8]}.part")
        try:
            _mox_call(mox, "copy_parallel", src, _mox_url(src), scratch)
            files = _local_files(scratch)
            for rel in sorted(files):
                target = os.path.join(dst.path, *rel.split("/"))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.replace(os.path.join(scratch, *rel.split("/")), target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    else:
        if not src.remote:
            files = _local_files(src.path)
        _mox_call(mox, "copy_parallel", src, _mox_url(src), _mox_url(dst))
        if src.remote:
            names = _mox_call(mox, "list_directory", dst, _mox_url(dst), recursive=True)
            files = {name: 0 for name in names}
            result.bytes = int(_mox_call(mox, "get_size", src, _mox_url(src), recursive=True))
    result.copied = len(files)
    result.bytes = result.bytes or sum(files.values())
    result.copied_files = sorted(files)
    return result


def _mox_copy(mox: ModuleType, src: Location, dst: Location, result: CopyResult) -> CopyResult:
    """``mox.file.copy`` of one file; a local destination appears only when complete."""
    if not _mox_call(mox, "exists", src, _mox_url(src)):
        raise ObjectNotFoundError(f"no such file or folder: {_redact(src.url)}",
                                  _redact(src.url))
    if not dst.remote:
        os.makedirs(os.path.dirname(dst.path), exist_ok=True)
        _clear_stale_temps(dst.path)
        temp = _temp_name(dst.path)
        try:
            _mox_call(mox, "copy", src, _mox_url(src), temp)
            os.replace(temp, dst.path)
        finally:
            if os.path.exists(temp):
                os.remove(temp)
        result.bytes = os.path.getsize(dst.path)
    else:
        _mox_call(mox, "copy", src, _mox_url(src), _mox_url(dst))
        result.bytes = (os.path.getsize(src.path) if not src.remote else
                        int(_mox_call(mox, "get_size", src, _mox_url(src))))
    result.copied, result.copied_files = 1, [""]
    return result


def copy_parallel(src_url: str | os.PathLike[str], dst_url: str | os.PathLike[str], *,
                  threads: int = 8, retries: int = 3, progress: bool | None = None
                  ) -> CopyResult:
    """Copy every file inside folder ``src_url`` into folder ``dst_url`` (like
    ``mox.file.copy_parallel``), ``threads`` files at a time, skipping files the
    destination already holds. A file ``src_url`` is copied as :func:`copy` would.
    """
    started = time.perf_counter()
    settings = StoreSettings.from_env()
    src_loc, dst_loc = parse_url(src_url), parse_url(dst_url)
    result = CopyResult(_redact(src_loc.url), _redact(dst_loc.url))
    mox = _mox_for(src_loc, dst_loc)
    if mox is not None:
        if _mox_call(mox, "is_directory", src_loc, _mox_url(src_loc)):
            _mox_copy_parallel(mox, src_loc, dst_loc, result)
        else:
            _mox_copy(mox, src_loc, dst_loc, result)
        result.seconds = time.perf_counter() - started
        return result
    with _errors(src_loc, settings):
        src = _Store(src_loc, settings)
        if src_loc.remote:
            src.check_bucket()
        is_folder = src.is_folder()
    if not is_folder:
        single = copy(src_url, dst_url, progress=progress, retries=retries)
        single.seconds = time.perf_counter() - started
        return single
    with _errors(dst_loc, settings):
        dst = _Store(dst_loc, settings)
        if dst_loc.remote:
            dst.check_bucket()
        elif os.path.isfile(dst_loc.path):
            raise ConfigurationError(f"destination {dst_loc.url} is a file, not a folder",
                                     dst_loc.url)
    with _errors(src_loc, settings):
        files = src.walk_files()
    with _errors(dst_loc, settings):
        existing = dst.walk_files() if (dst_loc.remote or os.path.isdir(dst_loc.path)) else {}
    _run_copy(sorted(files.items()), src, dst, existing, result, threads=threads,
              retries=retries, single=False,
              progress=_default_progress() if progress is None else progress)
    result.seconds = time.perf_counter() - started
    return result


def copy(src_url: str | os.PathLike[str], dst_url: str | os.PathLike[str], *,
         progress: bool | None = False, retries: int = 3) -> CopyResult:
    """Copy one file to ``dst_url`` (a file name, not a folder); skip it if identical."""
    started = time.perf_counter()
    settings = StoreSettings.from_env()
    src_loc, dst_loc = parse_url(src_url), parse_url(dst_url)
    result = CopyResult(_redact(src_loc.url), _redact(dst_loc.url))
    mox = _mox_for(src_loc, dst_loc)
    if mox is not None:
        if _mox_call(mox, "is_directory", src_loc, _mox_url(src_loc)):
            raise ConfigurationError(
                f"{src_loc.url} is a folder: use copy_parallel()", src_loc.url)
        _mox_copy(mox, src_loc, dst_loc, result)
        result.seconds = time.perf_counter() - started
        return result
    with _errors(src_loc, settings):
        src = _Store(src_loc, settings)
        if src_loc.remote:
            src.check_bucket()
        info = src.file_info()
        if info is None:
            if src.is_folder():
                raise ConfigurationError(
                    f"{src_loc.url} is a folder: use copy_parallel()", src_loc.url)
            raise ObjectNotFoundError(f"no such file or folder: {_redact(src_loc.url)}",
                                      _redact(src_loc.url))
    with _errors(dst_loc, settings):
        dst = _Store(dst_loc, settings)
        if dst_loc.remote:
            dst.check_bucket()
        elif os.path.isdir(dst_loc.path):
            raise ConfigurationError(
                f"destination {dst_loc.url} is a folder: give the file name", dst_loc.url)
        have = dst.file_info()
    existing = {"": have} if have is not None else {}
    _run_copy([("", info)], src, dst, existing, result, threads=1, retries=retries,
              single=True, progress=_default_progress() if progress is None else progress)
    result.seconds = time.perf_counter() - started
    return result


# ----------------------------------------------------------- small file system API
def exists(url: str | os.PathLike[str]) -> bool:
    """True if a file or folder is at ``url`` (False for a missing bucket)."""
    settings = StoreSettings.from_env()
    loc = parse_url(url)
    if not loc.remote:
        return os.path.exists(loc.path)
    if (mox := _mox_for(loc)) is not None:
        return bool(_mox_call(mox, "exists", loc, _mox_url(loc)))
    with _errors(loc, settings):
        store = _Store(loc, settings)
        try:
            store.check_bucket()
        except Exception as exc:  # noqa: BLE001
            if isinstance(_translate(exc, loc, settings.endpoint), BucketNotFoundError):
                return False
            raise
        return store.file_info() is not None or store.is_folder()


def is_directory(url: str | os.PathLike[str]) -> bool:
    """True for a local folder, a bucket, or a key prefix with objects below it."""
    settings = StoreSettings.from_env()
    loc = parse_url(url)
    if (mox := _mox_for(loc)) is not None:
        return bool(_mox_call(mox, "is_directory", loc, _mox_url(loc)))
    with _errors(loc, settings):
        return _Store(loc, settings).is_folder()


def list_directory(url: str | os.PathLike[str], recursive: bool = False) -> list[str]:
    """Sorted names relative to ``url``: its files and sub-folders, or with
    ``recursive=True`` every file below it (``a/b.bin``)."""
    settings = StoreSettings.from_env()
    loc = parse_url(url)
    if (mox := _mox_for(loc)) is not None:
        if not _mox_call(mox, "is_directory", loc, _mox_url(loc)):
            raise ObjectNotFoundError(f"no such folder: {_redact(loc.url)}", _redact(loc.url))
        return sorted(_mox_call(mox, "list_directory", loc, _mox_url(loc),
                                recursive=recursive))
    with _errors(loc, settings):
        store = _Store(loc, settings)
        if not store.is_folder():
            if store.file_info() is not None:
                raise ConfigurationError(f"{loc.url} is a file, not a folder", loc.url)
            raise ObjectNotFoundError(f"no such folder: {_redact(loc.url)}", _redact(loc.url))
        return sorted(store.walk_files()) if recursive else store.children()


def file_sizes(url: str | os.PathLike[str]) -> dict[str, int]:
    """``{relative name: bytes}`` for every file below folder ``url`` (one listing
    request per 1,000 objects on a store; no per-file requests; with MoXing, one
    size request per file)."""
    settings = StoreSettings.from_env()
    loc = parse_url(url)
    if (mox := _mox_for(loc)) is not None:
        sizes = {}
        for name in list_directory(url, recursive=True):
            child = loc.child(name)
            if not _mox_call(mox, "is_directory", child, _mox_url(child)):
                sizes[name] = int(_mox_call(mox, "get_size", child, _mox_url(child)))
        return sizes
    with _errors(loc, settings):
        store = _Store(loc, settings)
        if not store.is_folder():
            raise ObjectNotFoundError(f"no such folder: {_redact(loc.url)}", _redact(loc.url))
        return {name: info.size for name, info in sorted(store.walk_files().items())}


def make_dirs(url: str | os.PathLike[str]) -> None:
    """Create a local folder (with parents), or a bucket for ``s3://bucket``.

    Object stores have no folders below the bucket: for ``s3://bucket/prefix`` this
    only checks that the bucket exists (raising :class:`BucketNotFoundError`).
    """
    settings = StoreSettings.from_env()
    loc = parse_url(url)
    if not loc.remote:
        try:
            os.makedirs(loc.path, exist_ok=True)
        except FileExistsError:
            raise ConfigurationError(f"{loc.url} exists and is a file", loc.url) from None
        return
    if (mox := _mox_for(loc)) is not None:
        _mox_call(mox, "make_dirs", loc, _mox_url(loc))
        return
    with _errors(loc, settings):
        store = _Store(loc, settings)
        if loc.key.strip("/"):
            store.check_bucket()
            return
        try:
            store.check_bucket()
            return
        except BucketNotFoundError:
            pass
        except Exception as exc:  # noqa: BLE001
            if not isinstance(_translate(exc, loc, settings.endpoint), BucketNotFoundError):
                raise
        params: dict[str, Any] = {"Bucket": loc.bucket}
        if settings.region and settings.region != "us-east-1":
            params["CreateBucketConfiguration"] = {"LocationConstraint": settings.region}
        assert store.fs is not None
        store.fs.call_s3("create_bucket", **params)


def remove(url: str | os.PathLike[str], recursive: bool = False) -> None:
    """Delete a file, or with ``recursive=True`` a folder and everything below it."""
    settings = StoreSettings.from_env()
    loc = parse_url(url)
    if (mox := _mox_for(loc)) is not None:
        if not recursive and _mox_call(mox, "is_directory", loc, _mox_url(loc)):
            raise ConfigurationError(f"{loc.url} is a folder: pass recursive=True", loc.url)
        if not _mox_call(mox, "exists", loc, _mox_url(loc)):
            raise ObjectNotFoundError(f"no such file or folder: {_redact(loc.url)}",
                                      _redact(loc.url))
        _mox_call(mox, "remove", loc, _mox_url(loc), recursive=recursive)
        return
    with _errors(loc, settings):
        store = _Store(loc, settings)
        if not loc.remote:
            if os.path.isdir(loc.path):
                if not recursive:
                    raise ConfigurationError(
                        f"{loc.url} is a folder: pass recursive=True", loc.url)
                shutil.rmtree(loc.path)
            else:
                os.remove(loc.path)
            return
        store.check_bucket()
        assert store.fs is not None
        if store.file_info() is not None:
            store.fs.rm_file(loc.path)
        elif store.is_folder():
            if not recursive:
                raise ConfigurationError(f"{loc.url} is a folder: pass recursive=True",
                                         loc.url)
            store.fs.rm(loc.path, recursive=True)
        else:
            raise ObjectNotFoundError(f"no such file or folder: {_redact(loc.url)}",
                                      _redact(loc.url))


def describe_environment() -> list[tuple[str, str, str]]:
    """(variable, is it set?, purpose) rows - values are never shown."""
    return [(name, "set" if os.environ.get(name) else "-", purpose)
            for name, purpose in ENVIRONMENT.items()]
