"""``$MSRESNET_DATA_DIR``: the chapters' default data folder, never an explicit one."""

from __future__ import annotations

import os

import pytest

from msresnet.book.notebook import DATA_DIR_VARIABLE, config_from_parameters
from msresnet.paths import REPO_ROOT


@pytest.fixture
def in_notebooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    monkeypatch.delenv(DATA_DIR_VARIABLE, raising=False)


def test_without_the_variable_the_profile_folder_is_used(in_notebooks: None) -> None:
    assert config_from_parameters({"profile": "smoke"}).data_dir == os.path.join("..", "data")


def test_the_variable_replaces_the_profile_folder(in_notebooks: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_VARIABLE, "data-variant")
    assert config_from_parameters({"profile": "smoke"}).data_dir == os.path.join("..", "data-variant")
    monkeypatch.setenv(DATA_DIR_VARIABLE, "/somewhere/else")
    assert config_from_parameters({"profile": "smoke"}).data_dir == "/somewhere/else"


def test_an_explicit_parameter_wins_over_the_variable(in_notebooks: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_VARIABLE, "data-variant")
    config = config_from_parameters({"profile": "smoke", "data_dir": "mine"})
    assert config.data_dir == "mine"
