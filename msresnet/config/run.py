"""A run's Config, built in one place: the profile, the overrides, the data folder.

Every tool that starts or checks a run (``msresnet train``, ``launch``, ``job``,
``doctor``, ``lr-range``, the chapters' parameters, ``msresnet reproduce``) builds its
Config with :func:`build_run_config`, so the data folder is chosen by one rule
(:func:`msresnet.data.source.choose_data_dir`: a folder given for this run, else
``$MSRESNET_DATA_DIR``, else the profile's) and is absolute from here on (links
kept, so a ``data`` link inside the checkout is still recorded as ``data``): a value that meant "relative to the repository" in the profile and
"relative to the working folder" after the rule never travels further as text that
could be read the other way. The device-count rule for the learning rate
(:func:`msresnet.config.run.for_devices`) is applied here when the caller knows the
number of devices; training applies it for its own group size when it starts.

A run folder records the Config it trained with as :data:`CONFIG_FILE`
(:func:`recorded_config` reads it back): what a sweep, an export or a resume rebuilds
the network and the data from.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msresnet.config.profile import FIELDS, Config, load_config
from msresnet.data.source import choose_data_dir, same_data_dir
from msresnet.model.lr_schedule import scaled_lr_max
from msresnet.paths import REPO_ROOT, in_repo

CONFIG_FILE = "config.yaml"
"""The Config a run trained with, in its output folder."""


def build_run_config(profile_or_path: str | os.PathLike[str] = "smoke",
                     overrides: Mapping[str, Any] | None = None, *,
                     devices: int | None = None,
                     environ: Mapping[str, str] | None = None) -> Config:
    """The Config of a run: ``profile_or_path`` (a profile name or a YAML file) with
    ``overrides``, its ``data_dir`` chosen by the one rule (a ``data_dir`` override
    counts as given for this run) and made absolute, all checked once by
    :func:`~msresnet.config.profile.load_config`; with ``devices``, its ``lr_max`` scaled to
    that many devices."""
    def rule(data_dir: Any, given: bool) -> Any:
        if not isinstance(data_dir, str) or not data_dir.strip():
            return data_dir  # the check names the bad value
        return os.path.abspath(choose_data_dir(data_dir, given, environ))

    config = load_config(profile_or_path, overrides, data_dir_rule=rule)  # checked once
    return for_devices(config, devices) if devices is not None else config


def with_data_dir(config: Config, given: str | os.PathLike[str] | None) -> Config:
    """``config`` reading its data from ``given``, a folder given for this use of a
    recorded run (``msresnet sweep --data_dir``, ``export --data_dir``), absolute from
    here on like every run's; ``config`` itself when ``given`` is None or names the
    same folder (:func:`~msresnet.data.source.same_data_dir`)."""
    if given is None or same_data_dir(given, config.data_dir):
        return config
    return dataclasses.replace(config, data_dir=os.path.abspath(given))


def recording(config: Config) -> str:
    """``config.yaml``'s text for a run of ``config``: its data folder relative to the
    repository root when it lies inside it (as the profiles write it), absolute
    otherwise, so a checkout copied or moved elsewhere still finds its runs' data."""
    return dataclasses.replace(config, data_dir=in_repo(config.data_dir)).to_yaml()


def _from_repository(data_dir: Any, given: bool) -> Any:
    """A recorded data folder, absolute: a relative one is relative to the repository."""
    if isinstance(data_dir, str) and data_dir.strip() and not os.path.isabs(data_dir):
        return str(REPO_ROOT / data_dir)
    return data_dir


def recorded_config(run_dir: str | os.PathLike[str]) -> Config | None:
    """The configuration a run recorded in its ``config.yaml`` (its data folder
    absolute, :func:`recording`), or None when it has none."""
    path = Path(run_dir) / CONFIG_FILE
    return load_config(path, data_dir_rule=_from_repository) if path.is_file() else None


def for_devices(config: Config, devices: int) -> Config:
    """The config a run on ``devices`` devices trains with: the device-count rule.

    A profile states the device count its ``lr_max`` is tuned for, ``lr_devices``
    (the gpu and ascend recipes: 8, as the models repo's yaml; cpu and smoke: 1).
    A run on N devices (1 for one process, the worker count under msrun) trains at
    ``lr_max * N / lr_devices``, as the repo's ``train.py`` does for every run
    (``config.lr_max = config.lr_max / 8 * config.device_num``), so one GPU or
    Ascend card gets the recipe's 0.1 / 8 = 0.0125 without anyone typing it.

    The result has the scaled ``lr_max`` and ``lr_devices = N`` (checked once in
    its turn: ``lr_init`` and ``lr_end`` must not exceed the scaled rate). It is
    what a run trains with and records in ``config.yaml``; the rule applied to it
    again for the same N changes nothing, so a resumed run compares equal.
    :func:`lr_rule` says the same in one line. The training applies it once, where
    it learns its device count (:func:`msresnet.training.train.train_and_evaluate`).
    """
    if devices == config.lr_devices:
        return config
    rate = scaled_lr_max(config.lr_max, devices, config.lr_devices)
    sources = dict.fromkeys(FIELDS, f"profile {config.profile}")
    sources["lr_max"] = sources["lr_devices"] = (
        f"lr_max {config.lr_max:g} x {devices}/{config.lr_devices}: the device-count rule")
    return dataclasses.replace(config, lr_max=rate, lr_devices=devices, sources=sources)


def lr_rule(config: Config, devices: int) -> str:
    """One line: the ``lr_max`` a run of ``config`` on ``devices`` devices uses and
    why (:func:`for_devices`), e.g. ``lr_max 0.0125 for 1 device = 0.1 x 1/8 (gpu:
    lr_devices 8)``."""
    rate, tuned = for_devices(config, devices).lr_max, config.lr_devices
    where = f"{devices} device{'s' if devices != 1 else ''}"
    if devices == tuned:
        return f"lr_max {rate:g} for {where}: {config.profile}'s own (lr_devices {tuned})"
    return (f"lr_max {rate:g} for {where} = {config.lr_max:g} x {devices}/{tuned} "
            f"({config.profile}: lr_devices {tuned})")
