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
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from msresnet.atomic import write_json
from msresnet.command_line import ArgumentParser, positive_int
from msresnet.config import AMP_LEVELS, Config
from msresnet.cpu_speed import cpu_model
from msresnet.doctor.checks import FAIL, OK, Check, skip
from msresnet.doctor.hardware import check_device, check_msrun
from msresnet.doctor.software import check_mindspore, check_toolkit
from msresnet.doctor.speed import check_data, check_speed
from msresnet.run_config import build_run_config

DEFAULT_STEPS = 30


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


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet doctor",
        description="Check this machine for a profile before a long run: MindSpore and its "
                    "back ends, the device, CUDA/cuDNN or CANN, msrun and NCCL/HCCL, the "
                    "data, and a timed run of training steps with the projected run time.")
    parser.add_argument("--profile", required=True, help="smoke, cpu, gpu, ascend or a YAML path")
    parser.add_argument("--data_dir", default=None,
                        help="folder with cifar-10-batches-bin (default: the profile's)")
    parser.add_argument("--steps", type=positive_int, default=DEFAULT_STEPS,
                        help=f"timed training steps, after as many that compile "
                             f"(default {DEFAULT_STEPS})")
    parser.add_argument("--batch_size", type=positive_int, default=None,
                        help="batch of the timed steps (default: the profile's)")
    parser.add_argument("--amp_level", choices=AMP_LEVELS, default=None,
                        help="mixed precision of the timed steps (default: the profile's)")
    parser.add_argument("--json", type=Path, default=None, help="write everything found here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when every check passed, 1 when one failed, 2 for a bad command line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    overrides = {"data_dir": args.data_dir, "amp_level": args.amp_level}
    # the folder training would read: the one given, else $MSRESNET_DATA_DIR, else the profile's
    config = build_run_config(args.profile, {k: v for k, v in overrides.items() if v is not None})
    print(header(config), flush=True)
    checks: list[Check] = []
    for check in diagnose(config, args.steps, args.batch_size or config.batch_size):
        checks.append(check)
        print("\n".join([check.line(), *("      " + note for note in check.notes)]), flush=True)
    failed = [c.name for c in checks if c.status == FAIL]
    print(f"failed: {', '.join(failed)}" if failed else "every check passed")
    if args.json is not None:
        write_json(args.json, record(config, checks, argv))
        print(f"wrote {args.json}")
    return 1 if failed else 0
