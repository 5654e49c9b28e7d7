"""``msresnet job``: the command line of :func:`msresnet.jobs.job.run_logged` (a
ModelArts-style job: stage the data, train, upload the results).

The job's arguments are the platform's contract, so reading them stays in the
library (:func:`msresnet.jobs.job.parse_arguments`: ``--data_url``/``--train_url``
or their environment variables, Config fields as overrides, the platform's own
arguments ignored; chapter 6 plans a job with it, and the boot file
``msresnet/jobs/job.py`` runs it without this layer). This module parses, runs the
job and prints its summary as one JSON line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from msresnet.jobs.job import parse_arguments, run_logged


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: parse, :func:`~msresnet.jobs.job.run_logged`, print the summary.
    An error is written to ``job.log`` with its traceback and raised: ``msresnet`` prints
    the one line (:func:`msresnet.command_line.run`: exit 2 for a bad argument, config,
    data or store, 3 for anything the book does not raise on purpose)."""
    summary = run_logged(parse_arguments(sys.argv[1:] if argv is None else list(argv)))
    print(json.dumps(summary))
    return 0
