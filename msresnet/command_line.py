"""What every verb of ``msresnet`` shares: how it reads its command line and how it ends.

**One option spelling.** :class:`ArgumentParser` declares options as the config keys
are written (``--batch_size``) and reads ``--batch-size`` as the same option; a few
older names are read as the current ones (:data:`ArgumentParser.ALIASES`), among them
``--config`` for ``--profile``, the one way every verb names a profile (a name in
``configs/`` or a YAML file). The argument types (:func:`positive_int` and its
siblings) refuse a bad value with one line that names it.

**One line, or the traceback.** A reader who passes a wrong path, a bad config value
or a server that answers with an error should see *one* line on stderr that names
the file, key or value, and a non-zero exit code, not forty lines of traceback ending
in MindSpore's C++ reader. Each verb's ``main`` runs through :func:`run`:

- a :class:`SystemExit` with a status (argparse's usage errors, ``--help``) passes
  through unchanged; one with a message (``raise SystemExit("--repeat must be ...")``,
  how some verbs refuse a value) becomes ``msresnet VERB: error: <message>`` and exit
  code 2, like any other bad input (Python alone would exit 1);
- any other exception becomes ``msresnet VERB: error: <message>`` and exit
  code 2 (3 for an exception the book does not raise on purpose, so a bug still
  looks different from a typo), and the line says how to see the traceback;
- ``--debug`` on the command line (anywhere) or ``MSRESNET_DEBUG=1`` in the
  environment re-raises instead, with the full traceback.

The library's modules import this one, never :mod:`msresnet.cli` (the dispatcher on
the top floor). It is MindSpore-free: it must be importable before the CPU setting
acts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

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
    Older names are read the same way (:data:`ALIASES`: ``--out`` and ``--output``
    for ``--output_dir``, ``--batch`` for ``--batch_size``, ``--config`` for
    ``--profile``).
    ``allow_abbrev`` is off: a prefix of an option is an error, not a guess.
    """

    ALIASES = {"--out": "--output_dir", "--output": "--output_dir", "--batch": "--batch_size",
               "--config": "--profile"}

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


def first_word(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """``msresnet train cpu ...``: the profile written as the first word, and the rest.

    Not an argparse positional: one would take the value of an override argparse does
    not declare (``--epoch_size 3``) as the profile."""
    args = list(argv)
    return (args.pop(0) if args and not args[0].startswith("-") else None), args


def one_profile(word: str | None, option: str | None,
                default: str | None = None) -> str | None:
    """The profile a verb was given as its first word or with ``--profile``, else
    ``default``; both, naming different profiles, is refused. An empty name is
    returned as given, for the config check to refuse, never replaced by the default."""
    if word and option and word != option:
        raise SystemExit(f"two profiles given: {word!r} and --profile {option!r}")
    given = option if option is not None else word
    return default if given is None else given
