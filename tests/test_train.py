"""The training function and its command line: outputs, resume equivalence, errors.

Training runs are few and small (128 training images, batch 32, 2 epochs of 4
steps) and shared through module-scoped fixtures: one straight run, and one run
interrupted after epoch 1 and resumed. With fixed seeds MindSpore's CPU training
is bit-identical run to run, and resume replays the data pipeline exactly, so the
resumed run must end with the same steps, the same losses and the same weights.
The sweep tests (damaged checkpoints, other data) work on copies of the straight run.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import numpy as np
import pytest
from mindspore import nn

from msresnet.training import checkpoints as ck
from msresnet.training import sweep as sw
from msresnet.config.profile import ConfigError
from msresnet.paths import REPO_ROOT
from msresnet.config.run import recorded_config
from msresnet.commands import sweep as sweep_command
from msresnet.commands.train import parse_args
from msresnet.training.train import TrainError, train_and_evaluate, validation_epochs

SMALL = {"train_samples": 128, "eval_samples": 64, "epoch_size": 2, "ema_decay": 0.9,
         "nesterov": True,  # the hand-written optimizer must resume exactly too
         "depth": 14,  # one block a stage (ResNet50: 16): the mechanics compile fast
         "data_dir": str(REPO_ROOT / "data")}
STEPS_PER_EPOCH = SMALL["train_samples"] // 32  # batch 32 (smoke)
pytestmark = pytest.mark.slow  # training runs (the few quick checks here come along)

OUTPUT_FILES = ("config.yaml", "train.log", "history.json", "history.csv", "result.json",
                "best.ckpt", "best.json", "test.json")


def ckpt_file(epoch: int) -> str:
    """The checkpoint file training writes at the end of ``epoch``."""
    return f"resnet50-{epoch}_{STEPS_PER_EPOCH}.ckpt"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A straight run, and a run stopped after epoch 1 then resumed with ``auto``;
    the straight run also counts how often the data folder is validated and split."""
    from msresnet.data.cifar10 import validate
    from msresnet.data.splits import hold_out

    root = tmp_path_factory.mktemp("train")
    with pytest.MonkeyPatch.context() as monkeypatch:  # the straight run counts them
        validated = count_calls(monkeypatch, validate)
        split = count_calls(monkeypatch, hold_out)
        straight = train_and_evaluate("smoke", {**SMALL, "output_dir": str(root / "straight")},
                                      progress=False)
    stopped = train_and_evaluate("smoke", {**SMALL, "output_dir": str(root / "resumed")},
                                 stop_after_epoch=1, progress=False)
    resumed = train_and_evaluate("smoke", {**SMALL, "output_dir": str(root / "resumed"),
                                           "resume_from": "auto"}, progress=False)
    return {"straight": straight, "stopped": stopped, "resumed": resumed, "root": root,
            "straight_calls": {"validate": len(validated), "hold_out": len(split)}}


def test_straight_run_writes_everything(runs):
    result = runs["straight"]
    folder = result.output_dir
    for name in OUTPUT_FILES:
        assert (folder / name).is_file(), name
    assert [c for c in result.checkpoints] == [ckpt_file(1), ckpt_file(2)]
    assert result.steps == 2 * STEPS_PER_EPOCH and result.epochs == 2
    assert [r["epoch"] for r in result.history] == [1, 2]
    assert [r["step"] for r in result.history] == [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]
    for record in result.history:
        assert 0.0 <= record["val_top1"] <= record["val_top5"] <= 1.0
        assert record["train_seconds"] > 0 and record["images_per_second"] > 0
    assert json.loads((folder / "history.json").read_text()) == result.history
    assert len((folder / "history.csv").read_text().splitlines()) == 3
    best = json.loads((folder / "best.json").read_text())
    assert best == result.best
    assert best["top1"] == max(r["val_top1"] for r in result.history)
    assert best["source"] == ckpt_file(best["epoch"])
    assert f"epoch 2: step {2 * STEPS_PER_EPOCH}" in (folder / "train.log").read_text()


def test_interrupted_run_stops_after_one_epoch(runs):
    stopped = runs["stopped"]
    assert stopped.epochs == 1 and stopped.steps == STEPS_PER_EPOCH
    assert [r["epoch"] for r in stopped.history] == [1]


def test_resume_continues_at_the_right_epoch_and_step(runs):
    resumed = runs["resumed"]
    assert resumed.resumed_from == ckpt_file(1)
    assert resumed.steps == runs["straight"].steps == 2 * STEPS_PER_EPOCH
    assert [r["epoch"] for r in resumed.history] == [1, 2]
    assert resumed.checkpoints == runs["straight"].checkpoints
    ckpt = ck.read_checkpoint(resumed.output_dir / ckpt_file(2))
    assert ck.checkpoint_meta(ckpt) == {"epoch": 2, "step": 2 * STEPS_PER_EPOCH}
    assert int(ckpt["global_step"].asnumpy().item()) == 2 * STEPS_PER_EPOCH
    # the learning rate continued from the end of epoch 1, not from step 0
    assert [r["lr"] for r in resumed.history] == [r["lr"] for r in runs["straight"].history]


def test_resume_reproduces_the_straight_run_exactly(runs):
    straight, resumed = runs["straight"], runs["resumed"]
    keys = ("train_loss", "val_loss", "val_top1", "val_top5")
    assert [[r[k] for k in keys] for r in resumed.history] == \
        [[r[k] for k in keys] for r in straight.history]
    a = ck.read_checkpoint(straight.output_dir / ckpt_file(2))
    b = ck.read_checkpoint(resumed.output_dir / ckpt_file(2))
    assert sorted(a) == sorted(b)
    differing = [name for name in a if not np.array_equal(a[name].asnumpy(), b[name].asnumpy())]
    assert differing == [], f"weights differ after resume: {differing[:5]}"


def test_fresh_start_refuses_a_folder_with_checkpoints(runs):
    with pytest.raises(TrainError, match="resume_from='auto'"):
        train_and_evaluate("smoke", {**SMALL, "output_dir": str(runs["straight"].output_dir)},
                           progress=False)


def test_resume_from_a_missing_file_is_an_error(tmp_path):
    with pytest.raises(TrainError, match="checkpoint not found: .*nope.ckpt"):
        train_and_evaluate("smoke", {**SMALL, "output_dir": str(tmp_path),
                                     "resume_from": str(tmp_path / "nope.ckpt")}, progress=False)


def test_resume_with_other_steps_per_epoch_is_an_error(runs, tmp_path):
    source = runs["straight"].output_dir / ckpt_file(1)
    with pytest.raises(ck.CheckpointError, match="steps per epoch"):
        train_and_evaluate("smoke", {**SMALL, "train_samples": 64, "output_dir": str(tmp_path),
                                     "resume_from": str(source)}, progress=False)


def test_command_line_runs_the_smoke_profile(tmp_path):
    out = tmp_path / "cli"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "msresnet", "train", "--config", "configs/smoke.yaml",
         "--train_samples", "64", "--eval_samples", "32", "--epoch_size", "1",
         "--data_dir", "data", "--output", str(out), "--no-progress", "--valid_split", "0",
         "--depth", "14"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["epochs"] == 1 and summary["steps"] == 2
    for name in [n for n in OUTPUT_FILES if n != "test.json"] + ["resnet50-1_2.ckpt"]:
        assert (out / name).is_file(), name
    assert {"epoch_size: 1", "depth: 14"} <= set((out / "config.yaml").read_text().splitlines())
    # valid_split 0, the recipe's way: validated (and chose) on the test set, no test.json
    assert json.loads((out / "best.json").read_text())["evaluated_on"]["split"] == "test"
    assert not (out / "test.json").exists() and summary["test_top1"] is None


def test_command_line_reports_config_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "msresnet", "train", "smoke", "--batch_szie", "8"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "batch_szie" in proc.stderr and "batch_size" in proc.stderr


def test_parse_args_accepts_profile_config_and_overrides():
    assert parse_args(["cpu"]) == ("cpu", {}, None, True)
    for flag, spelled in (("--profile", ["--output_dir", "runs/x", "--stop_after_epoch", "1",
                                         "--no_progress"]),
                          ("--config", ["--output", "runs/x", "--stop-after-epoch", "1",
                                        "--no-progress"]),  # the older spellings
                          ("--profile", ["--output-dir=runs/x", "--stop_after_epoch=1",
                                         "--no-progress"])):
        profile, overrides, stop, progress = parse_args(
            [flag, "configs/smoke.yaml", *spelled, "--epoch-size", "3"])
        assert profile == "configs/smoke.yaml" and stop == 1 and progress is False
        assert overrides == {"output_dir": "runs/x", "epoch_size": 3}
    assert parse_args([])[0] == "smoke"
    with pytest.raises(ConfigError):
        parse_args(["smoke", "--epoch_size"])
    with pytest.raises(SystemExit, match="two profiles given: 'cpu' and --profile 'smoke'"):
        parse_args(["cpu", "--config", "smoke"])


@pytest.mark.parametrize("argv, message", [
    (["smoke", "--stop_after_epoch", "0"], "--stop_after_epoch: must be a positive integer, got 0"),
    (["smoke", "--stop_after_epoch", "-1"], "--stop_after_epoch: must be a positive integer, got -1"),
    (["--profile", ""], "profile: empty name ''"),
    ([""], "profile: empty name ''"),
    (["--config", " "], "profile: empty name ' '"),
])
def test_parse_args_refuses_a_stop_before_epoch_1_and_an_empty_profile(argv, message):
    """Issue 45: --stop_after_epoch 0 trained a whole epoch and exited 0; --config ''
    trained smoke. Both are refused before anything runs, naming the value."""
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        parse_args(argv)


def test_validation_epochs_always_include_the_last():
    assert validation_epochs(5, 1) == [1, 2, 3, 4, 5]
    assert validation_epochs(5, 2) == [2, 4, 5]
    assert validation_epochs(4, 2) == [2, 4]
    assert validation_epochs(2, 5) == [2]


def test_rank_dump_callback_only_when_the_launcher_asks(tmp_path):
    """The command line adds chapter 7's RankDump only with MSRESNET_RANK_DUMP set,
    and the training module does not import the evidence code at all, not even
    inside a function (the training package and ``ranks`` import in one direction)."""
    import msresnet.training.train as train_module
    from msresnet.commands.train import callbacks_from_environment
    from msresnet.training.distributed import DUMP_VARIABLE

    assert callbacks_from_environment({}) == []
    assert callbacks_from_environment({DUMP_VARIABLE: "  "}) == []
    [dump] = callbacks_from_environment({DUMP_VARIABLE: str(tmp_path)})
    assert type(dump).__name__ == "RankDump" and dump.directory == tmp_path
    tree = ast.parse(Path(train_module.__file__).read_text())
    anywhere = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "msresnet.training.distributed" in anywhere
    assert not {m for m in anywhere if m.startswith(("msresnet.ranks", "msresnet.commands"))}
    assert "msresnet.jobs.launch" not in anywhere
    assert DUMP_VARIABLE == "MSRESNET_RANK_DUMP"


def test_rank_helpers_on_one_device_and_in_a_group():
    from msresnet.training.distributed import RankInfo, launched_by_msrun, rank_info

    single = rank_info()  # nothing initialised mindspore.communication here
    assert (single.rank, single.group_size, single.is_main) == (0, 1, True)
    assert single.shard_kwargs() == {}
    worker = RankInfo(rank=1, group_size=4)
    assert not worker.is_main and worker.shard_kwargs() == {"num_shards": 4, "shard_id": 1}
    assert launched_by_msrun({"MS_WORKER_NUM": "2"}) and launched_by_msrun({"RANK_SIZE": "8"})
    assert not launched_by_msrun({"MS_WORKER_NUM": "1"}) and not launched_by_msrun({})


# ----------------------------------------------------------------- the run's own records

def test_the_run_records_its_data_folder_and_validation_images(runs):
    folder = runs["straight"].output_dir
    recorded = recorded_config(folder)
    assert recorded is not None and os.path.isabs(recorded.data_dir)
    assert Path(recorded.data_dir) == REPO_ROOT / "data"
    # written relative to the repository (issue 38): a moved checkout still finds it
    assert "\ndata_dir: data\n" in (folder / "config.yaml").read_text()
    best = json.loads((folder / "best.json").read_text())
    assert best["evaluated_on"]["images"] == SMALL["eval_samples"]
    assert best["evaluated_on"]["folder"] == str(REPO_ROOT / "data" / "cifar-10-batches-bin")
    # smoke holds out 512 training images: validation (and the choice) used them
    assert best["evaluated_on"]["split"] == "valid" and best["evaluated_on"]["held_out"] == 512


def test_the_test_set_scores_the_chosen_and_the_last_checkpoint_once(runs):
    result = runs["straight"]
    record = json.loads((result.output_dir / "test.json").read_text())
    assert record == result.test
    assert record["selected_on"] == result.best["evaluated_on"]
    assert record["evaluated_on"]["split"] == "test"
    assert record["evaluated_on"]["images"] == SMALL["eval_samples"]
    assert record["chosen"]["epoch"] == result.best["epoch"]
    assert record["chosen"]["valid_top1"] == result.best["top1"]
    assert record["last"] == {**record["last"], "file": ckpt_file(2), "epoch": 2}
    for scores in (record["chosen"], record["last"]):
        assert 0 <= scores["top1"] <= scores["top5"] <= 1
    if result.best["source"] == ckpt_file(2):
        assert record["chosen"]["top1"] == record["last"]["top1"]
    assert result.seconds_test is not None and result.seconds_test > 0


def test_resume_reports_settings_that_differ_from_the_recording(runs, tmp_path, caplog):
    import shutil
    folder = tmp_path / "run"
    shutil.copytree(runs["resumed"].output_dir, folder)
    with caplog.at_level("WARNING", logger="msresnet.training.train"):
        result = train_and_evaluate("smoke", {**SMALL, "output_dir": str(folder), "lr_max": 0.05,
                                              "resume_from": "auto"}, progress=False)
    assert list(result.changed_on_resume) == ["lr_max"]
    assert result.changed_on_resume["lr_max"][1] == 0.05
    assert "resuming with lr_max=0.05" in caplog.text
    assert json.loads((folder / "result.json").read_text())["changed_on_resume"]["lr_max"][1] == 0.05


def test_the_weight_average_is_saved_every_epoch_and_survives_resume(runs):
    from msresnet.training.ema import EMA_PREFIX

    straight, resumed = runs["straight"].output_dir, runs["resumed"].output_dir
    names = [c.name for c in ck.list_checkpoints(straight, EMA_PREFIX)]
    assert names == [ck.checkpoint_name(1, STEPS_PER_EPOCH, EMA_PREFIX),
                     ck.checkpoint_name(2, STEPS_PER_EPOCH, EMA_PREFIX)]
    last = ck.read_checkpoint(straight / names[-1])
    weights = ck.read_checkpoint(ck.list_checkpoints(straight)[-1].path)
    conv = "conv1.weight"
    # an average of the run's weights: not the last weights, but close to them
    assert not np.array_equal(last[conv].asnumpy(), weights[conv].asnumpy())
    assert ck.checkpoint_meta(last) == {"epoch": 2, "step": 2 * STEPS_PER_EPOCH}
    # the resumed run continued the saved average (float32 on disk, float64 in memory)
    again = ck.read_checkpoint(resumed / names[-1])
    for name in (conv, "bn1.moving_mean", "end_point.bias"):
        np.testing.assert_allclose(again[name].asnumpy(), last[name].asnumpy(),
                                   rtol=1e-5, atol=1e-7)


# ----------------------------------------------------------------- the data, resolved once

def count_calls(monkeypatch, function) -> list[tuple]:
    """Count every call of ``function``, under whatever name any msresnet module holds it."""
    calls: list[tuple] = []

    def counting(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    for module in [m for name, m in sys.modules.items() if name.startswith("msresnet")]:
        for name, value in list(vars(module).items()):
            if value is function:
                monkeypatch.setattr(module, name, counting)
    return calls


def test_a_training_start_validates_the_data_once_and_splits_it_once(runs):
    """Counted during the fixture's straight run (a training start with validation, a
    held-out split and the final test): the folder is validated once, split once."""
    result = runs["straight"]
    assert result.test is not None  # the final test on the test set is part of the start
    assert runs["straight_calls"] == {"validate": 1, "hold_out": 1}
    # the one source's identities are what the records say was scored
    assert result.test["selected_on"] == result.best["evaluated_on"]
    assert result.best["evaluated_on"]["split"] == "valid"
    assert result.test["evaluated_on"]["split"] == "test"


def test_a_failed_start_leaves_no_empty_output_folder(tmp_path):
    """Training fails after it made the output folder (an empty checkpoint to resume
    from is found out only when it is read): the folders it made go, others stay."""
    from msresnet.commands.train import main

    broken = tmp_path / "broken.ckpt"
    broken.touch()
    out = tmp_path / "runs" / "new"
    failing = {**SMALL, "resume_from": str(broken)}
    with pytest.raises(ck.CheckpointError, match="the file is empty"):
        train_and_evaluate("smoke", {**failing, "output_dir": str(out)}, progress=False)
    assert not (tmp_path / "runs").exists()  # both folders it created, removed
    with pytest.raises(ck.CheckpointError, match="the file is empty"):
        main(["smoke", "--data_dir", SMALL["data_dir"], "--resume_from", str(broken),
              "--output_dir", str(out), "--no_progress"])
    assert [p.name for p in tmp_path.iterdir()] == ["broken.ckpt"]
    kept = tmp_path / "kept"  # a folder that was there before is left alone
    kept.mkdir()
    with pytest.raises(ck.CheckpointError, match="the file is empty"):
        train_and_evaluate("smoke", {**failing, "output_dir": str(kept)}, progress=False)
    assert kept.is_dir()


# ----------------------------------------------------------------- msresnet sweep on a trained run
# (issue 28: damaged checkpoints, other data; on copies of the straight run)

def copy_of(runs, tmp_path):
    """A copy of the fixture's straight run (2 epochs of 4 steps, validated on 64
    held-out images), to damage."""
    import shutil
    return shutil.copytree(runs["straight"].output_dir, tmp_path / "run")


def cut_in_half(path) -> None:
    data_bytes = path.read_bytes()
    path.write_bytes(data_bytes[: len(data_bytes) // 2])


def best_files(folder) -> tuple[bytes, bytes]:
    return (folder / ck.BEST_JSON).read_bytes(), (folder / ck.BEST_CKPT).read_bytes()


def sweep_main(run, *args) -> int:
    return sweep_command.main([str(run), "--eval_samples", str(SMALL["eval_samples"]), *args])


def sweep_cli(run_dir, cwd, *args):
    return subprocess.run([sys.executable, "-m", "msresnet", "sweep", str(run_dir),
                           "--eval_samples", str(SMALL["eval_samples"]), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def test_sweep_evaluates_on_the_runs_own_data_and_guards_its_best(runs, tmp_path):
    from msresnet.data.cifar10 import FOLDER_NAME, RECORD_BYTES, TEST_FILES, TRAIN_FILES
    run_dir = copy_of(runs, tmp_path)
    # The sweep runs where ./data is *another* copy of CIFAR-10 (every file's records
    # reordered, so its held-out images and its test images differ): before, the
    # sweep took ./data and silently scored (and promoted) on it.
    source = REPO_ROOT / "data" / FOLDER_NAME
    other = tmp_path / "data" / FOLDER_NAME
    other.mkdir(parents=True)
    (other / "batches.meta.txt").symlink_to(source / "batches.meta.txt")
    for name in (*TRAIN_FILES, *TEST_FILES):
        records = np.fromfile(source / name, dtype=np.uint8).reshape(-1, RECORD_BYTES)
        records[::-1].tofile(other / name)

    best_before = best_files(run_dir)
    proc = sweep_cli(run_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    swept = json.loads((run_dir / "sweep.json").read_text())
    assert swept["evaluated_on"]["folder"] == str(source) and swept["overrides"] == {}
    # the same images as training's validation: the same epoch wins, and training's
    # choice is kept as it is (issue 38: it was copied over itself, silently)
    best = json.loads((run_dir / "best.json").read_text())
    assert best["selected_by"] == "validation during training" and "kept" in swept
    assert best_files(run_dir) == best_before and not (run_dir / "best.previous.json").exists()
    assert f"best.ckpt kept: epoch {best['epoch']} already chosen" in proc.stdout
    # the last line says what best.json holds now
    last = json.loads(proc.stdout.strip().splitlines()[-1])["best.json"]
    assert last == {k: v for k, v in best.items() if k != "evaluated_on"}
    assert swept["evaluated_on"]["split"] == "valid"
    tested = json.loads((run_dir / "test.json").read_text())  # the choice, scored on test
    assert swept["test"] == tested and tested["evaluated_on"]["split"] == "test"
    assert tested["selected_by"] == "validation during training"

    own_sweep = (run_dir / "sweep.json").read_bytes()
    proc = sweep_cli(run_dir, tmp_path, "--data_dir", "data")  # explicitly the other copy
    assert proc.returncode != 0
    assert "--no-promote" in proc.stderr and "--replace-best" in proc.stderr
    # the override is reported, absolute like every run's data folder
    assert f"evaluating with data_dir={tmp_path / 'data'}" in proc.stdout
    swept = json.loads((run_dir / "sweep-data.json").read_text())  # beside the run's own
    assert swept["overrides"]["data_dir"][1] == str(tmp_path / "data") and "not_promoted" in swept
    assert best_files(run_dir) == best_before and (run_dir / "sweep.json").read_bytes() == own_sweep


@pytest.mark.slow
def test_sweep_keeps_an_intact_best_when_its_epochs_file_is_damaged(runs, tmp_path):
    """Issue 28: the chosen epoch's periodic file cut in half; before, the sweep skipped
    it, then replaced the intact best.ckpt/best.json with a worse epoch (exit 0)."""
    run = copy_of(runs, tmp_path)
    best = json.loads((run / ck.BEST_JSON).read_text())
    before = best_files(run)
    cut_in_half(run / best["source"])
    assert sweep_main(run) == 0
    assert best_files(run) == before
    swept = json.loads((run / sw.SWEEP_JSON).read_text())
    assert [s["file"] for s in swept["skipped"]] == [best["source"]]
    assert swept["kept"] == best and "promoted" not in swept
    assert swept["standing"]["how"].startswith("trusted")
    tested = json.loads((run / "test.json").read_text())
    assert tested["chosen"]["epoch"] == best["epoch"] and tested == swept["test"]
    assert best["source"] in [s["file"] for s in tested["skipped"]]


@pytest.mark.slow
def test_sweep_tests_the_last_readable_checkpoint_when_the_last_is_damaged(runs, tmp_path):
    """Issue 28: before, the sweep warned it would skip the last file, then failed on it
    in the test step (exit 2, no sweep.json, no test.json)."""
    run = copy_of(runs, tmp_path)
    first, last = ck.list_checkpoints(run)
    cut_in_half(last.path)
    assert sweep_main(run) == 0
    swept = json.loads((run / sw.SWEEP_JSON).read_text())
    tested = json.loads((run / "test.json").read_text())
    assert [s["file"] for s in swept["skipped"]] == [last.name]
    assert [r["file"] for r in swept["records"]] == [first.name]
    assert tested["last"]["file"] == first.name and tested["last"]["newer_skipped"] == [last.name]
    assert [s["file"] for s in tested["skipped"]] == [last.name]


@pytest.mark.slow
def test_sweep_on_other_data_writes_its_table_beside_the_runs_own(runs, tmp_path):
    """Issue 28: the same folder spelled another way is no override; another folder's
    scores go to sweep-<name>.csv (and test-<name>.json), never over sweep.csv."""
    from msresnet.data.cifar10 import FOLDER_NAME
    from msresnet.paths import REPO_ROOT

    run = copy_of(runs, tmp_path)
    own = REPO_ROOT / "data" / FOLDER_NAME
    assert sweep_main(run, "--data_dir", f"{own}/", "--no-promote") == 0
    swept = json.loads((run / sw.SWEEP_JSON).read_text())
    assert swept["overrides"] == {} and swept["table"] == sw.SWEEP_CSV
    table = (run / sw.SWEEP_CSV).read_bytes()
    assert str(own.resolve()).encode() in table  # the rows name their data folder
    tested = (run / "test.json").read_bytes()

    other = tmp_path / "copy" / FOLDER_NAME  # a second folder (the files linked)
    other.mkdir(parents=True)
    for item in own.iterdir():
        (other / item.name).symlink_to(item)
    own_sweep = (run / sw.SWEEP_JSON).read_bytes()
    assert sweep_main(run, "--data_dir", str(tmp_path / "copy"), "--no-promote") == 0
    swept = json.loads((run / "sweep-copy.json").read_text())
    assert swept["overrides"]["data_dir"][1] == str(tmp_path / "copy")
    assert swept["table"] == "sweep-copy.csv"
    assert (run / sw.SWEEP_CSV).read_bytes() == table and (run / "test.json").read_bytes() == tested
    assert (run / sw.SWEEP_JSON).read_bytes() == own_sweep  # the run's own record stands
    with open(run / "sweep-copy.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["data_folder"] for row in rows} == {str(other)}
    assert json.loads((run / "test-copy.json").read_text())["evaluated_on"]["folder"] == str(other)


@pytest.mark.slow
def test_a_best_of_another_model_stops_the_sweep_after_recording_why(runs, tmp_path):
    """Not damage: a best.ckpt that does not fit the network is an error (exit 2 from the
    command), and sweep.json records it first; best.* are left as they are."""
    run = copy_of(runs, tmp_path)
    ck.save_atomic(nn.Dense(4, 10), run / ck.BEST_CKPT)  # another model
    before = best_files(run)
    with pytest.raises(ck.CheckpointMismatchError, match="best.ckpt"):
        sweep_main(run)
    swept = json.loads((run / sw.SWEEP_JSON).read_text())
    assert "best.ckpt" in swept["not_promoted"] and len(swept["records"]) == 2
    assert best_files(run) == before


@pytest.mark.slow
def test_chapter_5_and_the_command_leave_the_same_best(runs, tmp_path):
    """Issue 37: chapter 5 calls run_sweep, as `msresnet sweep` does (no second copy of
    its steps): on two copies of one run they leave the same best.* and test.json."""
    import shutil

    chapter = shutil.copytree(runs["straight"].output_dir, tmp_path / "chapter")
    command = shutil.copytree(runs["straight"].output_dir, tmp_path / "command")
    outcome = sw.run_sweep(chapter, eval_samples=SMALL["eval_samples"])
    assert sweep_main(command) == 0
    assert best_files(chapter) == best_files(command)
    assert (chapter / "test.json").read_bytes() == (command / "test.json").read_bytes()
    assert outcome.best == json.loads((command / ck.BEST_JSON).read_text())
    source = (REPO_ROOT / "notebooks" / "05_checkpoint_sweep.ipynb").read_text()
    assert "run_sweep(" in source
    assert not any(name in source for name in ("promote_best", "settle_best", "final_test"))


@pytest.mark.slow
@pytest.mark.parametrize("ready", [False, True])
def test_a_job_validates_the_data_once(ready, tmp_path, monkeypatch):
    """Issue 37: msresnet job prepared the data (validated), then training validated
    it again. Now the preparation's validation stands, unless the folder was already
    prepared (its marker vouches only for the files' sizes): then training's.

    The job is stopped where training builds its network: by then the data has been
    opened (validated, split, identified) and the datasets made; the rest of a
    training start validates nothing more (the fixture's straight run counts a whole
    one, :func:`test_a_training_start_validates_the_data_once_and_splits_it_once`),
    and a whole job runs in ``tests/test_job.py``. Compiling and training here would
    add half a minute of CPU to each case and nothing to the count."""
    from msresnet.data.cifar10 import validate
    from msresnet.jobs import job
    from msresnet.training import train

    class BuildingTheNetwork(Exception):
        """Raised where training builds its network: the data part is over."""

    def stop(*args, **kwargs):
        raise BuildingTheNetwork

    cache = tmp_path / "cache"
    args = job.parse_arguments(["--data_url", SMALL["data_dir"], "--train_url",
                                str(tmp_path / "out"), "--cache_dir", str(cache),
                                "--config", "smoke", "--no-progress",
                                *[f"--{k}={v}" for k, v in SMALL.items() if k != "data_dir"]])
    if ready:  # an earlier job on this node prepared the folder
        from msresnet.data.prepare import prepare_dataset
        prepare_dataset(SMALL["data_dir"], root=cache / "data", progress=False)
    calls = count_calls(monkeypatch, validate)
    monkeypatch.setattr(train, "make_model", stop)
    with pytest.raises(BuildingTheNetwork):
        job.run(args)
    assert len(calls) == 1
