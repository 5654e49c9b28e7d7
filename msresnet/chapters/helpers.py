"""What the chapters share, d2l-style: paths as the book prints them, output at the
page's width, and one look for every figure.

A chapter's own code is what a reader learns; what every chapter needs and nobody
learns from (how a path is printed, how a long line is wrapped, the figures' DPI)
lives here, once, so the chapters cannot drift apart::

    from msresnet.chapters.helpers import fill, figure_style, rel
    figure_style()
    print(rel(config.output_dir))            # runs/smoke, from any working folder
    print(fill("a long line ...", indent="    "))
"""

from __future__ import annotations

import logging
import os
import sys
import textwrap
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from msresnet.paths import REPO_ROOT

PAGE_WIDTH = 80
"""Columns of a printed line: the book's pages show 80 without scrolling sideways."""
FIGURE_DPI = 100
"""Dots per inch of a figure as drawn; shown at twice that density (``retina``)."""


def rel(path: str | Path) -> str:
    """``path`` as the book prints it: relative to the repository root when inside it
    (as written, else with links resolved), else absolute, the same from notebooks/
    or the root: a ``data`` link to a shared copy prints as ``data``."""
    for candidate in (Path(os.path.abspath(path)), Path(path).resolve()):
        if candidate.is_relative_to(REPO_ROOT):
            return candidate.relative_to(REPO_ROOT).as_posix()
    return str(Path(path).resolve())


def fill(text: str, indent: str = "    ", first: str = "") -> str:
    """``text`` wrapped at :data:`PAGE_WIDTH`, continuation lines indented by
    ``indent`` (the first by ``first``)."""
    return textwrap.fill(text, PAGE_WIDTH, initial_indent=first, subsequent_indent=indent)


class PageWidthStream:
    """A text stream that wraps every line written to it at :data:`PAGE_WIDTH`
    (continuation lines indented by four spaces) before passing it on."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        out = self.stream or sys.stdout
        out.write("\n".join(fill(line) if line else "" for line in text.split("\n")))
        return len(text)

    def flush(self) -> None:
        (self.stream or sys.stdout).flush()

    def isatty(self) -> bool:
        return False


class PageWidthHandler(logging.Handler):
    """A logging handler that prints ``[LEVEL] message`` to stderr at the page's
    width (MindSpore's Python warnings, for one)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(fill(f"[{record.levelname}] {record.getMessage()}", indent="  "),
              file=sys.stderr)


@contextmanager
def page_width_stdout() -> Iterator[None]:
    """Within the block, everything printed is wrapped at the page's width."""
    saved = sys.stdout
    sys.stdout = PageWidthStream(saved)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout = saved


def figure_style(**rc: Any) -> None:
    """Every chapter's figures alike: drawn at :data:`FIGURE_DPI` and shown at twice
    the pixel density (sharp on high-density screens, text legible as displayed)."""
    import matplotlib.pyplot as plt
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    plt.rcParams.update({"figure.dpi": FIGURE_DPI, **rc})
    set_matplotlib_formats("retina")
