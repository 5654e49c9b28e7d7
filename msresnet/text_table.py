"""The book's one plain-text table: fixed-width columns, a header and a rule.

Free of MindSpore, so a tool that only prints records (``msresnet ablation``) loads
no framework for a table; the checkpoint sweep, chapter 5 and chapter 10 print
theirs with it too (``msresnet.training.sweep`` re-exports it for the chapters).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def format_table(rows: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width text table (header first), for notebooks and logs."""
    text = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in text) for i in range(len(text[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in text]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
