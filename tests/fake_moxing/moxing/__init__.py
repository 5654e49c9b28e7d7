"""A stand-in for ModelArts' ``moxing`` package, for tests only.

The real MoXing is installed on ModelArts and cannot be installed elsewhere. This
package has the part of its API that :mod:`msresnet.storage.moxing_backend` uses
(``moxing.file``: copy_parallel, copy, exists, is_directory, list_directory,
make_dirs, remove, get_size) and does the work on the local disk, so a test can
check the results: ``obs://bucket/key`` and ``s3://bucket/key`` are the folder
``$FAKE_MOXING_ROOT/bucket/key``. Every call is recorded in :data:`file.CALLS`
and, when ``FAKE_MOXING_LOG`` names a file, appended to it as one JSON line (for
tests that run a job in a child process). It reads no credentials: on ModelArts
the platform authorises MoXing, which is the point of delegating to it.
"""

from . import file

__all__ = ["file"]
