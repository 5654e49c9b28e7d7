"""``msresnet export``: the command line of :func:`msresnet.deploy.export.export_checkpoint`
(MINDIR and ONNX) and, with ``--browser``, of :func:`msresnet.deploy.export.export_for_browser`
(the INT8 ONNX model and ``model.json`` the book's in-browser page serves).

It checks the checkpoint and its config before any folder is made, exports into a
folder that a failed export does not leave behind, and prints what it wrote. The
library functions know nothing of this layer.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from msresnet.atomic import output_folder
from msresnet.command_line import ArgumentParser, positive_int
from msresnet.deploy.checkpoint_config import EXPORT_RECORD, run_config


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet export",
        description="Export a checkpoint to MINDIR and ONNX, or (--browser) to the INT8 ONNX "
                    "model and model.json the book's in-browser page serves.")
    parser.add_argument("checkpoint", help="a .ckpt in a run folder (its config.yaml names "
                                           "the network)")
    parser.add_argument("--output_dir", required=True, help="folder to write into")
    parser.add_argument("--profile", default=None, help="profile or YAML instead of the "
                        "run's config.yaml")
    parser.add_argument("--batch_size", type=positive_int, default=1, help="batch size the graphs are "
                                                             "exported for")
    parser.add_argument("--force", action="store_true",
                        help=f"replace resnet50.onnx/.mindir files that {EXPORT_RECORD} in the "
                             "folder does not list (another program's)")
    parser.add_argument("--browser", action="store_true",
                        help="write model.int8.onnx (symbolic batch, INT8) and model.json")
    parser.add_argument("--data_dir", default=None,
                        help="folder holding cifar-10-batches-bin, for INT8 calibration "
                             "(default: the run's)")
    parser.add_argument("--calibration_images", type=positive_int, default=512,
                        help="training images that calibrate the INT8 model (default 512)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``msresnet export``: :func:`~msresnet.deploy.export.export_checkpoint`, or
    :func:`~msresnet.deploy.export.export_for_browser`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    run_config(args.checkpoint, args.profile)  # a missing file or config: before any folder
    from msresnet.deploy.export import export_checkpoint, export_for_browser  # MindSpore

    if not args.browser:
        with output_folder(args.output_dir):  # a failed export leaves no empty folder
            written = export_checkpoint(args.checkpoint, args.output_dir, args.batch_size,
                                        args.profile, force=args.force)
        print(*(f"wrote {path} ({path.stat().st_size:,} bytes)" for path in written), sep="\n")
        return 0
    with output_folder(args.output_dir):
        record = export_for_browser(args.checkpoint, args.output_dir, data_dir=args.data_dir,
                                    calibration_images=args.calibration_images,
                                    config=args.profile,
                                    command=shlex.join(["msresnet", "export", *argv]))
    print(f"wrote {Path(args.output_dir) / record['model']} ({record['bytes']:,} bytes) and "
          f"{Path(args.output_dir) / 'model.json'}")
    return 0
