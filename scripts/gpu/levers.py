"""Time MindSpore's training step on the GPU under each speed lever, one process each.

Each lever is a set of profile overrides (``data_format=NHWC``,
``amp_batchnorm=float16``, ``graph_kernel=true``, ``jit_level=O0``,
``batch_size=512`` ...) on top of a profile. A lever runs in a fresh process (graph
kernel fusion and the compile level are process-wide context settings) through
``msresnet.doctor.speed.timed_run``, the doctor's measurement: the profile's own
factories and data pipeline, ``Model.train`` with data sink, two epochs of
IMAGES images (the first compiles, the second is timed). A lever that fails is
recorded with the last line of its error and the others go on.

An item ``+name`` instead of ``key=value`` applies a process-wide patch of
``scripts/gpu/lever_patches.py``; ``choose_profile.py`` never takes such a lever.

Usage, on the GPU machine, from the repository root (``env.sh`` sourced)::

    python3 scripts/gpu/levers.py OUT.json PROFILE DATA_DIR IMAGES \\
        base: nhwc:data_format=NHWC bn16:amp_batchnorm=float16 ...

Writes OUT.json after every lever (a list of records: name, overrides, result or
error, seconds) and prints one line each.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

TIMEOUT = 240
PROFILE_ENV = "MSRESNET_GPU_PROFILE"  # set for a lever whose name starts with "profile"


def worker(profile: str, data_dir: str, images: int, overrides: list[str]) -> None:
    from msresnet.config.profile import load_config, parse_overrides
    from msresnet.doctor.speed import timed_run

    patches = [item[1:] for item in overrides if item.startswith("+")]
    if patches:  # process-wide experiments (scripts/gpu/lever_patches.py)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import lever_patches
        lever_patches.apply(patches)
    keys = [item for item in overrides if not item.startswith("+")]
    args = [f"--data_dir={data_dir}", *(f"--{item}" for item in keys)]  # key=value
    config = load_config(profile, parse_overrides(args))
    steps = max(1, images // config.batch_size)
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        result = timed_run(config, steps, config.batch_size)
    else:  # the same run under MindSpore's profiler (CUPTI): where the step's time goes
        import mindspore as ms
        profiler = ms.Profiler(output_path=folder)
        result = timed_run(config, steps, config.batch_size)
        profiler.analyse()
    print("LEVER " + json.dumps(result), flush=True)


def first_error(stderr: str, returncode: int) -> str:
    """The line that names the failure: the exception's own (``TypeError: ...``),
    not the advice MindSpore prints after it (``See file ... analyze_fail.ir``)."""
    lines = [x.strip() for x in stderr.splitlines() if x.strip()]
    named = [x for x in lines if re.match(r"^[\w.]*(Error|Exception)\b", x)]
    picked = named or [x for x in lines if "Error" in x or "fail" in x] or lines
    return (picked[-1] if picked else f"exit {returncode}")[:400]


def main(out: str, profile: str, data_dir: str, images: int, levers: list[str]) -> None:
    records = []
    for lever in levers:
        name, _, spec = lever.partition(":")
        overrides = [item for item in spec.split(",") if item]
        start = time.time()
        try:
            env = dict(os.environ)
            if name.startswith("profile"):
                env[PROFILE_ENV] = os.path.join(os.path.dirname(os.path.abspath(out)), name)
            run = subprocess.run([sys.executable, __file__, "--worker", profile, data_dir,
                                  str(images), *overrides], capture_output=True, text=True,
                                 timeout=TIMEOUT, env=env)
            lines = [x for x in run.stdout.splitlines() if x.startswith("LEVER ")]
            if run.returncode == 0 and lines:
                record = {"result": json.loads(lines[-1][6:])}
            else:
                record = {"error": first_error(run.stderr, run.returncode)}
        except subprocess.TimeoutExpired:
            record = {"error": f"no result within {TIMEOUT} s"}
        record = {"name": name, "overrides": overrides, **record,
                  "seconds": round(time.time() - start, 1)}
        records.append(record)
        with open(out, "w") as handle:
            json.dump(records, handle, indent=1)
        shown = record.get("result", {}).get("images_per_second", record.get("error"))
        print(f"lever {name} ({','.join(overrides) or 'profile'}): {shown}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
