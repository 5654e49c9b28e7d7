"""Command line: make a ready ``cifar-10-batches-bin`` folder.

    python -m msresnet.prepare                                   # official URL into data/
    python -m msresnet.prepare --source mindspore                # MindSpore's mirror
    python -m msresnet.prepare --source ../shared/data/cifar-10-binary.tar.gz \\
        --md5 f589d28b67d6155e7dae07c1a46334ef --root data

It prints what it did (source, checksum used, folder, seconds) and, on a
problem, one clear line and exit status 1 instead of a stack trace, because it
is meant for shell scripts and CI.
"""

from __future__ import annotations

import argparse
import sys

from msresnet.cifar10 import (MINDSPORE_MIRROR_URL, OFFICIAL_URL, DatasetError, prepare_dataset)
from msresnet.download import DownloadError
from msresnet.paths import DATA_ROOT

# Short names for the two well-known URLs, so nobody has to type the mirror's address.
SOURCE_ALIASES = {"official": OFFICIAL_URL, "mindspore": MINDSPORE_MIRROR_URL}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m msresnet.prepare",
        description="Download (or take) the CIFAR-10 binary archive, check it and extract it safely.")
    parser.add_argument("--source", default=OFFICIAL_URL,
                        help="an http(s) URL, a local .tar.gz, an extracted folder, or 'official' /"
                             f" 'mindspore' (default: {OFFICIAL_URL}; mindspore = {MINDSPORE_MIRROR_URL})")
    parser.add_argument("--root", default=str(DATA_ROOT),
                        help="folder that will contain cifar-10-batches-bin (default: %(default)s)")
    parser.add_argument("--md5", default=None,
                        help="expected MD5 of the archive (default: the official MD5 for the official and"
                             " MindSpore URLs; for other sources it is computed and reported, not checked)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; return the exit status."""
    args = build_parser().parse_args(argv)
    source = SOURCE_ALIASES.get(args.source, args.source)
    try:
        report = prepare_dataset(source, args.root, args.md5, progress=not args.quiet)
    except (DatasetError, DownloadError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; run again to resume", file=sys.stderr)
        return 130
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
