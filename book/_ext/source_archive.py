"""The book's source, offered by the book itself: an archive built with the HTML.

A reader who has only the rendered pages must be able to get the code. Every HTML
build writes :data:`ARCHIVE_NAME` to ``_downloads/`` of the output, at that fixed
path: a ``.tar.gz`` of every file of the checkout that git tracks (their contents
as they are in the working tree, the files the book was built from), under one
folder :data:`ARCHIVE_FOLDER`, plus :data:`MANIFEST`, which names the commit and
lists those files. Building the book again from an unpacked archive (no ``.git``)
archives the files that list names, so the archive reproduces itself.

For the pages:

* the role ``{source-archive}`msresnet-book.tar.gz``` is a link to the archive
  (the role's text), its size and the commit it was made from:
  ``msresnet-book.tar.gz (25.7 MB, commit 1a2b3c4)``;
* the MyST substitution ``{{ source_repository }}`` says where the repository is
  when ``repository.url`` is set in ``_config.yml`` (the extension then turns
  sphinx-book-theme's repository button on too), and that the archive is the way
  to the source when it is not.

``tests/test_source_archive.py`` builds a small book with this extension, with and
without a repository URL, and installs the real book's archive from its page.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxRole

logger = logging.getLogger(__name__)

ARCHIVE_NAME = "msresnet-book.tar.gz"
ARCHIVE_FOLDER = "msresnet-book"
DOWNLOADS = "_downloads"
MANIFEST = "source-archive.txt"
"""Written into the archive (not tracked): the commit, then one archived path a line."""


@dataclass(frozen=True)
class Source:
    """What the archive holds: the checkout's root, its files and where they came from."""

    root: Path
    files: tuple[str, ...]
    commit: str            # short hash, or "unknown"
    changed: tuple[str, ...] = ()   # tracked files that differ from the commit


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True).stdout


def find_source(srcdir: Path) -> Source:
    """The tracked files of the checkout holding ``srcdir``, or of an unpacked archive."""
    srcdir = srcdir.resolve()
    try:
        root = Path(_git(srcdir, "rev-parse", "--show-toplevel").strip())
    except (OSError, subprocess.CalledProcessError):
        root = None
    if root is not None:
        listed = [f for f in _git(root, "ls-files", "-z").split("\0") if f]
        files = tuple(f for f in listed if (root / f).is_file() or (root / f).is_symlink())
        try:
            commit = _git(root, "rev-parse", "--short", "HEAD").strip()
        except subprocess.CalledProcessError:
            commit = "unknown"
        changed = tuple(f for f in _git(root, "diff", "--name-only", "-z", "HEAD").split("\0")
                        if f)
        return Source(root, files, commit, changed)
    manifest = srcdir / MANIFEST
    if not manifest.is_file():
        raise ExtensionError(f"{srcdir} is neither a git checkout nor an unpacked source "
                             f"archive (no {MANIFEST}): nothing to offer as the book's source")
    lines = manifest.read_text().splitlines()
    commit = next((line.split()[-1] for line in lines if line.startswith("# commit ")),
                  "unknown")
    files = tuple(line for line in lines if line and not line.startswith("#"))
    missing = [f for f in files if not (srcdir / f).exists()]
    if missing:
        raise ExtensionError(f"{MANIFEST} lists files this folder lacks: {missing[:5]}")
    return Source(srcdir, files, commit)


def manifest_text(source: Source) -> str:
    lines = [f"# The source of the book 'ResNet50 on CIFAR-10 with MindSpore',",
             f"# as archived by book/_ext/source_archive.py when the book was built.",
             f"# commit {source.commit}"]
    if source.changed:
        lines.append("# with changes not committed to it: " + " ".join(source.changed))
    return "\n".join([*lines, *source.files]) + "\n"


def _normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_archive(source: Source, target: Path) -> Path:
    """``target`` (.tar.gz): every file of ``source`` under :data:`ARCHIVE_FOLDER`/, and
    :data:`MANIFEST`; written whole, then renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w:gz", compresslevel=6) as tar:
        for name in source.files:
            tar.add(source.root / name, arcname=f"{ARCHIVE_FOLDER}/{name}", recursive=False,
                    filter=_normalised)
        data = manifest_text(source).encode()
        info = _normalised(tarfile.TarInfo(f"{ARCHIVE_FOLDER}/{MANIFEST}"))
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    partial.replace(target)
    return target


# --------------------------------------------------------------------------- Sphinx

def _repository_url(app: Sphinx) -> str:
    return (app.config.html_theme_options or {}).get("repository_url", "") or ""


def _relative_uri(docname: str) -> str:
    return "../" * docname.count("/") + f"{DOWNLOADS}/{ARCHIVE_NAME}"


class SourceArchiveRole(SphinxRole):
    """``{source-archive}``: the archive's link, size and commit."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        facts = self.env.app.source_archive_facts
        link = nodes.reference("", "", internal=False, refuri=_relative_uri(self.env.docname),
                               classes=["source-archive"])
        link += nodes.literal(text=self.text or ARCHIVE_NAME)
        changed = ", with changes not committed" if facts["changed"] else ""
        return [link, nodes.Text(f" ({facts['megabytes']:.1f} MB, commit {facts['commit']}"
                                 f"{changed})")], []


def repository_sentence(url: str) -> str:
    """The Markdown of ``{{ source_repository }}``: the repository, or that there is none."""
    if url:
        return (f"The same files are in the book's repository, <{url}>, which `git clone "
                f"{url}` also gives you with its history.")
    return "The book has no public repository yet: this archive is how to get its source."


def _on_config_inited(app: Sphinx, config) -> None:
    # Jupyter Book refuses the repository button without a URL, so _config.yml leaves it
    # off; with a URL configured, the button appears.
    options = dict(config.html_theme_options or {})
    url = options.get("repository_url") or ""
    if url:
        options["use_repository_button"] = True
        config.html_theme_options = options
    config.myst_substitutions = {**(config.myst_substitutions or {}),
                                 "source_repository": repository_sentence(url)}


def _on_builder_inited(app: Sphinx) -> None:
    source = find_source(Path(app.srcdir))
    facts = {"commit": source.commit, "changed": bool(source.changed), "megabytes": 0.0}
    if app.builder.format == "html":
        path = write_archive(source, Path(app.outdir) / DOWNLOADS / ARCHIVE_NAME)
        facts["megabytes"] = path.stat().st_size / 1e6
        logger.info(f"source archive: {path} ({len(source.files)} files, "
                    f"{facts['megabytes']:.1f} MB, commit {source.commit})")
    app.source_archive_facts = facts


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _on_config_inited)
    app.connect("builder-inited", _on_builder_inited)
    app.add_role("source-archive", SourceArchiveRole())
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
