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

Under pytest-xdist the heaviest work goes out first (:func:`heaviest_first`), so the
last minutes of a run are short files on both workers, not one long file on one
while the other waits: chapters by their stored execution time, unit-test files by
:data:`UNIT_SECONDS`. The order changes no result, only when each file starts.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import pytest

from msresnet.chapters.notebook import NBVAL_OUTPUTS_VARIABLE
from msresnet.data.source import DATA_DIR_VARIABLE

T = TypeVar("T")
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


UNIT_SECONDS = {
    "tests/test_train.py": 234, "tests/test_predict.py": 75, "tests/test_msrun.py": 54,
    "tests/test_job.py": 39, "tests/test_lr_range.py": 35, "tests/test_reproduce.py": 29,
    "tests/test_cli_entries.py": 24, "tests/test_bench.py": 22, "tests/test_doctor.py": 19,
}
"""The slowest unit-test files, seconds of their tests on an idle 2-core host
(``pytest --durations``, 2026-12-06); every other file counts 0 and keeps its place."""


@functools.cache
def _stored_execution():
    """``book/_ext/stored_execution.py``, the execution-statistics page's reader of a
    notebook's stored run (its cells' execution metadata)."""
    source = Path(__file__).parent / "book" / "_ext" / "stored_execution.py"
    spec = importlib.util.spec_from_file_location("stored_execution", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebook_seconds(path: Path) -> float:
    """Seconds a notebook's stored run took, as the execution-statistics page says."""
    return _stored_execution().notebook_run(path)["seconds"] or 0.0


def heaviest_first(entries: Iterable[T], scope: Callable[[T], str],
                   seconds: Callable[[str], float]) -> list[T]:
    """``entries`` (tests or their nodeids) with their scopes (a file, a notebook, a
    chain of them) in order of ``seconds(scope)``, largest first; equal scopes keep
    their order, and so does every test inside a scope (a stable sort)."""
    entries = list(entries)
    weight = {name: seconds(name) for name in {scope(entry) for entry in entries}}
    return sorted(entries, key=lambda entry: -weight[scope(entry)])


def _scope_seconds(scope: str) -> float:
    """A unit-test file's :data:`UNIT_SECONDS`, or a chapter scope's stored seconds."""
    if scope in UNIT_SECONDS:
        return UNIT_SECONDS[scope]
    notebooks = [Path(__file__).parent / part for part in scope.split("+")]
    if all(n.suffix == ".ipynb" for n in notebooks):
        return sum(notebook_seconds(n) for n in notebooks if n.is_file())
    return 0.0


def work_scope(nodeid: str, nbval: bool) -> str:
    """What one pytest-xdist worker runs whole: a test file, a notebook, or under
    nbval the chained chapters together."""
    name = nodeid.split("::", 1)[0]
    if not nbval or Path(name).stem not in CHAINED:
        return name
    return "+".join(str(Path(name).with_stem(stem)) for stem in CHAINED)


def _ordered_by_weight(config) -> bool | None:
    """None when this run hands out no whole scopes; else whether it is nbval's."""
    nbval = bool(config.getoption("nbval", default=False))
    return nbval if nbval or config.getoption("dist", default="no") == "loadfile" else None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Tell each pytest-xdist worker how the scheduler groups its tests (a worker's own
    ``--dist`` reads ``no``)."""
    node.workerinput["msresnet_scopes"] = _ordered_by_weight(node.config)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """On each pytest-xdist worker: the collection heaviest scope first. The workers
    send it to the scheduler in this order, and it hands scopes out in that order."""
    nbval = getattr(config, "workerinput", {}).get("msresnet_scopes")
    if nbval is None:
        return
    items[:] = heaviest_first(items, lambda item: work_scope(item.nodeid, nbval),
                              _scope_seconds)


def pytest_xdist_make_scheduler(config, log):
    """Whole scopes in the workers' order (:func:`pytest_collection_modifyitems`), not
    pytest-xdist's own (scopes by their number of tests); under nbval whole notebooks,
    chapters 4, 5 and 8 as one unit.

    pytest-xdist's ``--dist loadscope`` already keeps a notebook's cells together (a
    notebook is a module); this only adds the chained chapters to one scope. (Its
    ``loadgroup`` would say the same with markers, but does not group under pytest
    9.2: nodeids no longer take the suffix it relies on.)
    """
    nbval = _ordered_by_weight(config)
    if nbval is None:
        return None  # another --dist: pytest-xdist's own
    config.option.loadscopereorder = False
    if not nbval:
        return None  # pytest-xdist's loadfile, in the collection's order
    from xdist.scheduler import LoadScopeScheduling

    class ChapterScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_scope(nodeid, nbval=True)

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
