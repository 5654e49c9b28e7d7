"""The checkpoint sweep: order, scores, skipping damaged files, strict errors, best.

A one-layer network on 64 synthetic samples stands in for ResNet50: the sweep
machinery (one evaluation graph, weights swapped per checkpoint) is the same.
"""

from __future__ import annotations

import csv
import json
import logging

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import mindspore as ms
import mindspore.dataset as ds
import numpy as np
import pytest
from mindspore import nn

from msresnet.training import checkpoints as ck
from msresnet.training import selection as sel
from msresnet.training import sweep as sw

CLASSES = 10


def data(samples: int = 64, batch: int = 16) -> ds.Dataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(samples, 4)).astype(np.float32)
    y = (np.abs(x[:, 0]) * 3).astype(np.int32) % CLASSES
    return ds.NumpySlicesDataset({"image": x, "label": y}, shuffle=False).batch(batch)


def tiny(seed: int) -> nn.Cell:
    ms.set_seed(seed)
    return nn.Dense(4, CLASSES)


@pytest.fixture()
def run_dir(tmp_path):
    """Checkpoints for epochs 1..3, each with different (random) weights."""
    for epoch in (1, 2, 3):
        net = tiny(seed=epoch)
        ck.save_atomic(net, tmp_path / ck.checkpoint_name(epoch, 4),
                       {"epoch_num": epoch, "step_num": epoch * 4})
    return tmp_path


def make_evaluator() -> sw.CheckpointEvaluator:
    return sw.CheckpointEvaluator(tiny(seed=99), data())


def expected_top1(seed: int) -> float:
    net = tiny(seed)
    net.set_train(False)
    correct = total = 0
    for x, y in data().create_tuple_iterator():
        correct += int((net(x).asnumpy().argmax(1) == y.asnumpy()).sum())
        total += len(y)
    return correct / total


def test_sweep_scores_every_checkpoint_in_order(run_dir):
    result = sw.sweep(run_dir, make_evaluator())
    assert [(r.file, r.epoch, r.step) for r in result.records] == [
        ("resnet50-1_4.ckpt", 1, 4), ("resnet50-2_4.ckpt", 2, 8), ("resnet50-3_4.ckpt", 3, 12)]
    for record, seed in zip(result.records, (1, 2, 3)):
        assert record.top1 == pytest.approx(expected_top1(seed))
        assert 0 <= record.top1 <= record.top5 <= 1 and np.isfinite(record.loss)
    assert result.skipped == []
    assert result.samples == 64
    assert len({r.top1 for r in result.records}) > 1, "weights were not reloaded per checkpoint"


def test_sweep_counts_the_images_of_a_last_partial_batch_once(run_dir):
    """70 images in batches of 16 are 5 batches but 70 images, not 80."""
    result = sw.sweep(run_dir, sw.CheckpointEvaluator(tiny(seed=99), data(samples=70)))
    assert result.samples == 70


def test_sweep_skips_truncated_file_with_warning_and_goes_on(run_dir, caplog):
    bad = run_dir / "resnet50-2_4.ckpt"
    data_bytes = bad.read_bytes()
    bad.chmod(0o600)
    bad.write_bytes(data_bytes[: len(data_bytes) // 2])
    with caplog.at_level(logging.WARNING, logger="msresnet.training.sweep"):
        result = sw.sweep(run_dir, make_evaluator())
    assert [r.epoch for r in result.records] == [1, 3]
    assert [name for name, _ in result.skipped] == ["resnet50-2_4.ckpt"]
    warnings = [r.getMessage() for r in caplog.records
                if r.name == "msresnet.training.sweep" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "skipping resnet50-2_4.ckpt" in warnings[0]


def test_sweep_stops_on_a_checkpoint_of_another_model(run_dir):
    ms.set_seed(0)
    ck.save_atomic(nn.Dense(4, 5), run_dir / ck.checkpoint_name(4, 4),
                   {"epoch_num": 4, "step_num": 16})
    with pytest.raises(ck.CheckpointMismatchError, match=r"resnet50-4_4.ckpt.*weight"):
        sw.sweep(run_dir, make_evaluator())


ON = {"split": "valid", "images": 64, "sha256": "ab" * 32, "folder": "/data/cifar-10-batches-bin",
      "held_out": 512, "seed": 1}


def test_sweep_csv_holds_every_record_and_replaces_the_file_whole(tmp_path):
    records = [sw.SweepRecord(f"resnet50-{e}_4.ckpt", e, 4 * e, 0.1 * e, 0.5, 2.0 / e, 1.5)
               for e in (1, 2)]
    path = tmp_path / "sweep.csv"
    path.write_text("an older sweep\n")
    assert sw.SweepResult(records, evaluated_on=ON).write_csv(path) == path
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [{k: row[k] for k in sw.SWEEP_FIELDS} for row in rows] == \
        [{k: str(v) for k, v in r.to_dict().items()} for r in records]
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.csv"]  # no temporary file left


def test_sweep_csv_names_the_images_every_row_was_scored_on(tmp_path):
    """A table read alone says which data it scored (before, nothing in sweep.csv did)."""
    records = [sw.SweepRecord("resnet50-1_4.ckpt", 1, 4, 0.5, 0.9, 1.0, 1.5)]
    sw.SweepResult(records, evaluated_on=ON).write_csv(tmp_path / "sweep.csv")
    with open(tmp_path / "sweep.csv", newline="") as handle:
        [row] = list(csv.DictReader(handle))
    assert (row["split"], row["images"], row["images_sha256"], row["data_folder"]) == \
        ("valid", "64", "ab" * 32, "/data/cifar-10-batches-bin")


def test_a_run_folder_without_checkpoints_is_one_line_and_exit_2_with_nothing_written(
        tmp_path, capsys):
    """Issue 45: it exited 1 with an empty stderr and wrote an empty sweep.csv and .json."""
    from msresnet import cli
    from msresnet.config.profile import load_config
    from msresnet.paths import REPO_ROOT

    config = load_config("smoke", {"data_dir": str(REPO_ROOT / "data")})
    (tmp_path / "config.yaml").write_text(config.to_yaml())
    assert cli.main(["sweep", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"msresnet sweep: error: no resnet50-<epoch>_<step>.ckpt files in {tmp_path}: "), err
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]


def test_one_data_folder_however_spelled_is_the_runs_own_and_a_copy_is_another(
        tmp_path, monkeypatch):
    """The folder-comparison rule of ``msresnet sweep --data_dir`` (issue 45: only the slow
    training tests watched it): the recorded folder spelled relatively, as its
    cifar-10-batches-bin, with a trailing slash or through a link is the run's own (no
    override, the run's own tables); a copy elsewhere is another folder, reported."""
    from msresnet.config.profile import load_config

    data, copy = tmp_path / "data", tmp_path / "copy"
    for folder in (data, copy):
        (folder / "cifar-10-batches-bin").mkdir(parents=True)
    (tmp_path / "link").symlink_to(data)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_config("smoke", {"data_dir": str(data)}).to_yaml())
    monkeypatch.chdir(tmp_path)
    for same in ("data", "./data/", str(data / "cifar-10-batches-bin"), "link", "run/../data"):
        config, overrides = sw._run_config(run, same)
        assert overrides == {} and config.data_dir == str(data), same
    config, overrides = sw._run_config(run, "copy")  # absolute from here on, as every run's
    assert overrides == {"data_dir": [str(data), str(copy)]} and config.data_dir == str(copy)


def test_a_sweep_on_another_data_folder_names_its_tables_apart():
    other = {**ON, "folder": "/elsewhere/copy/cifar-10-batches-bin"}
    own = sw.SweepResult([], evaluated_on=ON)
    assert (own.named(sw.SWEEP_CSV), own.named("test.json")) == ("sweep.csv", "test.json")
    moved = sw.SweepResult([], evaluated_on=other, overrides={"data_dir": ["/data", "copy"]})
    assert (moved.named(sw.SWEEP_CSV), moved.named("test.json")) == \
        ("sweep-copy.csv", "test-copy.json")
    odd = sw.SweepResult([], evaluated_on={**ON, "folder": "/x/my copy!"},
                         overrides={"data_dir": ["/data", "/x/my copy!"]})
    assert odd.named(sw.SWEEP_CSV) == "sweep-my_copy_.csv"


def test_promote_best_copies_file_and_record(run_dir):
    result = sw.sweep(run_dir, make_evaluator())
    best = result.best
    record = sel.promote_best(run_dir, best)
    assert (run_dir / ck.BEST_CKPT).read_bytes() == (run_dir / best.file).read_bytes()
    assert json.loads((run_dir / ck.BEST_JSON).read_text()) == record
    assert record["file_sha256"] == sel.file_sha256(run_dir / best.file)
    assert record["source"] == best.file and record["top1"] == round(best.top1, 6)
    assert not list(run_dir.glob("*.part.*"))


def test_predict_and_confusion_matrix(run_dir):
    evaluator = make_evaluator()
    labels, preds = evaluator.predict(run_dir / "resnet50-3_4.ckpt")
    assert labels.shape == preds.shape == (64,)
    cm = sw.confusion_matrix(labels, preds, CLASSES)
    assert cm.sum() == 64 and np.trace(cm) == int((labels == preds).sum())
    assert np.trace(cm) / 64 == pytest.approx(expected_top1(3))
    acc = sw.per_class_accuracy(cm)
    present = np.bincount(labels, minlength=CLASSES) > 0
    assert np.all(np.isnan(acc[~present])) and np.all((acc[present] >= 0) & (acc[present] <= 1))


def test_confusion_matrix_counts():
    cm = sw.confusion_matrix(np.array([0, 0, 1, 2]), np.array([0, 1, 1, 0]), 3)
    assert cm.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]
    assert sw.per_class_accuracy(cm)[:2].tolist() == [0.5, 1.0]


def test_format_table_aligns_columns():
    text = sw.format_table([["file", "top1"], ["a.ckpt", 0.5], ["long-name.ckpt", 0.25]])
    lines = text.splitlines()
    assert lines[0] == "file            top1"
    assert lines[1] == "--------------  ----"
    assert lines[3] == "long-name.ckpt  0.25"


# ----------------------------------------------------------------- which images chose best.json

def images_folder(root, order=None):
    """A folder whose test file holds 6 records (optionally reordered)."""
    from msresnet.data.cifar10 import RECORD_BYTES, TEST_FILES
    root.mkdir(parents=True, exist_ok=True)
    records = np.arange(6 * RECORD_BYTES, dtype=np.int64).astype(np.uint8).reshape(6, -1)
    records[:, 0] = np.arange(6) % 10
    if order is not None:
        records = records[order]
    records.tofile(root / TEST_FILES[0])
    return root


def test_evaluation_images_tell_copies_and_prefixes_apart(tmp_path):
    from msresnet.data.identity import evaluation_images, same_images_as
    a = images_folder(tmp_path / "a")
    b = images_folder(tmp_path / "b", order=[1, 0, 2, 3, 4, 5])
    first4, all6 = evaluation_images(a, 4), evaluation_images(a)
    assert all6["images"] == 6 and first4["images"] == 4
    assert same_images_as(first4, all6) and same_images_as(all6, all6)
    assert not same_images_as(all6, first4)  # fewer images cannot stand for more
    assert not same_images_as(first4, evaluation_images(b))  # another copy (record order)
    assert same_images_as(evaluation_images(b, 2), evaluation_images(b))


def test_promote_best_refuses_a_choice_made_on_other_images(run_dir, tmp_path):
    from msresnet.data.identity import evaluation_images
    result = sw.sweep(run_dir, make_evaluator())
    first = sel.promote_best(run_dir, result.records[0], "training",
                            evaluation_images(images_folder(tmp_path / "a"), 4))
    before = ((run_dir / ck.BEST_JSON).read_bytes(), (run_dir / ck.BEST_CKPT).read_bytes())
    other = evaluation_images(images_folder(tmp_path / "b", order=[5, 4, 3, 2, 1, 0]))
    with pytest.raises(sel.SelectionError, match="--replace-best") as error:
        sel.promote_best(run_dir, result.records[2], "sweep", other)
    assert "4 test images of" in str(error.value) and "6 test images of" in str(error.value)
    assert ((run_dir / ck.BEST_JSON).read_bytes(), (run_dir / ck.BEST_CKPT).read_bytes()) == before
    with pytest.raises(sel.SelectionError):  # a choice that does not say its images
        sel.promote_best(run_dir, result.records[2], "sweep", None)

    # Explicitly: replaced, and the earlier choice kept beside it.
    sel.promote_best(run_dir, result.records[2], "sweep", other, replace=True)
    assert json.loads((run_dir / "best.previous.json").read_text()) == first
    assert (run_dir / "best.previous.ckpt").read_bytes() == before[1]
    assert json.loads((run_dir / ck.BEST_JSON).read_text())["evaluated_on"] == other


def test_promote_best_replaces_a_choice_made_on_a_prefix_of_the_same_images(run_dir, tmp_path):
    from msresnet.data.identity import evaluation_images
    folder = images_folder(tmp_path / "a")
    result = sw.sweep(run_dir, make_evaluator())
    first = sel.promote_best(run_dir, result.records[0], "training", evaluation_images(folder, 4))
    best = sel.promote_best(run_dir, result.records[1], "sweep", evaluation_images(folder))
    assert best["source"] == result.records[1].file
    assert json.loads((run_dir / "best.previous.json").read_text()) == first
