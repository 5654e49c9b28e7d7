"""``msresnet local-s3``: the command line of :func:`msresnet.testing.local_s3.serve`.

:class:`msresnet.testing.local_s3.LocalS3Server` starts this verb as its child
(``python -m msresnet local-s3 --host HOST``) and hands it the credentials on its
standard input; it serves until that input closes. The library knows nothing of
this layer (it names the verb, it does not import it).
"""

from __future__ import annotations

from msresnet.command_line import ArgumentParser
from msresnet.testing.local_s3 import serve


def main(argv: list[str]) -> int:
    """Serve until standard input closes (:class:`~msresnet.testing.local_s3.LocalS3Server`
    starts this as its child)."""
    parser = ArgumentParser(prog="msresnet local-s3", description=serve.__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    serve(parser.parse_args(argv).host)
    return 0
