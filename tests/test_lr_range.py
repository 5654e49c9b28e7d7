"""The learning-rate range test: its arithmetic, and one short real run on the smoke profile."""

from __future__ import annotations

import json

import numpy as np
import pytest

import msresnet  # noqa: F401  (first: CPU speed setting before MindSpore)
from msresnet.config.profile import load_config
from msresnet.experiments.lr_range import RangeResult, RangeTestError, range_test, rates, smooth
from fresh_cli import run_in_fresh_process
from msresnet.paths import REPO_ROOT


def test_smoothing_is_bias_corrected():
    assert smooth([2.0]) == [2.0]  # no pull towards 0 at the start
    out = smooth([2.0, 2.0, 2.0, 4.0], beta=0.5)
    assert out[:3] == pytest.approx([2.0, 2.0, 2.0])
    assert 2.0 < out[3] < 4.0


def test_rates_are_log_spaced_from_min_to_max():
    lrs = rates(0.001, 10.0, 5)
    assert lrs[0] == pytest.approx(0.001) and lrs[-1] == pytest.approx(10.0)
    assert np.allclose(np.diff(np.log(lrs)), np.log(10.0))
    for bad in ((0.0, 1.0, 5), (1.0, 0.5, 5), (0.1, 1.0, 1)):
        with pytest.raises(RangeTestError):
            rates(*bad)


def test_suggestions_read_the_smoothed_curve():
    lrs = list(rates(0.001, 1.0, 7))  # 0.001 ... 1, a factor of 10**0.5 apart
    smoothed = [2.30, 2.29, 2.20, 1.90, 1.85, 2.5, 6.0]
    result = RangeResult(lr=lrs, loss=smoothed, smoothed=smoothed, batch_size=64, seconds=1.0,
                         diverged=True)
    assert result.min_loss_lr == pytest.approx(lrs[4])
    assert result.steepest_lr == pytest.approx(lrs[2])  # the biggest drop per factor of rate
    record = result.to_dict()
    assert record["min_loss_lr"] == result.min_loss_lr and record["diverged"] is True


@pytest.mark.slow
def test_a_short_real_range_test_stops_at_its_steps(tmp_path):
    config = load_config("smoke", {"train_samples": 64, "depth": 14,
                                   "data_dir": str(REPO_ROOT / "data")})
    result = range_test(config, lr_min=1e-4, lr_max=1e-2, steps=4, diverge=1e9)
    assert len(result.lr) == len(result.loss) == 4 and not result.diverged
    assert np.all(np.isfinite(result.loss))
    assert result.settings["valid_split"] == config.valid_split
    json.dumps(result.to_dict())  # what --json writes


@pytest.mark.parametrize("diverge", ["0.5", "1"])
def test_a_diverge_factor_of_1_or_less_is_refused_before_training(diverge, monkeypatch,
                                                                   capsys, tmp_path):
    """Issue 45: --diverge 0.5 trained one step, called it a divergence and exited 0."""
    from msresnet import cli
    from msresnet.experiments import lr_range

    def started(*args, **kwargs):
        raise AssertionError("the range test started")

    monkeypatch.setattr(lr_range, "set_context", started)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lr-range", "smoke", "--diverge", diverge, "--json", "lr.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"msresnet lr-range: error: --diverge must be above 1 (times the smoothed loss's "
        f"minimum), got {float(diverge)!r}"), err
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RangeTestError, match="--diverge must be above 1"):
        range_test(load_config("smoke"), diverge=float(diverge))


def test_a_bad_range_is_refused_before_mindspore_loads():
    """The command checks its range and divergence factor with msresnet.experiments.
    range_inputs, which imports no MindSpore: the error is one line at once, in a fresh
    process that never loaded MindSpore (about 3 CPU-s). The messages themselves are
    test_cli_entries.py's and the diverge test's above."""
    run = run_in_fresh_process([["lr-range", "smoke", "--lr_min", "1", "--lr_max", "0.5"],
                                ["lr-range", "smoke", "--diverge", "0.5"]], cwd=REPO_ROOT)
    assert (run.codes, run.mindspore_loaded) == ([2, 2], False), run.stderr_lines
    assert len(run.stderr_lines) == 2, run.stderr_lines  # one line each


def test_the_range_test_assembles_trainings_step(monkeypatch):
    """The range test gets its optimizer, mixed precision and loss scale where training
    does (factories.build_model): on a GPU profile a Model of its own would train in
    float32 with updates 1024 times too small (the optimizer divides by the loss scale
    that no one multiplied in)."""
    import ast

    from msresnet.experiments import lr_range

    tree = ast.parse(open(lr_range.__file__).read())
    called = {node.func.id for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "build_model" in called and "Model" not in called and "make_optimizer" not in called


@pytest.mark.slow
def test_a_loss_scaled_range_test_moves_the_weights_as_training_does(monkeypatch):
    """Issue 43: on a GPU or Ascend profile training scales the loss by ``loss_scale``
    (1024) and its optimizer divides the gradients by it again. A range test with a
    ``Model`` of its own kept the dividing optimizer without the scaling, so its
    updates were 1024 times too small. On the CPU, in float32: the smoke step with
    that loss scale switched on trains exactly as the unscaled one (the same losses,
    step after step), and the old assembly does not."""
    import mindspore as ms
    import mindspore.dataset as ds
    from mindspore.train import Model

    from msresnet.experiments import lr_range
    from msresnet.training import factories

    config = load_config("smoke", {"train_samples": 64, "loss_scale": 1024.0, "depth": 14,
                                   "data_dir": str(REPO_ROOT / "data")})

    def losses() -> list[float]:
        ms.set_seed(config.seed)
        ds.config.set_seed(config.seed)
        return range_test(config, lr_min=0.05, lr_max=0.5, steps=3, diverge=1e9).loss

    plain = losses()  # the CPU's policy: no loss scale
    monkeypatch.setattr(factories, "uses_mixed_precision", lambda c: True)  # a GPU's
    scaled = losses()
    assert scaled == pytest.approx(plain, abs=1e-6), (scaled, plain)

    def old_assembly(config, net, lr):  # the optimizer's division without the scaling
        optimizer = factories.make_optimizer(config, net, lr)
        return optimizer, Model(net, loss_fn=factories.make_loss(config), optimizer=optimizer)

    monkeypatch.setattr(lr_range, "build_model", old_assembly)
    unscaled_updates = losses()
    assert unscaled_updates[0] == pytest.approx(plain[0], abs=1e-6)  # the same start
    assert abs(unscaled_updates[-1] - plain[-1]) > 1e-3, (unscaled_updates, plain)
