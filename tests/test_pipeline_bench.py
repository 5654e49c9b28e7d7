"""Tests of msresnet.experiments.pipeline_bench (chapter 9's measurements).

The settings are checked before any process starts; one real measurement of the
pipeline alone runs in a fresh process (about 10 s) and must report what the
module promises: images/s, threads counted from the process, CPU use, memory.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from msresnet.experiments import pipeline_bench
from msresnet.paths import DATA_ROOT
from msresnet.experiments.pipeline_bench import GRIDS, PipelineBenchError, Setting

DATA_DIR = DATA_ROOT / "cifar-10-batches-bin"
from prerequisites import needs_data  # noqa: E402  (skipped without the data; CI=true: failed)


def test_sources_are_the_pipelines() -> None:
    import msresnet  # noqa: F401
    from msresnet.data import pipeline
    assert pipeline_bench.SOURCES == pipeline.SOURCES


@pytest.mark.parametrize("change, message", [
    ({"source": "tfrecord"}, "source must be one of"),
    ({"transforms": "jax"}, "transforms must be one of"),
    ({"workers": 0}, "workers must be a positive int, got 0"),
    ({"batch_size": True}, "batch_size must be a positive int"),
    ({"cores": 0}, "cores must be in 1.."),
    ({"cores": (os.cpu_count() or 1) + 1}, "cores must be in 1.."),
])
def test_bad_settings_are_named(change: dict, message: str) -> None:
    with pytest.raises(PipelineBenchError, match=message):
        Setting(**change).check()


def test_grids_are_valid_and_never_ask_for_more_workers_than_cores() -> None:
    for name, make in GRIDS.items():
        settings = make()
        assert settings, name
        for setting in settings:
            setting.check()
            if setting.global_workers is None:
                assert setting.workers <= (os.cpu_count() or 1), (name, setting)
    train = GRIDS["train"]()
    assert {s.cores for s in train} == {None, 1, 2}
    assert sum(s.synthetic for s in train) == 3


def test_summary_is_the_median_and_keeps_errors() -> None:
    setting = {"label": "x", "source": "binary", "workers": 1, "cores": None, "train_steps": 0}
    runs = [{"setting": setting, "images_per_s": v, "threads_before": 2, "threads_max": 16,
             "threads_added": 14, "cpu_cores": 1.5, "rss_mb": 500.0, "rss_added_mb": 100.0,
             "data_wait_share": None} for v in (10.0, 30.0, 20.0)]
    summary = pipeline_bench.summarise(runs)
    assert summary["images_per_s"] == 20.0 and summary["images_per_s_runs"] == [10.0, 30.0, 20.0]
    failed = pipeline_bench.summarise([{"setting": setting, "error": "Invalid Parameter, 8"}])
    table = pipeline_bench.format_table({"results": [summary, failed]})
    assert "error: Invalid Parameter, 8" in table and "20" in table


def test_error_line_keeps_mindsporess_message() -> None:
    text = ("RuntimeError: worker exited\npython -m x: error: RuntimeError: Syntax error. ---- "
            "[ERROR] Invalid Parameter, num_parallel_workers exceeds the boundary between 1 and 2, "
            "as got 8. ------ C++ Call Stack")
    assert pipeline_bench._error_line(text) == ("Invalid Parameter, num_parallel_workers exceeds "
                                                "the boundary between 1 and 2, as got 8.")


@needs_data
def test_one_measurement_in_a_fresh_process() -> None:
    result = pipeline_bench.run_one(Setting(images=2048, batch_size=64), str(DATA_DIR))
    assert result.images_per_s > 200  # thousands on an idle machine
    assert result.threads_added >= 3  # reader, map and batch threads at least
    assert result.threads_max > result.threads_before
    assert 0 < result.cpu_cores <= (os.cpu_count() or 1) + 0.5
    assert result.rss_mb > result.rss_added_mb > 0


@needs_data
def test_a_worker_count_mindspore_refuses_is_reported() -> None:
    cores = os.cpu_count() or 1
    if cores >= 64:
        pytest.skip("this machine accepts 64 workers")
    with pytest.raises(RuntimeError, match="num_parallel_workers"):
        pipeline_bench.run_one(Setting(global_workers=64, images=256), str(DATA_DIR))


@needs_data
def test_the_benchmarked_pipeline_is_the_training_pipeline() -> None:
    """``build_dataset`` repeats ``create_dataset``'s stages so that it can set the
    knobs first; with no knob set, it must yield the training pipeline's batches
    (same seed and worker count: the same images, crops, flips and labels)."""
    import msresnet  # noqa: F401
    from msresnet.data.pipeline import create_dataset

    setting = Setting(images=96, batch_size=32, seed=3)
    bench = pipeline_bench.build_dataset(setting, str(DATA_DIR), None)
    training = create_dataset(DATA_DIR, "train", 32, num_samples=96, num_workers=1,
                              shuffle=True, seed=3)
    pairs = list(zip(bench.create_tuple_iterator(output_numpy=True, num_epochs=1),
                     training.create_tuple_iterator(output_numpy=True, num_epochs=1)))
    assert len(pairs) == 3
    for (bench_images, bench_labels), (images, labels) in pairs:
        assert bench_images.dtype == images.dtype and bench_labels.dtype == labels.dtype
        assert np.array_equal(bench_images, images) and np.array_equal(bench_labels, labels)


def test_the_bench_finds_its_data_by_the_one_rule(monkeypatch, tmp_path):
    """Issue 37: ``--data_dir`` meant the inner folder here, with its own default that
    ignored ``$MSRESNET_DATA_DIR``; now it is the data folder every verb takes, chosen
    by the same rule, and the workers get the inner folder as ``--batches_dir``."""
    monkeypatch.delenv("MSRESNET_DATA_DIR", raising=False)
    assert pipeline_bench.batches_dir(None) == str(DATA_DIR)
    monkeypatch.setenv("MSRESNET_DATA_DIR", str(tmp_path))
    assert pipeline_bench.batches_dir(None) == str(tmp_path / "cifar-10-batches-bin")
    monkeypatch.chdir(tmp_path)
    assert pipeline_bench.batches_dir("mine") == str(tmp_path / "mine" / "cifar-10-batches-bin")
    command = pipeline_bench._worker_command(Setting(), str(DATA_DIR), None)
    assert command[command.index("--batches_dir") + 1] == str(DATA_DIR)
    assert "--data_dir" not in command


@pytest.mark.parametrize("argv, line", [
    (["--data_dir", "{tmp}/nonexistent"], "no dataset folder at {tmp}/nonexistent/"
                                          "cifar-10-batches-bin"),
    (["--data_dir", str(DATA_ROOT), "--mindrecord_dir", "{tmp}/nope"],
     "--mindrecord_dir: no such folder {tmp}/nope"),
])
def test_missing_data_is_one_line_and_exit_2_before_any_worker(argv, line, monkeypatch,
                                                               tmp_path, capsys):
    """Issue 45: --data_dir /nonexistent ran every worker, printed a table with an error in
    every row and exited 0."""
    from msresnet import cli

    started = []
    monkeypatch.setattr(pipeline_bench, "run_one",
                        lambda *args, **kwargs: started.append(args) or 1 / 0)
    argv = [arg.format(tmp=tmp_path) for arg in argv]
    assert cli.main(["pipeline-bench", "--grid", "knobs", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"msresnet pipeline-bench: error: {line.format(tmp=tmp_path)}"), err
    assert started == [] and list(tmp_path.iterdir()) == []
