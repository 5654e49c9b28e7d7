"""Figures and tables outside the numbered chapters are numbered page by page.

Sphinx numbers the figures, tables and code blocks of a numbered chapter by chapter
("Fig. 4.1", "Table 4.1"). On the pages outside the numbered part (the introduction,
the GPU page, the results page) it keeps one count across all of them, so the
results page's first figure was "Fig. 2" because the GPU page had one, and the GPU
page's first table "Table 2" because the introduction had one (issue 44). This
renumbers each such page's figures, tables and code blocks from 1, in the order
Sphinx met them, right after Sphinx has numbered them; ``{numref}`` reads the new
numbers. ``tests/test_browser.py`` checks the first figure and table of each page.
"""

from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment


def renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Number every unnumbered page's figures (and tables, code blocks) from 1; the
    pages whose numbers changed are written again."""
    changed = set()
    for docname, by_type in env.toc_fignumbers.items():
        if env.toc_secnumbers.get(docname):
            continue  # a numbered chapter: "4.1", Sphinx's own
        for figtype, numbers in by_type.items():
            per_page = {figure: (index + 1,)
                        for index, figure in enumerate(sorted(numbers, key=numbers.get))}
            if per_page != numbers:
                by_type[figtype] = per_page
                changed.add(docname)
    return sorted(changed)


def setup(app: Sphinx) -> dict[str, bool]:
    # after Sphinx's own TocTreeCollector (priority 500) has assigned the numbers
    app.connect("env-get-updated", renumber, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
