"""The chapters that train accept every valid parameter value, not only their defaults.

Papermill reproductions run the chapters with whatever values the config accepts,
so each chapter's asserts must state what holds for the values given (and skip,
saying why, what cannot be judged: one epoch has no trend). Each case runs chapters
4 (training) and 5 (the sweep of its checkpoints), or chapter 7 (data-parallel
training with msrun), through ``msresnet reproduce``, which is how a
reader runs them with other values.

Every case (one epoch of one batch of 2 images scored on 2 test images, batch size 1
with the cifar stem, the cifar stem with the cosine schedule, the constant one at
224x224, chapter 7's jobs at one epoch of one batch) is marked ``params`` and runs
with ``make param-test``: each executes chapters a second time, while the test
command executes every chapter once (strict nbval), and they cost a few minutes
more on two cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from msresnet.chapters.notebook import METRICS_DIR_VARIABLE
from msresnet.paths import REPO_ROOT

pytestmark = pytest.mark.slow

SMALL = ("-p", "epoch_size", "1", "-p", "train_samples", "2", "-p", "batch_size", "2",
         "-p", "eval_samples", "2")
CASES = {
    "smallest": SMALL,
    # Batch size 1 where allowed: with the cifar stem (the imagenet stem's 1x1 last stage
    # is refused by the config, tests/test_config.py).
    "batch-of-one": ("-p", "stem", "cifar", "-p", "epoch_size", "2", "-p", "train_samples", "1",
                     "-p", "batch_size", "1", "-p", "eval_samples", "1"),
    # ... and validating on the test set, the recipe's way (no held-out images, no test.json)
    "cifar-stem-cosine": ("-p", "stem", "cifar", "-p", "lr_schedule", "cosine",
                          "-p", "epoch_size", "2", "-p", "train_samples", "4",
                          "-p", "batch_size", "2", "-p", "eval_samples", "4",
                          "-p", "valid_split", "0"),
    "constant-lr-224": (*SMALL, "-p", "image_size", "224", "-p", "lr_schedule", "constant"),
    "data-parallel-smallest": ("-p", "job_epoch_size", "1", "-p", "job_train_samples", "2",
                               "-p", "batch_size", "2", "-p", "job_eval_samples", "2"),
}
CHAPTERS = {"data-parallel-smallest": "7"}


@pytest.mark.params
@pytest.mark.parametrize("case", list(CASES))
def test_training_chapters_run_with_other_valid_values(case, tmp_path):
    out = tmp_path / case
    env = {k: v for k, v in os.environ.items() if k != METRICS_DIR_VARIABLE}
    only = CHAPTERS.get(case, "4,5")
    extra = ("-p", "runs_dir", str(tmp_path / "jobs")) if only == "7" else ()
    proc = subprocess.run([sys.executable, "-m", "msresnet", "reproduce", "--profile", "smoke",
                           "--only", only, *CASES[case], *extra, "--out", str(out)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "unknown parameter" not in proc.stderr
    run = json.loads((out / "run.json").read_text())
    assert [e["status"] for e in run["notebooks"]] == ["ok"] * len(only.split(","))
    values = dict(zip(CASES[case][1::3], CASES[case][2::3]))
    for key, text in values.items():
        if key in run["parameters"]:  # a config key (the others are chapter parameters)
            assert str(run["parameters"][key]) == text, key
    if only == "4,5":
        trained = json.loads((out / "train" / "history.json").read_text())
        assert len(trained) == int(values["epoch_size"])
