"""No stored output depends on how busy the machine is.

matplotlib places a legend without ``loc`` at ``"best"``, a search over the plotted
data, and prints ``UserWarning: Creating legend with loc="best" can be slow with
large amounts of data.`` on stderr when that search took long, which a loaded
machine makes it: a fresh clone's strict nbval once failed on chapter 2 with that
warning as an unexpected stderr output (issue 45). So every legend of the chapters
and of the package code that draws the book's figures names its place, and one
chapter is run under strict nbval while other processes keep every core busy.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DRAWING_CODE = [*sorted((REPO / "msresnet").rglob("*.py")),
                *sorted((REPO / "results").rglob("*.py")), *sorted((REPO / "book").glob("*.py"))]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "book").glob("*.ipynb"))


def legends_without_loc(source: str) -> list[int]:
    """Line numbers of ``....legend(...)`` calls that pass no ``loc``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "legend"
                and not any(k.arg == "loc" for k in node.keywords)
                and not any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                            for a in node.args[2:3])):  # legend(handles, labels, loc)
            lines.append(node.lineno)
    return lines


def notebook_code(path: Path) -> list[tuple[int, str]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(number, "".join(cell["source"])) for number, cell in enumerate(cells)
            if cell["cell_type"] == "code"
            and not "".join(cell["source"]).lstrip().startswith(("%", "!"))]


def test_the_scan_finds_a_legend_that_searches():
    assert legends_without_loc("ax.legend()\nax.legend(fontsize=8)\n") == [1, 2]
    assert legends_without_loc("ax.legend(loc='upper right')\nfig.legend([], [], 'best')") == []


def test_every_legend_in_the_chapters_and_the_drawing_code_names_its_place():
    found = [f"{path.relative_to(REPO)}:{line}" for path in DRAWING_CODE
             for line in legends_without_loc(path.read_text(encoding="utf-8"))]
    found += [f"{path.relative_to(REPO)} cell {number} line {line}"
              for path in NOTEBOOKS for number, source in notebook_code(path)
              for line in legends_without_loc(source)]
    assert found == [], "legend() without loc= (a search that warns on a busy machine)"


@pytest.mark.slow
@pytest.mark.twin  # make test: its nbval runs every chapter beside the other two groups
def test_a_chapter_passes_strict_nbval_while_every_core_is_busy(tmp_path):
    """Chapter 2 (the one whose legend warning failed a fresh clone) under strict nbval,
    with one busy-looping process per core running beside it the whole time. In
    ``make test`` the unit and browser groups keep both cores busy while nbval runs
    every chapter, so the loops would only take CPU from them; ``make unit-test``
    runs this."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 2)]
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
             "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
             "notebooks/02_config_lr.ipynb"],
            cwd=REPO, capture_output=True, text=True, timeout=900,
            env={**os.environ, "MSRESNET_DATA_DIR": "data"})
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert run.returncode == 0, run.stdout[-3000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
