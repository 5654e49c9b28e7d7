"""One command: nothing in the repository still runs a tool by its module path.

Issue 27 replaced the seventeen ``python -m msresnet.X`` entries by ``msresnet VERB``
(:data:`msresnet.cli.COMMANDS`). A chapter, page, test, record or Makefile line that
still wrote the old form would fail for the reader (the modules have no ``__main__``
block any more), so every tracked text file is read for it.
"""

from __future__ import annotations

import re
import subprocess

from msresnet.paths import REPO_ROOT

OLD_FORMS = re.compile(r"""-m[ ",']+msresnet\.[a-z_]""")
TEXT = {".py", ".ipynb", ".md", ".yml", ".yaml", ".json", ".cfg", ".toml", ".js", ".sh", ".txt"}


def tracked_text_files() -> list[str]:
    names = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    return [name for name in names
            if name.rsplit(".", 1)[-1] in {s[1:] for s in TEXT} or name.endswith("Makefile")
            or name == ".ci/run"]


def test_the_checker_sees_each_old_form() -> None:
    for line in ('python -m msresnet.train smoke', '[sys.executable, "-m", "msresnet.sweep"]',
                 "$(PY) -m msresnet.prepare --root data"):
        assert OLD_FORMS.search(line), line
    for line in ("python -m msresnet train smoke", '["-m", "msresnet", "sweep"]',
                 "from msresnet.training import train"):
        assert not OLD_FORMS.search(line), line


def test_no_module_path_command_is_left() -> None:
    files = tracked_text_files()
    assert "Makefile" in files and "README.md" in files and len(files) > 100
    found = [f"{name}:{number}" for name in files
             for number, line in enumerate((REPO_ROOT / name).read_text(errors="replace")
                                           .splitlines(), 1)
             if OLD_FORMS.search(line) and name != "tests/test_one_command.py"]
    assert not found, f"python -m msresnet.X is gone; use msresnet VERB: {found[:10]}"
