"""pytest hooks for strict nbval runs of the chapters (``make nbval``).

nbval compares each executed cell's outputs with the stored ones and then drops
them, so nothing after the run can read what the run itself printed, including
the cells whose output is not compared (``nbval-ignore-output``). With
``MSRESNET_NBVAL_OUTPUTS`` set to a folder, every executed cell's outputs are kept
there, one JSON-lines file per notebook: ``tests/test_nbval_outputs.py`` greps them
for the fake credentials ``make nbval`` gives chapter 6. Unset (unit tests, a
reader's own pytest run): nothing is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    folder = os.environ.get("MSRESNET_NBVAL_OUTPUTS")
    outputs = getattr(item, "test_outputs", None)  # an nbval cell, once it ran
    if not folder or call.when != "call" or outputs is None:
        return
    target = Path(folder) / f"{Path(str(item.fspath)).stem}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"cell": item.name, "outputs": outputs}) + "\n")
