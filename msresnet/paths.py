"""Where the book keeps things, relative to the repository checkout."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"
DATA_ROOT = REPO_ROOT / "data"
RUNS_ROOT = REPO_ROOT / "runs"

LOCAL_MIRROR = REPO_ROOT.parent / "shared" / "data" / "cifar-10-binary.tar.gz"
"""This project's local copy of the CIFAR-10 binary archive, next to the checkout
(``../shared/data/cifar-10-binary.tar.gz`` from the repository root). Its images are
the real CIFAR-10 ones, JPEG re-encoded and in another record order, so it has its
own checksum (:data:`LOCAL_MIRROR_MD5`, not the official MD5). ``msresnet prepare
--source auto`` (what ``make data`` runs) uses it when it exists; the tests that need
it skip without it, and fail under ``CI=true``. The one place that names it."""

LOCAL_MIRROR_MD5 = "f589d28b67d6155e7dae07c1a46334ef"
"""MD5 of :data:`LOCAL_MIRROR`."""


def in_repo(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the repository when inside it, else as given: the same
    text whatever folder a tool runs in (for messages and generated pages)."""
    try:
        return Path(os.path.abspath(path)).relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)
