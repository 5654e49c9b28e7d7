"""The one rule for tests that need something the checkout may lack: skip locally, fail in CI.

A test that needs the prepared CIFAR-10 folder, this project's local mirror of the
archive (the file ``MSRESNET_LOCAL_MIRROR`` names, which the ``Makefile`` sets where
there is one) or a chapter notebook skips, naming the missing thing, on a reader's
machine that lacks it. Under ``CI=true`` (what CI services set, and what
``make test`` runs under there) the test command provides all of them, so a
missing one is a failure that names it: a folder that was not prepared or a
chapter that was renamed cannot turn tests into silent passes.

Use the markers (``@needs_data``, ``@needs_mirror``, ``@needs_chapter(name)``,
``@needs(path, ..., what=...)``; also as ``pytestmark``), checked before the
test's fixtures are set up by :func:`pytest_runtest_setup` (``tests/conftest.py``
imports the hooks), or, inside a test, :func:`require` and :func:`chapter`.

This is a module of its own rather than part of ``tests/conftest.py`` because
the repository root has a ``conftest.py`` too, and test modules cannot import
``conftest`` and know which of the two they get.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from msresnet.data.cifar10 import FOLDER_NAME, REQUIRED_FILES
from msresnet.paths import DATA_ROOT, LOCAL_MIRROR_VARIABLE, REPO_ROOT, local_mirror

CI_VARIABLE = "CI"
CI_VALUES = ("true", "1")
"""``CI`` values (any case) that mean the test command provides every prerequisite."""

MARKER = "needs"
DATA_DIR = DATA_ROOT / FOLDER_NAME
NOTEBOOKS = REPO_ROOT / "notebooks"


def under_ci() -> bool:
    """Whether ``CI`` says this is the CI run (read at each check, so a test can set it)."""
    return os.environ.get(CI_VARIABLE, "").strip().lower() in CI_VALUES


def missing(what: str, path: Path | str, problem: str = "is missing") -> NoReturn:
    """Skip the test (``path``, needed for ``what``, is missing), or fail it under CI."""
    message = f"{what}: {path} {problem}"
    if under_ci():
        pytest.fail(f"{message} ({CI_VARIABLE}={os.environ[CI_VARIABLE]}: the test command "
                    "provides it, so this is an error, not a skip)", pytrace=False)
    pytest.skip(message)


def require(*paths: Path, what: str) -> Path:
    """The first of ``paths`` once all exist; else :func:`missing` for the first that does not."""
    for path in map(Path, paths):
        if not path.exists():
            missing(what, path)
    return Path(paths[0])


def require_data() -> Path:
    """The prepared CIFAR-10 folder (``data/cifar-10-batches-bin``), every file of it required."""
    require(*DATA_FILES, what=DATA_WHAT)
    return DATA_DIR


def require_mirror() -> Path:
    """The local mirror (:func:`msresnet.paths.local_mirror`), required: the variable unset
    or empty, or the file it names missing, is a skip locally, a failure under CI."""
    mirror = local_mirror()
    if mirror is None:
        missing(MIRROR_WHAT, LOCAL_MIRROR_VARIABLE, "is not set")
    return require(mirror, what=MIRROR_WHAT)


def chapter(name: str) -> Path:
    """``notebooks/<name>.ipynb``, required: a renamed chapter is a skip locally, a failure
    under CI."""
    return require(NOTEBOOKS / f"{name}.ipynb", what=f"chapter {name} (renamed?)")


def needs(*paths: Path, what: str) -> pytest.MarkDecorator:
    """A marker: the test needs every one of ``paths`` (checked by :func:`pytest_runtest_setup`)."""
    return getattr(pytest.mark, MARKER)(*map(Path, paths), what=what)


def needs_chapter(name: str) -> pytest.MarkDecorator:
    """A marker: the test reads chapter ``name`` (``notebooks/<name>.ipynb``)."""
    return needs(NOTEBOOKS / f"{name}.ipynb", what=f"chapter {name} (renamed?)")


DATA_FILES = tuple(DATA_DIR / name for name in REQUIRED_FILES)
DATA_WHAT = "CIFAR-10 prepared (run `make data`)"
needs_data = needs(*DATA_FILES, what=DATA_WHAT)
MIRROR_WHAT = f"this project's local CIFAR-10 mirror (make sets {LOCAL_MIRROR_VARIABLE})"
needs_mirror = getattr(pytest.mark, MARKER)(mirror=True, what=MIRROR_WHAT)
"""A marker: the test needs the local mirror (:func:`require_mirror`, read at setup)."""


def after_nbval(variable: str, folder: Path) -> pytest.MarkDecorator:
    """Skip unless ``make nbval`` set ``variable`` to ``folder``: the checks it runs on
    what the chapters wrote, after them. In the unit-test step the chapters are still
    running, so there these are another step's tests, skipped under CI too."""
    value = os.environ.get(variable)
    return pytest.mark.skipif(not value or Path(value).resolve() != Path(folder).resolve(),
                              reason=f"run by make nbval after the chapters ({variable})")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(*paths, what, mirror=False): the test needs "
                            "these files, or the local mirror (tests/prerequisites.py: skipped "
                            "without them, failed under CI=true)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Check every ``needs`` marker before the test's fixtures run (a module-scoped fixture
    that would read the data is not started)."""
    for mark in item.iter_markers(MARKER):
        if mark.kwargs.get("mirror"):
            require_mirror()
        else:
            require(*mark.args, what=mark.kwargs["what"])


NBVAL_NOTEBOOKS_VARIABLE = "MSRESNET_NBVAL_NOTEBOOKS"
"""What ``make nbval`` ran (its ``NOTEBOOKS``, space-separated paths): the checks after
it look only at those chapters, so ``make nbval NOTEBOOKS=...`` passes for a subset."""


def nbval_chapters(all_chapters: set[str]) -> set[str]:
    """The chapters the last ``make nbval`` ran: every one of ``all_chapters`` unless
    :data:`NBVAL_NOTEBOOKS_VARIABLE` names some."""
    chosen = {Path(path).stem for path in os.environ.get(NBVAL_NOTEBOOKS_VARIABLE, "").split()}
    return all_chapters & chosen if chosen else set(all_chapters)

