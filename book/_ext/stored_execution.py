"""Sphinx directive ``stored-execution-table``: when and how long each stored notebook ran.

The book is built with execution off, so Jupyter Book's own report
(``{nb-exec-table}``) has nothing to list. The notebooks were executed before they
were committed, though, and the executor (nbclient) recorded in every code cell's
metadata when it started and finished (``metadata.execution``). This directive
reads those timestamps from each notebook of the book and shows one row per
notebook: when it was last executed, how long the whole run took, how many code
cells it has, and how many of them stored an error (the deliberate
``raises-exception`` cells of the troubleshooting page).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import nbformat
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def _timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def notebook_run(path: Path) -> dict:
    """Start, duration (s), code-cell count and stored-error count of a notebook's last run."""
    notebook = nbformat.read(path, as_version=4)
    cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    starts, ends = [], []
    for cell in cells:
        execution = cell.metadata.get("execution", {})
        start = _timestamp(execution.get("iopub.status.busy") or execution.get("iopub.execute_input"))
        end = _timestamp(execution.get("iopub.status.idle") or execution.get("shell.execute_reply"))
        if start and end:
            starts.append(start)
            ends.append(end)
    errors = sum(any(output.get("output_type") == "error" for output in cell.get("outputs", []))
                 for cell in cells)
    return {
        "start": min(starts) if starts else None,
        "seconds": (max(ends) - min(starts)).total_seconds() if starts else None,
        "cells": len(cells),
        "errors": errors,
    }


def _row(*entries: nodes.Node | str) -> nodes.row:
    row = nodes.row()
    for entry in entries:
        cell = nodes.entry()
        cell += entry if isinstance(entry, nodes.Node) else nodes.paragraph(text=entry)
        row += cell
    return row


class StoredExecutionTable(SphinxDirective):
    """One row per notebook of the book, from the timing metadata stored in the file."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        env = self.env
        # Chapters (notebooks/) first, in file-name order, then the other pages.
        docnames = sorted((name for name in env.found_docs
                           if str(env.doc2path(name)).endswith(".ipynb")),
                          key=lambda name: (not name.startswith("notebooks/"), name))
        headers = ("Notebook", "Last executed (UTC)", "Run time (s)", "Code cells", "Stored errors")
        table = nodes.table(classes=["stored-execution-table"])
        group = nodes.tgroup(cols=len(headers))
        table += group
        for _ in headers:
            group += nodes.colspec(colwidth=1)
        head = nodes.thead()
        head += _row(*headers)
        group += head
        body = nodes.tbody()
        for docname in docnames:
            path = Path(env.doc2path(docname))
            env.note_dependency(str(path))
            run = notebook_run(path)
            link = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget="/" + docname,
                                         refexplicit=False, refwarn=True)
            link += nodes.inline(text=docname)
            paragraph = nodes.paragraph()
            paragraph += link
            body += _row(
                paragraph,
                run["start"].strftime("%Y-%m-%d %H:%M") if run["start"] else "not executed",
                f"{run['seconds']:.0f}" if run["seconds"] is not None else "-",
                str(run["cells"]),
                str(run["errors"]),
            )
        group += body
        return [table]


def setup(app: Sphinx) -> dict:
    app.add_directive("stored-execution-table", StoredExecutionTable)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
