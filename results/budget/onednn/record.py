"""Write this folder's records: oneDNN's verbose lines for one convolution.

Usage, from the repository root (see README.md)::

    .venv/bin/python results/budget/onednn/record.py mindspore
    .venv/bin/python results/budget/onednn/record.py pytorch $TORCH_ENV/bin/python

The first argument chooses the framework (``mindspore`` or ``pytorch``), the
optional second one the Python that runs it (default: this one), so PyTorch can
live in its own environment. The record is ``<framework>.json`` next to this
script; ``msresnet.experiments.onednn_trace.write_record`` does the work.
"""

import shlex
import sys
from pathlib import Path

from msresnet.experiments.onednn_trace import write_record

framework, *python = sys.argv[1:]
command = shlex.join([".venv/bin/python", "results/budget/onednn/record.py",
                      *sys.argv[1:]])
data = write_record(Path(__file__).with_name(f"{framework}.json"), framework,
                    command, python=python[0] if python else None)
for trace in data["traces"]:
    print(f"{trace['setting']:<4}  {trace['implementation']}  "
          f"{trace['calls'][-1]['src']}  {trace['median_ms']:.1f} ms")
