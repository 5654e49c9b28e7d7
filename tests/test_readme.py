"""The README names what ``make quick-test`` leaves out.

Every test file that marks a test ``slow`` (which quick-test skips) must be named
in the README, so a newly slow test cannot quietly leave the edit-test loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
README = TESTS.parent / "README.md"


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
