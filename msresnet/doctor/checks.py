"""What every check of ``msresnet doctor`` reports: a :class:`Check` and its status."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
"""A warning is not a failure: the doctor still exits 0 and runs what needs it."""


@dataclass
class Check:
    """One finding: ``status`` is ok, warn, FAIL or skip; ``fix`` says what to do on FAIL."""

    name: str
    status: str
    summary: str
    fix: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # printed under the line, indented

    def line(self) -> str:
        if self.status == FAIL:
            return f"FAIL  {self.name}: {self.summary}; {self.fix}"
        return f"{self.status:<5} {self.name}: {self.summary}"


def skip(name: str, need: str) -> Check:
    return Check(name, SKIP, f"needs {need}")
