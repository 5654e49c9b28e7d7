"""``msresnet ablation``: the command line of :func:`msresnet.experiments.ablation.run_row`
(``run``: train and record rows) and of :func:`msresnet.experiments.ablation.table`
(``table``: the table, from the records).

It picks the plan (``--profile``: the ``cpu`` one of chapter 10, or ``gpu-fast``),
checks the row names before anything trains, and runs or tables them. The library
functions know nothing of this layer.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from msresnet.command_line import ArgumentParser
from msresnet.experiments.ablation import CPU, PLANS, read_rows, run_row, table
from msresnet.text_table import format_table


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="msresnet ablation",
                            description="Short recorded runs, one per budget trick.")
    sub = parser.add_subparsers(dest="action", required=True)
    names = ", ".join(PLANS)
    run = sub.add_parser("run", help="train (if needed) and record rows")
    run.add_argument("rows", nargs="*", help="rows (default all): "
                     + "; ".join(f"{p.profile}: {', '.join(p.by_name)}" for p in PLANS.values()))
    run.add_argument("--profile", default=CPU.profile, choices=list(PLANS),
                     help=f"whose ablation ({names}; default {CPU.profile})")
    run.add_argument("--runs", type=Path, default=None,
                     help="run folders (default runs/ablation, runs/ablation-gpu)")
    run.add_argument("--records", type=Path, default=None,
                     help="record folders (default results/budget/ablation, results/gpu/ablation)")
    shown = sub.add_parser("table", help="print the table from the records")
    shown.add_argument("--profile", default=CPU.profile, choices=list(PLANS),
                       help=f"whose ablation ({names}; default {CPU.profile})")
    shown.add_argument("--records", type=Path, default=None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    plan = PLANS[args.profile]
    records = plan.records if args.records is None else args.records
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.action == "table":
        if not records.is_dir():
            raise SystemExit(f"--records {records}: no such folder of ablation records")
        print(format_table(table(read_rows(records, plan), plan.timed)))
        return 0
    unknown = [name for name in args.rows if name not in plan.by_name]
    if unknown:
        raise SystemExit(f"unknown row {unknown[0]!r}; rows: {', '.join(plan.by_name)}")
    for name in args.rows or list(plan.by_name):
        run_row(plan.by_name[name], args.runs, records, plan)
    return 0
