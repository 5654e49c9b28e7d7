"""``msresnet sync``: the command line of :func:`msresnet.storage.sync.sync_data`.

What each of a node's processes runs to copy once per node: it prints one JSON line
about what this process did (copied as the owner, or waited for the owner's copy);
a store's error is that line too, with one line for the reader on stderr and exit
status 2. The library function knows nothing of this layer.
"""

from __future__ import annotations

import json
import os
import sys

from msresnet.command_line import USAGE_ERROR, ArgumentParser, positive_int, positive_number
from msresnet.storage.staging import StagingError
from msresnet.storage.sync import sync_data


def main(argv: list[str] | None = None) -> int:
    """``msresnet sync SRC DST [--world N] [--job ID] [--timeout S]``: what
    each of N processes of a node runs; prints one JSON line about what it did."""
    parser = ArgumentParser(prog="msresnet sync", description=main.__doc__)
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--world", type=positive_int, default=None,
                        help="processes per node (default: LOCAL_WORLD_SIZE / RANK_SIZE)")
    parser.add_argument("--job", default=None, help="job id (default: JOB_ID or parent pid)")
    parser.add_argument("--timeout", type=positive_number, default=3600.0)
    parser.add_argument("--lock_dir", default=None)
    args = parser.parse_args(argv)
    try:
        result = sync_data(args.src, args.dst, timeout=args.timeout, lock_dir=args.lock_dir,
                           job=args.job, world=args.world, progress=False)
    except StagingError as error:
        print(json.dumps({"pid": os.getpid(), "error": type(error).__name__,
                          "message": str(error)}))
        print(f"msresnet sync: error: {error}", file=sys.stderr)  # for the reader
        return USAGE_ERROR
    print(json.dumps({"pid": os.getpid(), "owner": result.owner, "copied": result.copied,
                      "skipped": result.skipped, "bytes": result.bytes,
                      "waited": round(result.waited, 3)}))
    sys.stdout.flush()
    return 0
