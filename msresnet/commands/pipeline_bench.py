"""``msresnet pipeline-bench``: the command line of
:func:`msresnet.experiments.pipeline_bench.run_grid` (and, in the fresh process it
starts per setting, ``--worker``, of :func:`msresnet.experiments.pipeline_bench.run_worker`).

It finds the data folder as every verb does
(:func:`msresnet.experiments.pipeline_bench.batches_dir`), checks it once before the
first worker starts, measures the grid and prints the table. The library functions
know nothing of this layer.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from msresnet import atomic
from msresnet.command_line import ArgumentParser, positive_int
from msresnet.experiments.pipeline_bench import (GRIDS, RESULT_MARKER, Setting, batches_dir,
                                                 check_data, format_table, run_grid, run_worker)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="msresnet pipeline-bench",
                            description="Measure the CIFAR-10 pipeline, alone and in training.")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="alone")
    parser.add_argument("--data_dir", default=None,
                        help="the data folder, chosen as for training: this option (from the "
                             "working folder), else $MSRESNET_DATA_DIR, else the profiles' data")
    parser.add_argument("--batches_dir", help=argparse.SUPPRESS)  # a worker's: resolved once
    parser.add_argument("--mindrecord_dir", default=None,
                        help="folder of cifar10_train.mindrecord (default: DATA_DIR/mindrecord)")
    parser.add_argument("--repeat", type=positive_int, default=1, help="runs of each setting (median kept)")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker is not None:
        setting = Setting(**json.loads(args.worker))
        result = run_worker(setting, args.batches_dir, args.mindrecord_dir)
        print(RESULT_MARKER + json.dumps(asdict(result)), flush=True)
        return 0
    if args.repeat < 1:
        raise SystemExit(f"--repeat must be at least 1, got {args.repeat}")
    batches = batches_dir(args.data_dir)
    check_data(batches, args.mindrecord_dir)
    report = run_grid(GRIDS[args.grid](), batches, args.mindrecord_dir, args.repeat, progress=True)
    report["grid"] = args.grid
    report["command"] = "msresnet pipeline-bench " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]))
    print(format_table(report))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(args.json, report)
        print(f"wrote {args.json}")
    return 0
