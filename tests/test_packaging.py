"""The package's declared dependencies: what `pip install .` brings, against what the code imports and what CI pins.

``pyproject.toml`` declares ranges (``dependencies`` and the extras ``obs``,
``book``, ``test``); ``requirements.txt`` holds the exact pins CI installs. Checked
here, without installing anything:

* every pin is exact (``name==version``), and every pinned package is declared in
  ``pyproject.toml`` (in the dependencies or an extra): no pin that ``pip install
  .[test]`` would not bring;
* the pins satisfy every declared range, extras included (``packaging``'s
  specifiers, markers evaluated for this interpreter);
* every third-party module imported anywhere in ``msresnet/`` (at module level or
  inside a function, read from the source with :mod:`ast`) belongs to a declared
  distribution, or is in :data:`OPTIONAL` with its reason; and what the tools a
  reader runs after ``pip install .`` import (``train``, ``sweep``, ``export``,
  ``predict``, ``prepare``, ``launch``, ``doctor``: every module they reach,
  lazy imports included) is in the plain dependencies, not in an extra.

Each check is shown failing on a changed copy of the declarations. The install
itself, from the book's source archive, is ``tests/test_source_archive.py``.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "msresnet"

from msresnet.cli import COMMANDS  # noqa: E402  (the verbs' modules, wherever they live)

OPTIONAL = {
    "moxing": "Huawei's MoXing, in ModelArts images only (not on PyPI); the staging "
              "backend uses it when it can be imported",
}
"""Third-party modules ``msresnet`` imports that no extra declares, and why."""

TOOLS = tuple(COMMANDS[verb][0] for verb in ("train", "sweep", "export", "predict", "prepare",
                                             "launch", "doctor"))
"""The tools `pip install .` must run on its own (their verbs: train, sweep, ...)."""


# --------------------------------------------------------------------------- declarations

def declared(pyproject: dict) -> dict[str, list[Requirement]]:
    """``{"": dependencies, "obs": [...], ...}``, an extra's ``msresnet[x]`` expanded."""
    project = pyproject["project"]
    name = canonicalize_name(project["name"])
    raw = {"": project.get("dependencies", []), **project.get("optional-dependencies", {})}

    def expand(group: str, seen: frozenset[str] = frozenset()) -> list[Requirement]:
        found = []
        for text in raw[group]:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == name:
                for extra in sorted(requirement.extras - seen):
                    found += expand(extra, seen | {extra})
            else:
                found.append(requirement)
        return found

    return {group: expand(group) for group in raw}


def pins(text: str) -> dict[str, Requirement]:
    """requirements.txt's lines by canonical name (comments and blanks skipped)."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            found[canonicalize_name(requirement.name)] = requirement
    return found


def pinned_version(requirement: Requirement) -> str | None:
    """The version of an exact pin (``==X``), else None."""
    specs = list(requirement.specifier)
    if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
        return specs[0].version
    return None


def unsatisfied(groups: dict[str, list[Requirement]], pinned: dict[str, Requirement]) -> list[str]:
    """Each declared requirement that requirements.txt's pins do not satisfy, and why."""
    environment = default_environment()
    problems = []
    for group, requirements in groups.items():
        where = f"[{group}]" if group else "dependencies"
        for requirement in requirements:
            if requirement.marker and not requirement.marker.evaluate(environment):
                continue
            pin = pinned.get(canonicalize_name(requirement.name))
            if pin is None:
                problems.append(f"{where}: {requirement} has no pin in requirements.txt")
                continue
            version = pinned_version(pin)
            if version is None or not requirement.specifier.contains(version, prereleases=True):
                problems.append(f"{where}: {requirement} is not satisfied by the pin {pin}")
            if not requirement.extras <= pin.extras:
                problems.append(f"{where}: {requirement} asks for extras the pin {pin} lacks")
    return problems


def undeclared_pins(groups: dict[str, list[Requirement]], pinned: dict[str, Requirement]) -> list[str]:
    names = {canonicalize_name(r.name) for requirements in groups.values() for r in requirements}
    return sorted(str(pin) for name, pin in pinned.items() if name not in names)


PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PINS = pins((REPO / "requirements.txt").read_text())


def test_every_pin_is_exact() -> None:
    loose = [str(pin) for pin in PINS.values() if pinned_version(pin) is None]
    assert not loose, f"requirements.txt: not name==version: {loose}"


def test_the_pins_satisfy_every_declared_range() -> None:
    problems = unsatisfied(declared(PYPROJECT), PINS)
    assert not problems, "\n".join(problems)


def test_every_pin_is_declared_in_pyproject() -> None:
    extra = undeclared_pins(declared(PYPROJECT), PINS)
    assert not extra, f"pinned in requirements.txt but in no pyproject.toml group: {extra}"


def test_the_pinned_mindspore_is_in_the_declared_range() -> None:
    (mindspore,) = [r for r in declared(PYPROJECT)[""] if r.name == "mindspore"]
    assert mindspore.specifier.contains(pinned_version(PINS["mindspore"]))


def test_a_wrong_declaration_fails() -> None:
    """A range the pins miss, an extra the pin lacks, a pin declared nowhere."""
    pinned = {**PINS, "onnx": Requirement("onnx==1.14.0")}
    assert any("onnx" in p for p in unsatisfied(declared(PYPROJECT), pinned))
    changed = {"project": {**PYPROJECT["project"],
                           "dependencies": ["mindspore>=2.11", "moto[server,s3]>=5"]}}
    problems = unsatisfied(declared(changed), PINS)
    assert any(p.startswith("dependencies: mindspore>=2.11 is not satisfied") for p in problems)
    assert any("asks for extras" in p for p in problems)
    without_tqdm = {"project": {**PYPROJECT["project"], "dependencies": [
        r for r in PYPROJECT["project"]["dependencies"] if not r.startswith("tqdm")]}}
    assert undeclared_pins(declared(without_tqdm), PINS) == ["tqdm==" + pinned_version(PINS["tqdm"])]


# --------------------------------------------------------------------------- imports

def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, own: set[str]) -> tuple[set[str], set[str]]:
    """(modules of the package, third-party top-level modules) that ``path`` imports
    anywhere in its source: module level, functions, ``if`` branches."""
    package, third = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top == "msresnet":
                package.update(n for n in (name,) if n in own)
            elif top not in sys.stdlib_module_names and top != "__future__":
                third.add(top)
    return package, third


def third_party(starts: list[str], table: dict[str, Path]) -> dict[str, set[str]]:
    """Third-party module -> the package modules importing it, over everything
    ``starts`` reach through the package's own imports."""
    seen, todo, found = set(), list(starts), {}
    own = set(table)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        package, third = imports(table[name], own)
        for module in third:
            found.setdefault(module, set()).add(name)
        todo += package
    return found


@functools.cache
def _providers() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions_of(module: str) -> set[str]:
    """The installed distributions that provide a top-level module (canonical names)."""
    return {canonicalize_name(d) for d in _providers().get(module, [])}


def undeclared_imports(used: dict[str, set[str]], requirements: list[Requirement],
                       optional: dict[str, str]) -> list[str]:
    """Each imported module that no requirement of ``requirements`` provides."""
    names = {canonicalize_name(r.name) for r in requirements}
    problems = []
    for module, where in sorted(used.items()):
        if module in optional:
            continue
        providers = distributions_of(module)
        if not providers & names:
            source = ", ".join(sorted(providers)) or "no installed distribution"
            problems.append(f"{module} (from {source}), imported by "
                            f"{', '.join(sorted(where)[:3])}")
    return problems


TABLE = modules()


def test_what_the_tools_import_is_in_the_plain_dependencies() -> None:
    used = third_party(list(TOOLS), TABLE)
    assert {"mindspore", "numpy", "onnx", "onnxruntime"} <= set(used), sorted(used)
    problems = undeclared_imports(used, declared(PYPROJECT)[""], {})
    assert not problems, "not in pyproject.toml's dependencies:\n  " + "\n  ".join(problems)


def test_every_import_of_the_package_is_declared() -> None:
    used = third_party(sorted(TABLE), TABLE)
    everything = [r for requirements in declared(PYPROJECT).values() for r in requirements]
    problems = undeclared_imports(used, everything, OPTIONAL)
    assert not problems, "in no pyproject.toml group nor OPTIONAL:\n  " + "\n  ".join(problems)
    stale = sorted(set(OPTIONAL) - set(used))
    assert not stale, f"OPTIONAL names modules msresnet no longer imports: {stale}"


def test_a_missing_dependency_fails() -> None:
    used = third_party(list(TOOLS), TABLE)
    without = [r for r in declared(PYPROJECT)[""] if r.name != "tqdm"]
    problems = undeclared_imports(used, without, {})
    assert len(problems) == 1 and problems[0].startswith("tqdm (from tqdm), imported by ")
    # and a lazy import inside a function counts: export's onnxruntime
    without = [r for r in declared(PYPROJECT)[""] if r.name != "onnxruntime"]
    assert [p.split(" ")[0] for p in undeclared_imports(used, without, {})] == ["onnxruntime"]


def test_the_book_tools_need_their_extra() -> None:
    """What ``.[book]`` adds is really needed by the package's book tools: matplotlib,
    papermill and jinja2 are imported by msresnet.chapters, and not by the plain tools."""
    plain = third_party(list(TOOLS), TABLE)
    book = third_party([m for m in TABLE if m.startswith("msresnet.chapters.")], TABLE)
    for module in ("matplotlib", "papermill", "jinja2"):
        assert module in book and module not in plain, module
    assert re.search(r"^\s*\"msresnet\[obs\]\",$", (REPO / "pyproject.toml").read_text(), re.M)


# --------------------------------------------------------------------------- the MindSpore range

COMPAT = REPO / "results" / "compat"


def test_the_oldest_mindspore_of_the_range_was_tested() -> None:
    """pyproject's lower bound for MindSpore has a `make compat-test` record (the unit
    tests of make quick-test under that version), and the setup page quotes its counts."""
    (mindspore,) = [r for r in declared(PYPROJECT)[""] if r.name == "mindspore"]
    lower = min((s.version for s in mindspore.specifier if s.operator == ">="),
                key=lambda v: tuple(int(x) for x in v.split(".")))
    records = {json.loads(path.read_text())["versions"]["mindspore"]: json.loads(path.read_text())
               for path in sorted(COMPAT.glob("mindspore-*.json"))}
    tested = [v for v in records if v.startswith(lower + ".") or v == lower]
    assert tested, f"no results/compat record for MindSpore {lower} (make compat-test)"
    record = records[min(tested)]
    assert "not slow and not browser and not params" in record["command"]
    assert mindspore.specifier.contains(record["versions"]["mindspore"])
    counts = record["counts"]
    text = " ".join((REPO / "book" / "setup.md").read_text().split())
    quoted = (f"under MindSpore {record['versions']['mindspore']} from PyPI")
    assert quoted in text, quoted
    said = re.search(r"`results/compat/mindspore-[\d.]+\.txt`\): (\d+) passed, (\d+) skipped "
                     r"and (\d+) failed", text)
    assert said, "setup.md: no 'N passed, M skipped and K failed' after the record's name"
    assert [int(n) for n in said.groups()] == [counts.get(k, 0) for k in
                                               ("passed", "skipped", "failed")], counts
    # which of its failures the pinned version shares (the same commit's quick-test record)
    pinned = json.loads((REPO / "results" / "tests" / "quick-test.json").read_text())
    assert pinned["commit"] == record["commit"], "record both at the same commit"
    shared = set(record["failed"]) & set(pinned["failed"])
    own = set(record["failed"]) - set(pinned["failed"])
    words = "zero one two three four five six seven eight nine ten".split()
    if shared:
        assert f"{words[len(shared)].capitalize()} of the failures failed under " \
               f"{pinned['versions']['mindspore']} too" in text
    if own:  # what fails under the old version only: the doctor's pin rule, said so
        assert f"The {words[len(own)]} others are the doctor's" in text
        assert all(name.startswith("tests/test_doctor.py::") for name in own), own
    else:
        assert f"none failed under {record['versions']['mindspore']} alone" in text
