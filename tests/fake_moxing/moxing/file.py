"""``moxing.file`` stand-in: the same names and meanings, on the local disk."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

#: (operation, arguments) of every call, in order.
CALLS: list[tuple[str, tuple[Any, ...]]] = []
_REMOTE = ("obs://", "s3://")


def _record(operation: str, *args: Any) -> None:
    CALLS.append((operation, args))
    log = os.environ.get("FAKE_MOXING_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"op": operation, "args": [str(a) for a in args]}) + "\n")
    failing = os.environ.get("FAKE_MOXING_FAIL", "")
    if failing and failing == operation:
        raise RuntimeError(f"injected failure of {operation}")


def _path(url: str) -> str:
    """Where a URL's bytes live: obs://b/k -> $FAKE_MOXING_ROOT/b/k; paths as they are."""
    url = os.fspath(url)
    for prefix in _REMOTE:
        if url.startswith(prefix):
            root = os.environ.get("FAKE_MOXING_ROOT")
            if not root:
                raise RuntimeError("FAKE_MOXING_ROOT is not set")
            return os.path.join(root, *url[len(prefix):].strip("/").split("/"))
    return url


def copy_parallel(src_url: str, dst_url: str) -> None:
    """Copy the files inside folder ``src_url`` into folder ``dst_url``."""
    _record("copy_parallel", src_url, dst_url)
    src, dst = _path(src_url), _path(dst_url)
    if not os.path.isdir(src):
        raise FileNotFoundError(f"{src_url} is not a folder")
    shutil.copytree(src, dst, dirs_exist_ok=True)


def copy(src_url: str, dst_url: str) -> None:
    _record("copy", src_url, dst_url)
    dst = _path(dst_url)
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    shutil.copyfile(_path(src_url), dst)


def exists(url: str) -> bool:
    _record("exists", url)
    return os.path.exists(_path(url))


def is_directory(url: str) -> bool:
    _record("is_directory", url)
    return os.path.isdir(_path(url))


def list_directory(url: str, recursive: bool = False) -> list[str]:
    _record("list_directory", url, recursive)
    root = _path(url)
    if not recursive:
        return sorted(os.listdir(root))
    return sorted(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                  for folder, _, names in os.walk(root) for name in names)


def make_dirs(url: str) -> None:
    _record("make_dirs", url)
    os.makedirs(_path(url), exist_ok=True)


def remove(url: str, recursive: bool = False) -> None:
    _record("remove", url, recursive)
    path = _path(url)
    if os.path.isdir(path):
        if not recursive:
            raise IsADirectoryError(url)
        shutil.rmtree(path)
    else:
        os.remove(path)


def get_size(url: str, recursive: bool = False) -> int:
    _record("get_size", url, recursive)
    path = _path(url)
    if not os.path.isdir(path):
        return os.path.getsize(path)
    if not recursive:
        raise IsADirectoryError(url)
    return sum(os.path.getsize(os.path.join(folder, name))
               for folder, _, names in os.walk(path) for name in names)
