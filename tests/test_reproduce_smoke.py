"""``python -m msresnet.reproduce`` end to end, on a cheap subset of the chapters.

Strict nbval already executes every chapter once in the test command, so this test
runs only chapters 1 and 2 (about a minute) through the real command: papermill,
parameters passed with ``-p``, one output folder, ``--resume``. It checks what a
reproduction promises: the chapters ran, ``run.json`` records each with its time
and the key figures the chapter recorded itself, and ``report.md`` lists them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from msresnet.notebook import METRICS_DIR_VARIABLE
from msresnet.paths import REPO_ROOT
import pytest

from msresnet.reproduce import chapters, select

pytestmark = pytest.mark.slow
ONLY = "1,2"

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


def reproduce(out, *extra):
    env = {k: v for k, v in os.environ.items() if k != METRICS_DIR_VARIABLE}
    result = subprocess.run([sys.executable, "-m", "msresnet.reproduce", "--profile", "smoke",
                             "--only", ONLY, "-p", "throughput_images", "1000",
                             "--out", str(out), *extra], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-5000:]
    return result


def test_chapters_reproduce_under_the_smoke_profile(tmp_path):
    out = tmp_path / "smoke"
    reproduce(out)

    run = json.loads((out / "run.json").read_text())
    names = [chapter.name for chapter in select(chapters(), ONLY)]
    assert names == ["01_dataset", "02_config_lr"]
    assert [entry["name"] for entry in run["notebooks"]] == names
    every = {chapter.name for chapter in chapters()}
    assert set(EXPECTED_METRICS) <= every, "a chapter was renamed: update this test"
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

    # --resume: the same command again skips every chapter that completed.
    before = {n: (out / f"{n}.ipynb").stat().st_mtime_ns for n in names}
    reproduce(out, "--resume")
    again = json.loads((out / "run.json").read_text())
    assert [e["status"] for e in again["notebooks"]] == [e["status"] for e in run["notebooks"]]
    assert {n: (out / f"{n}.ipynb").stat().st_mtime_ns for n in names} == before


# make nbval runs every chapter with MSRESNET_METRICS_DIR set to this folder, then this
# test (so the chapters this file does not reproduce still prove their metric keys).
NBVAL_METRICS = REPO_ROOT / "runs" / "nbval-metrics"


@pytest.mark.skipif(not NBVAL_METRICS.is_dir(), reason="run by make nbval after the notebooks")
def test_every_chapter_recorded_its_metrics_under_nbval():
    for name, keys in EXPECTED_METRICS.items():
        path = NBVAL_METRICS / f"{name}.json"
        assert path.is_file(), f"{name} recorded no metrics under nbval"
        recorded = json.loads(path.read_text())
        assert keys <= set(recorded), f"{name} did not record {sorted(keys - set(recorded))}"
        assert all(isinstance(v, (int, float)) for v in recorded.values()), name
