"""The run's data, resolved once: msresnet.data.source.DataSource on the prepared data."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from msresnet.config.profile import load_config
from msresnet.data import cifar10, identity, source, splits
from msresnet.data.source import (DataSource, check_folder, open_data_source, resolve_data_dir,
                                  same_data_dir)
from msresnet.paths import REPO_ROOT
from prerequisites import needs_data

DATA = REPO_ROOT / "data"
FOLDER = DATA / cifar10.FOLDER_NAME
pytestmark = needs_data  # skipped without the prepared data; CI=true: failed


def smoke(**overrides: object):
    return load_config("smoke", {"data_dir": str(DATA), **overrides})


def counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple]:
    """Record every call of ``source.<name>`` (how the source reaches it)."""
    calls: list[tuple] = []
    original = getattr(source, name)

    def counting(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(source, name, counting)
    return calls


def test_the_source_holds_the_folder_the_split_and_what_is_scored():
    config = smoke(eval_samples=64)
    data = open_data_source(config)
    assert data.data_dir == DATA and data.folder == FOLDER
    train, valid = splits.hold_out(FOLDER, config.valid_split, config.seed)
    assert np.array_equal(data.train_indices, train) and np.array_equal(data.valid_indices, valid)
    # the identities are what evaluation_images says for the same images
    assert data.evaluated_on == identity.evaluation_images(FOLDER, 64, valid_split=512,
                                                          seed=config.seed)
    assert data.tested_on == identity.evaluation_images(FOLDER, 64)
    assert data.evaluated_on["split"] == "valid" and data.tested_on["split"] == "test"


def test_the_source_is_frozen():
    data = open_data_source(smoke())
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.seed = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        data.valid_indices[0] = 1  # type: ignore[index]
    record = data.evaluated_on
    record["images"] = -1  # a caller's copy: the source keeps its own
    assert data.evaluated_on["images"] == 512


def test_without_a_held_out_split_validation_scores_the_test_set():
    data = open_data_source(smoke(valid_split=0, eval_samples=32))
    assert data.train_indices is None and data.valid_indices is None
    assert data.evaluated_on == data.tested_on == identity.evaluation_images(FOLDER, 32)


def test_opening_validates_once_and_splits_once(monkeypatch):
    validated, split = counted(monkeypatch, "validate"), counted(monkeypatch, "hold_out")
    data = open_data_source(smoke())
    assert len(validated) == 1 and len(split) == 1
    fewer = data.with_eval_samples(16)  # a sweep's count: identities only
    assert len(validated) == 1 and len(split) == 1
    assert fewer.evaluated_on == open_data_source(smoke(eval_samples=16)).evaluated_on
    assert fewer.evaluated_on["images"] == 16 and fewer.tested_on["images"] == 16
    assert fewer.valid_indices is data.valid_indices


def test_the_folder_is_recorded_resolved(tmp_path, monkeypatch):
    link = tmp_path / "linked"
    link.symlink_to(DATA)
    monkeypatch.chdir(tmp_path)
    data = open_data_source(smoke(data_dir="linked"))  # relative: to the working directory
    assert data.data_dir == DATA and data.folder == FOLDER
    assert resolve_data_dir("linked") == DATA
    assert same_data_dir("linked", DATA) and not same_data_dir("linked", tmp_path)


def test_a_missing_folder_is_named_with_what_to_do(tmp_path):
    with pytest.raises(cifar10.DatasetError, match=r"no dataset folder at .*nothing.*"
                                                   r"`msresnet prepare` makes it"):
        open_data_source(smoke(data_dir=str(tmp_path / "nothing")))
    with pytest.raises(cifar10.DatasetError, match="msresnet prepare"):
        check_folder(tmp_path)


def test_the_source_is_made_by_one_function():
    """Only open_data_source builds a DataSource in the package."""
    import ast

    makers = []
    for path in (REPO_ROOT / "msresnet").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "DataSource":
                makers.append(path.name)
    assert makers == ["source.py"]
    assert DataSource.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_with_data_dir_keeps_the_runs_own_folder_and_makes_another_absolute(tmp_path, monkeypatch):
    """Issue 43: sweep and export take a data folder given for a recorded run through one
    rule (config.run.with_data_dir), absolute like every run's."""
    from msresnet.config.profile import load_config
    from msresnet.config.run import with_data_dir

    data, copy = tmp_path / "data", tmp_path / "copy"
    for folder in (data, copy):
        (folder / "cifar-10-batches-bin").mkdir(parents=True)
    config = load_config("smoke", {"data_dir": str(data)})
    monkeypatch.chdir(tmp_path)
    for same in (None, "data", "data/cifar-10-batches-bin/", str(data)):
        assert with_data_dir(config, same) is config, same
    assert with_data_dir(config, "copy").data_dir == str(copy)
