"""Half-written files that nobody mistakes for whole ones.

A local destination is written under a hidden temporary name in its own folder and
renamed when complete (``os.replace`` is atomic), so a killed copy never leaves a
truncated file under the final name; folder listings skip the temporary names, and
the next copy removes the ones a killed copy left behind.

Not :mod:`msresnet.atomic`'s recipe: a staged file must stay out of the folder
listings an upload makes while it is written, and it is not ``fsync``'ed (a copy
from object storage can be fetched again; what readers need is never to see half a
file, which the rename gives).
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

_TEMP_PATTERN = re.compile(r"^\..+\.staging-[0-9a-f]{8}\.part$")


def is_temp(name: str) -> bool:
    """Is this file or folder name one of the temporary names made here?"""
    return bool(_TEMP_PATTERN.match(name))


def temp_name(target: str) -> str:
    """A hidden temporary name beside ``target`` that listings skip."""
    folder, name = os.path.split(target)
    return os.path.join(folder, f".{name}.staging-{uuid.uuid4().hex[:8]}.part")


def _remove(path: str) -> None:
    """Remove a file or folder; gone already (another process was faster) is fine."""
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def clear_stale_temps(target: str) -> None:
    """Remove what killed copies to ``target`` left behind (files or folders)."""
    folder, name = os.path.split(target)
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.startswith(f".{name}.staging-") and is_temp(entry):
            _remove(os.path.join(folder, entry))


@contextmanager
def scratch_beside(target: str) -> Iterator[str]:
    """A temporary name beside ``target`` (its folder is created), removed on exit
    with whatever was written there; leftovers of killed copies go first."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    clear_stale_temps(target)
    temp = temp_name(target)
    try:
        yield temp
    finally:
        _remove(temp)


@contextmanager
def written_in_place(target: str) -> Iterator[str]:
    """Yield a temporary name beside ``target`` to write; on success it becomes
    ``target``, on an error it is removed and ``target`` is left as it was."""
    with scratch_beside(target) as temp:
        yield temp
        os.replace(temp, target)  # atomic: the final name only ever holds a whole file
