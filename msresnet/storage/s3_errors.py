"""What botocore's and s3fs's exceptions mean, as :mod:`~msresnet.storage.errors` classes.

A failed request surfaces as a ``ClientError`` with a code, an HTTP status and an
operation name, often wrapped by s3fs in an ``OSError``; the caller wants to know
"bucket missing", "credentials rejected" or "endpoint unreachable" and which URL was
concerned. :func:`translate` walks the exception chain for the first cause it
recognises. botocore is imported only when there is something to translate.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from msresnet.storage.errors import (AccessDeniedError, BucketNotFoundError, CredentialsError,
                                     EndpointUnreachableError, ServerError, StagingError,
                                     TransferError, not_found)
from msresnet.storage.settings import StoreSettings
from msresnet.storage.urls import Location

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


def _client_error(err: Any, loc: Location, where: str) -> StagingError | None:
    """An S3 error answer (``ClientError``) by its code and HTTP status."""
    url = loc.shown
    code = str(err.response.get("Error", {}).get("Code", ""))
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code == "NoSuchBucket":
        return BucketNotFoundError(
            f"bucket {loc.bucket!r} does not exist at {where} ({url})", url)
    if code in ("NoSuchKey", "404", "NotFound") or status == 404:
        return not_found(url)
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


def translate(exc: BaseException, loc: Location, endpoint: str | None) -> StagingError | None:
    """Map botocore/s3fs/OS exceptions to one StagingError subclass naming the URL."""
    from botocore.exceptions import (ClientError, ConnectTimeoutError,
                                     EndpointConnectionError, NoCredentialsError,
                                     PartialCredentialsError, ReadTimeoutError)

    url = loc.shown
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
            return _client_error(err, loc, where)
    if isinstance(exc, FileNotFoundError) and not loc.remote:
        return not_found(url)
    return None


@contextmanager
def translated_errors(loc: Location, settings: StoreSettings | None = None) -> Iterator[None]:
    """Raise what :func:`translate` makes of an exception, or the exception itself."""
    try:
        yield
    except StagingError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated or re-raised
        translated = translate(exc, loc, settings.endpoint if settings else None)
        if translated is None:
            raise
        raise translated from exc
