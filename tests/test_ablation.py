"""The budget ablation's bookkeeping: commands, records and the table.

The runs themselves are ordinary ``msresnet.training.train`` runs (tested in
``test_train.py``); here a fake run folder stands in for one.
"""

from __future__ import annotations

import json
import shlex

import pytest

from msresnet.experiments import ablation as ab
from msresnet.config.profile import load_config
from msresnet.commands import ablation as ablation_command
from msresnet.commands.train import parse_args


def test_every_row_changes_what_it_says_and_its_command_parses():
    recipe = load_config(ab.PROFILE, ab.SHORT)
    for row in ab.ROWS:
        command = ab.train_command(row)
        assert command[:2] == ["msresnet", "train"]
        profile, overrides = parse_args(command[3:])[:2]
        config = load_config(profile, overrides)
        assert config.train_samples == 4800  # 3 epochs, but the row that buys a 4th
        assert config.epoch_size == (4 if row.name == "progressive-16-4ep" else 3)
        changed = {key for key in ab.SHORT | dict(ab.BY_NAME[row.run_name].overrides)
                   if getattr(config, key) != getattr(recipe, key)}
        assert changed == set(ab.BY_NAME[row.run_name].overrides) - {"ema_decay"} or \
            row.run_name == "recipe" and changed == {"ema_decay"}


def test_evaluation_rows_score_the_recipe_run_and_train_nothing():
    scored = [row for row in ab.ROWS if not row.trains]
    assert {row.scores for row in scored} == {"flip", "ema"}
    assert all(row.run_of == "recipe" for row in scored)
    assert ab.score_command(ab.BY_NAME["ema"]) == ["msresnet", "ablation", "run",
                                                    "ema"]
    assert ab.score_command(ab.BY_NAME["recipe"]) is None


def fake_run(folder, top1: float) -> None:
    folder.mkdir(parents=True)
    history = [{"epoch": e, "train_seconds": 60.0, "images_per_second": 70.0 + e,
                "train_loss": 2.0 - e / 10, "val_top1": None if e < 3 else top1,
                "val_top5": None if e < 3 else 0.9, "val_loss": None if e < 3 else 1.5}
               for e in (1, 2, 3)]
    (folder / "history.json").write_text(json.dumps(history))
    (folder / "test.json").write_text(json.dumps(
        {"last": {"file": "resnet50-3_75.ckpt", "top1": top1 - 0.01, "top5": 0.9,
                  "loss": 1.6}}))
    (folder / "train.log").write_text("log\n")


def test_a_training_row_is_recorded_from_its_run_and_tabled(tmp_path):
    runs, records = tmp_path / "runs", tmp_path / "records"
    fake_run(runs / "recipe", 0.40)
    fake_run(runs / "nesterov", 0.43)
    for name in ("recipe", "nesterov"):
        ab.record_row(ab.BY_NAME[name], runs, records)
    row = json.loads((records / "nesterov" / ab.ROW_JSON).read_text())
    assert row["valid"] == {"top1": 0.43, "top5": 0.9, "loss": 1.5}
    assert row["test"]["top1"] == pytest.approx(0.42)
    assert row["train_seconds"] == 180.0 and row["images_per_second"] == 73.0
    assert shlex.split(row["command"]) == ab.train_command(ab.BY_NAME["nesterov"])
    assert (records / "nesterov" / "train.log").is_file()
    lines = ab.table(ab.read_rows(records))
    assert lines[0][:4] == ["row", "change", "valid top-1 %", "vs recipe"]
    assert [line[0] for line in lines[1:]] == ["recipe", "nesterov"]  # ROWS order
    assert lines[2][2:5] == ["43.0", "+3.0", "42.0"]


def test_a_row_without_a_finished_run_is_named(tmp_path):
    runs = tmp_path / "runs"
    fake_run(runs / "lr-0.2", 0.3)
    (runs / "lr-0.2" / "test.json").unlink()
    with pytest.raises(FileNotFoundError, match="lr-0.2: no test.json"):
        ab.record_row(ab.BY_NAME["lr-0.2"], runs, tmp_path / "records")


def test_unknown_rows_are_refused():
    with pytest.raises(SystemExit, match="unknown row 'nesterof'"):
        ablation_command.main(["run", "nesterof"])


def test_the_noise_floor_is_the_spread_of_the_seed_rows():
    rows = [{"row": name, "valid": {"top1": top1}} for name, top1 in
            (("recipe", 0.30), ("seed-2", 0.26), ("nesterov", 0.50), ("seed-3", 0.28))]
    assert ab.noise_floor(rows) == pytest.approx(0.04)
    assert ab.noise_floor(rows[:1]) is None


@pytest.mark.parametrize("plan", list(ab.PLANS.values()), ids=list(ab.PLANS))
def test_every_plans_rows_load_as_configs_that_change_what_they_say(plan):
    recipe = load_config(plan.profile, dict(plan.short))
    for row in plan.rows:
        command = ab.train_command(row, plan=plan)
        profile, overrides = parse_args(command[2:])[:2]
        assert profile == plan.profile
        assert overrides["output_dir"] == str(plan.runs / row.run_name)
        config = load_config(profile, overrides)
        changed = {key for key in dict(plan.by_name[row.run_name].overrides)
                   if getattr(config, key) != getattr(recipe, key)}
        assert changed == set(plan.by_name[row.run_name].overrides)
    assert plan.rows[0].name == "recipe"


def test_the_gpu_plan_is_short_gpu_fast_scored_without_a_new_profile(tmp_path):
    config = load_config(ab.GPU.profile, dict(ab.GPU.short))
    assert (config.device_target, config.epoch_size, config.valid_split) == ("GPU", 20, 5000)
    assert config.epoch_size % config.save_checkpoint_epochs == 0  # the last epoch is saved
    assert ab.score_command(ab.GPU.by_name["flip-tta"], ab.GPU) == [
        "msresnet", "ablation", "run", "--profile", "gpu-fast", "flip-tta"]
    fake_run(tmp_path / "recipe", 0.80)
    fake_run(tmp_path / "size-40", 0.82)
    for name in ("recipe", "size-40"):
        ab.record_row(ab.GPU.by_name[name], tmp_path, tmp_path / "rec", ab.GPU)
    lines = ab.table(ab.read_rows(tmp_path / "rec", ab.GPU), timed=True)
    assert lines[0][-1] == "train s" and lines[2][2:] == ["82.0", "+2.0", "81.0", "180"]
