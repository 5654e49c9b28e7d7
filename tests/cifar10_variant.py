"""Write a second genuine-looking copy of CIFAR-10 that differs from the first.

The book's stored outputs were produced from one copy of CIFAR-10 (this project's
machines use a local mirror; readers use the official archive). No stored output
may depend on which genuine copy a reader has, so the test command runs the
chapters under strict nbval against a copy that differs from the one that
produced the outputs in the two ways genuine copies differ:

* record order: the records of every ``.bin`` file are shuffled (a fixed
  permutation per file, so the copy is the same on every machine);
* pixel values: every pixel is nudged by -1, 0 or +1 (clipped to 0..255), as a
  JPEG round trip or another decoder would.

Labels travel with their images and stay in their file, so the class balance
and the train/test split are the official ones, exactly as for a genuine copy.

Usage: ``python tests/cifar10_variant.py SOURCE_FOLDER DEST_ROOT`` writes
``DEST_ROOT/cifar-10-batches-bin`` (atomically: a temporary folder renamed into
place) and prepares it with ``msresnet.data.prepare``'s validation and marker.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import numpy as np

from msresnet.data import cifar10
from msresnet.data import prepare as preparation

SEED = 20261201


def vary_file(source: Path, target: Path, rng: np.random.Generator) -> None:
    """Shuffle the records of one ``.bin`` file and nudge its pixels by at most 1."""
    records = np.fromfile(source, dtype=np.uint8).reshape(-1, cifar10.RECORD_BYTES)
    records = records[rng.permutation(len(records))]
    nudge = rng.integers(-1, 2, size=(len(records), cifar10.RECORD_BYTES - 1), dtype=np.int16)
    pixels = np.clip(records[:, 1:].astype(np.int16) + nudge, 0, 255).astype(np.uint8)
    np.concatenate([records[:, :1], pixels], axis=1).tofile(target)


def write_variant(source_folder: str | os.PathLike[str], dest_root: str | os.PathLike[str]) -> Path:
    """Write the varied copy of ``source_folder`` as ``dest_root/cifar-10-batches-bin``."""
    source = Path(source_folder)
    if (source / cifar10.FOLDER_NAME).is_dir():
        source = source / cifar10.FOLDER_NAME
    cifar10.validate(source)
    root = Path(dest_root)
    dest = root / cifar10.FOLDER_NAME
    if dest.exists():
        shutil.rmtree(dest)
    tmp = root / f".variant-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        rng = np.random.default_rng(SEED)
        for name in (*cifar10.TRAIN_FILES, *cifar10.TEST_FILES):
            vary_file(source / name, tmp / name, rng)
        shutil.copyfile(source / "batches.meta.txt", tmp / "batches.meta.txt")
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # prepare() finds the folder in place, validates it and writes its marker.
    return preparation.prepare_dataset(dest, root, progress=False).folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="an extracted cifar-10-batches-bin folder (or its parent)")
    parser.add_argument("dest_root", help="where to write cifar-10-batches-bin")
    args = parser.parse_args(argv)
    try:
        folder = write_variant(args.source, args.dest_root)
    except (cifar10.DatasetError, OSError) as err:
        print(f"cifar10_variant: {err}", file=sys.stderr)
        return 1
    print(f"differing copy of CIFAR-10 written: {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
