"""The package's layers, as ``msresnet/__init__.py`` states them, read from the imports.

Every module's imports are parsed with ``ast`` (nothing is imported, except in the
last test, which checks the result in a fresh interpreter):

* no import cycles between ``msresnet`` modules, counting imports inside
  functions too (a lazy import cycle still ties two modules together);
* the MindSpore-free modules (``msresnet.MINDSPORE_FREE_MODULES``) are exactly
  those that import no ``mindspore`` at import time, directly or through the
  top-level imports of other ``msresnet`` modules;
* every module is named in the package docstring, so the layers stay described;
* at import time a module imports only from its own layer (a bullet of that
  docstring) or from the layers listed before it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "msresnet"
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def _init_tree() -> ast.Module:
    return ast.parse((PACKAGE / "__init__.py").read_text())


def declared_free() -> set[str]:
    """``MINDSPORE_FREE_MODULES`` as written in ``__init__.py`` (read, not imported)."""
    for node in _init_tree().body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "MINDSPORE_FREE_MODULES" for t in node.targets):
            return set(ast.literal_eval(node.value.args[0]))
    raise AssertionError("msresnet/__init__.py: no MINDSPORE_FREE_MODULES")


def imports(source: str, lazy: bool) -> set[str]:
    """Modules imported by ``source``: at import time, or (``lazy``) anywhere.

    Import time means the module body, including ``if``/``try``/``with`` blocks and
    class bodies, but not function bodies nor ``if TYPE_CHECKING:`` blocks.
    ``from msresnet import x`` counts as importing ``msresnet.x``.
    """
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if lazy:
                    visit(node.body)
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module == "msresnet":
                    found.update(f"msresnet.{a.name}" if a.name in MODULES else "msresnet"
                                 for a in node.names)
                else:
                    found.add(node.module)
            for name in ("body", "orelse", "finalbody"):
                block = getattr(node, name, None)
                if isinstance(block, list):
                    visit(block)
            for handler in getattr(node, "handlers", []):
                visit(handler.body)
            for case in getattr(node, "cases", []):
                visit(case.body)

    visit(ast.parse(source).body)
    return found


def graph(lazy: bool) -> dict[str, set[str]]:
    """msresnet module -> the msresnet modules it imports."""
    edges = {}
    for name in MODULES:
        found = imports((PACKAGE / f"{name}.py").read_text(), lazy)
        edges[name] = {m.split(".")[1] for m in found if m.startswith("msresnet.")} - {name}
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def mindspore_at_import() -> dict[str, list[str]]:
    """Module -> the chain through which importing it imports MindSpore."""
    top = graph(lazy=False)
    direct = {name for name in MODULES
              if any(m == "mindspore" or m.startswith("mindspore.")
                     for m in imports((PACKAGE / f"{name}.py").read_text(), lazy=False))}
    chains: dict[str, list[str]] = {}

    def chain(name: str, seen: tuple[str, ...] = ()) -> list[str] | None:
        if name in direct:
            return [name, "mindspore"]
        for dep in sorted(top[name]):
            if dep not in seen and (rest := chain(dep, seen + (name,))):
                return [name] + rest
        return None

    for name in MODULES:
        if (found := chain(name)) is not None:
            chains[name] = found
    return chains


# --------------------------------------------------------------------------- the checker
def test_the_checker_sees_lazy_and_aliased_imports():
    source = ("import os\nfrom msresnet import config\nfrom msresnet.paths import X\n"
              "try:\n    import mindspore\nexcept ImportError:\n    pass\n"
              "if TYPE_CHECKING:\n    import msresnet.train\n"
              "class A:\n    import numpy\n"
              "def f():\n    from msresnet.model import resnet50\n")
    assert imports(source, lazy=False) == {"os", "msresnet.config", "msresnet.paths",
                                           "mindspore", "numpy"}
    assert "msresnet.model" in imports(source, lazy=True)
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


# --------------------------------------------------------------------------- the package
@pytest.mark.parametrize("lazy", [False, True], ids=["at import", "including lazy imports"])
def test_no_import_cycles(lazy):
    cycle = find_cycle(graph(lazy))
    assert cycle is None, "import cycle: " + " -> ".join(f"msresnet.{m}" for m in cycle)


def test_training_does_not_import_the_launcher_or_chapter_7s_analysis():
    top = graph(lazy=False)
    assert not top["train"] & {"launch", "rank_dump", "rank_analysis", "sweep"}
    assert "rank_analysis" not in graph(lazy=True)["train"]
    assert not top["factories"] & {"train", "sweep", "rank_dump", "rank_analysis"}


def test_mindspore_free_modules_are_free_and_listed():
    declared = declared_free()
    unknown = declared - set(MODULES)
    assert not unknown, f"MINDSPORE_FREE_MODULES names modules that do not exist: {unknown}"
    chains = mindspore_at_import()
    leaking = {name: " -> ".join(chains[name]) for name in sorted(declared & set(chains))}
    assert not leaking, f"MindSpore-free modules import MindSpore at import time: {leaking}"
    unlisted = sorted(set(MODULES) - set(chains) - declared)
    assert not unlisted, (f"{unlisted} import no MindSpore: add them to MINDSPORE_FREE_MODULES "
                          "in msresnet/__init__.py (and its docstring)")
    assert {"cpu_speed", "atomic", "config", "paths"} <= declared


def test_init_imports_only_the_cpu_setting():
    assert imports((PACKAGE / "__init__.py").read_text(), lazy=True) == {"msresnet.cpu_speed"}


def test_every_module_is_named_in_the_package_docstring():
    doc = ast.get_docstring(_init_tree()) or ""
    missing = [name for name in MODULES if f"``{name}``" not in doc]
    assert not missing, f"msresnet/__init__.py's docstring does not describe: {missing}"


def docstring_layers() -> dict[str, int]:
    """Module -> the position of the docstring's bullet that first names it."""
    doc = ast.get_docstring(_init_tree()) or ""
    layers: dict[str, int] = {}
    for position, bullet in enumerate(re.split(r"\n\* ", doc)[1:]):
        for name in re.findall(r"``(\w+)``", bullet):
            if name in MODULES:
                layers.setdefault(name, position)
    return layers


def test_modules_import_only_their_own_or_earlier_layers():
    layers = docstring_layers()
    assert set(layers) == set(MODULES)
    upward = [f"msresnet.{name} -> msresnet.{dep}" for name, deps in sorted(graph(lazy=False).items())
              for dep in sorted(deps) if layers[dep] > layers[name]]
    assert not upward, f"imports at import time from a later layer of msresnet/__init__.py: {upward}"


def test_free_modules_really_import_without_mindspore():
    """What the ast reading concludes, checked by importing them for real."""
    names = sorted(declared_free())
    code = ("import sys\n" + "".join(f"import msresnet.{n}\n" for n in names) +
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'mindspore')\n"
            "print(loaded[:5])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout
