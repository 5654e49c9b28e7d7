"""The data a run reads, resolved once: its folder, held-out split and image identity.

A run's data folder used to be resolved by several rules (the working directory
for the command line, the repository root for the chapters, the variable's
precedence written twice, ``abspath`` in one record and ``realpath`` in another),
and one training start validated the folder four times and drew its held-out
split three times. Here is the one rule and the one value:

* :func:`choose_data_dir`: which folder. A folder given for this run (the command
  line's ``--data_dir``, a chapter's ``-p data_dir`` parameter) wins, as given
  (relative to the working directory); else ``$MSRESNET_DATA_DIR`` when set (how the
  test command runs the chapters on a second copy of CIFAR-10); else the profile's
  ``data_dir``. The last two, when relative, are relative to the repository root,
  like the profiles that name them.
* :func:`open_data_source`: a frozen :class:`DataSource` made once per run from the
  run's Config: the folder as an absolute path with links resolved
  (:func:`resolve_data_dir`, also what two recorded folders are compared by), validated once, the held-out split computed once, and the
  identity of the images validation and the final test score. The pipelines are
  built from it (:mod:`msresnet.training.factories`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from msresnet.data.cifar10 import (FOLDER_NAME, REQUIRED_FILES, DatasetError, dataset_folder,
                                   validate)
from msresnet.data.identity import evaluation_images
from msresnet.data.splits import hold_out
from msresnet.paths import REPO_ROOT

if TYPE_CHECKING:  # a type only: the config layer comes after data (it reads data.cifar10)
    from msresnet.config.profile import Config

DATA_DIR_VARIABLE = "MSRESNET_DATA_DIR"
"""The default data folder when set, instead of the profile's (see :func:`choose_data_dir`):
how the test command runs every chapter on a second, differing copy of CIFAR-10."""


def choose_data_dir(configured: str, given: bool,
                    environ: Mapping[str, str] | None = None) -> str:
    """The run's data folder by the book's one precedence rule, as a path from the
    working directory.

    ``configured`` is the Config's ``data_dir``; ``given``: it was given for this run
    (command line, notebook parameter), so it wins and is taken as given. Otherwise
    ``$MSRESNET_DATA_DIR`` (from ``environ``, default the process environment) when
    set and not empty, else ``configured`` (the profile's); either, when relative, is
    relative to the repository root, and is returned relative to the working
    directory (``../data`` from ``notebooks/``, ``data`` from the root).
    """
    if given:
        return configured
    env = os.environ if environ is None else environ
    chosen = env.get(DATA_DIR_VARIABLE) or configured
    return chosen if os.path.isabs(chosen) else os.path.relpath(REPO_ROOT / chosen)


def resolve_data_dir(data_dir: str | os.PathLike[str]) -> Path:
    """``data_dir`` as an absolute path with every link resolved: how a run records
    its data folder, so the same folder is always written the same way."""
    return Path(os.path.realpath(data_dir))


def same_data_dir(one: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """True when the two paths name the same data folder: after resolving
    (:func:`resolve_data_dir`), the parent or ``cifar-10-batches-bin`` itself, relative
    or absolute, with or without a trailing slash."""
    return resolve_data_dir(dataset_folder(one)) == resolve_data_dir(dataset_folder(other))


def check_folder(folder: Path) -> dict[str, int]:
    """Validate a ``cifar-10-batches-bin`` folder (:func:`msresnet.data.cifar10.validate`),
    failing early with a message that names the folder or file, instead of deep inside
    MindSpore's C++ reader; return the record count of each ``.bin``.

    Where to get the data is said only when files are missing; a wrong file is named
    with its folder, since downloading again would not fix a reader's own files."""
    try:
        return validate(folder)
    except DatasetError as err:
        if all((folder / name).is_file() for name in REQUIRED_FILES):
            raise DatasetError(f"{err} (in {folder})") from err
        raise DatasetError(f"{err} (the data folder must hold the extracted {FOLDER_NAME};"
                           " the command `msresnet prepare` makes it)") from err


def _frozen(indices: np.ndarray) -> np.ndarray:
    indices.setflags(write=False)
    return indices


@dataclass(frozen=True, eq=False)
class DataSource:
    """The CIFAR-10 a run reads: made once by :func:`open_data_source`, never changed.

    ``train_indices``/``valid_indices`` are the held-out split
    (:func:`msresnet.data.splits.hold_out`), read-only; both None when
    ``valid_split`` is 0 (training reads every training image, validation the test
    set). :attr:`evaluated_on` and :attr:`tested_on` say which images validation and
    the final test score (:func:`msresnet.data.identity.evaluation_images`): the first
    ``eval_samples`` of the held-out images (of the test set when none are held out)
    and of the test set.
    """

    data_dir: Path              # the folder the run named, resolved (what config.yaml records)
    folder: Path                # the validated cifar-10-batches-bin folder in it
    valid_split: int
    seed: int
    eval_samples: int | None    # images scored per evaluation (None: all)
    train_indices: np.ndarray | None = field(repr=False)
    valid_indices: np.ndarray | None = field(repr=False)
    identities: Mapping[str, Mapping[str, object]] = field(repr=False)

    @property
    def evaluated_on(self) -> dict[str, object]:
        """Which images validation scores (a fresh dict, for a record)."""
        return dict(self.identities["valid" if self.valid_split else "test"])

    @property
    def tested_on(self) -> dict[str, object]:
        """Which test images the final test scores (a fresh dict, for a record)."""
        return dict(self.identities["test"])

    def with_eval_samples(self, eval_samples: int | None) -> DataSource:
        """The same data scored on another number of images (e.g. a sweep's):
        identities recomputed, the folder neither validated nor split again."""
        if eval_samples == self.eval_samples:
            return self
        return dataclasses.replace(self, eval_samples=eval_samples,
                                   identities=_identities(self.folder, eval_samples,
                                                          self.valid_indices, self.seed))


def _identities(folder: Path, eval_samples: int | None, valid_indices: np.ndarray | None,
                seed: int) -> Mapping[str, Mapping[str, object]]:
    found = {"test": MappingProxyType(evaluation_images(folder, eval_samples))}
    if valid_indices is not None:
        found["valid"] = MappingProxyType(
            evaluation_images(folder, eval_samples, valid=valid_indices, seed=seed))
    return MappingProxyType(found)


def open_data_source(config: Config, *, validated: bool = False) -> DataSource:
    """The run's :class:`DataSource` from ``config.data_dir`` (relative: to the working
    directory; chosen by :func:`choose_data_dir` where the Config was made), its
    ``valid_split``, ``seed`` and ``eval_samples``. Raises
    :class:`~msresnet.data.cifar10.DatasetError` naming the folder or file when the
    data is missing or wrong. ``validated``: the caller has just validated this very
    folder (the doctor's data check, a job's preparation), so it is not read again."""
    data_dir = resolve_data_dir(config.data_dir)
    folder = resolve_data_dir(dataset_folder(data_dir))
    if not validated:
        check_folder(folder)
    train = valid = None
    if config.valid_split:
        train, valid = (_frozen(part) for part in hold_out(folder, config.valid_split,
                                                             config.seed))
    return DataSource(data_dir=data_dir, folder=folder, valid_split=config.valid_split,
                      seed=config.seed, eval_samples=config.eval_samples,
                      train_indices=train, valid_indices=valid,
                      identities=_identities(folder, config.eval_samples, valid, config.seed))
