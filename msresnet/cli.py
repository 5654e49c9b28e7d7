"""The one command, ``msresnet <verb>``: the dispatcher on the package's top floor.

``msresnet --help`` lists the verbs (:data:`COMMANDS`); ``msresnet VERB ARGS`` imports
the module that implements the verb only then (so ``msresnet --help`` and the
MindSpore-free verbs never load MindSpore) and runs its ``main(argv)`` through
:func:`msresnet.command_line.run`, which turns an error into one line. The console
script ``msresnet`` and ``python -m msresnet`` are the same entry (:func:`main`).
No library module imports this one: what the verbs share (the option spelling, the
argument types, the one-line errors) is :mod:`msresnet.command_line`.

The module is MindSpore-free: it must be importable before the CPU setting acts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from msresnet.command_line import USAGE_ERROR, run
from msresnet.spelling import did_you_mean

COMMANDS: dict[str, tuple[str, str]] = {
    # verb: (module with main(argv), one line for ``msresnet --help``), in the book's order
    "prepare": ("msresnet.commands.prepare", "download or copy CIFAR-10, check it, make the ready folder"),
    "train": ("msresnet.commands.train", "train and validate ResNet50 under a profile"),
    "sweep": ("msresnet.commands.sweep", "score every checkpoint of a run, promote the best"),
    "export": ("msresnet.commands.export", "a checkpoint to MINDIR, ONNX and INT8 ONNX"),
    "predict": ("msresnet.commands.predict", "the top-5 classes of pictures (checkpoint, MINDIR or ONNX)"),
    "doctor": ("msresnet.commands.doctor", "check this machine for a profile before a long run"),
    "launch": ("msresnet.commands.launch", "data-parallel training with msrun"),
    "job": ("msresnet.commands.job", "a ModelArts-style training job: stage, train, upload"),
    "sync": ("msresnet.commands.sync", "copy from or to object storage, once per node"),
    "reproduce": ("msresnet.commands.reproduce", "run every chapter with papermill, write a report"),
    "results-page": ("msresnet.commands.results_page", "record a reproduction as the reference result"),
    "lab": ("msresnet.commands.lab", "JupyterLab on the book's kernel"),
    "convert-mindrecord": ("msresnet.commands.convert_mindrecord", "CIFAR-10 binary files to MindRecord"),
    "bench": ("msresnet.commands.bench", "time a training step with and without the ISA cap"),
    "pipeline-bench": ("msresnet.commands.pipeline_bench", "time the data pipeline, alone and in training"),
    "ablation": ("msresnet.commands.ablation", "chapter 10's short runs, one per budget trick"),
    "lr-range": ("msresnet.commands.lr_range", "a learning-rate range test on a profile"),
    "local-s3": ("msresnet.commands.local_s3", "the loopback S3 server the chapters start (internal)"),
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
