"""Every chapter records the key figures that reproductions and the results page read.

``msresnet reproduce`` collects what each chapter records with
:func:`msresnet.chapters.notebook.record_metrics`; ``report.md`` and the results page show
those numbers. Strict nbval is the run that executes every chapter in the test
command, and ``make nbval`` runs it with ``MSRESNET_METRICS_DIR`` set to
``runs/nbval-metrics``, then this test. (The reproduce command itself is tested on
chapter 2 and on small notebooks of its own in ``tests/test_reproduce.py``, so no
chapter runs twice in the test command.)
"""

from __future__ import annotations

import json

from msresnet.chapters.notebook import METRICS_DIR_VARIABLE
from msresnet.paths import REPO_ROOT
from msresnet.chapters.reproduce import chapters
from prerequisites import after_nbval, nbval_chapters

# The figures each chapter records with record_metrics (at least these keys).
EXPECTED_METRICS = {
    "01_dataset": {"train_records", "test_records", "pipeline_images_per_second"},
    "02_config_lr": {"total_steps", "peak_lr", "final_lr"},
    "03_model": {"parameters", "macs_per_image", "train_images_per_second"},
    "04_train_eval": {"final_train_loss", "best_top1", "best_epoch", "train_images_per_second",
                      "test_top1", "last_test_top1",
                      "train_seconds"},
    "05_checkpoint_sweep": {"best_top1", "best_top5", "last_top1", "checkpoints", "test_top1",
                            "seconds_per_checkpoint"},
    "06_obs_staging": {"archive_upload_mb_per_s", "folder_upload_mb_per_s",
                       "job_uploaded_files"},
    "07_data_parallel": {"workers", "identical_weight_tensors", "images_shared_between_ranks",
                         "max_epoch_loss_difference_1x64_vs_2x32", "images_per_second_1_worker",
                         "images_per_second_data_parallel"},
    "08_export_deploy": {"samples", "checkpoint_top1", "onnx_max_logit_difference",
                         "top1_onnx_int8_static", "images_per_s_onnx_int8_static",
                         "images_per_s_onnx_fp32"},
    "09_data_pipeline": {"mindrecord_train_records", "pipeline_images_per_s_binary_1",
                         "pipeline_images_per_s_mindrecord_1", "pipeline_images_per_s_numpy_1",
                         "threads_added_binary_1", "default_workers"},
    "10_training_budget": {"reference_images_per_second", "budget_images", "reference_test_top1",
                           "ablation_rows", "ablation_noise_points"},
}
NBVAL_METRICS = REPO_ROOT / "runs" / "nbval-metrics"


def test_every_chapter_is_listed_here():
    assert {chapter.name for chapter in chapters()} == set(EXPECTED_METRICS), \
        "a chapter was added or renamed: list the metrics it records"


@after_nbval(METRICS_DIR_VARIABLE, NBVAL_METRICS)  # there a missing folder fails, not skips
def test_every_chapter_recorded_its_metrics_under_nbval():
    ran = nbval_chapters(set(EXPECTED_METRICS))  # make nbval NOTEBOOKS=...: those only
    for name, keys in sorted(EXPECTED_METRICS.items()):
        if name not in ran:
            continue
        path = NBVAL_METRICS / f"{name}.json"
        assert path.is_file(), f"{name} recorded no metrics under nbval"
        recorded = json.loads(path.read_text())
        assert keys <= set(recorded), f"{name} did not record {sorted(keys - set(recorded))}"
        assert all(isinstance(v, (int, float)) for v in recorded.values()), name
