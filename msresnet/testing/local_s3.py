"""A private S3-compatible server on loopback, for the OBS chapter and its tests.

Object storage (Huawei OBS, AWS S3, MinIO, ...) is where a cloud training job finds
its data. To show the real workflow without an account, the book starts moto's S3
server (``moto[server]``) in a child process bound to 127.0.0.1 on a free port, with
*authentication switched on*: the server accepts exactly one randomly generated
access key, so wrong credentials fail the way they fail on OBS.

The credentials never appear in a notebook, on a command line or in a log: the
parent generates them, hands them to the child on its stdin, and exports them only
into ``os.environ`` of the current process (from where child processes such as
``msresnet job`` inherit them). Leaving the ``with`` block (or calling
:meth:`LocalS3Server.stop`) stops the server and restores the environment.

Tests that want recognisable credentials (to grep outputs for leaks) set
``LOCAL_S3_ACCESS_KEY_ID`` and ``LOCAL_S3_SECRET_ACCESS_KEY`` before starting it.
"""

from __future__ import annotations

import json
import os
import secrets
import string
import subprocess
import sys
from types import TracebackType


#: Environment variables this server exports while it runs (values restored on stop).
EXPORTED_VARIABLES = (
    "S3_ENDPOINT",
    "S3_ADDRESSING_STYLE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)
_USER_NAME = "book-reader"
_REGION = "us-east-1"  # moto keeps IAM users per partition; "aws" is the default one


def _random_credentials() -> tuple[str, str]:
    alphabet = string.ascii_uppercase + string.digits
    key = "AKIA" + "".join(secrets.choice(alphabet) for _ in range(16))
    secret = secrets.token_urlsafe(30)[:40]
    return key, secret


class LocalS3Server:
    """moto's S3 server in a child process, with one accepted access key.

    Use as a context manager (``with LocalS3Server() as server:``) or call
    :meth:`start` and :meth:`stop` across notebook cells.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        *,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        export_env: bool = True,
    ) -> None:
        self.host = host
        self.export_env = export_env
        key = access_key_id or os.environ.get("LOCAL_S3_ACCESS_KEY_ID")
        secret = secret_access_key or os.environ.get("LOCAL_S3_SECRET_ACCESS_KEY")
        if not (key and secret):
            key, secret = _random_credentials()
        self._credentials = (key, secret)
        self._process: subprocess.Popen[str] | None = None
        self._saved_env: dict[str, str | None] = {}
        self.port: int | None = None

    # The repr is what a notebook shows: endpoint yes, credentials never.
    def __repr__(self) -> str:
        state = f"endpoint={self.endpoint!r}" if self.port else "stopped"
        return f"LocalS3Server({state})"

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise RuntimeError("the local S3 server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def environment(self) -> dict[str, str]:
        """The variables a client process needs (credentials included: keep it private)."""
        key, secret = self._credentials
        return {
            "S3_ENDPOINT": self.endpoint,
            "S3_ADDRESSING_STYLE": "path",
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_REGION": _REGION,
            "AWS_DEFAULT_REGION": _REGION,
        }

    def start(self) -> LocalS3Server:
        if self._process is not None:
            return self
        self._process = subprocess.Popen(
            [sys.executable, "-m", "msresnet", "local-s3", "--host", self.host],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        key, secret = self._credentials
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps({"key": key, "secret": secret}) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait(timeout=10)
            self._process = None
            raise RuntimeError(f"the local S3 server did not start (exit code {code})")
        self.port = int(json.loads(line)["port"])
        if self.export_env:
            self._saved_env = {name: os.environ.get(name) for name in EXPORTED_VARIABLES}
            for name in EXPORTED_VARIABLES:
                os.environ.pop(name, None)
            os.environ.update(self.environment())
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            assert process.stdin is not None
            try:
                process.stdin.close()  # the child exits when its stdin closes
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if self._saved_env:
            for name, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._saved_env = {}
        self.port = None

    def __enter__(self) -> LocalS3Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def local_server(**kwargs: object) -> LocalS3Server:
    """``with local_server() as server:`` - start moto on loopback and export its settings."""
    return LocalS3Server(**kwargs)  # type: ignore[arg-type]


def serve(host: str) -> None:
    """Child side: read credentials from stdin, serve until stdin closes."""
    try:
        credentials = json.loads(sys.stdin.readline())
        key, secret = credentials["key"], credentials["secret"]
    except (ValueError, KeyError, TypeError):  # the line itself is not shown: it holds a secret
        raise SystemExit('standard input: expected one JSON line {"key": ..., "secret": ...}, '
                         "as LocalS3 (the parent that starts this verb) writes it") from None
    from moto import settings
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends
    from moto.server import ThreadedMotoServer

    iam = iam_backends[DEFAULT_ACCOUNT_ID]["aws"]
    iam.create_user(region_name=_REGION, user_name=_USER_NAME)
    policy = {"Version": "2012-10-17",
              "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(_USER_NAME, "everything", json.dumps(policy))
    access_key = iam.create_access_key(_USER_NAME)
    access_key.access_key_id = key
    access_key.secret_access_key = secret
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # from now on every request is checked

    server = ThreadedMotoServer(ip_address=host, port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    sys.stdout.write(json.dumps({"port": port}) + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # blocks until the parent closes the pipe (or dies)
    server.stop()
