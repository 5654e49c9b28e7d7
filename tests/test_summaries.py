"""Summaries that must match what they summarise.

* The README names what ``make quick-test`` leaves out: every test file that marks
  a test ``slow`` (which quick-test skips), so a newly slow test cannot quietly
  leave the edit-test loop.
* The troubleshooting page's table lists every section once, each as the section
  says (*reproduced here*, *cited* or *measured on the project's GPUs*), and its
  closing summary counts them right.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
README = TESTS.parent / "README.md"
TROUBLESHOOTING = TESTS.parent / "book" / "troubleshooting.ipynb"
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def marks_slow(source: str) -> bool:
    """Whether the code (not a string or comment) uses ``pytest.mark.slow``."""
    return any(isinstance(node, ast.Attribute) and node.attr == "slow"
               and ast.unparse(node.value) == "pytest.mark"
               for node in ast.walk(ast.parse(source)))


def test_every_file_with_slow_tests_is_named_in_the_readme() -> None:
    readme = README.read_text()
    slow = sorted(p.name for p in TESTS.glob("test_*.py") if marks_slow(p.read_text()))
    assert slow, "no test is marked slow: the README's list would be stale"
    missing = [name for name in slow if name not in readme]
    assert not missing, f"README.md: tests marked slow in {missing} are not named"


def _markdown_cells(path: Path) -> list[str]:
    return ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]
            if cell["cell_type"] == "markdown"]


def test_troubleshooting_summaries_match_its_sections() -> None:
    cells = _markdown_cells(TROUBLESHOOTING)
    sections = {}  # label -> "reproduced" or "cited", as the section's own line says
    for text in cells:
        label = re.match(r"\((ts-[\w-]+)\)=", text)
        if label:
            kind = re.search(r"^\*[^*\n]*; (reproduced here|cited|measured on the "
                             r"project's GPUs)\.\*$", text, re.M)
            assert kind, f"{TROUBLESHOOTING.name}: section {label[1]} says neither " \
                         "'reproduced here', 'cited' nor 'measured on the project's GPUs'"
            sections[label[1]] = kind[1].split()[0]
    rows = re.findall(r"^\| \{ref\}`[^`]*<(ts-[\w-]+)>` \| [^|]+ \| (\w+) \|$", cells[0], re.M)
    assert sorted(label for label, _ in rows) == sorted(sections), \
        f"{TROUBLESHOOTING.name}: the table's rows are not the page's sections"
    # the table's "Here" column says "run" for a failure reproduced on this page
    kinds = {label: {"run": "reproduced"}.get(kind, kind) for label, kind in rows}
    assert kinds == sections, f"{TROUBLESHOOTING.name}: a row's kind differs from its section"
    closing = cells[-1]
    reproduced = re.search(r"^\* (\w+) failures reproduced", closing, re.M)
    cited = re.search(r"^\* (\w+) GPU/Ascend failures", closing, re.M)
    measured = re.search(r"^\* (\w+) failures measured on the project's GPUs", closing, re.M)
    assert reproduced and cited and measured, \
        f"{TROUBLESHOOTING.name}: the closing summary has no counts"
    counted = {"reproduced": NUMBERS[reproduced[1].lower()], "cited": NUMBERS[cited[1].lower()],
               "measured": NUMBERS[measured[1].lower()]}
    assert counted == {kind: list(sections.values()).count(kind)
                       for kind in ("reproduced", "cited", "measured")}, \
        f"{TROUBLESHOOTING.name}: the closing summary's counts {counted} are not the sections'"
