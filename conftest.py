"""pytest hooks for strict nbval runs of the chapters (``make nbval``).

nbval compares each executed cell's outputs with the stored ones and then drops
them, so nothing after the run can read what the run itself printed, including
the cells whose output is not compared (``nbval-ignore-output``). With
``MSRESNET_NBVAL_OUTPUTS`` set to a folder, every executed cell's outputs are kept
there, one JSON-lines file per notebook: ``tests/test_nbval_outputs.py`` greps them
for the fake credentials ``make nbval`` gives chapter 6. Unset (unit tests, a
reader's own pytest run): nothing is written.

Under pytest-xdist (``make nbval`` runs two workers) each notebook goes to one
worker whole, so its cells run in order in one kernel, and the chapters that read
what an earlier one wrote (chapter 4 trains the checkpoints that 5 sweeps and 8
exports) go to one worker together, in that order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from msresnet.book.notebook import NBVAL_OUTPUTS_VARIABLE

CHAINED = ("04_train_eval", "05_checkpoint_sweep", "08_export_deploy")


def pytest_xdist_make_scheduler(config, log):
    """Whole notebooks to each pytest-xdist worker, chapters 4, 5 and 8 as one unit.

    pytest-xdist's ``--dist loadscope`` already keeps a notebook's cells together (a
    notebook is a module); this only adds the chained chapters to one scope. (Its
    ``loadgroup`` would say the same with markers, but does not group under pytest
    9.2: nodeids no longer take the suffix it relies on.)
    """
    if not config.getoption("nbval", default=False):
        return None  # the unit tests keep their own --dist
    from xdist.scheduler import LoadScopeScheduling

    class ChapterScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            notebook = nodeid.split("::", 1)[0]
            return "+".join(CHAINED) if Path(notebook).stem in CHAINED else notebook

    return ChapterScheduling(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    folder = os.environ.get(NBVAL_OUTPUTS_VARIABLE)
    outputs = getattr(item, "test_outputs", None)  # an nbval cell, once it ran
    if not folder or call.when != "call" or outputs is None:
        return
    target = Path(folder) / f"{Path(str(item.fspath)).stem}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"cell": item.name, "outputs": outputs}) + "\n")
