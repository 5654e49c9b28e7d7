"""msresnet.training.callbacks.Progress: a bar on a terminal, one line per epoch anywhere else.

Stored notebook outputs, logs and pipes must not fill up with redrawn progress
bars (they differ on every run and bury the result), so off a terminal the
callback writes one final line per epoch. Driven here with the run context
MindSpore passes, without training anything.
"""

from __future__ import annotations

import io
from pathlib import Path

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import numpy as np

from msresnet.training.callbacks import Progress


class Params(dict):
    """Like MindSpore's callback parameters: a dict whose keys are also attributes."""

    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


class Context:
    def __init__(self) -> None:
        self.params = Params(cur_epoch_num=1, cur_step_num=0, net_outputs=np.float32(2.5))

    def original_args(self) -> Params:
        return self.params


def run_epochs(progress: Progress, epochs: int = 2, steps: int = 3) -> None:
    context = Context()
    for epoch in range(1, epochs + 1):
        context.params.cur_epoch_num = epoch
        progress.on_train_epoch_begin(context)
        for _ in range(steps):
            context.params.cur_step_num += 1
            progress.on_train_step_end(context)
        progress.on_train_epoch_end(context)
    progress.on_train_end(context)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_one_line_per_epoch() -> None:
    out = io.StringIO()
    run_epochs(Progress(2, 3, batch_size=4, lr=np.full(6, 0.01), file=out))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue()
    assert lines[0].startswith("epoch 1/2: 3/3 steps in ") and "loss=2.5000" in lines[0]
    assert lines[1].startswith("epoch 2/2: 3/3 steps in ") and "lr=0.01000" in lines[1]


def test_on_a_terminal_a_bar_that_redraws() -> None:
    out = Terminal()
    run_epochs(Progress(2, 3, batch_size=4, lr=np.full(6, 0.01), file=out))
    text = out.getvalue()
    assert "\r" in text and "epoch 1/2" in text and "3/3" in text


def test_bars_can_be_forced_either_way() -> None:
    out = Terminal()
    run_epochs(Progress(1, 3, batch_size=4, lr=np.full(3, 0.01), file=out, bars=False), epochs=1)
    assert out.getvalue().count("\n") == 1 and "\r" not in out.getvalue()


def test_the_loss_guard_stops_at_the_end_of_the_first_epoch_that_is_not_a_number() -> None:
    import pytest

    from msresnet.training.callbacks import EpochHistory, LossGuard, TrainingDiverged

    history, context = EpochHistory(None, np.full(5, 0.01), batch_size=4), Context()
    guard = LossGuard(history)
    for epoch, losses in [(1, [2.3, 2.1]), (2, [1.9, float("nan"), float("nan")])]:
        context.params.cur_epoch_num = epoch
        history.on_train_epoch_begin(context)
        for loss in losses:
            context.params.cur_step_num += 1
            context.params.net_outputs = (np.float32(loss), False, 1024.0)
            history.on_train_step_end(context)
        if epoch == 1:
            guard.on_train_epoch_end(context)  # finite: nothing happens
    with pytest.raises(TrainingDiverged, match=r"^epoch 2: the training loss is nan; stopped"):
        guard.on_train_epoch_end(context)


def test_a_run_whose_loss_turns_nan_stops_with_one_line_and_no_checkpoint(tmp_path) -> None:
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "msresnet", "train", "--config", "configs/cpu.yaml",
         "--train_samples", "64", "--eval_samples", "64", "--batch_size", "32",
         "--epoch_size", "2", "--warmup_epochs", "0", "--lr_max", "1e30", "--no_progress",
         "--depth", "14",
         "--output_dir", str(tmp_path / "run")], capture_output=True, text=True,
        cwd=Path(__file__).resolve().parents[1])
    errors = [line for line in run.stderr.splitlines() if "error" in line]
    assert run.returncode == 2, run.stderr[-2000:]
    assert len(errors) == 1 and "epoch 1: the training loss is nan" in errors[0]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["config.yaml", "train.log"]
