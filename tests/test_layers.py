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
SUBPACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def _dotted(path: Path) -> str:
    """``msresnet/data/cifar10.py`` -> ``data.cifar10`` (the name the docstring uses)."""
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


MODULES = sorted(_dotted(p) for p in PACKAGE.rglob("*.py")
                 if p.stem not in ("__init__", "__main__") and "__pycache__" not in p.parts)


def source_of(name: str) -> str:
    return (PACKAGE / (name.replace(".", "/") + ".py")).read_text()


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
    ``from msresnet.data import cifar10`` counts as importing ``msresnet.data.cifar10``.
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
                if node.module == "msresnet" or node.module.startswith("msresnet."):
                    inside = node.module.removeprefix("msresnet").removeprefix(".")
                    for alias in node.names:
                        name = f"{inside}.{alias.name}" if inside else alias.name
                        found.add(f"msresnet.{name}" if name in MODULES else node.module)
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
        found = imports(source_of(name), lazy)
        edges[name] = {m.removeprefix("msresnet.") for m in found} & set(MODULES) - {name}
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
                     for m in imports(source_of(name), lazy=False))}
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
    source = ("import os\nfrom msresnet.config import profile\nfrom msresnet.paths import X\n"
              "try:\n    import mindspore\nexcept ImportError:\n    pass\n"
              "if TYPE_CHECKING:\n    import msresnet.training.train\n"
              "class A:\n    import numpy\n"
              "def f():\n    from msresnet.model.resnet import resnet50\n")
    assert imports(source, lazy=False) == {"os", "msresnet.config.profile", "msresnet.paths",
                                           "mindspore", "numpy"}
    assert "msresnet.model.resnet" in imports(source, lazy=True)
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


# --------------------------------------------------------------------------- the package
@pytest.mark.parametrize("lazy", [False, True], ids=["at import", "including lazy imports"])
def test_no_import_cycles(lazy):
    cycle = find_cycle(graph(lazy))
    assert cycle is None, "import cycle: " + " -> ".join(f"msresnet.{m}" for m in cycle)


def test_training_does_not_import_the_launcher_or_chapter_7s_analysis():
    top = graph(lazy=False)
    assert not top["training.train"] & {"jobs.launch", "ranks.dump", "ranks.analysis",
                                        "training.sweep"}
    assert "ranks.analysis" not in graph(lazy=True)["training.train"]
    assert not top["training.factories"] & {"training.train", "training.sweep", "ranks.dump",
                                            "ranks.analysis"}


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
    assert {"cpu_speed", "atomic", "config.profile", "paths", "cli"} <= declared


def test_no_library_module_imports_the_command_layer():
    """Issue 43: the front door (``cli``, the dispatcher, and ``commands``, the verbs'
    command lines) sits on the top floor; what the library needs of a command line
    (the option spelling, the argument types, the one-line errors) is
    ``command_line``, at the root. Lazy imports count too."""
    front = {"cli"} | {m for m in MODULES if m.startswith("commands.")}
    upward = sorted(f"{name} -> {dep}" for name, deps in graph(lazy=True).items()
                    if name not in front for dep in deps & front)
    assert upward == [], upward
    layers = docstring_layers()
    assert {layers[m] for m in front} == {max(layers.values())}, "the front door is the top floor"


def test_init_imports_only_the_cpu_setting():
    assert imports((PACKAGE / "__init__.py").read_text(), lazy=True) == {"msresnet.cpu_speed"}


def test_subpackages_import_nothing():
    """Importing ``msresnet.training`` must not load MindSpore, nor anything else."""
    assert SUBPACKAGES == ["chapters", "commands", "config", "data", "deploy", "doctor",
                           "experiments", "jobs", "model", "ranks", "storage", "testing",
                           "training"]
    for name in SUBPACKAGES:
        assert imports((PACKAGE / name / "__init__.py").read_text(), lazy=True) == set(), name


def test_the_checker_reads_every_module_of_the_tree():
    """Not only ``msresnet/*.py``: a module in a sub-package is read too."""
    assert {"data.cifar10", "training.train", "storage.staging", "cli"} <= set(MODULES)
    assert len(MODULES) == len([p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts
                                and p.stem not in ("__init__", "__main__")])


def docstring_layers() -> dict[str, int]:
    """Module -> the position of the docstring's bullet that first names it.

    A bullet that starts with a sub-package (````data````: ...) names its modules
    by their short names (````cifar10```` is ``data.cifar10``)."""
    doc = ast.get_docstring(_init_tree()) or ""
    layers: dict[str, int] = {}
    for position, bullet in enumerate(re.split(r"\n\* ", doc)[1:]):
        names = re.findall(r"``([\w.]+)``", bullet)
        package = names[0] if names and names[0] in SUBPACKAGES else ""
        for name in names:
            dotted = f"{package}.{name}" if package and f"{package}.{name}" in MODULES else name
            if dotted in MODULES:
                layers.setdefault(dotted, position)
    return layers


def test_every_module_is_named_in_the_package_docstring():
    missing = sorted(set(MODULES) - set(docstring_layers()))
    assert not missing, f"msresnet/__init__.py's docstring does not describe: {missing}"


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


def _calls(name: str) -> dict[str, int]:
    """Modules that call the function ``name`` (any form: ``f(...)``, ``x.f(...)``)."""
    found: dict[str, int] = {}
    for module in MODULES:
        tree = ast.parse(source_of(module))
        count = sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call) and (
            getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name))
        if count:
            found[module] = count
    return found


def test_one_place_builds_a_runs_config():
    """Issue 37: the profile, the overrides and the data folder's rule meet in
    config.run.build_run_config; no tool loads a profile or applies the rule itself
    (the table of the profiles side by side aside)."""
    assert _calls("choose_data_dir") == {"config.run": 1}
    assert set(_calls("load_config")) == {"config.table", "config.run"}
    assert _calls("build_run_config"), "nobody builds a run's config"
