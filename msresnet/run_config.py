"""A run's Config, built in one place: the profile, the overrides, the data folder.

Every tool that starts or checks a run (``msresnet train``, ``launch``, ``job``,
``doctor``, ``lr-range``, the chapters' parameters, ``msresnet reproduce``) builds its
Config with :func:`build_run_config`, so the data folder is chosen by one rule
(:func:`msresnet.data.source.choose_data_dir`: a folder given for this run, else
``$MSRESNET_DATA_DIR``, else the profile's) and is absolute, links resolved, from
here on: a value that meant "relative to the repository" in the profile and
"relative to the working folder" after the rule never travels further as text that
could be read the other way. The device-count rule for the learning rate
(:func:`msresnet.config.for_devices`) is applied here when the caller knows the
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

from msresnet.config import Config, for_devices, load_config
from msresnet.data.source import choose_data_dir, resolve_data_dir

CONFIG_FILE = "config.yaml"
"""The Config a run trained with, in its output folder."""


def build_run_config(profile_or_path: str | os.PathLike[str] | Config = "smoke",
                     overrides: Mapping[str, Any] | None = None, *,
                     devices: int | None = None,
                     environ: Mapping[str, str] | None = None) -> Config:
    """The Config of a run: ``profile_or_path`` (a profile name, a YAML file, or a
    Config already loaded) with ``overrides`` (each checked by
    :func:`~msresnet.config.load_config`), its ``data_dir`` chosen by the one rule (a
    ``data_dir`` override counts as given for this run) and made absolute, and, with
    ``devices``, its ``lr_max`` scaled to that many devices."""
    overrides = overrides if overrides is not None else {}  # keeps an Overrides' source
    if isinstance(profile_or_path, Config):
        config = dataclasses.replace(profile_or_path, **dict(overrides)) if overrides else \
            profile_or_path
    else:
        config = load_config(profile_or_path, overrides)
    chosen = choose_data_dir(config.data_dir, "data_dir" in overrides, environ)
    absolute = str(resolve_data_dir(chosen))
    if absolute != config.data_dir:
        config = dataclasses.replace(config, data_dir=absolute)
    return for_devices(config, devices) if devices is not None else config


def recorded_config(run_dir: str | os.PathLike[str]) -> Config | None:
    """The configuration a run recorded in its ``config.yaml``, or None when it has none."""
    path = Path(run_dir) / CONFIG_FILE
    return load_config(path) if path.is_file() else None
