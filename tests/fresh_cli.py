"""Run ``msresnet`` commands in a fresh Python process and say whether MindSpore loaded.

The commands that check their input with MindSpore-free modules (lr-range, export,
predict) promise a one-line error before MindSpore loads (about 3 CPU-s); only a
process that has imported nothing yet can show it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FreshRun:
    codes: list[int]            # each command's exit status, in order
    mindspore_loaded: bool      # 'mindspore' in sys.modules after the last one
    stderr_lines: list[str]


def run_in_fresh_process(commands: list[list[str]], cwd: Path) -> FreshRun:
    """``msresnet.cli.main(argv)`` for each argv of ``commands``, in one new process."""
    code = ("import json, sys\n"
            "from msresnet import cli\n"
            f"codes = [cli.main(argv) for argv in {commands!r}]\n"
            "print(json.dumps([codes, 'mindspore' in sys.modules]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    codes, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return FreshRun(codes, loaded, done.stderr.strip().splitlines())
