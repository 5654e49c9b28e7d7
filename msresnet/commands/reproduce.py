"""``msresnet reproduce``: the command line of :func:`msresnet.chapters.reproduce.reproduce`.

It reads the profile, the ``-p KEY VALUE`` parameters and the chapters to run,
runs them through the library function and says where the report is; the command
it records in ``run.json`` is :func:`msresnet.chapters.reproduce.command_line`'s.
The library function knows nothing of this layer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import msresnet.chapters.reproduce as library
from msresnet.chapters.reproduce import NOTEBOOK_DIR, command_line, reproduce
from msresnet.command_line import ArgumentParser
from msresnet.config.profile import PROFILES


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="msresnet reproduce",
                            description=library.__doc__.split("\n\n")[0])
    parser.add_argument("--profile", required=True, choices=PROFILES)
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                        metavar=("KEY", "VALUE"), help="a notebook parameter / config key")
    parser.add_argument("--only", help="chapter numbers to run, e.g. 1,4,5")
    parser.add_argument("--output_dir", required=True, type=Path, help="output folder, e.g. runs/NAME")
    parser.add_argument("--resume", action="store_true",
                        help="skip chapters that completed with the same parameters")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOK_DIR,
                        help="folder of the chapter notebooks (default: notebooks/)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = command_line(argv if argv is not None else sys.argv[1:])
    # a ReproduceError or ConfigError ends as msresnet.command_line's one line, exit 2
    run = reproduce(args.profile, args.output_dir, args.parameter, args.only, args.resume, command,
                    notebook_dir=args.notebooks)
    print(f"{len(run['notebooks'])} chapters in {run['seconds']:.0f} s; "
          f"report: {args.output_dir / 'report.md'}")
    return 0
