"""From the built HTML alone to a checked machine: the book's source archive, installed.

A reader who has only the rendered book must be able to get the code, install it
with one command and run ``msresnet doctor --profile cpu``. Every HTML build writes
``_downloads/msresnet-book.tar.gz`` (``book/_ext/source_archive.py``); the intro and
the setup page link it, and the setup page's section "From this page to a checked
machine" (``setup-get-the-source``) gives the commands. The test opens that page in
headless Chromium, reads the commands as the page shows them (the archive's address
filled in by ``_static/source-archive.js``), and runs them one by one in a temporary
folder: ``curl`` the archive from the served book, unpack it, make the venv, the one
``pip install``, ``msresnet prepare``, ``msresnet doctor --profile cpu``.

Three changes keep it fast and offline, none of them in what is checked:

* MindSpore and the other dependencies are not downloaded again (800 MB). Before
  the install, the new venv is given exactly the distributions that the unpacked
  archive's ``pyproject.toml`` declares, and their own dependencies, taken from
  the environment running the tests: each is linked into one folder that a
  ``.pth`` file puts on the venv's path (:func:`dependency_folder`). The page's
  ``pip install -e .`` then runs with ``--no-index --no-build-isolation``: pip
  must find every declared requirement, at a version its range accepts, among
  those, or fail. A module that ``pyproject.toml`` does not declare is not there,
  so the doctor fails on its import (:func:`test_a_dependency_missing_from_pyproject_fails`).
* ``msresnet prepare`` takes the repository's prepared CIFAR-10 folder as its
  ``--source`` instead of downloading the archive (the copy it makes is what the
  doctor then reads, at the profile's default place).
* ``msresnet doctor`` times 3 training steps at batch 8 instead of 30 at 64, and
  writes its record (``--json``), which is held to what ``tests/test_doctor.py``
  asks of the same command (:func:`test_doctor.check_timed_cpu_run`).

The package must be imported from the unpacked folder, not from this checkout; a
file the archive lacks then fails the run (checked at the end of
:func:`test_from_the_page_to_a_checked_machine`). A small book built with the
extension shows the repository mechanism: no URL, the archive only; a URL, the
clone command and the theme's repository button. And ``make restore`` in an
unpacked archive takes the chapters back from it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import browser_check
from prerequisites import DATA_DIR, needs_data
from test_doctor import DOCTOR_TIMING, check_timed_cpu_run

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = "msresnet-book.tar.gz"
FOLDER = "msresnet-book"
SECTION = "setup-get-the-source"

PAGE_COMMANDS = [
    r"curl -LO (?P<url>\S+)",
    r"tar -xzf msresnet-book\.tar\.gz",
    r"cd msresnet-book",
    r"python3\.11 -m venv \.venv",
    r"\. \.venv/bin/activate",
    r"pip install -e \.",
    r"msresnet prepare --root data",
    r"msresnet doctor --profile cpu",
]
"""The setup page's block, command by command: a change there must be made here too."""

ADDED = {
    "pip install -e .": " --no-index --no-build-isolation",
    "msresnet prepare --root data": f" --source {DATA_DIR} --quiet",
    "msresnet doctor --profile cpu": " " + " ".join([*DOCTOR_TIMING, "--json", "doctor.json"]),
}
"""What the test adds to a command of the page (see the module docstring)."""


# --------------------------------------------------------------------------- the dependencies

def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _installed() -> dict[str, importlib.metadata.Distribution]:
    return {canonicalize_name(d.metadata["Name"]): d
            for d in importlib.metadata.distributions(path=[str(_site_packages())])}


def dependency_closure(requirements: list[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions that ``requirements`` need, their own requirements
    included (markers and extras evaluated); a missing or out-of-range one is an error."""
    installed = _installed()
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [(r, frozenset(r.extras)) for r in requirements]
    while todo:
        requirement, extras = todo.pop()
        if requirement.marker and not any(requirement.marker.evaluate({"extra": e})
                                          for e in (extras or {""})):
            continue
        name = canonicalize_name(requirement.name)
        dist = installed.get(name)
        if dist is None:
            raise LookupError(f"{requirement}: not installed in {_site_packages()}")
        if not requirement.specifier.contains(dist.version, prereleases=True):
            raise LookupError(f"{requirement}: {dist.version} is installed")
        if name not in found:
            found[name] = dist
            for text in dist.requires or []:
                todo.append((Requirement(text), frozenset(requirement.extras)))
        for extra in requirement.extras:
            for text in dist.requires or []:
                inner = Requirement(text)
                if inner.marker and inner.marker.evaluate({"extra": extra}):
                    todo.append((inner, frozenset()))
    return found


def _top_entries(dist: importlib.metadata.Distribution) -> set[str]:
    return {Path(f).parts[0] for f in dist.files or [] if Path(f).parts[0] != ".."}


def dependency_folder(pyproject: Path, folder: Path) -> list[str]:
    """A folder holding exactly what ``pyproject``'s dependencies (and its build
    needs) install, linked from this environment; returns the distributions' names."""
    project = tomllib.loads(pyproject.read_text())
    roots = [Requirement(t) for t in project["project"].get("dependencies", [])]
    roots += [Requirement(t) for t in project["build-system"]["requires"]]
    roots.append(Requirement("wheel"))  # setuptools before 70.1 builds editable wheels with it
    closure = dependency_closure(roots)
    site = _site_packages()
    owners: dict[str, set[str]] = {}
    for name, dist in _installed().items():
        for entry in _top_entries(dist):
            owners.setdefault(entry, set()).add(name)
    folder.mkdir(parents=True, exist_ok=True)
    for name, dist in closure.items():
        for entry in _top_entries(dist):
            source, target = site / entry, folder / entry
            if not (source.exists() or source.is_symlink()) or target.is_symlink():
                continue
            if owners[entry] <= set(closure):
                target.symlink_to(source)
                continue
            for file in dist.files or []:  # a folder shared with what is not declared
                if Path(file).parts[0] == entry and (site / file).exists():
                    (folder / file).parent.mkdir(parents=True, exist_ok=True)
                    if not (folder / file).exists():
                        (folder / file).symlink_to(site / file)
    return sorted(closure)


# --------------------------------------------------------------------------- the page's commands

def page_commands(context, url: str) -> list[str]:
    """The commands of the setup section's first code block, as the page shows them."""
    page = context.new_page()
    try:
        page.goto(url, wait_until="load")
        text = page.locator(f"xpath=//*[@id='{SECTION}']/following::div"
                            "[contains(@class, 'highlight')][1]//pre").inner_text()
    finally:
        page.close()
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def run_commands(commands: list[str], where: Path, *, until: str | None = None,
                 before_install=None, timeout: int = 600) -> subprocess.CompletedProcess | None:
    """Each command in bash, in order, as a reader pastes them: a ``cd`` and the venv's
    ``activate`` carry over to the commands after them. Stops after ``until``; calls
    ``before_install(folder)`` just before the ``pip install``. Returns the last run."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PIP_FIND_LINKS", "PIP_INDEX_URL",
                        "PIP_EXTRA_INDEX_URL", "MSRESNET_DATA_DIR"}}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(sys.prefix))
    carried: list[str] = []
    cwd = where
    result = None
    for command in commands:
        line = command + ADDED.get(command, "")
        if command.startswith("cd "):
            cwd = cwd / command.split(maxsplit=1)[1]
        if command.startswith("pip install") and before_install:
            before_install(cwd)
        script = "\n".join(["set -euo pipefail", *carried, line])
        result = subprocess.run(["bash", "-c", script], cwd=cwd if not command.startswith("cd ")
                                else cwd.parent, env=env, capture_output=True, text=True,
                                timeout=timeout)
        if result.returncode != 0 or command == until:
            return result
        if command.startswith(". "):
            carried.append(command)
    return result


def install_dependencies(folder: Path) -> None:
    """The dependency folder for the unpacked archive in ``folder``, on its venv's path."""
    names = dependency_folder(folder / "pyproject.toml", folder.parent / "dependencies")
    assert "mindspore" in names
    (folder / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
     / "site-packages" / "book-dependencies.pth").write_text(f"{folder.parent / 'dependencies'}\n")


@pytest.fixture(scope="module")
def commands(book, base_url: str) -> list[str]:
    context, _, _ = book
    found = page_commands(context, f"{base_url}book/setup.html")
    assert len(found) == len(PAGE_COMMANDS), found
    for command, pattern in zip(found, PAGE_COMMANDS):
        assert re.fullmatch(pattern, command), f"the page says {command!r}, expected {pattern}"
    url = re.fullmatch(PAGE_COMMANDS[0], found[0])["url"]
    assert url == f"{base_url}_downloads/{ARCHIVE}", url
    return found


# --------------------------------------------------------------------------- the tests

@pytest.mark.parametrize("stem", ["book/intro", "book/setup", "book/gpu-ascend"])
def test_the_page_links_the_archive(book, base_url: str, built_html: Path, stem: str) -> None:
    """The link, its size and commit; and every command block that fetches the archive
    shows its address (``ARCHIVE_URL`` filled in by _static/source-archive.js)."""
    context, links, _ = book
    page = context.new_page()
    try:
        page.goto(f"{base_url}{stem}.html", wait_until="load")
        link = page.locator("article a.source-archive").first
        href, text = link.evaluate("a => a.href"), link.inner_text()
        after = link.evaluate("a => a.nextSibling.textContent")
        blocks = page.eval_on_selector_all("article pre", "pres => pres.map(p => p.innerText)")
    finally:
        page.close()
    fetching = [b for b in blocks if "curl -LO" in b]
    assert all(f"curl -LO {base_url}_downloads/{ARCHIVE}" in b for b in fetching), fetching
    assert not any("ARCHIVE_URL" in b for b in blocks)
    source = (REPO / f"{stem}.md").read_text()
    assert len(fetching) == source.count("curl -LO ARCHIVE_URL")
    assert fetching or stem == "book/intro", "no command block fetches the archive"
    assert href == f"{base_url}_downloads/{ARCHIVE}" and text == ARCHIVE
    assert links.problem(href) is None
    size = (built_html / "_downloads" / ARCHIVE).stat().st_size
    match = re.match(r" \((\d+\.\d) MB, commit ([0-9a-f]{7,}|unknown)", after)
    assert match and float(match[1]) == round(size / 1e6, 1), after


def test_the_archive_holds_every_tracked_file(built_html: Path) -> None:
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True,
                             text=True, check=True).stdout.split("\0")
    tracked = {f for f in tracked if f and (REPO / f).exists()}
    with tarfile.open(built_html / "_downloads" / ARCHIVE) as tar:
        names = {n.removeprefix(f"{FOLDER}/") for n in tar.getnames()}
        manifest = tar.extractfile(f"{FOLDER}/source-archive.txt").read().decode()
    assert names == tracked | {"source-archive.txt"}
    listed = {line for line in manifest.splitlines() if line and not line.startswith("#")}
    assert listed == tracked
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert f"# commit {head}" in manifest


@needs_data
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_from_the_page_to_a_checked_machine(commands: list[str], tmp_path: Path) -> None:
    result = run_commands(commands, tmp_path, before_install=install_dependencies)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "every check passed" in result.stdout, output[-4000:]
    assert re.search(r"^ok +data: 50,000 train, 10,000 test images in .*data/cifar-10-batches-bin",
                     result.stdout, re.M), result.stdout
    unpacked = tmp_path / FOLDER
    check_timed_cpu_run(result.stdout, json.loads((unpacked / "doctor.json").read_text()))
    where = subprocess.run([str(unpacked / ".venv" / "bin" / "python"), "-c",
                            "import msresnet; print(msresnet.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert Path(where.stdout.strip()).resolve() == (unpacked / "msresnet" / "__init__.py").resolve(), (
        where.stdout + where.stderr)
    # A file the archive lacks fails the run: the installed package reads the unpacked
    # folder, not this checkout (checked here, on the same install, instead of a
    # second venv and install of its own).
    (unpacked / "configs" / "cpu.yaml").unlink()
    again = run_commands(["cd msresnet-book", ". .venv/bin/activate", commands[-1]], tmp_path)
    assert again.returncode != 0 and "cpu" in again.stdout + again.stderr, again.stdout[-3000:]


def _unpacked_with(commands: list[str], tmp_path: Path, change) -> subprocess.CompletedProcess:
    """Up to the venv as the page says, then ``change(folder)``, then the rest."""
    first = commands.index("python3.11 -m venv .venv")
    result = run_commands(commands[:first + 1], tmp_path)
    assert result.returncode == 0, result.stderr
    change(tmp_path / FOLDER)
    rest = ["cd msresnet-book", *commands[first + 1:]]
    return run_commands(rest, tmp_path, before_install=install_dependencies)


@needs_data
@pytest.mark.timeout(600)
def test_a_dependency_missing_from_pyproject_fails(commands: list[str], tmp_path: Path) -> None:
    def drop_tqdm(folder: Path) -> None:
        pyproject = folder / "pyproject.toml"
        text = pyproject.read_text()
        assert re.search(r'^\s*"tqdm[^"]*",\n', text, re.M)
        pyproject.write_text(re.sub(r'^\s*"tqdm[^"]*",\n', "", text, flags=re.M))

    result = _unpacked_with(commands, tmp_path, drop_tqdm)
    assert result.returncode != 0
    assert "No module named 'tqdm'" in result.stdout + result.stderr, result.stdout[-3000:]


def test_an_undeclared_range_is_refused(tmp_path: Path) -> None:
    """The dependency folder refuses what this environment cannot satisfy."""
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\n'
        '[project]\nname = "x"\nversion = "0"\ndependencies = ["mindspore>=9"]\n')
    with pytest.raises(LookupError, match=r"mindspore>=9: .* is installed"):
        dependency_folder(tmp_path / "pyproject.toml", tmp_path / "deps")


def test_make_restore_in_an_unpacked_archive(built_html: Path, tmp_path: Path) -> None:
    """No git there: ``make restore`` takes notebooks/ back from the archive beside it."""
    archive = tmp_path / ARCHIVE
    shutil.copy(built_html / "_downloads" / ARCHIVE, archive)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / FOLDER
    chapter = sorted((folder / "notebooks").glob("*.ipynb"))[0]
    stored = chapter.read_bytes()
    chapter.write_text("{}")
    result = subprocess.run(["make", "restore"], cwd=folder, capture_output=True, text=True,
                            env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert chapter.read_bytes() == stored
    (tmp_path / "elsewhere").mkdir()
    archive.rename(tmp_path / "elsewhere" / ARCHIVE)
    result = subprocess.run(["make", "restore"], cwd=folder, capture_output=True, text=True,
                            env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert result.returncode != 0 and "SOURCE_ARCHIVE=path" in result.stderr


# --------------------------------------------------------------------------- the mechanism

CONF = """
import sys
sys.path.insert(0, {ext!r})
extensions = ["myst_parser", "source_archive"]
myst_enable_extensions = ["substitution"]
html_theme = "sphinx_book_theme"
html_theme_options = {{"repository_url": {url!r}}}
"""
PAGE = ("# Start\n\n{source-archive}`msresnet-book.tar.gz` is the source.\n"
        "{{ source_repository }}\n\n## Sub\n\nText.\n")


def _small_book(root: Path, url: str, git: bool) -> subprocess.CompletedProcess:
    (root / "conf.py").write_text(CONF.format(ext=str(REPO / "book" / "_ext"), url=url))
    (root / "index.md").write_text(PAGE)
    if git:
        for args in (["init", "-q"], ["add", "conf.py", "index.md"],
                     ["-c", "user.name=t", "-c", "user.email=t@example.invalid",
                      "commit", "-q", "-m", "book"]):
            subprocess.run(["git", *args], cwd=root, check=True)
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(root),
                           str(root / "_build")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent)})


def test_the_repository_mechanism(tmp_path: Path) -> None:
    """No URL: the page says the archive is the way and there is no repository button;
    a URL: the page names it with `git clone`, and the theme shows its button. An
    unpacked archive (no git) builds its archive again from its list of files."""
    plain, linked = tmp_path / "plain", tmp_path / "linked"
    plain.mkdir()
    linked.mkdir()
    url = "https://github.com/example/msresnet-book"
    for root, address in ((plain, ""), (linked, url)):
        result = _small_book(root, address, git=True)
        assert result.returncode == 0, result.stdout + result.stderr
    def text(html: str) -> str:
        return " ".join(re.sub(r"<[^>]+>", "", html).split())

    html = (plain / "_build" / "index.html").read_text()
    assert "no public repository yet: this archive is how to get" in text(html)
    assert "git clone" not in html and url not in html and "source-repository-button" not in html
    html = (linked / "_build" / "index.html").read_text()
    assert f"git clone {url} also gives you" in text(html) and f'href="{url}"' in html
    assert re.search(rf'<a href="{re.escape(url)}"[^>]*btn-source-repository-button', html), (
        "no repository button")
    with tarfile.open(linked / "_build" / "_downloads" / ARCHIVE) as tar:
        assert sorted(tar.getnames()) == [f"{FOLDER}/{n}" for n in
                                          ("conf.py", "index.md", "source-archive.txt")]
        unpacked = tmp_path / "unpacked"
        tar.extractall(unpacked, filter="data")
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                             str(unpacked / FOLDER), str(unpacked / "out")],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    with tarfile.open(unpacked / "out" / "_downloads" / ARCHIVE) as tar:
        assert len(tar.getnames()) == 3
    (unpacked / FOLDER / "source-archive.txt").unlink()
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                             str(unpacked / FOLDER), str(unpacked / "out2")],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert result.returncode != 0 and "neither a git checkout" in result.stdout + result.stderr
