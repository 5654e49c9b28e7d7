"""Strict nbval masks whichever data folder ``make nbval NBVAL_DATA=DIR`` names.

The chapters print their data folder (``../data/cifar-10-batches-bin``) and the
stored outputs were made on ``data/``; ``make nbval`` runs them on another copy,
``$MSRESNET_DATA_DIR``. The sanitize file names ``data-variant``, the default; the
root ``conftest.py`` puts the folder of the run in its place. Here a one-cell
notebook that prints its folder the way the chapters do runs under nbval, with the
test command's options, on folders of other names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from msresnet.data.source import DATA_DIR_VARIABLE
from msresnet.paths import REPO_ROOT

CELL = ('import os\n'
        'from msresnet.paths import REPO_ROOT\n'
        'name = os.environ["MSRESNET_DATA_DIR"]\n'
        'print(f"folder: ../{name}/cifar-10-batches-bin")\n'
        'print(f"resolved: {REPO_ROOT / name}/cifar-10-batches-bin")')
STORED = ("folder: ../data/cifar-10-batches-bin\n"
          f"resolved: {REPO_ROOT}/data/cifar-10-batches-bin\n")


def nbval(tmp_path: Path, data_dir: str) -> subprocess.CompletedProcess[str]:
    """The chapter-like notebook under strict nbval with ``$MSRESNET_DATA_DIR=data_dir``,
    run from the repository root like ``make nbval`` (``-p conftest``: the notebook
    lies outside the repository, whose root conftest.py would not load by itself)."""
    notebook = new_notebook(cells=[new_code_cell(CELL, execution_count=1, outputs=[
        new_output("stream", name="stdout", text=STORED)])], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    path = tmp_path / "chapter.ipynb"
    nbformat.write(notebook, path)
    env = {**os.environ, DATA_DIR_VARIABLE: data_dir}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "conftest", "--nbval", "--nbval-current-env",
                           "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", str(path)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("data_dir", ["data-variant", "my-copy", "copies/cifar.v2"])
def test_the_folder_of_the_run_is_masked_whatever_its_name(tmp_path, data_dir):
    result = nbval(tmp_path, data_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout


def test_a_folder_outside_the_repository_is_refused_with_one_line(tmp_path):
    result = nbval(tmp_path, str(tmp_path / "elsewhere"))
    assert result.returncode != 0
    assert (f"{DATA_DIR_VARIABLE}={tmp_path / 'elsewhere'}: strict nbval needs the data copy "
            "inside the repository") in result.stderr, result.stderr[-2000:]
