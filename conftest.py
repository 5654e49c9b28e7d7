"""pytest hooks for strict nbval runs of the chapters (``make nbval``), and the
order in which pytest-xdist hands out the unit-test files (``make unit-test``).

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
exports) go to one worker together, in that order. The unit tests (``--dist
loadfile``) go out file by file in collection order, the longest files first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from msresnet.notebook import NBVAL_OUTPUTS_VARIABLE

CHAINED = ("04_train_eval", "05_checkpoint_sweep", "08_export_deploy")
# The unit-test files that take longest (make unit-test's --durations: a few tiny
# trainings, jobs and exports each), handed out first: pytest-xdist orders files by
# their number of tests, and the longest file, started last, kept one worker busy
# alone at the end of the test command.
LONGEST_FIRST = ("tests/test_train.py", "tests/test_job.py", "tests/test_predict.py")


def pytest_xdist_make_scheduler(config, log):
    """Whole notebooks to each pytest-xdist worker, chapters 4, 5 and 8 as one unit.

    pytest-xdist's ``--dist loadscope`` already keeps a notebook's cells together (a
    notebook is a module); this only adds the chained chapters to one scope. (Its
    ``loadgroup`` would say the same with markers, but does not group under pytest
    9.2: nodeids no longer take the suffix it relies on.)
    """
    from xdist.scheduler import LoadFileScheduling, LoadScopeScheduling

    if not config.getoption("nbval", default=False):
        if config.getoption("dist", default="no") != "loadfile":
            return None
        config.option.loadscopereorder = False  # collection order: LONGEST_FIRST first
        return LoadFileScheduling(config, log)

    class ChapterScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            notebook = nodeid.split("::", 1)[0]
            return "+".join(CHAINED) if Path(notebook).stem in CHAINED else notebook

    return ChapterScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Unit tests: the LONGEST_FIRST files first (a stable sort: nothing else moves)."""
    if config.getoption("nbval", default=False):
        return
    rank = {name: number for number, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


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
