"""The one command, ``msresnet <verb>``, and how every verb ends: one clear line, or the traceback.

``msresnet --help`` lists the verbs (:data:`COMMANDS`); ``msresnet VERB ARGS`` imports
the module that implements the verb only then (so ``msresnet --help`` and the
MindSpore-free verbs never load MindSpore) and runs its ``main(argv)``. The console
script ``msresnet`` and ``python -m msresnet`` are the same entry (:func:`main`).

A reader who passes a wrong path, a bad config value or a server that answers with
an error should see *one* line on stderr that names the file, key or value, and a
non-zero exit code, not forty lines of traceback ending in MindSpore's C++ reader.
Each verb's ``main`` runs through :func:`run`:

- a :class:`SystemExit` with a status (argparse's usage errors, ``--help``) passes
  through unchanged; one with a message (``raise SystemExit("--repeat must be ...")``,
  how some verbs refuse a value) becomes ``msresnet VERB: error: <message>`` and exit
  code 2, like any other bad input (Python alone would exit 1);
- any other exception becomes ``msresnet VERB: error: <message>`` and exit
  code 2 (3 for an exception the book does not raise on purpose, so a bug still
  looks different from a typo), and the line says how to see the traceback;
- ``--debug`` on the command line (anywhere) or ``MSRESNET_DEBUG=1`` in the
  environment re-raises instead, with the full traceback.

The module is MindSpore-free: it must be importable before the CPU setting acts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from msresnet.spelling import did_you_mean

DEBUG_FLAG = "--debug"
DEBUG_VARIABLE = "MSRESNET_DEBUG"
USAGE_ERROR = 2
UNEXPECTED_ERROR = 3


def is_ours(err: BaseException) -> bool:
    """Raised on purpose with a message for the reader: the book's own error classes,
    and the operating system's (missing file, permission, full disk), which name the path."""
    module = type(err).__module__
    return module.startswith("msresnet") or isinstance(err, OSError)


def _message(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if is_ours(err) else f"{type(err).__name__}: {text}"


def run(main: Callable[[Sequence[str]], int | None], argv: Sequence[str] | None = None, *,
        prog: str) -> int:
    """Call ``main(argv)`` (``--debug`` removed) and turn an exception into one line."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in args or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    args = [arg for arg in args if arg != DEBUG_FLAG]
    try:
        return int(main(args) or 0)
    except SystemExit as exited:
        if not isinstance(exited.code, str):
            raise
        print(f"{prog}: error: {exited.code}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the point of this module
        if debug:
            raise
        code = USAGE_ERROR if is_ours(err) else UNEXPECTED_ERROR
        hint = f" (run with {DEBUG_FLAG} or {DEBUG_VARIABLE}=1 for the traceback)"
        print(f"{prog}: error: {_message(err)}{hint}", file=sys.stderr)
        return code


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the book's one option spelling: ``--batch_size``, as the config
    keys are written, and ``--batch-size`` accepted for it.

    Every verb declares its options with underscores; a command line may write any
    of them with hyphens instead (``--no-promote``, ``--data-dir DIR``,
    ``--batch-size=64``), which :meth:`parse_known_args` rewrites to the declared
    spelling before parsing, so help and messages show one spelling and both work.
    The older short names of three options are read the same way (:data:`ALIASES`:
    ``--out`` and ``--output`` for ``--output_dir``, ``--batch`` for ``--batch_size``).
    ``allow_abbrev`` is off: a prefix of an option is an error, not a guess.
    """

    ALIASES = {"--out": "--output_dir", "--output": "--output_dir", "--batch": "--batch_size"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def add_argument(self, *names: Any, **kwargs: Any) -> argparse.Action:
        for name in names:
            if isinstance(name, str) and name.startswith("--") and "-" in name[2:]:
                raise ValueError(f"{self.prog}: declare {name} as "
                                 f"{'--' + name[2:].replace('-', '_')} (one spelling)")
        return super().add_argument(*names, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> Any:
        tokens = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args([self._declared(t) for t in tokens], namespace)

    def _declared(self, token: str) -> str:
        """``--batch-size=8`` -> ``--batch_size=8`` when that is a declared option."""
        if not token.startswith("--") or token == "--":
            return token
        name, equals, value = token.partition("=")
        spelled = "--" + name[2:].replace("-", "_")
        spelled = self.ALIASES.get(spelled, spelled)
        return spelled + equals + value if spelled in self._option_string_actions else token


def _integer(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 1 (a batch, a count of steps)."""
    return _integer(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 0 (warm-up steps, a seed)."""
    return _integer(text, 0, "an integer >= 0")


def positive_number(text: str) -> float:
    """An argparse ``type``: a finite number above 0 (seconds, a rate)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text!r}")
    return value


def count_or_null(text: str) -> int | None:
    """An argparse ``type``: a positive integer, or null/none (all of them)."""
    if text.strip().lower() in ("null", "none", "~"):
        return None
    return _integer(text, 1, "a positive integer or null")


COMMANDS: dict[str, tuple[str, str]] = {
    # verb: (module with main(argv), one line for ``msresnet --help``), in the book's order
    "prepare": ("msresnet.data.prepare", "download or copy CIFAR-10, check it, make the ready folder"),
    "train": ("msresnet.commands.train", "train and validate ResNet50 under a profile"),
    "sweep": ("msresnet.training.sweep", "score every checkpoint of a run, promote the best"),
    "export": ("msresnet.deploy.export", "a checkpoint to MINDIR, ONNX and INT8 ONNX"),
    "predict": ("msresnet.deploy.predict", "the top-5 classes of pictures (checkpoint, MINDIR or ONNX)"),
    "doctor": ("msresnet.doctor.command", "check this machine for a profile before a long run"),
    "launch": ("msresnet.jobs.launch", "data-parallel training with msrun"),
    "job": ("msresnet.jobs.job", "a ModelArts-style training job: stage, train, upload"),
    "sync": ("msresnet.storage.sync", "copy from or to object storage, once per node"),
    "reproduce": ("msresnet.chapters.reproduce", "run every chapter with papermill, write a report"),
    "results-page": ("msresnet.chapters.results_page", "record a reproduction as the reference result"),
    "lab": ("msresnet.chapters.lab", "JupyterLab on the book's kernel"),
    "convert-mindrecord": ("msresnet.data.mindrecord", "CIFAR-10 binary files to MindRecord"),
    "bench": ("msresnet.experiments.bench", "time a training step with and without the ISA cap"),
    "pipeline-bench": ("msresnet.experiments.pipeline_bench", "time the data pipeline, alone and in training"),
    "ablation": ("msresnet.experiments.ablation", "chapter 10's short runs, one per budget trick"),
    "lr-range": ("msresnet.experiments.lr_range", "a learning-rate range test on a profile"),
    "local-s3": ("msresnet.testing.local_s3", "the loopback S3 server the chapters start (internal)"),
}
"""Every verb of ``msresnet``; ``tests/test_cli_entries.py`` checks each module has ``main``."""


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {verb:<{width}}  {line}" for verb, (_, line) in COMMANDS.items()]
    return ("usage: msresnet COMMAND [ARGS ...] [--debug]\n\n"
            "The command-line tools of the book 'ResNet50 on CIFAR-10 with MindSpore'.\n\n"
            "commands:\n" + "\n".join(lines) +
            "\n\n'msresnet COMMAND --help' shows a command's options.")


def main(argv: Sequence[str] | None = None) -> int:
    """``msresnet VERB ARGS``: import the verb's module and :func:`run` its ``main``."""
    import importlib

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else USAGE_ERROR
    verb, rest = args[0], args[1:]
    if verb not in COMMANDS:
        hint = did_you_mean(verb, COMMANDS)
        print(f"msresnet: error: unknown command {verb!r}{hint}; 'msresnet --help' lists them",
              file=sys.stderr)
        return USAGE_ERROR
    module = importlib.import_module(COMMANDS[verb][0])
    return run(module.main, rest, prog=f"msresnet {verb}")
