"""s3fs filesystems for ``s3://`` and ``obs://``, configured from the environment.

OBS speaks the S3 protocol, so s3fs serves both schemes; ``obs://`` needs a class of
its own (:data:`ObsFileSystem`) because a plain alias would keep ``obs:`` in the
bucket name. The classes are built on first use: importing s3fs pulls in botocore
and aiobotocore, which a job that copies through MoXing never needs. Filesystems
built here hold no credentials (botocore reads them from the environment when it
signs a request) and their ``repr`` shows the endpoint only.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import fsspec

from msresnet.storage.errors import ConfigurationError, CredentialsError
from msresnet.storage.settings import StoreSettings, credentials_fingerprint, missing_credentials

if TYPE_CHECKING:  # s3fs (and botocore) are imported only when a store is opened
    from s3fs import S3FileSystem


class _SafeRepr:
    """Filesystems built here never hold secrets; say so in their repr too."""

    retries = 3  # s3fs's own retries (dropped connections mid-response), besides botocore's

    def __repr__(self) -> str:  # pragma: no cover - trivial
        endpoint = getattr(self, "endpoint_url", None) or "AWS default"
        return f"{type(self).__name__}(endpoint={endpoint!r})"


_S3_CLASSES: dict[str, type] = {}


def _s3_classes() -> dict[str, type]:
    """The two filesystem classes, built once, on first use."""
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
    """``ObsFileSystem`` / ``S3StagingFileSystem``, built lazily."""
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
    cache_key = (scheme, settings, credentials_fingerprint(), os.getpid())
    with _FILESYSTEMS_LOCK:
        cached = _FILESYSTEMS.get(cache_key)
    if cached is not None:
        return cached
    fs = _new_filesystem(scheme, settings)
    with _FILESYSTEMS_LOCK:
        if len(_FILESYSTEMS) > 16:
            _FILESYSTEMS.clear()
        return _FILESYSTEMS.setdefault(cache_key, fs)


def _check_environment(scheme: str, settings: StoreSettings) -> None:
    """Fail before any request when the environment cannot work."""
    if scheme == "obs" and not settings.endpoint:
        raise ConfigurationError(
            "obs:// URLs need S3_ENDPOINT, e.g. https://obs.cn-north-4.myhuaweicloud.com")
    missing = [] if settings.anonymous else missing_credentials()
    if missing:
        raise CredentialsError(
            f"no credentials: set {' and '.join(missing)} in the environment "
            f"(OBS: your AK and SK), or S3_ANONYMOUS=1 for a public bucket")


def _botocore_config(settings: StoreSettings) -> dict[str, Any]:
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
    return config


def _new_filesystem(scheme: str, settings: StoreSettings) -> S3FileSystem:
    _check_environment(scheme, settings)
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
        config_kwargs=_botocore_config(settings),
        use_listings_cache=False,
        skip_instance_cache=True,
    )
