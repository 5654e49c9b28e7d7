"""Reader text speaks of the project, not of how its authors' days went (issue 44).

The book's pages, the chapters' markdown cells and the records' READMEs are read by
people who will never see this project's working days: words such as "session",
"lease" or "pgrep" there are working notes that leaked. The tools' own file names
(``scripts/gpu/lease.sh``) and quoted code or output are not notes and are allowed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTES = re.compile(r"\b(sessions?|leases?|leased|pgrep|my day|next time)\b", re.I)
NAMES = re.compile(r"[\w/.-]*lease\.sh")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
"""Quoted code and program output (a MindSpore source path with ``session/`` in it)."""


def reader_texts() -> list[tuple[str, str]]:
    texts = [(str(p.relative_to(REPO)), p.read_text()) for p in sorted(REPO.glob("book/*.md"))]
    texts += [(str(p.relative_to(REPO)), p.read_text())
              for p in sorted(REPO.glob("results/**/README.md"))]
    for path in sorted(REPO.glob("notebooks/*.ipynb")) + sorted(REPO.glob("book/*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        texts.append((str(path.relative_to(REPO)),
                      "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")))
    return texts


def notes_in(text: str) -> list[str]:
    return [m.group(0) for m in NOTES.finditer(NAMES.sub("", CODE.sub("", text)))]


def test_the_check_finds_a_working_note_and_spares_a_file_name():
    assert notes_in("left for the next session with one GPU") == ["session"]
    assert notes_in("the machine went back after the lease; pgrep -f") == ["lease", "pgrep"]
    assert notes_in("scripts/gpu/lease.sh ran it") == []
    assert notes_in("```\nE  ccsrc/backend/common/session/kernel_build_client.h\n```") == []


TEXTS = reader_texts()


@pytest.mark.parametrize("name, text", TEXTS, ids=[name for name, _ in TEXTS])
def test_no_working_notes_in_reader_text(name, text):
    assert notes_in(text) == [], name
