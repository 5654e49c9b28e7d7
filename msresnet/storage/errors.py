"""The errors of staging: one class per cause, each naming the URL concerned.

A caller (the job, a notebook) tells a missing bucket from rejected credentials by
the class, not by parsing a message, and a message never holds a credential. The
causes no retry can mend are :data:`PERMANENT`: a copy stops at once on them.
"""

from __future__ import annotations


class StagingError(Exception):
    """Base of every staging error; ``url`` is the location concerned."""

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


#: Errors that a retry cannot mend: a copy gives up on them at once.
PERMANENT = (ConfigurationError, CredentialsError, AccessDeniedError,
             BucketNotFoundError, ObjectNotFoundError)


def not_found(url: str, what: str = "file or folder") -> ObjectNotFoundError:
    """The one wording of "nothing there" (``url`` already redacted)."""
    return ObjectNotFoundError(f"no such {what}: {url}", url)


def is_a_folder(url: str, hint: str) -> ConfigurationError:
    """A folder where the operation wants a file, with what to do instead."""
    return ConfigurationError(f"{url} is a folder: {hint}", url)
