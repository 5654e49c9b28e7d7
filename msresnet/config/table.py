"""The profiles side by side, as rows and as a Markdown table (chapter 2, the
GPU/Ascend page): every key, or only the keys where profiles differ."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msresnet.config.profile import FIELDS, PROFILES, load_config


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def profiles_table(names: Sequence[str] = PROFILES, *, differences_only: bool = False,
                   with_help: bool = False) -> list[list[str]]:
    """Rows comparing profiles, header first: ``["key", *names]`` (``+ ["meaning"]``).

    One row per Config field (``profile`` is the header). ``differences_only`` keeps
    the rows where the profiles disagree.
    """
    configs = [load_config(name) for name in names]
    header = ["key", *names] + (["meaning"] if with_help else [])
    rows = [header]
    for key, field in FIELDS.items():
        if key == "profile":
            continue
        cells = [_cell(getattr(config, key)) for config in configs]
        if differences_only and len(set(cells)) == 1:
            continue
        rows.append([key, *cells] + ([field.metadata["help"]] if with_help else []))
    return rows


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    """A GitHub/MyST markdown table; the first row is the header."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    header, *body = rows
    return "\n".join([line(header), line(["---"] * len(header)), *map(line, body)])
