"""Which images an evaluation scored: their SHA-256, and whether two records agree.

A score means little without the images behind it: two copies of CIFAR-10 (the
official archive, a mirror, a reader's own data) or two validation splits give
different numbers. :func:`evaluation_images` names the images a validation or a
final test scores by a hash, recorded beside the score; :func:`same_images_as`
checks a recorded identity against the data at hand before one selection replaces
another (:func:`msresnet.training.selection.promote_best`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from msresnet.data.cifar10 import RECORD_BYTES, TEST_FILES, DatasetError, record_count
from msresnet.data.splits import hold_out, training_records


def evaluation_images(folder: str | os.PathLike[str], count: int | None = None, *,
                      valid_split: int = 0, seed: int = 0,
                      valid: np.ndarray | None = None) -> dict[str, object]:
    """Which images an evaluation scores, and their SHA-256.

    With ``valid_split`` 0 and no ``valid``: the first ``count`` records of the test
    file (the evaluation pipeline reads ``test_batch.bin`` in file order, so those
    *are* the images scored; all 10,000 when None). Otherwise the first ``count``
    images of the held-out validation split, in index order: ``valid``, the held-out
    indices a caller already drew with ``seed`` (so a run draws its split once), or
    else :func:`~msresnet.data.splits.hold_out` with ``valid_split`` and ``seed``. The
    hash says exactly which images those were: two copies of CIFAR-10 (the official
    archive, a mirror, a reader's own data) give different hashes, and a selection
    recorded with this identity can be checked before it is replaced
    (:func:`same_images_as`).
    """
    if valid is None and valid_split:
        _, valid = hold_out(folder, valid_split, seed)
    if valid is not None:
        picked = valid if count is None else valid[:int(count)]
        digest = hashlib.sha256(training_records(folder, picked).tobytes())
        return {"split": "valid", "images": len(picked), "sha256": digest.hexdigest(),
                "folder": str(Path(folder).resolve()), "held_out": len(valid), "seed": seed}
    path = Path(folder) / TEST_FILES[0]
    images = record_count(path) if count is None else min(int(count), record_count(path))
    return {"split": "test", "images": images, "sha256": _leading_sha256(path, images),
            "folder": str(Path(folder).resolve())}


def _leading_sha256(path: Path, records: int) -> str:
    """SHA-256 of the first ``records`` records of ``path``, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        remaining = records * RECORD_BYTES
        while remaining:
            block = handle.read(min(remaining, 1 << 22))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
    return digest.hexdigest()


def same_images_as(recorded: dict[str, object], current: dict[str, object]) -> bool:
    """True when ``current`` scores the images ``recorded`` scored, and maybe more.

    Both are :func:`evaluation_images` records of the same split (and, for a
    validation split, the same held-out count and seed). The recorded images must be
    the first ``recorded['images']`` of ``current``'s, byte for byte.
    """
    try:
        images = int(recorded["images"])  # type: ignore[arg-type]
        current_images = int(current["images"])  # type: ignore[arg-type]
        if recorded.get("split") != current.get("split") or images > current_images:
            return False
        held = {}
        if recorded.get("split") == "valid":
            if (recorded.get("held_out"), recorded.get("seed")) != (current.get("held_out"),
                                                                   current.get("seed")):
                return False
            held = {"valid_split": int(recorded["held_out"]),  # type: ignore[arg-type]
                    "seed": int(recorded["seed"])}  # type: ignore[arg-type]
        again = evaluation_images(str(current["folder"]), images, **held)
        return again["sha256"] == recorded["sha256"]
    except (KeyError, TypeError, ValueError, OSError, DatasetError):
        return False
