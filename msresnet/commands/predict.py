"""``msresnet predict``: the command line of :func:`msresnet.deploy.predict.predict`.

It reads every picture first (:func:`msresnet.deploy.predict.read_pictures`: one line
on stderr for each unusable one), opens the model only when one is usable
(:func:`msresnet.deploy.predict.open_model`), and prints each picture's top classes;
the exit status is 2 when a picture was left out. The library functions know
nothing of this layer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from msresnet.command_line import USAGE_ERROR, ArgumentParser
from msresnet.data.cifar10 import CLASSES
from msresnet.data.images import Color
from msresnet.deploy.predict import (REFUSE, TOP_K, background_colour, open_model, predict,
                                     read_pictures)


def _top(text: str) -> int:
    """``--top``'s value: 1 to the number of classes."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= len(CLASSES):
        raise argparse.ArgumentTypeError(f"must be between 1 and {len(CLASSES)}, got {text!r}")
    return value


def _background(text: str) -> Color | None:
    try:
        return background_colour(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a colour Pillow knows (white, black, #808080...) nor "
            f"'{REFUSE}'") from None


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet predict",
        description="Print the top-5 CIFAR-10 classes of each image (any size, any format "
                    "Pillow reads) for a checkpoint, MINDIR or ONNX model.")
    parser.add_argument("model", help="a .ckpt (its run folder's config.yaml says which network), "
                                      ".mindir or .onnx file")
    parser.add_argument("images", nargs="+", help="picture files")
    parser.add_argument("--profile", default=None,
                        help="profile or YAML describing the checkpoint's network "
                             "(default: config.yaml beside the checkpoint)")
    parser.add_argument("--top", type=_top, default=TOP_K, help="classes to print per image")
    parser.add_argument("--background", type=_background, default="white",
                        help="colour transparent pixels are composited on (a name or #rrggbb; "
                             f"default white), or '{REFUSE}' to refuse such pictures")
    parser.add_argument("--verbose", action="store_true",
                        help="also print how each picture was converted to RGB")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    failed = []

    def report(line: str) -> None:  # one line per unusable picture, as msresnet.command_line writes one
        failed.append(line)
        print(f"{parser.prog}: error: {line}", file=sys.stderr, flush=True)

    pictures = read_pictures(args.images, args.background, report)
    if not pictures:
        return USAGE_ERROR
    model = open_model(args.model, args.profile)
    print(f"model: {model.path} ({model.kind}, input {model.image_size}x{model.image_size})")
    ranked_all = predict(model, [picture for _, picture in pictures], args.top)
    for (file, picture), ranked in zip(pictures, ranked_all):
        print(f"{file}:")
        if args.verbose:
            print("".join(f"  read: {step}\n" for step in picture.steps), end="")
        for rank, (name, probability) in enumerate(ranked, start=1):
            print(f"  {rank}. {name:<10} {probability:7.2%}")
    return USAGE_ERROR if failed else 0
