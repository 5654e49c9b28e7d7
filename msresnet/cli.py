"""How every command-line entry of the book ends: one clear line, or the traceback on request.

A reader who passes a wrong path, a bad config value or a server that answers with
an error should see *one* line on stderr that names the file, key or value, and a
non-zero exit code, not forty lines of traceback ending in MindSpore's C++ reader.
Each ``python -m msresnet.X`` runs its ``main`` through :func:`run`:

- a :class:`SystemExit` (argparse's usage errors, ``--help``) passes through unchanged;
- any other exception becomes ``python -m msresnet.X: error: <message>`` and exit
  code 2 (3 for an exception the book does not raise on purpose, so a bug still
  looks different from a typo), and the line says how to see the traceback;
- ``--debug`` on the command line (anywhere) or ``MSRESNET_DEBUG=1`` in the
  environment re-raises instead, with the full traceback.

The module is MindSpore-free: it must be importable before the CPU setting acts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

DEBUG_FLAG = "--debug"
DEBUG_VARIABLE = "MSRESNET_DEBUG"
USAGE_ERROR = 2
UNEXPECTED_ERROR = 3


def _is_ours(err: BaseException) -> bool:
    """Raised on purpose with a message for the reader: the book's own error classes,
    and the operating system's (missing file, permission, full disk), which name the path.

    ``__main__`` counts as the book's: under ``python -m msresnet.train`` the classes
    defined in ``train.py`` (``TrainError``) live in the module ``__main__``."""
    module = type(err).__module__
    return module.startswith("msresnet") or module == "__main__" or isinstance(err, OSError)


def _message(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if _is_ours(err) else f"{type(err).__name__}: {text}"


def run(main: Callable[[Sequence[str]], int | None], argv: Sequence[str] | None = None, *,
        prog: str) -> int:
    """Call ``main(argv)`` (``--debug`` removed) and turn an exception into one line."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in args or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    args = [arg for arg in args if arg != DEBUG_FLAG]
    try:
        return int(main(args) or 0)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the point of this module
        if debug:
            raise
        code = USAGE_ERROR if _is_ours(err) else UNEXPECTED_ERROR
        hint = f" (run with {DEBUG_FLAG} or {DEBUG_VARIABLE}=1 for the traceback)"
        print(f"{prog}: error: {_message(err)}{hint}", file=sys.stderr)
        return code
