"""Notebook parameters with one vocabulary, checked against the config schema.

Every chapter has one cell tagged ``parameters`` (papermill injects the values a
user passes with ``-p`` in a cell right after it). Papermill only *warns* about a
parameter the notebook does not declare, so ``-p epoch_sise 3`` would silently
train with the profile's epochs. The chapters therefore do this::

    guard = ParameterGuard(globals())      # first cell, after the imports
    # ... the parameters cell ...
    config = guard.config(globals(), extras={"show_images"})   # next cell

:meth:`ParameterGuard.config` looks at the names defined since the guard was made:
each must be a :class:`~msresnet.config.profile.Config` field or one of the notebook's own
``extras``, or it raises :class:`ParameterError` naming it. Config fields left at
``None`` keep the profile's value, so ``-p profile cpu`` really runs the ``cpu``
profile; anything else is an override, validated by :func:`load_config`. For
the fields that may be null, a null word as text (``-p train_samples null``; the
config's :data:`~msresnet.config.profile.NULL_WORDS`, as on the command line) asks for null
itself.

Notebooks also record their key figures with :func:`record_metrics`, so that
``msresnet reproduce`` reads numbers, not scraped text.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from msresnet.atomic import write_json
from msresnet.spelling import did_you_mean
from msresnet.config.profile import (FIELDS, Config, ConfigError, Overrides, value_from_text)
from msresnet.config.run import build_run_config
from msresnet.paths import REPO_ROOT

METRICS_DIR_VARIABLE = "MSRESNET_METRICS_DIR"
# Where strict nbval keeps what each executed cell printed, when set (conftest.py;
# read by tests/test_nbval_outputs.py).
NBVAL_OUTPUTS_VARIABLE = "MSRESNET_NBVAL_OUTPUTS"
# DATA_DIR_VARIABLE (msresnet.data.source, imported above) is re-exported for the tools.
PATH_FIELDS = ("data_dir", "output_dir")


class ParameterError(ConfigError):
    """A notebook parameter that no chapter and no config key knows."""


class ParameterGuard:
    """Remembers the names a notebook defined before its parameters cell."""

    def __init__(self, namespace: Mapping[str, Any]) -> None:
        self._before = frozenset(namespace)

    def parameters(self, namespace: Mapping[str, Any],
                   known: Iterable[str] = ()) -> dict[str, Any]:
        """The parameters: the names (and values) defined since the guard, plus the
        ``known`` names (config fields, the notebook's extras) found in ``namespace``.

        The second part matters when a reader runs the notebook again in the same
        kernel: the first cell then makes a new guard while last run's parameters
        still exist, and without it a re-run would silently drop them.
        """
        known = set(known)
        return {name: value for name, value in namespace.items()
                if (name not in self._before or name in known) and not name.startswith("_")
                and not isinstance(value, ParameterGuard)}

    def config(self, namespace: Mapping[str, Any], extras: Iterable[str] = ()) -> Config:
        """Check the parameters and build the run's :class:`Config` from them."""
        extras = set(extras)
        params = self.parameters(namespace, known=set(FIELDS) | extras)
        return config_from_parameters(params, extras)


def config_from_parameters(params: Mapping[str, Any], extras: Iterable[str] = ()) -> Config:
    """Validate parameter names, then load the profile with the non-None overrides.

    A relative ``output_dir`` taken from a profile file is relative to the repository
    root (where the command-line tools run); it is rewritten relative to the current
    folder, which for a notebook is ``notebooks/``. ``data_dir`` follows the book's
    one rule (:func:`msresnet.data.source.choose_data_dir`): the parameter, else
    ``$MSRESNET_DATA_DIR`` (how the test command runs the chapters on a second copy of
    CIFAR-10), else the profile's, the last two seen from the current folder.
    """
    known = set(FIELDS) | set(extras)
    for name in params:
        if name not in known:
            hint = did_you_mean(name, known)
            raise ParameterError(
                f"unknown notebook parameter '{name}'{hint}; parameters are config keys "
                f"or this notebook's own: {', '.join(sorted(extras)) or 'none'}",
                key=name, value=params[name], source="notebook parameters")
    profile = params.get("profile") or "smoke"
    # None means "the profile's value"; a null word (text) asks for null, which the
    # config reads as it reads it from a file or the command line.
    overrides = Overrides({k: value_from_text(k, v) for k, v in params.items()
                           if k in FIELDS and k != "profile" and v is not None},
                          source="notebook parameters")
    config = build_run_config(profile, overrides)
    if "output_dir" in overrides or os.path.isabs(config.output_dir):
        return config
    return dataclasses.replace(config, output_dir=os.path.relpath(REPO_ROOT / config.output_dir))


def record_metrics(chapter: str, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Record a chapter's key figures for ``msresnet.chapters.reproduce``.

    Writes ``<MSRESNET_METRICS_DIR>/<chapter>.json`` when the reproduce command set
    that variable; interactively (or under nbval) it only returns the numbers.
    """
    data = {key: _plain(value) for key, value in metrics.items()}
    folder = os.environ.get(METRICS_DIR_VARIABLE)
    if folder:
        path = Path(folder) / f"{chapter}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, data, sort_keys=True)
    return data


def _plain(value: Any) -> Any:
    """numpy scalars and paths to JSON-friendly values."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value
