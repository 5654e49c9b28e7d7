"""``msresnet sweep``: the command line of :func:`msresnet.training.sweep.run_sweep`.

It names the run folder and the evaluation's options, scores every checkpoint
through the library function (the one chapter 5 calls too), and prints the table,
the test's scores and what ``best.json`` holds now. The library function knows
nothing of this layer.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence

from msresnet.command_line import ArgumentParser, count_or_null, positive_int
from msresnet.text_table import format_table
from msresnet.training.sweep import run_sweep


def _parser() -> ArgumentParser:
    parser = ArgumentParser(prog="msresnet sweep",
                            description="Evaluate every checkpoint of a training run.")
    parser.add_argument("run_dir", help="the run folder (holds config.yaml and the checkpoints)")
    parser.add_argument("--data_dir", default=None,
                        help="folder containing cifar-10-batches-bin (default: the run's own, "
                             "from its config.yaml); another folder's tables are written "
                             "beside the run's own, as sweep-<name>.csv and .json")
    parser.add_argument("--eval_samples", type=count_or_null, default=None,
                        help="first N images per checkpoint; null: all of the split")
    parser.add_argument("--split", choices=("valid", "test"), default=None,
                        help="choose on the run's held-out validation images or on the test "
                             "set (default: what the run validated on)")
    parser.add_argument("--batch_size", type=positive_int, default=None,
                        help="evaluation batch size")
    parser.add_argument("--no_promote", action="store_true",
                        help="do not write best.ckpt/best.json")
    parser.add_argument("--replace_best", action="store_true",
                        help="replace best.ckpt/best.json even when they were selected on "
                             "other images (they are kept as best.previous.*)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``msresnet sweep RUN_DIR [--data_dir DIR] [--eval_samples N|null] ...``: parse,
    :func:`~msresnet.training.sweep.run_sweep`, print the table, the test's scores and,
    last, what ``best.json`` holds now. Exit status 1 when no checkpoint was scored."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(levelname)s %(name)s: %(message)s")
    outcome = run_sweep(args.run_dir, args.data_dir, args.eval_samples, args.batch_size, args.split,
                        promote=not args.no_promote, replace_best=args.replace_best)
    print(format_table(outcome.result.rows()))
    if outcome.test is not None:
        print(json.dumps({role: outcome.test[role] for role in ("chosen", "last")}))
    best = outcome.best
    print(json.dumps({"best.json": {k: v for k, v in best.items() if k != "evaluated_on"}}
                     if best else {"best.json": None}))
    if outcome.refused is not None:
        raise outcome.refused
    return 0 if outcome.result.records else 1
