"""Where the book keeps things, relative to the repository checkout."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"
DATA_ROOT = REPO_ROOT / "data"
RUNS_ROOT = REPO_ROOT / "runs"

LOCAL_MIRROR_VARIABLE = "MSRESNET_LOCAL_MIRROR"
"""The environment variable that names a local copy of the CIFAR-10 binary archive for
``msresnet prepare --source auto`` (what ``make data`` runs): a path to the
``.tar.gz``, relative to the working folder or absolute. The library names no
location of its own; the ``Makefile`` sets the variable (its ``LOCAL_MIRROR``: by
default the copy that this project's machines and CI keep next to the checkout, when
that file exists, made absolute; ``make data LOCAL_MIRROR=path`` names another) and
exports it to every recipe that prepares data or runs tests, nbval or the chapters;
CI (``.ci/run``) runs ``make test``. Read by :func:`local_mirror`."""

LOCAL_MIRROR_MD5 = "f589d28b67d6155e7dae07c1a46334ef"
"""MD5 of this project's mirror, the archive :data:`LOCAL_MIRROR_VARIABLE` names on its
machines. Its images are the real CIFAR-10 ones, JPEG re-encoded and in another record
order, so it has its own checksum, not the official MD5. It stays a constant here,
not a second variable: the checksum identifies *which* archive the book's stored
outputs came from (chapter 1 prints it), so a variable that moved the file cannot
also change what counts as that file, and a copy named by mistake fails the check
instead of passing silently. Another archive under the variable is checked against
an MD5 given with it (``make data CIFAR10_MD5=...``, ``msresnet prepare --md5``)."""


def local_mirror() -> Path | None:
    """The archive :data:`LOCAL_MIRROR_VARIABLE` names (``~`` expanded), or None when it is
    unset or empty: then there is no local mirror and ``--source auto`` downloads the
    official archive. Read at each call, not at import. Whether the file exists is the
    caller's question (``msresnet prepare --source auto`` refuses a missing one; the tests
    that need it skip without it, and fail under ``CI=true``)."""
    value = os.environ.get(LOCAL_MIRROR_VARIABLE, "")
    return Path(value).expanduser() if value.strip() else None


def in_repo(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the repository when inside it, else as given: the same
    text whatever folder a tool runs in (for messages and generated pages)."""
    try:
        return Path(os.path.abspath(path)).relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)
