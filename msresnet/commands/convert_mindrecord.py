"""``msresnet convert-mindrecord``: the command line of :func:`msresnet.data.mindrecord.convert`.

It checks ``--usage`` (a comma-separated subset of ``train,test``) before anything
is written, converts each split in turn and prints what was written or already up
to date. The library function knows nothing of this layer.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from msresnet.command_line import ArgumentParser
from msresnet.data.mindrecord import SPLIT_FILES, convert


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet convert-mindrecord",
        description="Convert the CIFAR-10 binary files to MindRecord (PNG images, int32 labels).")
    parser.add_argument("batches_dir", type=Path, help="the cifar-10-batches-bin folder itself")
    parser.add_argument("--output_dir", type=Path, required=True, help="folder for the .mindrecord files")
    parser.add_argument("--usage", default="train,test", help="comma-separated: train,test")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace MindRecord files this converter did not write from these files")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    usages = [u.strip() for u in args.usage.split(",") if u.strip()]
    bad = [u for u in usages if u not in SPLIT_FILES]
    if bad or not usages:
        raise SystemExit(f"--usage: expected a comma-separated subset of train,test; got {args.usage!r}")
    for usage in usages:
        done = convert(args.batches_dir, args.output_dir, usage, overwrite=args.overwrite)
        state = "wrote" if done.written else "up to date:"
        print(f"{state} {done.path} ({done.records:,d} records)", flush=True)
    return 0
