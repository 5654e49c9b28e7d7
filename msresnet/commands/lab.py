"""``msresnet lab``: the command line of :func:`msresnet.chapters.lab.serve` (and, with
``--register_only``, of :func:`msresnet.chapters.lab.register_kernel`).

It checks the port before anything is registered or started, then registers the
book's kernel and runs JupyterLab until it stops. The library functions know
nothing of this layer.
"""

from __future__ import annotations

from collections.abc import Sequence

import msresnet.chapters.lab as library
from msresnet.chapters.lab import DEFAULT_PORT, KERNEL_NAME, display_name, register_kernel, serve
from msresnet.command_line import ArgumentParser


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="msresnet lab",
                            description=library.__doc__.splitlines()[0])
    parser.add_argument("--ip", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}, the next free one if taken; "
                             "0: any free port)")
    parser.add_argument("--register_only", action="store_true",
                        help="only register the kernel, print where, and exit")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:  # before anything is registered or started
        parser.error(f"--port: {args.port} is not a TCP port (0-65535; 0: any free port)")
    if args.register_only:
        print(f'kernel "{display_name()}" ({KERNEL_NAME}) registered in {register_kernel()}')
        return 0
    return serve(args.ip, args.port)
