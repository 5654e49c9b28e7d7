"""``msresnet bench``: the command line of :func:`msresnet.experiments.bench.run_benchmark`
(and, in the fresh process it starts per combination, ``--worker``, of
:func:`msresnet.experiments.bench.run_worker`).

It checks ``--modes``, ``--isa`` and the ``--json`` path before any timing (found
only after the benchmark, a mistake cost minutes of it), times every combination
and prints the table. The library functions know nothing of this layer.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict
from pathlib import Path

from msresnet.atomic import write_json
from msresnet.command_line import (ArgumentParser, non_negative_int, positive_int,
                                   positive_number)
from msresnet.cpu_speed import ISA_VALUES, ISA_VARIABLE
from msresnet.data.cifar10 import NUM_CLASSES
from msresnet.experiments.bench import (DEFAULT_ISA, MODES, RESULT_MARKER, BenchSettings,
                                        format_table, run_benchmark, run_worker)


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet bench",
        description="Time a ResNet50 training step per execution mode and ONEDNN_MAX_CPU_ISA "
                    "value, each in a fresh process.")
    parser.add_argument("--batch_size", type=positive_int, default=32, help="images per step (default 32)")
    parser.add_argument("--image_size", type=positive_int, default=32, help="input height and width (default 32)")
    parser.add_argument("--stem", default="imagenet", help="imagenet or cifar (default imagenet)")
    parser.add_argument("--num_classes", type=positive_int, default=NUM_CLASSES)
    parser.add_argument("--steps", type=positive_int, default=5, help="timed steps (default 5)")
    parser.add_argument("--warmup", type=non_negative_int, default=2,
                        help="untimed steps first; graph mode compiles in the first (default 2)")
    parser.add_argument("--modes", default="graph,pynative", help="comma-separated: graph,pynative")
    parser.add_argument("--isa", default=f"AVX2,{DEFAULT_ISA}",
                        help=f"comma-separated {ISA_VARIABLE} values; '{DEFAULT_ISA}' removes the "
                             "variable, ALL means no cap (default AVX2,default)")
    parser.add_argument("--device_target", default="CPU")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="CPU kernel threads (mindspore.device_context.cpu.op_tuning."
                             "threads_num); default: MindSpore's own choice")
    parser.add_argument("--jit_level", default=None, choices=("O0", "O1", "O2"),
                        help="graph compile level (set_context(jit_config=...)); default: "
                             "MindSpore's")
    parser.add_argument("--graph_kernel", action="store_true",
                        help="AKG graph-kernel fusion (set_context(enable_graph_kernel=True); "
                             "needs the `decorator` package, not a dependency of the book)")
    parser.add_argument("--seed", type=non_negative_int, default=1)
    parser.add_argument("--timeout", type=positive_number, default=1800, help="seconds per combination")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser


def check_json_path(path: Path | None) -> None:
    """Refuse a ``--json`` path that cannot be written (a folder, a path under a file, a
    folder without write permission), raising :class:`SystemExit` with the one line.

    The report is written after the whole benchmark: found only then, the mistake
    cost minutes of timing and the results with it.
    """
    if path is None:
        return
    if path.is_dir():
        raise SystemExit(f"--json: {path} is a folder; name the file to write, "
                         f"e.g. {path / 'bench.json'}")
    existing = next(parent for parent in path.absolute().parents if parent.exists())
    if not existing.is_dir():
        raise SystemExit(f"--json: {existing} is a file, not a folder (in {path})")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SystemExit(f"--json: cannot write in {existing} (in {path})")


def _combinations(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """``--modes`` and ``--isa`` as lists, each value checked (SystemExit names it)."""
    modes, isas = _csv(args.modes), _csv(args.isa)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise SystemExit(f"--modes: expected a comma-separated subset of {','.join(MODES)}; "
                         f"got {args.modes!r}")
    unknown = [isa for isa in isas if isa != DEFAULT_ISA and isa.upper() not in ISA_VALUES]
    if unknown or not isas:
        raise SystemExit(f"--isa: expected {DEFAULT_ISA} or oneDNN's values "
                         f"({', '.join(ISA_VALUES)}); got {args.isa!r}")
    return modes, isas


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = BenchSettings(batch_size=args.batch_size, image_size=args.image_size, stem=args.stem,
                             num_classes=args.num_classes, steps=args.steps, warmup=args.warmup,
                             device_target=args.device_target, seed=args.seed,
                             threads=args.threads, jit_level=args.jit_level,
                             graph_kernel=args.graph_kernel)
    modes, isas = _combinations(args)
    if args.worker:
        result = run_worker(settings, modes[0], isas[0])
        print(RESULT_MARKER + json.dumps(asdict(result)), flush=True)
        return 0
    check_json_path(args.json)
    report = run_benchmark(settings, modes, isas, timeout=args.timeout, progress=True)
    print(format_table(report))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.json, report)
        print(f"wrote {args.json}")
    return 0
