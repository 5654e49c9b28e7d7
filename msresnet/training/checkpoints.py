"""Checkpoint files a user can trust: atomic saves, strict loads, clear errors.

Three promises, each one a failure we have seen in long training runs:

* **An interrupted save never leaves a corrupt newest file.** :func:`save_atomic`
  writes to a temporary name in the same folder, flushes it to disk and only then
  renames it over the final name (``os.replace`` is atomic on POSIX and Windows).
  MindSpore's ``ModelCheckpoint`` deletes the old file and renames its own
  temporary file, which is close, but a job killed between the two steps loses the
  file; ours never has a moment without a complete file at the final name.
* **Loading is strict.** ``mindspore.load_param_into_net`` returns the names it
  could not load and carries on; a sweep that evaluates a half-loaded network
  reports the accuracy of random weights. :func:`load_strict` raises
  :class:`CheckpointMismatchError` naming every missing or mis-shaped parameter.
* **A damaged file is recognised as damaged.** Every checkpoint we write carries
  MindSpore's CRC trailer (``crc_check=True``), which ``load_checkpoint`` verifies.
  A file that cannot be parsed, fails its checksum, or was cut off (truncated
  files lose the trailer) raises :class:`CheckpointCorruptError` naming the file,
  so a sweep can skip it with a warning and go on.

File names follow ``ModelCheckpoint``: ``<prefix>-<epoch>_<step in epoch>.ckpt``,
and each file records ``epoch_num`` and ``step_num`` (global step) through
``append_dict``, which resume reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mindspore as ms
from mindspore.train import serialization as _serialization

from msresnet.atomic import atomic_path

PREFIX = "resnet50"
BEST_CKPT = "best.ckpt"
BEST_JSON = "best.json"
# What best.json holds, and who writes it, is msresnet.training.selection's.
# Temporary files (msresnet.atomic.partial_path) are ``<stem>.part<suffix>``, e.g.
# ``resnet50-3_8.part.ckpt``: they keep the ``.ckpt`` suffix (``mindspore.save_checkpoint``
# appends one otherwise) but never match the ``<prefix>-<epoch>_<step>.ckpt`` pattern of
# finished checkpoints.

CRC_TRAILER = b"crc_num"
"""MindSpore's ``save_checkpoint(crc_check=True)`` ends the file with this tag + 10 bytes."""
CRC_TRAILER_BYTES = len(CRC_TRAILER) + 10

# Bookkeeping entries that are not network or optimizer parameters.
META_KEYS = ("epoch_num", "step_num")


# MindSpore's own estimate (free pages only), kept for systems without /proc/meminfo.
_FREE_PAGES_ONLY = getattr(_serialization, "_get_available_memory", None)


def available_memory() -> int | None:
    """Bytes the kernel can hand out now: ``MemAvailable`` (free pages plus the page
    cache it can drop), from ``/proc/meminfo``.

    MindSpore 2.10's ``load_checkpoint`` refuses a file larger than
    ``os.sysconf("SC_AVPHYS_PAGES")``, the *free* pages only. Once the page cache has
    filled the memory, which any run that writes checkpoints and reads data soon
    does, that is a few hundred MB, and a 188 MB ResNet50 checkpoint is refused while
    gigabytes are available (seen in the test command: "the checkpoint protobuf
    content size 188462235 bytes exceeds current available memory 186101760
    bytes"). Importing this module points MindSpore's check at this function.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return _FREE_PAGES_ONLY() if _FREE_PAGES_ONLY is not None else None


if _FREE_PAGES_ONLY is not None:
    _serialization._get_available_memory = available_memory

# What MindSpore raises when that check refuses a file (a ValueError, like a parse error).
_TOO_LARGE_FOR_MEMORY = getattr(_serialization, "_CheckpointProtobufSizeError", ())


class CheckpointError(ValueError):
    """Base class: a checkpoint cannot be used; the message names the file."""


class CheckpointCorruptError(CheckpointError):
    """The file is unreadable, fails its checksum or is truncated."""


class CheckpointMismatchError(CheckpointError):
    """The file is intact but does not fit the network (names the parameters)."""


@dataclass(frozen=True, order=True)
class CheckpointFile:
    """A checkpoint in a run folder, ordered by (epoch, step) as training wrote them."""

    epoch: int
    step: int
    path: Path

    @property
    def name(self) -> str:
        return self.path.name


def checkpoint_name(epoch: int, step_in_epoch: int, prefix: str = PREFIX) -> str:
    """``resnet50-3_8.ckpt``: the name ``ModelCheckpoint`` would give epoch 3, step 8 of it."""
    return f"{prefix}-{epoch}_{step_in_epoch}.ckpt"


def _name_pattern(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(prefix)}-(\d+)_(\d+)\.ckpt$")


def list_checkpoints(folder: str | os.PathLike[str], prefix: str = PREFIX) -> list[CheckpointFile]:
    """The periodic checkpoints in ``folder``, oldest first (``best.ckpt`` is not one).

    Sorting is numeric, so ``resnet50-10_8`` comes after ``resnet50-9_8`` (a plain
    string sort would put it first).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    pattern = _name_pattern(prefix)
    found = []
    for path in folder.iterdir():
        match = pattern.match(path.name)
        if match and path.is_file():
            found.append(CheckpointFile(int(match.group(1)), int(match.group(2)), path))
    return sorted(found)


def latest_checkpoint(folder: str | os.PathLike[str], prefix: str = PREFIX) -> Path | None:
    """The newest periodic checkpoint in ``folder`` (for ``resume_from: auto``), or None."""
    files = list_checkpoints(folder, prefix)
    return files[-1].path if files else None


def save_atomic(save_obj: Any, path: str | os.PathLike[str],
                append_dict: Mapping[str, Any] | None = None) -> Path:
    """Save a checkpoint so that ``path`` is either the old complete file or the new one.

    ``save_obj`` is anything ``mindspore.save_checkpoint`` accepts (a Cell, a
    parameter list, a dict). The data goes to ``<stem>.part.ckpt``, is flushed to disk,
    then renamed over ``path`` (:func:`msresnet.atomic.atomic_path`). On any failure
    the partial file is removed and the exception re-raised; whatever was at ``path``
    before is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as partial:
        ms.save_checkpoint(save_obj, str(partial), append_dict=dict(append_dict or {}),
                           crc_check=True)
    return path


def has_crc_trailer(path: str | os.PathLike[str]) -> bool:
    """True when the file ends with MindSpore's CRC trailer (every file we write does)."""
    path = Path(path)
    size = path.stat().st_size
    if size < CRC_TRAILER_BYTES:
        return False
    with open(path, "rb") as handle:
        handle.seek(size - CRC_TRAILER_BYTES)
        return handle.read(len(CRC_TRAILER)) == CRC_TRAILER


def _without_folder(message: str, path: Path) -> str:
    """``message`` with every spelling of ``path`` (absolute, resolved, as given) cut to
    its name, keeping messages free of local paths. The longest spelling goes first:
    replacing a relative ``runs/x/f.ckpt`` inside MindSpore's absolute ``/repo/runs/x/
    f.ckpt`` left ``/repo/f.ckpt``, a file that does not exist (issue 45)."""
    spellings = {str(path), os.path.abspath(path), str(path.resolve())}
    for spelling in sorted(spellings, key=len, reverse=True):
        message = message.replace(spelling, path.name)
    return message


def read_checkpoint(path: str | os.PathLike[str]) -> dict[str, ms.Parameter]:
    """``mindspore.load_checkpoint`` with the checksum verified and one error type.

    Raises :class:`CheckpointCorruptError` naming the file when it is missing its
    contents, cannot be parsed, or fails its CRC. (A file cut exactly between two
    parameters still parses; :func:`load_strict` then finds the missing parameters
    and, because the CRC trailer is gone too, reports the file as truncated.) A file
    MindSpore finds larger than the memory available now is a plain
    :class:`CheckpointError`: it may be intact, and must not be skipped as damaged.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointCorruptError(f"checkpoint {path.name}: no such file ({path})")
    if path.stat().st_size == 0:
        raise CheckpointCorruptError(f"checkpoint {path.name}: the file is empty (0 bytes)")
    try:
        # Verify the CRC when the file has one (ours always do); asking for it on a file
        # without one only makes MindSpore log a warning.
        return ms.load_checkpoint(str(path), crc_check=has_crc_trailer(path))
    except (ValueError, RuntimeError, OSError) as error:
        detail = _without_folder(str(error), path)
        if isinstance(error, _TOO_LARGE_FOR_MEMORY):  # intact, but not loadable here now
            raise CheckpointError(f"checkpoint {path.name}: not loaded, too large for the "
                                  f"memory available now ({detail})") from error
        raise CheckpointCorruptError(
            f"checkpoint {path.name}: unreadable, truncated or corrupt "
            f"({type(error).__name__}: {detail})") from error


def checkpoint_meta(params: Mapping[str, Any]) -> dict[str, int | None]:
    """``{"epoch": ..., "step": ...}`` from the ``append_dict`` entries (None if absent)."""
    meta: dict[str, int | None] = {}
    for key, out in (("epoch_num", "epoch"), ("step_num", "step")):
        value = params.get(key)
        meta[out] = None if value is None else int(value.asnumpy().item())
    return meta


def _short_list(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def check_fits(net: ms.nn.Cell, params: Mapping[str, Any], source: str = "checkpoint",
               ignore: tuple[str, ...] = ()) -> None:
    """Raise :class:`CheckpointMismatchError` unless ``params`` has every parameter of
    ``net`` (except names in ``ignore``) with the same shape, and no parameter of a
    layer ``net`` has that ``net`` lacks.

    Checked before loading so that nothing is half-loaded and the message lists every
    offending name at once (MindSpore stops at the first shape mismatch). The last rule
    stops a deeper network's checkpoint (``depth``) from loading into a shallower one,
    whose extra blocks would otherwise be dropped without a word; optimizer state
    (``moments.*``) is not a layer.
    """
    missing: list[str] = []
    mismatched: list[str] = []
    own: set[str] = set()
    for param in net.get_parameters():
        own.add(param.name)
        if param.name in ignore:
            continue
        value = params.get(param.name)
        if value is None:
            missing.append(param.name)
        elif tuple(value.shape) != tuple(param.shape):
            mismatched.append(f"{param.name} (network {tuple(param.shape)}, "
                              f"checkpoint {tuple(value.shape)})")
    layers = set(net.name_cells())
    foreign = [name for name in params
               if name not in own and name.split(".", 1)[0] in layers and name not in ignore]
    problems = []
    if foreign:
        problems.append(f"{len(foreign)} parameter(s) of layers the network lacks (another "
                        f"depth?): {_short_list(foreign)}")
    if missing:
        problems.append(f"missing {len(missing)} parameter(s): {_short_list(missing)}")
    if mismatched:
        problems.append(f"shape mismatch for {len(mismatched)} parameter(s): "
                        f"{_short_list(mismatched)}")
    if problems:
        raise CheckpointMismatchError(f"{source} does not fit the network: " + "; ".join(problems))


def load_strict(net: ms.nn.Cell, params: Mapping[str, Any] | str | os.PathLike[str],
                source: str | None = None, ignore: tuple[str, ...] = ()) -> dict[str, Any]:
    """Load every parameter of ``net`` from ``params`` (a dict or a checkpoint path) or raise.

    Errors: :class:`CheckpointCorruptError` for an unreadable file (or one that lost
    parameters *and* its CRC trailer, i.e. was cut off); :class:`CheckpointMismatchError`
    naming the parameters when an intact checkpoint does not fit. Returns the dict.
    """
    path: Path | None = None
    if isinstance(params, (str, os.PathLike)):
        path = Path(params)
        source = source or f"checkpoint {path.name}"
        params = read_checkpoint(path)
    source = source or "checkpoint"
    try:
        check_fits(net, params, source, ignore)
    except CheckpointMismatchError as error:
        if path is not None and "missing" in str(error) and not has_crc_trailer(path):
            raise CheckpointCorruptError(
                f"{source}: truncated (it ends without the CRC trailer msresnet writes and "
                f"lacks parameters) - {error}") from error
        raise
    wanted = {p.name for p in net.get_parameters()} - set(ignore)
    not_loaded, _ = ms.load_param_into_net(net, {k: v for k, v in params.items() if k in wanted},
                                           strict_load=False)
    not_loaded = [name for name in not_loaded if name in wanted]
    if not_loaded:  # defensive: check_fits should have caught it
        raise CheckpointMismatchError(f"{source}: parameters not loaded: {_short_list(not_loaded)}")
    return dict(params)


def prune_checkpoints(folder: str | os.PathLike[str], keep: int, prefix: str = PREFIX) -> list[Path]:
    """Delete the oldest periodic checkpoints so at most ``keep`` remain (0 = keep all)."""
    if keep <= 0:
        return []
    files = list_checkpoints(folder, prefix)
    removed = []
    for item in files[: max(0, len(files) - keep)]:
        item.path.unlink(missing_ok=True)
        removed.append(item.path)
    return removed
