"""msresnet.training.selection: the choice rule, the same-images rule, best.json and the
sweep's settlement, and the final test that leaves unreadable checkpoints out.

Tiny one-layer networks stand in for ResNet50; the scores a sweep would measure are
written out where the rule, not the scoring, is under test.
"""

from __future__ import annotations

import json

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import mindspore as ms
import mindspore.dataset as ds
import numpy as np
import pytest
from mindspore import nn

from msresnet.training import checkpoints as ck
from msresnet.training import selection as sel
from msresnet.training.sweep import CheckpointEvaluator, SweepRecord

ON = {"split": "valid", "images": 64, "sha256": "ab" * 32, "folder": "/data/cifar-10-batches-bin",
      "held_out": 512, "seed": 1}
TEST_ON = {"split": "test", "images": 64, "sha256": "cd" * 32, "folder": ON["folder"]}


def tiny(seed: int) -> nn.Cell:
    ms.set_seed(seed)
    return nn.Dense(4, 10)


def data() -> ds.Dataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (np.abs(x[:, 0]) * 3).astype(np.int32) % 10
    return ds.NumpySlicesDataset({"image": x, "label": y}, shuffle=False).batch(16)


def name(epoch: int) -> str:
    return ck.checkpoint_name(epoch, 4)


@pytest.fixture()
def run_dir(tmp_path):
    """Checkpoints of epochs 1..3 (different weights each)."""
    for epoch in (1, 2, 3):
        ck.save_atomic(tiny(epoch), tmp_path / name(epoch),
                       {"epoch_num": epoch, "step_num": 4 * epoch})
    return tmp_path


def record(epoch: int, top1: float, loss: float = 2.0) -> SweepRecord:
    return SweepRecord(name(epoch), epoch, 4 * epoch, top1, 0.9, loss, 0.1)


def cut_in_half(path) -> None:
    data_bytes = path.read_bytes()
    path.write_bytes(data_bytes[: len(data_bytes) // 2])


def best_files(folder) -> tuple[bytes, bytes]:
    return (folder / ck.BEST_JSON).read_bytes(), (folder / ck.BEST_CKPT).read_bytes()


def never(path):
    raise AssertionError(f"{path} was scored again, though its record could be trusted")


# ----------------------------------------------------------------------- the choice rule

def test_select_best_prefers_top1_then_loss_then_earlier():
    rec = lambda e, t, l: SweepRecord(f"f{e}", e, e, t, 1.0, l, 0.0)  # noqa: E731
    assert sel.select_best([rec(1, 0.5, 1.0), rec(2, 0.6, 2.0), rec(3, 0.4, 0.1)]).epoch == 2
    assert sel.select_best([rec(1, 0.6, 1.0), rec(2, 0.6, 0.9)]).epoch == 2
    assert sel.select_best([rec(1, 0.6, 1.0), rec(2, 0.6, 1.0)]).epoch == 1
    assert sel.select_best([]) is None


def test_the_rule_compares_what_best_json_keeps():
    """A loss lower by less than best.json's 6 digits is a tie (the earlier epoch stays):
    a record read back from best.json ranks as the scores it was made from did."""
    assert sel.select_best([record(1, 0.5, 1.0), record(2, 0.5, 1.0 - 1e-8)]).epoch == 1
    assert not sel.rank_key(0.5, 1.0, 2, 8) > sel.rank_key(0.5, None, 1, 4)  # no loss: kept


# ----------------------------------------------------------------------- the same images

def test_same_images_is_the_identity_wherever_the_folder_is():
    assert sel.same_images(ON, {**ON, "folder": "/moved/cifar-10-batches-bin"})
    assert not sel.same_images(ON, {**ON, "images": 32})
    assert not sel.same_images(ON, {**ON, "seed": 2})
    assert not sel.same_images(ON, None) and sel.same_images(None, None)
    assert sel.includes({**ON, "folder": "/moved"}, ON)  # no hashing needed
    assert not sel.includes(ON, None) and not sel.includes(None, ON)


# ----------------------------------------------------------------------- the sweep's settlement

def trained_best(folder, epoch: int, top1: float, loss: float = 2.0, on=ON) -> dict:
    """best.* as training leaves them: epoch's weights, its record, its file's hash."""
    ck.save_atomic(tiny(epoch), folder / ck.BEST_CKPT,
                   {"epoch_num": epoch, "step_num": 4 * epoch})
    return sel.write_best(folder, epoch=epoch, step=4 * epoch, top1=top1, top5=0.9, loss=loss,
                          source=name(epoch), selected_by="validation during training",
                          evaluated_on=on)


def test_a_damaged_checkpoint_of_the_best_epoch_does_not_demote_an_intact_best(run_dir):
    """Issue 28: epoch 1 (0.1992) was chosen, its periodic file is cut in half; the
    sweep's best readable checkpoint, epoch 2 (0.1738), must not replace it."""
    trained_best(run_dir, 1, 0.1992)
    before = best_files(run_dir)
    cut_in_half(run_dir / name(1))
    settled = sel.settle_best(run_dir, record(2, 0.1738), ON, "sweep", never)
    assert settled.action == "kept" and best_files(run_dir) == before
    assert settled.standing["how"].startswith("trusted") and settled.standing["top1"] == 0.1992
    assert not (run_dir / "best.previous.json").exists()


def test_a_record_that_cannot_be_trusted_is_scored_again(run_dir):
    """A record made on the first 32 of these images (or whose file changed) says
    nothing about these 64: best.ckpt is scored again, and competes with that score."""
    trained_best(run_dir, 1, 0.9, on={**ON, "images": 32})
    scored = []

    def rescore(path):
        scored.append(path.name)
        return record(1, 0.5)

    with pytest.MonkeyPatch.context() as patch:  # the prefix check would hash the files
        patch.setattr(sel, "same_images_as", lambda recorded, current: True)
        kept = sel.settle_best(run_dir, record(2, 0.4), ON, "sweep", rescore)
        assert kept.action == "kept" and kept.standing["top1"] == 0.5
        beaten = sel.settle_best(run_dir, record(2, 0.6), ON, "sweep", rescore)
    assert scored == [ck.BEST_CKPT, ck.BEST_CKPT]
    assert beaten.action == "promoted" and beaten.best["source"] == name(2)
    assert json.loads((run_dir / "best.previous.json").read_text())["epoch"] == 1

    trained_best(run_dir, 1, 0.9)  # on these very images, but:
    ck.save_atomic(tiny(7), run_dir / ck.BEST_CKPT)  # the file is no longer the recorded one
    assert sel.settle_best(run_dir, record(2, 0.4), ON, "sweep", rescore).action == "kept"
    assert scored[-1] == ck.BEST_CKPT and len(scored) == 3


def test_a_better_readable_checkpoint_replaces_the_best(run_dir):
    trained_best(run_dir, 1, 0.5)
    settled = sel.settle_best(run_dir, record(3, 0.6), ON, "checkpoint sweep", never)
    assert settled.action == "promoted"
    assert (run_dir / ck.BEST_CKPT).read_bytes() == (run_dir / name(3)).read_bytes()
    assert json.loads((run_dir / ck.BEST_JSON).read_text()) == settled.best
    assert settled.best["selected_by"] == "checkpoint sweep"
    tie = sel.settle_best(run_dir, record(2, 0.6), ON, "sweep", never)  # full tie: earlier
    assert tie.action == "promoted" and tie.best["epoch"] == 2


def test_the_same_checkpoint_is_not_promoted_again(run_dir, caplog):
    """Issue 38: the winner is the best's own periodic file (the same weights): before,
    its 188 MB file was copied over training's best.ckpt, silently; now the choice is
    kept, and the log says why."""
    trained_best(run_dir, 1, 0.5)
    before = best_files(run_dir)
    with caplog.at_level("INFO", logger="msresnet.training.selection"):
        settled = sel.settle_best(run_dir, record(1, 0.5), ON, "checkpoint sweep", never)
    assert settled.action == "kept" and settled.best["selected_by"] == "validation during training"
    assert best_files(run_dir) == before and not (run_dir / "best.previous.json").exists()
    assert "best.ckpt kept: epoch 1 already chosen (resnet50-1_4.ckpt)" in caplog.text


def test_an_equal_score_keeps_a_choice_that_names_no_source(run_dir):
    """Issue 45 (a mutant no test saw): training records ``source: null`` when the chosen
    epoch saved no periodic checkpoint, so the same-file shortcut above cannot apply and
    the equal-score rule alone keeps the choice. With ``<`` for ``<=`` the sweep copied
    the 188 MB periodic file over best.ckpt and made best.previous.*."""
    ck.save_atomic(tiny(1), run_dir / ck.BEST_CKPT, {"epoch_num": 1, "step_num": 4})
    sel.write_best(run_dir, epoch=1, step=4, top1=0.5, top5=0.9, loss=2.0, source=None,
                   selected_by="validation during training", evaluated_on=ON)
    before = best_files(run_dir)
    settled = sel.settle_best(run_dir, record(1, 0.5), ON, "checkpoint sweep", never)
    assert settled.action == "kept" and settled.best["source"] is None
    assert settled.standing["how"].startswith("trusted")
    assert best_files(run_dir) == before
    assert list(run_dir.glob("best.previous.*")) == []


def test_an_unreadable_best_does_not_compete(run_dir):
    trained_best(run_dir, 1, 0.9)
    cut_in_half(run_dir / ck.BEST_CKPT)
    evaluator = CheckpointEvaluator(tiny(99), data())
    settled = sel.settle_best(run_dir, record(2, 0.1), ON, "sweep", evaluator.evaluate)
    assert settled.action == "promoted" and settled.standing is None
    assert [file for file, _ in settled.skipped] == [ck.BEST_CKPT]
    assert "truncated" in settled.skipped[0][1] or "unreadable" in settled.skipped[0][1]
    assert (run_dir / ck.BEST_CKPT).read_bytes() == (run_dir / name(2)).read_bytes()


def test_a_choice_made_on_other_images_is_not_replaced_unless_asked(run_dir):
    trained_best(run_dir, 1, 0.1)
    before = best_files(run_dir)
    other = {**ON, "sha256": "ef" * 32}
    with pytest.raises(sel.SelectionError, match="--replace-best"):
        sel.settle_best(run_dir, record(2, 0.9), other, "sweep", never)
    assert best_files(run_dir) == before
    settled = sel.settle_best(run_dir, record(2, 0.05), other, "sweep", never, replace=True)
    assert settled.action == "promoted" and settled.best["evaluated_on"] == other


# ----------------------------------------------------------------------- the final test

def test_the_final_test_scores_the_newest_readable_checkpoint_as_last(run_dir):
    """Issue 28: the last epoch's file is damaged; the final test names the newest
    readable one as "last", and lists the file it left out and why."""
    trained_best(run_dir, 1, 0.5)
    cut_in_half(run_dir / name(3))
    evaluator = CheckpointEvaluator(tiny(99), data())
    record_ = sel.final_test(run_dir, evaluator.net, evaluator.model, data(), TEST_ON)
    assert record_["last"]["file"] == name(2) and record_["last"]["epoch"] == 2
    assert record_["last"]["newer_skipped"] == [name(3)]
    assert [s["file"] for s in record_["skipped"]] == [name(3)]
    assert record_["chosen"]["epoch"] == 1 and record_["evaluated_on"] == TEST_ON
    assert record_["last"]["top1"] == round(evaluator.evaluate(run_dir / name(2)).top1, 6)
    assert json.loads((run_dir / sel.TEST_JSON).read_text()) == record_ == sel.read_test(run_dir)


def test_the_final_test_leaves_out_what_the_sweep_could_not_read(run_dir):
    trained_best(run_dir, 1, 0.5)
    evaluator = CheckpointEvaluator(tiny(99), data())
    known = [(name(3), "unreadable, truncated or corrupt (seen by the sweep)")]
    record_ = sel.final_test(run_dir, evaluator.net, evaluator.model, data(), TEST_ON,
                             skipped=known, name="test-other.json")
    assert record_["last"]["file"] == name(2)
    assert record_["skipped"] == [{"file": name(3), "reason": known[0][1]}]
    assert (run_dir / "test-other.json").is_file() and not (run_dir / sel.TEST_JSON).exists()


def test_the_final_test_needs_a_choice_and_a_readable_checkpoint(run_dir):
    evaluator = CheckpointEvaluator(tiny(99), data())
    with pytest.raises(ck.CheckpointError, match="nothing was chosen"):
        sel.final_test(run_dir, evaluator.net, evaluator.model, data(), TEST_ON)
    trained_best(run_dir, 1, 0.5)
    for epoch in (1, 2, 3):
        cut_in_half(run_dir / name(epoch))
    with pytest.raises(ck.CheckpointError, match="no readable periodic checkpoint"):
        sel.final_test(run_dir, evaluator.net, evaluator.model, data(), TEST_ON)
