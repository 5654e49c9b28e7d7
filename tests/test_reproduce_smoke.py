"""The whole book under the smoke profile: ``python -m msresnet.reproduce --profile smoke``.

Slow (every chapter, training included: several minutes on two CPU cores), so it
is a file of its own for the Makefile to place. It checks what a reproduction
promises: every chapter ran, ``run.json`` records each with its time and the key
figures the chapter recorded itself, and ``report.md`` lists them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from msresnet.notebook import METRICS_DIR_VARIABLE
from msresnet.paths import REPO_ROOT
from msresnet.reproduce import chapters

# The figures each chapter records with record_metrics (at least these keys).
EXPECTED_METRICS = {
    "01_dataset": {"train_records", "test_records", "pipeline_images_per_second"},
    "02_config_lr": {"total_steps", "peak_lr", "final_lr"},
    "03_model": {"parameters", "macs_per_image", "train_images_per_second"},
    "04_train_eval": {"final_train_loss", "best_top1", "best_epoch", "train_images_per_second",
                      "train_seconds"},
    "05_checkpoint_sweep": {"best_top1", "best_top5", "last_top1", "checkpoints",
                            "seconds_per_checkpoint"},
    "06_obs_staging": {"archive_upload_mb_per_s", "folder_upload_mb_per_s",
                       "job_uploaded_files"},
    "07_data_parallel": {"workers", "identical_weight_tensors", "images_shared_between_ranks",
                         "max_epoch_loss_difference_1x64_vs_2x32", "images_per_second_1_worker",
                         "images_per_second_data_parallel"},
}


def test_the_whole_book_reproduces_under_the_smoke_profile(tmp_path):
    out = tmp_path / "smoke"
    env = {k: v for k, v in os.environ.items() if k != METRICS_DIR_VARIABLE}
    result = subprocess.run([sys.executable, "-m", "msresnet.reproduce", "--profile", "smoke",
                             "--out", str(out)], cwd=REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=3600)
    assert result.returncode == 0, result.stderr[-5000:]

    run = json.loads((out / "run.json").read_text())
    names = [chapter.name for chapter in chapters()]
    assert [entry["name"] for entry in run["notebooks"]] == names
    assert set(EXPECTED_METRICS) <= set(names), "a chapter was renamed: update this test"
    assert run["profile"] == "smoke" and run["parameters"]["profile"] == "smoke"
    assert run["parameters"]["output_dir"] == str(out / "train")
    assert run["finished"] and run["seconds"] > 0
    assert run["versions"]["mindspore"] != "not installed"
    for entry in run["notebooks"]:
        assert entry["status"] == "ok" and entry["seconds"] > 0, entry["name"]
        assert entry["metrics"], f"{entry['name']} recorded no metrics"
        missing = EXPECTED_METRICS.get(entry["name"], set()) - set(entry["metrics"])
        assert not missing, f"{entry['name']} did not record {sorted(missing)}"
        assert all(isinstance(v, (int, float)) for v in entry["metrics"].values()), entry["name"]
        assert (out / entry["output"]).exists()
        recorded = json.loads((out / "metrics" / f"{entry['name']}.json").read_text())
        assert recorded == entry["metrics"]

    report = (out / "report.md").read_text()
    for name in names:
        assert f"| {name} | ok |" in report
    assert list((out / "train").glob("*.ckpt")), "chapter 4 trains into OUT/train"
