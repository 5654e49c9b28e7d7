"""Command line: make a ready ``cifar-10-batches-bin`` folder.

    msresnet prepare                                   # official URL into data/
    msresnet prepare --source auto                     # local mirror if present
    msresnet prepare --source mindspore                # MindSpore's mirror
    msresnet prepare --source path/to/cifar-10-binary.tar.gz --md5 HEX --root data

``--source auto`` (what ``make data`` runs) takes this project's local mirror of the
archive, :data:`msresnet.paths.LOCAL_MIRROR` with its own MD5, when it exists, and
the official archive otherwise, and says which one it took. It prints what it did
(source, checksum used, folder, seconds) and, on a problem, one clear line and exit
status 2 instead of a stack trace (``--debug`` shows it), because it is meant for
shell scripts and CI.
"""

from __future__ import annotations

import argparse
import os
import sys

from msresnet.cli import ArgumentParser
from msresnet.data.cifar10 import MINDSPORE_MIRROR_URL, OFFICIAL_URL
from msresnet.data.preparation import prepare_dataset
from msresnet.paths import DATA_ROOT, LOCAL_MIRROR, LOCAL_MIRROR_MD5

# Short names for the two well-known URLs, so nobody has to type the mirror's address.
SOURCE_ALIASES = {"official": OFFICIAL_URL, "mindspore": MINDSPORE_MIRROR_URL}
AUTO = "auto"
PROG = "msresnet prepare"


def resolve_source(source: str, md5: str | None) -> tuple[str, str | None, str | None]:
    """``(source, md5, note)`` for a ``--source`` value: aliases expanded, and ``auto``
    turned into the local mirror (path relative to the current folder, its MD5 unless
    ``md5`` is given) when it exists, else the official URL. ``note`` says what
    ``auto`` chose (None for any other source)."""
    if source != AUTO:
        return SOURCE_ALIASES.get(source, source), md5, None
    if LOCAL_MIRROR.is_file():
        return (os.path.relpath(LOCAL_MIRROR), md5 or LOCAL_MIRROR_MD5,
                f"--source auto: the local mirror {LOCAL_MIRROR} exists; using it")
    return (OFFICIAL_URL, md5,
            f"--source auto: no local mirror at {LOCAL_MIRROR}; using the official archive")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Download (or take) the CIFAR-10 binary archive, check it and extract it safely.")
    parser.add_argument("--source", default=OFFICIAL_URL,
                        help="an http(s) URL, a local .tar.gz, an extracted folder, 'official',"
                             " 'mindspore', or 'auto' (the local mirror if it exists, else"
                             f" official; default: {OFFICIAL_URL}; mindspore = {MINDSPORE_MIRROR_URL})")
    parser.add_argument("--root", default=str(DATA_ROOT),
                        help="folder that will contain cifar-10-batches-bin (default: %(default)s)")
    parser.add_argument("--md5", default=None,
                        help="expected MD5 of the archive (default: the official MD5 for the official and"
                             " MindSpore URLs, the mirror's own for auto; for other sources it is"
                             " computed and reported, not checked)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str]) -> int:
    """``msresnet prepare``; errors become one line in :func:`msresnet.cli.run`."""
    args = build_parser().parse_args(argv)
    source, md5, note = resolve_source(args.source, args.md5)
    if note:
        print(note)
    try:
        report = prepare_dataset(source, args.root, md5, progress=not args.quiet)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing half-done is left in {args.root}"
              " (a partial download is kept: run again to resume)", file=sys.stderr)
        return 130
    print(report.summary())
    return 0
