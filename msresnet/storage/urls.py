"""Staging URLs: local paths, ``file://``, ``s3://`` (``s3a://``) and ``obs://``.

Every operation parses its URLs once, into a :class:`Location`, and works with that;
messages show :attr:`Location.shown`, from which a ``user:password@`` part is cut.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from msresnet.storage.errors import ConfigurationError

REMOTE_SCHEMES = ("s3", "s3a", "obs")


def redact(url: str) -> str:
    """Drop a user:password@ part from a URL before it goes into a message."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return url.replace(parts.netloc, "***@" + parts.netloc.rsplit("@", 1)[1], 1)
    return url


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

    @property
    def shown(self) -> str:
        """The URL as messages show it (no credentials)."""
        return redact(self.url)

    @property
    def scheme_url(self) -> str:
        """``scheme://bucket/key`` for a remote location, the local path otherwise."""
        return f"{self.scheme}://{self.path}" if self.remote else self.path

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
    if scheme not in REMOTE_SCHEMES:
        raise ConfigurationError(
            f"unsupported URL scheme {scheme!r} in {redact(text)!r}: "
            "use a local path, file://, s3:// or obs://", redact(text))
    if "@" in parts.netloc:
        raise ConfigurationError(
            f"credentials inside URLs are not supported ({redact(text)}); "
            "set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY instead", redact(text))
    if not parts.netloc:
        raise ConfigurationError(f"no bucket in {text!r}", text)
    return Location("s3" if scheme == "s3a" else scheme, parts.netloc,
                    parts.path.lstrip("/"), text)
