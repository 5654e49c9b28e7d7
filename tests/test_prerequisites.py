"""The tests' one rule for a missing prerequisite (tests/prerequisites.py): skip locally,
fail under ``CI=true``, with a message that names what is missing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import prerequisites
from prerequisites import after_nbval, chapter, require

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_a_missing_file_is_a_skip_outside_ci(monkeypatch, tmp_path, value):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    (tmp_path / "here").write_text("x")
    with pytest.raises(pytest.skip.Exception,
                       match=re.escape(f"the data: {tmp_path / 'nope'} is missing")):
        require(tmp_path / "here", tmp_path / "nope", what="the data")


@pytest.mark.parametrize("value", ["true", "TRUE", "1"])
def test_a_missing_file_fails_under_ci(monkeypatch, tmp_path, value):
    monkeypatch.setenv("CI", value)
    (tmp_path / "here").write_text("x")
    with pytest.raises(pytest.fail.Exception) as failed:
        require(tmp_path / "here", tmp_path / "nope", what="the data")
    assert f"the data: {tmp_path / 'nope'} is missing" in str(failed.value)
    assert f"CI={value}" in str(failed.value) and "not a skip" in str(failed.value)


def test_present_files_pass_under_ci_and_give_the_first(monkeypatch, tmp_path):
    monkeypatch.setenv("CI", "true")
    for name in ("a", "b"):
        (tmp_path / name).write_text(name)
    assert require(tmp_path / "a", tmp_path / "b", what="both") == tmp_path / "a"


def test_a_renamed_chapter_skips_locally_and_fails_under_ci(monkeypatch, tmp_path):
    monkeypatch.setattr(prerequisites, "NOTEBOOKS", tmp_path)
    (tmp_path / "06_obs_staging_v2.ipynb").write_text("{}")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"chapter 06_obs_staging \(renamed\?\)"):
        chapter("06_obs_staging")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"06_obs_staging\.ipynb is missing"):
        chapter("06_obs_staging")
    assert chapter("06_obs_staging_v2") == tmp_path / "06_obs_staging_v2.ipynb"


def test_the_real_chapters_and_data_markers_name_real_paths():
    assert chapter("06_obs_staging").is_file()
    assert prerequisites.DATA_DIR / "test_batch.bin" in prerequisites.needs_data.args
    assert prerequisites.needs_data.kwargs["what"] == prerequisites.DATA_WHAT


def test_the_nbval_step_checks_run_only_when_make_nbval_set_the_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("SOME_FOLDER", raising=False)
    assert after_nbval("SOME_FOLDER", tmp_path).args == (True,)
    monkeypatch.setenv("SOME_FOLDER", str(tmp_path / "other"))
    assert after_nbval("SOME_FOLDER", tmp_path).args == (True,)
    monkeypatch.setenv("SOME_FOLDER", str(tmp_path))
    assert after_nbval("SOME_FOLDER", tmp_path).args == (False,)


MARKED = '''
import pytest
from prerequisites import needs


@pytest.fixture(scope="module")
def job():
    print("FIXTURE STARTED")


@needs({here!r}, {missing!r}, what="the thing")
def test_marked(job):
    pass


def test_unmarked():
    pass
'''


@pytest.mark.parametrize("ci, outcome", [(None, "1 passed, 1 skipped"),
                                         ("true", "1 passed, 1 error")])
def test_the_needs_marker_as_pytest_runs_it(tmp_path, ci, outcome):
    """The marker is checked before the test's fixtures start, through the hooks that
    tests/conftest.py imports (here loaded as a plugin, -p prerequisites)."""
    (tmp_path / "here").write_text("x")
    missing = tmp_path / "gone" / "data_batch_1.bin"
    (tmp_path / "test_marked.py").write_text(MARKED.format(here=str(tmp_path / "here"),
                                                           missing=str(missing)))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(TESTS)
    if ci:
        env["CI"] = ci
    result = subprocess.run([sys.executable, "-m", "pytest", "-rsE", "-s", "-p", "prerequisites",
                             "-p", "no:cacheprovider", "test_marked.py"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert outcome in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    assert f"the thing: {missing} is missing" in result.stdout
    assert "FIXTURE STARTED" not in result.stdout
