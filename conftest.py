"""pytest hooks for strict nbval runs of the chapters (``make nbval``).

nbval compares each executed cell's outputs with the stored ones and then drops
them, so nothing after the run can read what the run itself printed, including
the cells whose output is not compared (``nbval-ignore-output``). With
``MSRESNET_NBVAL_OUTPUTS`` set to a folder, every executed cell's outputs are kept
there, one JSON-lines file per notebook: ``tests/test_nbval_outputs.py`` greps them
for the fake credentials ``make nbval`` gives chapter 6. Unset (unit tests, a
reader's own pytest run): nothing is written.

``make nbval NBVAL_DATA=DIR`` runs the chapters on the copy of CIFAR-10 in DIR
(``$MSRESNET_DATA_DIR``), whose name the chapters print where the stored outputs say
``data``: :func:`pytest_configure` gives nbval the sanitize file with that folder in
the regex of its ``[differing-data-copy]`` section (written for ``data-variant``, the
default), so any folder name is masked, not one.

Under pytest-xdist (``make nbval`` runs two workers) each notebook goes to one
worker whole, so its cells run in order in one kernel, and the chapters that read
what an earlier one wrote (chapter 4 trains the checkpoints that 5 sweeps and 8
exports) go to one worker together, in that order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from msresnet.chapters.notebook import NBVAL_OUTPUTS_VARIABLE
from msresnet.data.source import DATA_DIR_VARIABLE

CHAINED = ("04_train_eval", "05_checkpoint_sweep", "08_export_deploy")
DATA_COPY_SECTION = "[differing-data-copy]"
DATA_COPY_NAME = "data-variant"  # the folder that section's regex names in the file


def sanitize_for_data_dir(text: str, data_dir: str, source: str) -> str:
    """The sanitize file ``text`` with ``data_dir`` in place of ``data-variant`` in the
    regex of its ``[differing-data-copy]`` section (kept in its place: the sections
    apply in order, and ``[repository-root]`` must see the masked name).

    ``data_dir`` must be relative to the repository root and inside it, as the test
    command names it; anything else is a :class:`pytest.UsageError` naming it."""
    name = Path(os.path.normpath(data_dir)).as_posix()
    if os.path.isabs(data_dir) or name == ".." or name.startswith("../"):
        raise pytest.UsageError(f"{DATA_DIR_VARIABLE}={data_dir}: strict nbval needs the data "
                                "copy inside the repository, named relative to its root "
                                "(the stored outputs print ../data)")
    section = text.find(DATA_COPY_SECTION)
    line = re.compile(rf"^regex: .*{re.escape(DATA_COPY_NAME)}.*$", re.M)
    found = line.search(text, section) if section >= 0 else None
    if found is None:
        raise pytest.UsageError(f"{source}: no {DATA_COPY_SECTION} section with a regex naming "
                                f"{DATA_COPY_NAME} to put {name} in")
    masked = found.group(0).replace(DATA_COPY_NAME, re.escape(name))
    return text[:found.start()] + masked + text[found.end():]


def pytest_configure(config):
    """Under nbval with ``$MSRESNET_DATA_DIR`` set: the sanitize file given, with that
    folder masked (:func:`sanitize_for_data_dir`), written to a temporary file that
    nbval reads instead."""
    source = getattr(config.option, "nbval_sanitize_with", None)
    data_dir = os.environ.get(DATA_DIR_VARIABLE)
    if not config.getoption("nbval", default=False) or not source or not data_dir:
        return
    folder = Path(tempfile.mkdtemp(prefix="nbval-sanitize-"))
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    target = folder / Path(source).name
    target.write_text(sanitize_for_data_dir(Path(source).read_text(), data_dir, source))
    config.option.nbval_sanitize_with = str(target)


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
