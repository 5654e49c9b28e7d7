"""``msresnet prepare``: the command line of :func:`msresnet.data.prepare.prepare_dataset`.

It reads ``--source`` (a URL, an archive, a folder, or one of the short names that
:func:`msresnet.data.prepare.resolve_source` expands), checks ``--md5`` before anything
is fetched, prepares the folder and prints what was done. The library function
knows nothing of this layer.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from msresnet.command_line import ArgumentParser
from msresnet.data.cifar10 import MINDSPORE_MIRROR_URL, OFFICIAL_URL
from msresnet.data.prepare import ALREADY_PREPARED, prepare_dataset, resolve_source
from msresnet.paths import DATA_ROOT

PROG = "msresnet prepare"


def _md5(text: str) -> str:
    """``--md5``'s value: 32 hexadecimal digits, checked before anything is fetched."""
    if re.fullmatch(r"[0-9a-fA-F]{32}", text) is None:
        raise argparse.ArgumentTypeError(f"must be an MD5 checksum (32 hex digits), got {text!r}")
    return text.lower()


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Download (or take) the CIFAR-10 binary archive, check it and extract it safely.")
    parser.add_argument("--source", default=OFFICIAL_URL,
                        help="an http(s) URL, a local .tar.gz, an extracted folder, 'official',"
                             " 'mindspore', or 'auto' (the archive $MSRESNET_LOCAL_MIRROR names if"
                             f" set, else official; default: {OFFICIAL_URL}; mindspore = {MINDSPORE_MIRROR_URL})")
    parser.add_argument("--root", default=str(DATA_ROOT),
                        help="folder that will contain cifar-10-batches-bin (default: %(default)s)")
    parser.add_argument("--md5", type=_md5, default=None,
                        help="expected MD5 of the archive (default: the official MD5 for the official and"
                             " MindSpore URLs, the mirror's own for auto; for other sources it is"
                             " computed and reported, not checked)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str]) -> int:
    """``msresnet prepare``; errors become one line in :func:`msresnet.command_line.run`."""
    parser = build_parser()
    args = parser.parse_args(argv)
    source, md5, note = resolve_source(args.source, args.md5)
    if args.md5 and Path(source).expanduser().is_dir():
        parser.error(f"--md5 checks an archive; --source {args.source} is a folder "
                     "(its files are validated instead)")
    try:
        report = prepare_dataset(source, args.root, md5, progress=not args.quiet)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing half-done is left in {args.root}"
              " (a partial download is kept: run again to resume)", file=sys.stderr)
        return 130
    if note and report.action != ALREADY_PREPARED:  # what auto chose, when it was used
        print(note)
    print(report.summary())
    return 0
