"""What a failed ``msrun`` worker left behind, in a few readable lines: the end of its
log without MindSpore's runtime chatter, and how its process ended."""

from __future__ import annotations

import re
import signal
from pathlib import Path

TAIL_LINES = 25
_RUNTIME_CHATTER = re.compile(r"^\[(WARNING|INFO|DEBUG)\] ")


def log_tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of a log, without MindSpore's WARNING/INFO chatter
    (unless nothing else is left)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    useful = [line for line in text if line.strip() and not _RUNTIME_CHATTER.match(line)]
    return (useful or text)[-lines:]


def describe_exit(code: int) -> str:
    """How a worker process ended, in words (its exit code, or the signal that killed it)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
