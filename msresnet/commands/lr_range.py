"""``msresnet lr-range``: the command line of :func:`msresnet.experiments.lr_range.range_test`.

It reads the profile (the first word or ``--profile``, ``cpu`` by default) and the
``--KEY VALUE`` overrides, checks the range and the divergence factor before
MindSpore loads (:mod:`msresnet.experiments.range_inputs`), builds the run's Config once
(:func:`msresnet.config.run.build_run_config`), runs the test and prints a one-line
summary (``--json`` keeps every step). The library function knows nothing of this
layer.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence

from msresnet.atomic import write_json
from msresnet.command_line import (ArgumentParser, first_word, one_profile, positive_int,
                                   positive_number)
from msresnet.config.profile import parse_overrides
from msresnet.experiments.range_inputs import check_diverge, rates
from msresnet.config.run import build_run_config


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet lr-range",
        usage="msresnet lr-range [PROFILE | --profile PROFILE_OR_YAML] [options] "
              "[--KEY VALUE ...]",
        description="Learning-rate range test on a profile's training step "
                    "(config overrides as --KEY VALUE after the options).")
    parser.add_argument("--profile", default=None, help="profile or YAML (default cpu); "
                        "also the first word")
    parser.add_argument("--lr_min", type=positive_number, default=1e-3)
    parser.add_argument("--lr_max", type=positive_number, default=10.0)
    parser.add_argument("--steps", type=positive_int, default=200)
    parser.add_argument("--diverge", type=positive_number, default=4.0,
                        help="stop once the smoothed loss is this many times its minimum")
    parser.add_argument("--json", default=None, help="write the result here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    word, argv = first_word(argv if argv is not None else sys.argv[1:])
    args, rest = _parser().parse_known_args(argv)
    profile = one_profile(word, args.profile, default="cpu")
    rates(args.lr_min, args.lr_max, args.steps)  # a bad range fails before MindSpore loads
    check_diverge(args.diverge)
    config = build_run_config(profile, parse_overrides(rest))
    import mindspore.dataset as ds  # here: the checks above need none of MindSpore
    from msresnet.experiments.lr_range import range_test

    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    ds.config.set_seed(config.seed)
    result = range_test(config, lr_min=args.lr_min, lr_max=args.lr_max, steps=args.steps,
                        diverge=args.diverge)
    summary = {"steps": len(result.lr), "diverged": result.diverged,
               "min_loss_lr": result.min_loss_lr, "steepest_lr": result.steepest_lr,
               "seconds": result.seconds}
    if args.json:
        write_json(args.json, result.to_dict())
        summary["json"] = args.json
    print(json.dumps(summary))
    return 0
