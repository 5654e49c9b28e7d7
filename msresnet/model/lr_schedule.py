"""Learning-rate schedules: one value per training step, with a linear warmup.

MindSpore's ``nn.Momentum`` accepts the learning rate as a tensor holding one value
per step, so a schedule is just an array computed before training starts. The
formulas follow the MindSpore models repository,
``official/cv/ResNet/src/lr_generator.py`` (``get_lr`` and its helpers
``_generate_steps_lr``, ``_generate_poly_lr``, ``_generate_cosine_lr`` and
``_generate_liner_lr``). Every schedule here shares the same warmup: for the
first ``warmup_epochs * steps_per_epoch`` steps the rate rises linearly,

    lr[i] = lr_init + (lr_max - lr_init) * i / warmup_steps,

so step 0 uses ``lr_init`` and the first step after warmup uses ``lr_max``. After
warmup, with ``p = (i - warmup_steps) / (total_steps - warmup_steps)`` running
from 0 towards 1:

* ``steps``: ``lr_max * 0.1**k`` where ``k`` counts the milestones passed, at 30%,
  60% and 80% of *all* steps (warmup included). Same as the repo; ``lr_end`` unused.
* ``poly``: ``lr_end + (lr_max - lr_end) * (1 - p)**2``. The repo computes
  ``lr_max * (1 - p)**2``: it ignores ``lr_end`` and decays towards 0.
* ``cosine``: ``lr_end + (lr_max - lr_end) * 0.5 * (1 + cos(pi * p))``. The repo
  computes ``lr_max * ((T - i) / D * 0.5 * (1 + cos(0.94 * pi * i / D)) + 1e-5)``
  and its warmup uses ``i + 1`` instead of ``i``.
* ``linear``: ``lr_max - (lr_max - lr_end) * p``. Same as the repo.
* ``constant``: ``lr_max`` (not in the repo).

(T: total steps, D: decay steps.) Where ours differs, it is on purpose: our poly
and cosine end at ``lr_end`` as the config says, and an unknown schedule name is an
error (the repo's ``get_lr`` silently falls back to linear for any name it does not
know; it also has a ``step`` mode without warmup, not kept here). The repo's cosine
is a linear ramp times a cosine over 0.94 pi measured from step 0 rather than from
the end of warmup, plus a floor of ``1e-5 * lr_max``: for the 90-epoch recipe it
starts its decay at 0.0992 (not 0.1) and ends near 1e-6, whatever ``lr_end`` says.
Ours is the plain half cosine from ``lr_max`` to ``lr_end``. With ``lr_end = 0`` our
poly equals the repo's value for value (``tests/test_lr_schedule.py`` checks this
against a transcription), and steps and linear always do.

The decay reaches its end value one step *after* the last step (``p`` never
reaches 1), in the repo as here. To resume at epoch ``k``, both use the tail of the
same array, ``lr[k * steps_per_epoch:]`` (the repo's ``start_epoch`` argument).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

SCHEDULES: tuple[str, ...] = ("steps", "poly", "cosine", "linear", "constant")

# "steps": fractions of *all* steps (warmup included) where the rate drops tenfold,
# as in the models repo's _generate_steps_lr (0.3, 0.6, 0.8 of total_steps).
STEP_MILESTONES: tuple[float, ...] = (0.3, 0.6, 0.8)
STEP_FACTOR = 0.1
# "poly": the models repo squares the remaining fraction (power 2).
POLY_POWER = 2.0
# The linear scaling rule of the models repo: its lr_max is meant for 8 devices
# (the gpu and ascend profiles say so with lr_devices: 8).
REFERENCE_DEVICES = 8


def _steps(p: np.ndarray, step: np.ndarray, total_steps: int, lr_max: float,
           lr_end: float) -> np.ndarray:
    passed = sum((step >= m * total_steps).astype(np.int64) for m in STEP_MILESTONES)
    return lr_max * STEP_FACTOR ** passed


def _poly(p: np.ndarray, step: np.ndarray, total_steps: int, lr_max: float,
          lr_end: float) -> np.ndarray:
    return lr_end + (lr_max - lr_end) * (1.0 - p) ** POLY_POWER


def _cosine(p: np.ndarray, step: np.ndarray, total_steps: int, lr_max: float,
            lr_end: float) -> np.ndarray:
    return lr_end + (lr_max - lr_end) * 0.5 * (1.0 + np.cos(np.pi * p))


def _linear(p: np.ndarray, step: np.ndarray, total_steps: int, lr_max: float,
            lr_end: float) -> np.ndarray:
    return lr_max - (lr_max - lr_end) * p


def _constant(p: np.ndarray, step: np.ndarray, total_steps: int, lr_max: float,
              lr_end: float) -> np.ndarray:
    return np.full_like(p, lr_max)


_DECAYS: dict[str, Callable[..., np.ndarray]] = {
    "steps": _steps, "poly": _poly, "cosine": _cosine, "linear": _linear,
    "constant": _constant,
}


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_rate(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
            or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
    return float(value)


def get_lr(schedule: str, lr_init: float, lr_max: float, lr_end: float,
           warmup_epochs: int, total_epochs: int, steps_per_epoch: int) -> np.ndarray:
    """The learning rate of every step of a run, as float32 (what MindSpore expects).

    Returns ``total_epochs * steps_per_epoch`` values: a linear warmup from
    ``lr_init`` to ``lr_max`` over ``warmup_epochs`` epochs, then the decay named by
    ``schedule`` (one of :data:`SCHEDULES`), see the module docstring for the formulas
    and how they compare with the models repo's ``src/lr_generator.py``.
    ``warmup_epochs`` may be 0 (start at ``lr_max``) or equal ``total_epochs`` (the
    whole run is warmup). Bad arguments raise ``ValueError`` naming the argument.

    This is the entry for raw numbers (chapter 2 draws schedules with rates no
    profile has, e.g. ``lr_end=0``), so it checks them, :func:`_check_arguments`.
    The training passes a :class:`msresnet.config.profile.Config` to :func:`lr_for_config`
    instead, which the config already checked when it was built.
    """
    _check_arguments(schedule, lr_init, lr_max, lr_end, warmup_epochs, total_epochs)
    return _schedule(schedule, float(lr_init), float(lr_max), float(lr_end),
                     int(warmup_epochs), int(total_epochs),
                     _check_int("steps_per_epoch", steps_per_epoch, 1))


def _check_arguments(schedule: str, lr_init: Any, lr_max: Any, lr_end: Any,
                     warmup_epochs: Any, total_epochs: Any) -> None:
    """What :mod:`msresnet.config.profile` checks for a Config, for callers that pass numbers."""
    if schedule not in _DECAYS:
        choices = ", ".join(repr(s) for s in SCHEDULES)
        raise ValueError(f"schedule: must be one of {choices}, got {schedule!r}")
    lr_init = _check_rate("lr_init", lr_init)
    lr_max = _check_rate("lr_max", lr_max)
    lr_end = _check_rate("lr_end", lr_end)
    if lr_max <= 0:
        raise ValueError(f"lr_max: must be positive, got {lr_max!r}")
    if lr_init > lr_max:
        raise ValueError(f"lr_init: must not exceed lr_max ({lr_max:g}), got {lr_init:g}")
    if lr_end > lr_max:
        raise ValueError(f"lr_end: must not exceed lr_max ({lr_max:g}), got {lr_end:g}")
    total_epochs = _check_int("total_epochs", total_epochs, 1)
    warmup_epochs = _check_int("warmup_epochs", warmup_epochs, 0)
    if warmup_epochs > total_epochs:
        raise ValueError(f"warmup_epochs: must not exceed total_epochs ({total_epochs}), "
                         f"got {warmup_epochs}")


def _schedule(schedule: str, lr_init: float, lr_max: float, lr_end: float,
              warmup_epochs: int, total_epochs: int, steps_per_epoch: int) -> np.ndarray:
    """:func:`get_lr`'s array, for arguments already checked."""
    total_steps = total_epochs * steps_per_epoch
    warmup_steps = warmup_epochs * steps_per_epoch
    step = np.arange(total_steps, dtype=np.float64)
    lr = np.empty(total_steps, dtype=np.float64)
    warm = step < warmup_steps
    lr[warm] = lr_init + (lr_max - lr_init) * step[warm] / max(warmup_steps, 1)
    if warmup_steps < total_steps:
        progress = (step[~warm] - warmup_steps) / (total_steps - warmup_steps)
        lr[~warm] = _DECAYS[schedule](progress, step[~warm], total_steps, lr_max, lr_end)
    return lr.astype(np.float32)


def lr_for_config(config: Any, steps_per_epoch: int) -> np.ndarray:
    """:func:`get_lr` for a :class:`msresnet.config.profile.Config` (its ``lr_*`` fields,
    ``warmup_epochs`` and ``epoch_size``); ``steps_per_epoch`` comes from the dataset
    (``dataset.get_dataset_size()``).

    The config's values are not checked again: a Config checks them all (rates,
    ``lr_init``/``lr_end`` at most ``lr_max``, warmup within the epochs) when it is
    built, and it is frozen. Only ``steps_per_epoch``, which no config holds, is.
    """
    return _schedule(config.lr_schedule, config.lr_init, config.lr_max, config.lr_end,
                     config.warmup_epochs, config.epoch_size,
                     _check_int("steps_per_epoch", steps_per_epoch, 1))


def steps_per_epoch(num_samples: int, batch_size: int, device_num: int = 1) -> int:
    """Steps in one epoch when ``num_samples`` images are split over ``device_num``
    devices and batched with the last partial batch dropped (as in training).

    MindSpore's distributed sampler gives every shard ``ceil(num_samples /
    device_num)`` images. For CIFAR-10 (50,000 images) and batch 32 this is 1562 on
    one device and 195 on eight, the figure in the models repo's README.
    """
    num_samples = _check_int("num_samples", num_samples, 1)
    batch_size = _check_int("batch_size", batch_size, 1)
    device_num = _check_int("device_num", device_num, 1)
    return math.ceil(num_samples / device_num) // batch_size


def scaled_lr_max(lr_max: float, device_num: int,
                  reference_devices: int = REFERENCE_DEVICES) -> float:
    """``lr_max`` scaled linearly with the number of devices (the linear scaling rule).

    The models repo's recipe (``config/resnet50_cifar10_config.yaml``: batch 32 per
    device, ``lr_max: 0.1``) was tuned on 8 devices, a global batch of 256. Its
    ``train.py`` (``init_lr``, at commit 27da157 of mindspore-ai/models) rescales the
    peak rate for the devices actually used, for every run, one device included::

        config.lr_max = config.lr_max / 8 * config.device_num

    so 8 devices keep 0.1 and a single device (``device_num: 1``, the yaml default)
    trains at 0.0125. This is Goyal et al.'s rule (lr proportional to the global
    batch). An older ``train.py`` (commit 145444c) had no such line and trained a
    single device at 0.1.

    This is the arithmetic; a profile states its own reference count
    (``lr_devices``) and :func:`msresnet.config.run.for_devices` applies the rule to a
    run's config once, where the run learns its device count.
    """
    lr_max = _check_rate("lr_max", lr_max)
    device_num = _check_int("device_num", device_num, 1)
    reference_devices = _check_int("reference_devices", reference_devices, 1)
    return lr_max / reference_devices * device_num
