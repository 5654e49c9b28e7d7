"""``msresnet results-page``: the command line of :func:`msresnet.chapters.results_page.record`
and :func:`msresnet.chapters.results_page.write_page`.

It copies a finished reproduction's durable part into ``--dest``, writes the results
page from those copies and rewrites the README's row for the run. The library
functions know nothing of this layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msresnet.chapters.results_page as library
from msresnet.chapters.results_page import record, write_page, write_readme_row
from msresnet.command_line import ArgumentParser


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="msresnet results-page",
                            description=library.__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a finished reproduce --out folder")
    parser.add_argument("--dest", type=Path, default=Path("results/cpu"))
    parser.add_argument("--page", type=Path, default=Path("book/results.md"))
    parser.add_argument("--readme", type=Path, default=Path("README.md"),
                        help="README whose reproduction-table row for this run is rewritten")
    args = parser.parse_args(argv)
    # a ResultsError ends as msresnet.command_line's one line, "msresnet results-page: error: ...", exit 2
    written = record(args.run_dir, args.dest)
    write_page(args.dest, args.page)
    write_readme_row(args.dest, args.readme)
    print(f"{len(written)} files in {args.dest}; page {args.page}")
    return 0
