"""Tests of msresnet.model.lr_schedule, including agreement with the MindSpore models repo."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from msresnet.model.lr_schedule import (SCHEDULES, get_lr, lr_for_config, scaled_lr_max,
                                  steps_per_epoch)

# A small run: 10 epochs of 20 steps, 2 warmup epochs.
RUN = dict(lr_init=0.01, lr_max=0.1, lr_end=1e-4, warmup_epochs=2, total_epochs=10,
           steps_per_epoch=20)
WARMUP_STEPS = 2 * 20


# Transcriptions of official/cv/ResNet/src/lr_generator.py (mindspore-ai/models),
# written as loops the way the repo does, to compare against.
def repo_poly(lr_init, lr_max, total_steps, warmup_steps):
    inc = (lr_max - lr_init) / warmup_steps if warmup_steps else 0.0
    out = []
    for i in range(total_steps):
        if i < warmup_steps:
            out.append(lr_init + inc * i)
        else:
            base = 1.0 - (i - warmup_steps) / (total_steps - warmup_steps)
            out.append(max(lr_max * base * base, 0.0))
    return np.array(out, dtype=np.float32)


def repo_steps(lr_init, lr_max, total_steps, warmup_steps):
    out = []
    for i in range(total_steps):
        if i < warmup_steps:
            out.append(lr_init + (lr_max - lr_init) * i / warmup_steps)
        elif i < 0.3 * total_steps:
            out.append(lr_max)
        elif i < 0.6 * total_steps:
            out.append(lr_max * 0.1)
        elif i < 0.8 * total_steps:
            out.append(lr_max * 0.01)
        else:
            out.append(lr_max * 0.001)
    return np.array(out, dtype=np.float32)


def repo_linear(lr_init, lr_end, lr_max, total_steps, warmup_steps):
    out = []
    for i in range(total_steps):
        if i < warmup_steps:
            out.append(lr_init + (lr_max - lr_init) * i / warmup_steps)
        else:
            out.append(lr_max - (lr_max - lr_end) * (i - warmup_steps)
                       / (total_steps - warmup_steps))
    return np.array(out, dtype=np.float32)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_one_float32_value_per_step(schedule):
    lr = get_lr(schedule, **RUN)
    assert lr.shape == (200,) and lr.dtype == np.float32
    assert np.all(np.isfinite(lr)) and np.all(lr >= 0)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_warmup_rises_linearly_from_lr_init_to_the_peak(schedule):
    lr = get_lr(schedule, **RUN)
    assert lr[0] == pytest.approx(0.01)
    assert lr[WARMUP_STEPS // 2] == pytest.approx(0.01 + 0.09 / 2)
    assert np.all(np.diff(lr[:WARMUP_STEPS + 1]) > 0)
    assert lr[WARMUP_STEPS] == pytest.approx(0.1)  # first step after warmup
    assert lr.max() == pytest.approx(0.1)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_never_increases_after_warmup(schedule):
    lr = get_lr(schedule, **RUN)
    assert np.all(np.diff(lr[WARMUP_STEPS:]) <= 0)


@pytest.mark.parametrize("schedule", ["poly", "cosine", "linear"])
def test_decay_ends_at_lr_end(schedule):
    lr = get_lr(schedule, **RUN)
    decay_steps = 200 - WARMUP_STEPS
    # The last step sits one step before the end of the curve (progress 159/160).
    assert lr[-1] > 1e-4
    assert lr[-1] == pytest.approx(1e-4, abs=(0.1 - 1e-4) * 4 / decay_steps)
    assert lr[-1] < lr[-2]


def test_poly_end_value_exactly():
    lr = get_lr("poly", **RUN)
    assert lr[-1] == pytest.approx(1e-4 + (0.1 - 1e-4) * (1 / 160) ** 2, rel=1e-6)


def test_steps_milestones_at_30_60_80_percent_of_all_steps():
    lr = get_lr("steps", **RUN)
    assert lr[59] == pytest.approx(0.1) and lr[60] == pytest.approx(0.01)
    assert lr[119] == pytest.approx(0.01) and lr[120] == pytest.approx(0.001)
    assert lr[159] == pytest.approx(0.001) and lr[160] == pytest.approx(0.0001)


def test_constant_holds_lr_max():
    assert np.all(get_lr("constant", **RUN)[WARMUP_STEPS:] == np.float32(0.1))


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_without_warmup_starts_at_lr_max(schedule):
    lr = get_lr(schedule, **{**RUN, "warmup_epochs": 0})
    assert lr[0] == pytest.approx(0.1)
    assert np.all(np.diff(lr) <= 0)


def test_all_warmup_run_never_reaches_the_peak():
    lr = get_lr("poly", **{**RUN, "warmup_epochs": 10})
    assert lr[0] == pytest.approx(0.01) and lr[-1] < 0.1 and np.all(np.diff(lr) > 0)


def test_poly_with_lr_end_zero_equals_the_models_repo():
    lr = get_lr("poly", 0.01, 0.1, 0.0, 5, 90, 97)
    np.testing.assert_allclose(lr, repo_poly(0.01, 0.1, 90 * 97, 5 * 97), rtol=1e-6, atol=0)


def test_poly_differs_from_the_models_repo_only_by_lr_end():
    ours = get_lr("poly", 0.01, 0.1, 1e-5, 5, 90, 97)
    repo = repo_poly(0.01, 0.1, 90 * 97, 5 * 97)
    assert ours[-1] > 1e-5 > repo[-1]
    np.testing.assert_allclose(ours[: 5 * 97], repo[: 5 * 97], rtol=1e-6)
    assert np.all(np.abs(ours - repo) <= 1e-5 + 1e-7)


def test_steps_and_linear_equal_the_models_repo():
    np.testing.assert_allclose(get_lr("steps", 0.01, 0.1, 1e-5, 5, 90, 97),
                               repo_steps(0.01, 0.1, 90 * 97, 5 * 97), rtol=1e-6)
    np.testing.assert_allclose(get_lr("linear", 0.01, 0.1, 1e-3, 5, 90, 97),
                               repo_linear(0.01, 1e-3, 0.1, 90 * 97, 5 * 97), rtol=1e-6)


def test_unknown_schedule_is_an_error_not_a_fallback():
    with pytest.raises(ValueError, match=r"^schedule: must be one of 'steps', 'poly', "
                                         r"'cosine', 'linear', 'constant', got 'liner'$"):
        get_lr("liner", **RUN)


@pytest.mark.parametrize("change, message", [
    ({"warmup_epochs": 11}, "warmup_epochs: must not exceed total_epochs"),
    ({"steps_per_epoch": 0}, "steps_per_epoch: must be an integer >= 1"),
    ({"total_epochs": 2.5}, "total_epochs: must be an integer >= 1"),
    ({"lr_max": 0.0, "lr_init": 0.0, "lr_end": 0.0}, "lr_max: must be positive"),
    ({"lr_init": 0.2}, "lr_init: must not exceed lr_max"),
    ({"lr_end": -1.0}, "lr_end: must be a finite number >= 0"),
])
def test_bad_arguments_name_the_argument(change, message):
    with pytest.raises(ValueError, match="^" + message):
        get_lr("poly", **{**RUN, **change})


def test_lr_for_config_uses_the_config_fields():
    config = SimpleNamespace(lr_schedule="cosine", lr_init=0.01, lr_max=0.1, lr_end=1e-4,
                             warmup_epochs=2, epoch_size=10)
    np.testing.assert_array_equal(lr_for_config(config, 20), get_lr("cosine", **RUN))


def test_lr_for_a_loaded_profile():
    from msresnet.config.profile import load_config
    config = load_config("gpu")
    lr = lr_for_config(config, steps_per_epoch(50_000, config.batch_size))
    assert lr.shape == (90 * 1562,)
    assert lr[5 * 1562] == pytest.approx(0.1)


def test_steps_per_epoch_matches_the_models_repo_readme():
    # README: "epoch=90, steps per epoch=195, batch_size = 32" on 8 devices.
    assert steps_per_epoch(50_000, 32, 8) == 195
    assert steps_per_epoch(50_000, 32) == 1562
    assert steps_per_epoch(1024, 32) == 32


@pytest.mark.parametrize("devices, expected", [(1, 0.0125), (2, 0.025), (8, 0.1), (16, 0.2)])
def test_linear_scaling_rule_of_the_models_repo(devices, expected):
    # train.py: config.lr_max = config.lr_max / 8 * config.device_num
    assert math.isclose(scaled_lr_max(0.1, devices), expected, rel_tol=1e-12)


def test_scaled_lr_max_takes_the_reference_count_a_profile_states():
    # smoke and cpu are tuned for one process (lr_devices: 1): 2 workers double the rate
    assert scaled_lr_max(0.002, 2, 1) == pytest.approx(0.004)
    assert scaled_lr_max(0.002, 2, 2) == 0.002
    with pytest.raises(ValueError, match="reference_devices"):
        scaled_lr_max(0.1, 1, 0)


def test_scaled_lr_max_rejects_zero_devices():
    with pytest.raises(ValueError, match="device_num"):
        scaled_lr_max(0.1, 0)


def test_lr_for_config_trusts_the_checked_config(monkeypatch):
    """A Config checked lr_init <= lr_max and the rest when it was built (and is
    frozen), so lr_for_config does not check them again; get_lr, which takes raw
    numbers, does."""
    from msresnet.config.profile import load_config
    from msresnet.model import lr_schedule

    checked = []
    real = lr_schedule._check_arguments
    monkeypatch.setattr(lr_schedule, "_check_arguments",
                        lambda *args: checked.append(args) or real(*args))
    config = load_config("gpu")
    from_config = lr_for_config(config, 97)
    assert checked == []
    direct = get_lr(config.lr_schedule, config.lr_init, config.lr_max, config.lr_end,
                    config.warmup_epochs, config.epoch_size, 97)
    assert len(checked) == 1
    np.testing.assert_array_equal(from_config, direct)
    with pytest.raises(ValueError, match="^steps_per_epoch: must be an integer >= 1"):
        lr_for_config(config, 0)  # from the dataset, not the config: still checked
