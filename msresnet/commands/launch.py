"""``msresnet launch``: the command line of :func:`msresnet.jobs.launch.build_plan` and
:func:`msresnet.jobs.launch.run`.

It reads the job's layout and the ``--KEY VALUE`` overrides, builds the plan (the
config loaded and checked once), prints the learning rate the workers will train at,
the config they load and the ``msrun`` command, then runs it unless ``--dry_run``
(chapter 7 calls :func:`main` for a dry run). The launcher knows nothing of this layer.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from msresnet.command_line import ArgumentParser, non_negative_int, positive_int, positive_number
from msresnet.config.profile import parse_overrides
from msresnet.jobs.launch import (DEFAULT_CLUSTER_TIME_OUT, RANK_DUMP_FOLDER, LaunchError,
                                  build_plan, run)
from msresnet.config.run import lr_rule
from msresnet.training.distributed import DUMP_VARIABLE  # where --rank_dump tells the workers to write


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet launch",
        description="Train data-parallel with msrun. Other --KEY VALUE options are Config "
                    "fields passed to the training (e.g. --epoch_size 2 --batch_size 32).")
    parser.add_argument("--workers", type=positive_int, required=True,
                        help="worker processes in total (one per device)")
    parser.add_argument("--profile", default="smoke", help="smoke, cpu, gpu, ascend or a YAML path")
    parser.add_argument("--output_dir", help="where the run writes (default: the profile's)")
    parser.add_argument("--master_port", type=int, help="scheduler port (default: a free one)")
    parser.add_argument("--master_addr", default="127.0.0.1",
                        help="scheduler address (the first node's IP for several nodes)")
    parser.add_argument("--local_workers", type=positive_int,
                        help="workers on this node (default: all; fewer for several nodes)")
    parser.add_argument("--node_rank", type=non_negative_int, help="this node's index, 0 on the master")
    parser.add_argument("--log_dir", help="where every process's log goes (default: OUTPUT/logs)")
    parser.add_argument("--cluster_time_out", type=positive_int, default=DEFAULT_CLUSTER_TIME_OUT,
                        help="seconds for all workers to register with the scheduler")
    parser.add_argument("--timeout", type=positive_number, help="stop the job after this many seconds")
    parser.add_argument("--rank_dump", action="store_true",
                        help=f"each rank writes its data, losses and weights to OUTPUT/"
                             f"{RANK_DUMP_FOLDER} ({DUMP_VARIABLE})")
    parser.add_argument("--progress", action="store_true", help="rank 0 shows a progress bar")
    parser.add_argument("--dry_run", dest="dry_run", action="store_true",
                        help="check the config, print the command and exit (writes nothing)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: print the command, run it (unless --dry_run); 0 when every worker
    finished. A bad config or command line, and a failed worker, raise
    :class:`~msresnet.config.profile.ConfigError` or :class:`~msresnet.jobs.launch.LaunchError`:
    ``msresnet`` prints the one line (:func:`msresnet.command_line.run`, exit 2)."""
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    overrides = parse_overrides(rest)  # errors name the command line
    plan = build_plan(args.workers, args.profile, overrides, args.output_dir,
                      master_port=args.master_port, master_addr=args.master_addr,
                      local_workers=args.local_workers, node_rank=args.node_rank,
                      log_dir=args.log_dir, cluster_time_out=args.cluster_time_out,
                      rank_dump=args.rank_dump, progress=args.progress)
    print(f"# {lr_rule(plan.config, plan.workers)}")
    print(plan.describe_config())
    print(plan.shell(), flush=True)
    if args.dry_run:
        return 0
    try:
        result = run(plan, timeout=args.timeout, echo=sys.stdout)
    except LaunchError as error:  # the failed rank's last lines, then the one-line error
        if error.tail:
            print(f"--- last lines of {error.log} ---", *error.tail, sep="\n", file=sys.stderr)
        raise LaunchError(error.summary, rank=error.rank, exit_code=error.exit_code) from None
    print(f"done in {result.seconds:.0f} s; logs of every rank in {plan.log_dir}")
    return 0
