"""``msresnet doctor``: what a reader should know before starting a 90-epoch run.

A long run that fails in its first minute (a CUDA 12 toolkit where MindSpore needs
11.x, a shell without CANN's ``set_env.sh``, a truncated data file) costs little;
one that runs at a tenth of the expected speed costs a day. So before a run this
command checks, on this machine and for one profile:

* ``mindspore``: the installed build against the book's pin (``requirements.txt``),
  the back ends it loaded, the CUDA versions its GPU kernels were built for and the
  CANN versions it accepts (read from the installed wheel, not from a table here);
* ``device``: the profile's device is there (its driver), MindSpore's back end for
  it loaded, and ``mindspore.run_check()`` passes on it; its name and memory;
* ``toolkit``: the CUDA runtime and cuDNN, or the CANN toolkit, found against the
  ones this MindSpore needs;
* ``msrun``: the launcher of ``msresnet launch`` and, on GPU and Ascend, the
  collective library an 8-card run needs (NCCL, HCCL);
* ``data``: the CIFAR-10 folder, validated as training validates it;
* ``speed``: a few dozen training steps of the profile on the device, through the
  training's own factories (network, mixed precision, loss scale, data sink), the
  projected epoch and run time, and the figures the book cites beside them.

A check that fails prints one line saying what to do; the checks that need what it
lacks are skipped, so a machine without a GPU gets one line for the ``gpu``
profile, not five. The exit status is 1 when a check failed (2 for a bad command
line), and ``--json`` keeps everything found. Example::

    msresnet doctor --profile cpu --data_dir data --json runs/doctor.json

This module is the report (:func:`diagnose`, :func:`header`, :func:`record`); the
command line is :mod:`msresnet.commands.doctor`.
"""

from __future__ import annotations

import dataclasses
import os
import platform
from collections.abc import Iterator, Sequence
from typing import Any

from msresnet.config.profile import Config
from msresnet.cpu_speed import cpu_model
from msresnet.doctor.checks import FAIL, OK, Check, skip
from msresnet.doctor.hardware import check_device, check_msrun
from msresnet.doctor.software import check_mindspore, check_toolkit
from msresnet.doctor.speed import check_data, check_speed


# --------------------------------------------------------------------------- the report
def diagnose(config: Config, steps: int, batch_size: int) -> Iterator[Check]:
    """Yield the checks in order; the ones whose need failed are skipped."""
    build, ms = check_mindspore()
    yield build
    device = check_device(config, ms) if ms is not None else skip("device", "MindSpore")
    yield device
    device_ok = device.status == OK
    yield check_toolkit(config, device_ok, build.details)
    yield check_msrun(config, device_ok, ms)
    data, source = check_data(config)
    yield data
    # The toolkit and msrun lines are versions and files: the timed steps are the
    # real test of them, so only what the steps cannot run without skips them.
    if any(check.status == FAIL for check in (build, device, data)):
        yield skip("speed", "MindSpore, the device and the data")
    else:
        yield check_speed(config, steps, batch_size, data.details["train_images"], source)


def header(config: Config) -> str:
    return (f"doctor: profile {config.profile} ({config.device_target}, "
            f"{config.image_size}x{config.image_size}, batch {config.batch_size}, "
            f"{config.epoch_size} epochs, {config.amp_level}, loss scale {config.loss_scale:g})")


def record(config: Config, checks: Sequence[Check], argv: Sequence[str]) -> dict[str, Any]:
    """Everything found, for ``--json``."""
    failed = [c.name for c in checks if c.status == FAIL]
    return {"command": " ".join(["msresnet", "doctor", *argv]), "ok": not failed,
            "failed": failed, "profile": config.profile, "config": config.to_dict(),
            "machine": {"cpu": cpu_model(), "cpu_count": os.cpu_count(),
                        "platform": platform.platform(), "python": platform.python_version()},
            "checks": [dataclasses.asdict(c) for c in checks]}
