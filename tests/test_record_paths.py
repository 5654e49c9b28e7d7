"""Committed records carry no machine's absolute paths (issue 43).

A record names files the way a reader of the repository can follow them: relative
to the repository root, or through a named placeholder (``ROOT/``, ``RECORDS/``,
``REPO/``, ``VENV/``, ``$TORCH_ENV``) that its README explains. An absolute path
such as ``/work/main/data`` says only where one machine kept its checkout.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MACHINE_PATH = re.compile(r"(?<![\w.$/-])/(?:work|home|root|tmp|opt|Users|mnt|scratch)/[\w.+-]+")


def machine_paths(text: str) -> list[str]:
    return MACHINE_PATH.findall(text)


def test_the_check_finds_a_machine_path_and_spares_placeholders_and_urls():
    assert machine_paths("data_dir: /work/main/data") == ["/work/main"]
    assert machine_paths('"folder": "/tmp/ms27/bin/python"') == ["/tmp/ms27"]
    assert machine_paths("data_dir: data, ROOT/data, $TORCH_ENV/bin/python, VENV/bin") == []
    assert machine_paths("https://example.org/home/page and file:///") == []


def test_no_committed_record_holds_an_absolute_machine_path():
    files = subprocess.run(["git", "ls-files", "results"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    found = {}
    for name in files:
        try:
            text = (REPO / name).read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # pictures and checkpoints
        if paths := machine_paths(text):
            found[name] = sorted(set(paths))
    assert not found, found
