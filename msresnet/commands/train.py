"""``msresnet train``: the command line of :func:`msresnet.training.train.train_and_evaluate`.

It reads the profile and the ``--KEY VALUE`` overrides, builds the run's Config
once (:func:`msresnet.config.run.build_run_config`), adds chapter 7's per-rank
evidence when the launcher asked for it, trains, and prints a one-line summary.
The training function knows nothing of this layer.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from msresnet.command_line import ArgumentParser, first_word, one_profile
from msresnet.config.profile import ConfigError, available_profiles, parse_overrides
from msresnet.config.run import build_run_config
from msresnet.training.distributed import DUMP_VARIABLE

if TYPE_CHECKING:
    from mindspore.train import Callback


def callbacks_from_environment(environ: Mapping[str, str] | None = None) -> list[Callback]:
    """``[RankDump(folder)]`` when :data:`~msresnet.training.distributed.DUMP_VARIABLE` names a
    folder (``msresnet launch --rank_dump`` sets it), else ``[]``.

    Only the command line asks, and imports the evidence code of chapter 7 only then.
    """
    env = os.environ if environ is None else environ
    folder = env.get(DUMP_VARIABLE, "").strip()
    if not folder:
        return []
    from msresnet.ranks.dump import RankDump

    return [RankDump(folder)]


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet train",
        usage="msresnet train [PROFILE | --profile PROFILE_OR_YAML] [--output_dir DIR]\n"
              "                      [--stop_after_epoch N] [--no_progress] [--KEY VALUE ...]",
        description="Train and validate ResNet50 on CIFAR-10 under a profile.",
        epilog="Every Config field can be overridden with --KEY VALUE (e.g. --epoch_size 3 "
               "--train_samples 256 --resume_from auto; chapter 2 lists them). The data "
               "folder: --data_dir DIR, else $MSRESNET_DATA_DIR, else the profile's (those "
               "two relative to the repository root).")
    parser.add_argument("--profile", default=None, help="the profile: smoke, cpu, gpu or "
                        "ascend (configs/<name>.yaml), or a YAML path; also the first word")
    parser.add_argument("--output_dir", default=None, help="where the run writes "
                        "(default: the profile's output_dir)")
    parser.add_argument("--stop_after_epoch", type=int, default=None,
                        help="stop after this epoch, as if interrupted (resume continues)")
    parser.add_argument("--no_progress", action="store_true", help="no progress bar")
    return parser


def parse_args(argv: Sequence[str]) -> tuple[str, dict[str, Any], int | None, bool]:
    """``(profile_or_path, overrides, stop_after_epoch, progress)`` from the command line;
    a bad value raises :class:`~msresnet.config.profile.ConfigError` naming it."""
    first, argv = first_word(argv)
    args, rest = _parser().parse_known_args(argv)
    # '' is a typo, not "the default profile": smoke only when none is named at all
    profile = one_profile(first, args.profile, default="smoke")
    if not profile.strip():
        raise ConfigError(f"profile: empty name {profile!r}; name a profile "
                          f"({', '.join(available_profiles())}) or a YAML file", key="profile")
    # 0 or less would still train a whole epoch before the callback could stop it
    if args.stop_after_epoch is not None and args.stop_after_epoch < 1:
        raise ConfigError(f"--stop_after_epoch: must be a positive integer, got "
                          f"{args.stop_after_epoch}", key="stop_after_epoch")
    overrides = dict(parse_overrides(rest))
    if args.output_dir is not None:
        overrides["output_dir"] = args.output_dir
    return profile, overrides, args.stop_after_epoch, not args.no_progress


def main(argv: Sequence[str] | None = None) -> int:
    """``msresnet train``: train, print a one-line summary; a bad config or a run that
    cannot start raises, and ``msresnet`` prints the one line (:func:`msresnet.command_line.run`)."""
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    profile, overrides, stop, progress = parse_args(argv)
    config = build_run_config(profile, overrides)
    # MindSpore loads only now (about 2.5 s of CPU): a typo in the command fails first
    from msresnet.training.train import train_and_evaluate

    result = train_and_evaluate(config, stop_after_epoch=stop, progress=progress,
                                extra_callbacks=callbacks_from_environment())
    best = result.best or {}
    print(json.dumps({"output_dir": str(result.output_dir), "epochs": result.epochs,
                      "steps": result.steps, "seconds": result.seconds,
                      "final_loss": result.final_loss, "best_top1": best.get("top1"),
                      "test_top1": (result.test or {}).get("chosen", {}).get("top1"),
                      "last_test_top1": (result.test or {}).get("last", {}).get("top1")}))
    return 0
