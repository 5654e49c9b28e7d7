"""onnxruntime's CPU session as the package opens it (predict, the INT8 test).

One place for the session options, so that ``msresnet predict`` and
:func:`msresnet.deploy.export.int8_test` run the same way. onnxruntime is imported
when a session is made: importing this module loads neither it nor MindSpore.
"""

from __future__ import annotations

import os


def cpu_session(path: str | os.PathLike[str]):
    """An onnxruntime session on the CPU whose worker threads sleep between operators.

    By default onnxruntime's threads spin while they wait for the next operator: on a
    machine doing other work too, that spinning takes CPU from it. Without it, scoring
    3,000 test images with the browser's INT8 model took 8.1-8.9 CPU-s instead of
    11.3-12.4 in the same wall time (5.9-7.1 s, 2-core AMD EPYC, 2026-12-07).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
