"""``msresnet doctor``: the command line of :func:`msresnet.doctor.command.diagnose`.

It builds the profile's Config as training would (the data folder given, else
``$MSRESNET_DATA_DIR``, else the profile's), prints each check as it finishes, and
writes everything found with ``--json``. The exit status is 0 when every check
passed, 1 when one failed (2 for a bad command line). The checks know nothing of
this layer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from msresnet.atomic import write_json
from msresnet.command_line import ArgumentParser, positive_int
from msresnet.config.profile import AMP_LEVELS
from msresnet.doctor.checks import FAIL, Check
from msresnet.doctor.command import diagnose, header, record
from msresnet.config.run import build_run_config

DEFAULT_STEPS = 30


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet doctor",
        description="Check this machine for a profile before a long run: MindSpore and its "
                    "back ends, the device, CUDA/cuDNN or CANN, msrun and NCCL/HCCL, the "
                    "data, and a timed run of training steps with the projected run time.")
    parser.add_argument("--profile", required=True, help="smoke, cpu, gpu, ascend or a YAML path")
    parser.add_argument("--data_dir", default=None,
                        help="folder with cifar-10-batches-bin (default: the profile's)")
    parser.add_argument("--steps", type=positive_int, default=DEFAULT_STEPS,
                        help=f"timed training steps, after as many that compile "
                             f"(default {DEFAULT_STEPS})")
    parser.add_argument("--batch_size", type=positive_int, default=None,
                        help="batch of the timed steps (default: the profile's)")
    parser.add_argument("--amp_level", choices=AMP_LEVELS, default=None,
                        help="mixed precision of the timed steps (default: the profile's)")
    parser.add_argument("--json", type=Path, default=None, help="write everything found here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when every check passed, 1 when one failed, 2 for a bad command line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    overrides = {"data_dir": args.data_dir, "amp_level": args.amp_level}
    # the folder training would read: the one given, else $MSRESNET_DATA_DIR, else the profile's
    config = build_run_config(args.profile, {k: v for k, v in overrides.items() if v is not None})
    print(header(config), flush=True)
    checks: list[Check] = []
    for check in diagnose(config, args.steps, args.batch_size or config.batch_size):
        checks.append(check)
        print("\n".join([check.line(), *("      " + note for note in check.notes)]), flush=True)
    failed = [c.name for c in checks if c.status == FAIL]
    print(f"failed: {', '.join(failed)}" if failed else "every check passed")
    if args.json is not None:
        write_json(args.json, record(config, checks, argv))
        print(f"wrote {args.json}")
    return 1 if failed else 0
