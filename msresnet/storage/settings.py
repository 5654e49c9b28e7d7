"""Staging's configuration: environment variables only, credentials never kept.

Credentials do not pass through notebook parameters, command lines or config files,
and nothing here prints or stores them: :class:`StoreSettings` holds the connection
settings but no credential value, botocore reads the keys from the environment when
it signs a request, and what this module offers about them is whether they are set
(:func:`missing_credentials`) and a hash to notice that they changed
(:func:`credentials_fingerprint`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from msresnet.storage.errors import ConfigurationError
from msresnet.storage.urls import redact

#: The variable that chooses who handles remote URLs (see ``staging.BACKENDS``).
BACKEND_VARIABLE = "MSRESNET_STAGING_BACKEND"

#: Every environment variable staging reads, and what it is for.
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
    BACKEND_VARIABLE: "auto (default: MoXing when importable, else "
                      "fsspec/s3fs), moxing, or open (always fsspec/s3fs).",
}

REQUIRED_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
CREDENTIAL_VARIABLES = (*REQUIRED_CREDENTIALS, "AWS_SESSION_TOKEN")


def missing_credentials(environ: Mapping[str, str] | None = None) -> list[str]:
    """The required credential variables that are not set (names only)."""
    env = os.environ if environ is None else environ
    return [name for name in REQUIRED_CREDENTIALS if not env.get(name)]


def credentials_fingerprint() -> bytes:
    """A hash of the credentials, kept in memory to notice that they changed."""
    text = "\0".join(os.environ.get(name, "") for name in CREDENTIAL_VARIABLES)
    return hashlib.sha256(text.encode()).digest()


def describe_environment() -> list[tuple[str, str, str]]:
    """(variable, is it set?, purpose) rows - values are never shown."""
    return [(name, "set" if os.environ.get(name) else "-", purpose)
            for name, purpose in ENVIRONMENT.items()]


def _positive_number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None
    if value <= 0:
        raise ConfigurationError(f"{name} must be positive, got {raw!r}")
    return value


def _endpoint(env: Mapping[str, str]) -> str | None:
    endpoint = (env.get("S3_ENDPOINT") or env.get("AWS_ENDPOINT_URL_S3")
                or env.get("AWS_ENDPOINT_URL") or None)
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"S3_ENDPOINT must be an http(s) URL such as "
                f"https://obs.cn-north-4.myhuaweicloud.com, got {redact(endpoint)!r}")
    return endpoint.rstrip("/") if endpoint else None


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
        style = env.get("S3_ADDRESSING_STYLE", "auto").strip().lower() or "auto"
        if style not in ("auto", "path", "virtual"):
            raise ConfigurationError(
                f"S3_ADDRESSING_STYLE must be path, virtual or auto, got {style!r}")
        return cls(
            endpoint=_endpoint(env),
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            addressing_style=style,
            verify_ssl=env.get("S3_VERIFY_SSL", "1").strip().lower()
            not in ("0", "false", "no", "off"),
            connect_timeout=_positive_number(env, "S3_CONNECT_TIMEOUT", 3.0),
            read_timeout=_positive_number(env, "S3_READ_TIMEOUT", 60.0),
            max_attempts=int(_positive_number(env, "S3_MAX_ATTEMPTS", 3)),
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
