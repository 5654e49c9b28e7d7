"""The order pytest-xdist hands out work (conftest.py): heaviest scopes first.

The order changes no result, only when each file starts; what it must not do is split
a scope, reorder the tests inside one, or lose a test.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("root_conftest", REPO / "conftest.py")
hooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hooks)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def test_heaviest_scope_first_and_each_scope_whole_and_in_order():
    ids = ["a.py::1", "a.py::2", "b.py::1", "c.py::1", "c.py::2", "d.py::1"]
    seconds = {"a.py": 1, "b.py": 0, "c.py": 9, "d.py": 0}
    ordered = hooks.heaviest_first(ids, _file, seconds.__getitem__)
    assert ordered == ["c.py::1", "c.py::2", "a.py::1", "a.py::2", "b.py::1", "d.py::1"]


def test_the_chapters_weigh_what_their_stored_runs_took():
    chain = hooks.work_scope("notebooks/05_checkpoint_sweep.ipynb::Cell 3", nbval=True)
    assert chain == hooks.work_scope("notebooks/04_train_eval.ipynb::Cell 0", nbval=True)
    assert hooks.work_scope("notebooks/05_checkpoint_sweep.ipynb::Cell 3", nbval=False) \
        == "notebooks/05_checkpoint_sweep.ipynb"
    chained = hooks._scope_seconds(chain)
    assert chained == sum(hooks.notebook_seconds(REPO / "notebooks" / f"{stem}.ipynb")
                          for stem in hooks.CHAINED)
    assert chained > hooks.notebook_seconds(REPO / "notebooks" / "02_config_lr.ipynb") > 0


def test_every_weighed_unit_test_file_exists():
    """A renamed file would silently go back to its collection place."""
    missing = [name for name in hooks.UNIT_SECONDS if not (REPO / name).is_file()]
    assert not missing, missing
