"""Test helper: an S3-compatible server (moto) on 127.0.0.1 with a free port.

The tests start and stop the server themselves. :func:`running_server` wraps
:class:`msresnet.testing.local_s3.LocalS3Server` (a moto child process with IAM
authentication on, so wrong credentials are rejected as on OBS) and gives it
recognisable fake credentials, which the leak tests then grep for.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from msresnet.testing.local_s3 import LocalS3Server

# Recognisable fake credentials: if one of these strings shows up in a notebook,
# a log or an error message, a secret has leaked.
FAKE_ACCESS_KEY_ID = "AKIALEAKCANARY7Q3XZ9"
FAKE_SECRET_ACCESS_KEY = "leak-canary-secret-Zq8Vr2Kp5Wm9Tx4Ny7Lb3Hc"

# Variables the server exports or the staging code reads; tests start from none of them.
_CLEARED = (
    "S3_ENDPOINT", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_ADDRESSING_STYLE",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
    "AWS_REGION", "AWS_DEFAULT_REGION", "S3_VERIFY_SSL", "S3_CONNECT_TIMEOUT",
    "S3_READ_TIMEOUT", "S3_MAX_ATTEMPTS", "S3_ANONYMOUS", "JOB_ID", "MSRESNET_JOB_ID",
    "LOCAL_WORLD_SIZE", "RANK_SIZE", "DEVICE_NUM", "RANK_ID",
)


def clear_environment() -> dict[str, str]:
    """Remove the variables above from os.environ; returns what was there."""
    saved = {name: os.environ.pop(name) for name in _CLEARED if name in os.environ}
    return saved


@contextmanager
def running_server(*, recognisable: bool = True) -> Iterator[LocalS3Server]:
    """Start moto on 127.0.0.1:<free port>, export its settings, stop and restore."""
    saved = clear_environment()
    kwargs = {}
    if recognisable:
        kwargs = {"access_key_id": FAKE_ACCESS_KEY_ID,
                  "secret_access_key": FAKE_SECRET_ACCESS_KEY}
    server = LocalS3Server(**kwargs)
    try:
        with server:
            yield server
    finally:
        clear_environment()
        os.environ.update(saved)


def closed_port() -> int:
    """A loopback port nobody listens on (bound, read, released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def new_bucket_name(prefix: str = "test") -> str:
    """A valid, unique bucket name (3-63 lowercase letters, digits, hyphens)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
