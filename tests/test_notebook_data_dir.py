"""The data folder's one rule: a folder given for the run, else ``$MSRESNET_DATA_DIR``,
else the profile's; the chapters, the command line and ``reproduce`` all follow it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from msresnet.chapters.notebook import config_from_parameters
from msresnet.data.source import DATA_DIR_VARIABLE
from msresnet.paths import REPO_ROOT


@pytest.fixture
def in_notebooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    monkeypatch.delenv(DATA_DIR_VARIABLE, raising=False)


def test_without_the_variable_the_profile_folder_is_used(in_notebooks: None) -> None:
    # absolute from here on (issue 37): the profile's folder, relative to the repository
    assert config_from_parameters({"profile": "smoke"}).data_dir == str(REPO_ROOT / "data")


def test_the_variable_replaces_the_profile_folder(in_notebooks: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_VARIABLE, "data-variant")
    assert config_from_parameters({"profile": "smoke"}).data_dir == \
        str(REPO_ROOT / "data-variant")
    monkeypatch.setenv(DATA_DIR_VARIABLE, "/somewhere/else")
    assert config_from_parameters({"profile": "smoke"}).data_dir == "/somewhere/else"


def test_an_explicit_parameter_wins_over_the_variable(in_notebooks: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_VARIABLE, "data-variant")
    config = config_from_parameters({"profile": "smoke", "data_dir": "mine"})
    assert config.data_dir == str(REPO_ROOT / "notebooks" / "mine")  # as given: from here


# ----------------------------------------------------------------- one rule, every entry point

def test_the_rule_given_then_the_variable_then_the_profile(tmp_path, monkeypatch):
    from msresnet.data.source import choose_data_dir

    monkeypatch.chdir(tmp_path)  # the profile's and the variable's paths: from the repository
    assert choose_data_dir("data", given=False, environ={}) == os.path.relpath(REPO_ROOT / "data")
    assert choose_data_dir("data", given=False, environ={DATA_DIR_VARIABLE: ""}) == \
        os.path.relpath(REPO_ROOT / "data")  # set but empty: not set
    assert choose_data_dir("data", given=False, environ={DATA_DIR_VARIABLE: "data-variant"}) == \
        os.path.relpath(REPO_ROOT / "data-variant")
    assert choose_data_dir("data", False, {DATA_DIR_VARIABLE: "/abs/x"}) == "/abs/x"
    # given for this run: as given (relative to the working directory), whatever is set
    assert choose_data_dir("mine", given=True, environ={DATA_DIR_VARIABLE: "/abs/x"}) == "mine"


@pytest.mark.parametrize("variable", [None, "data-variant", "/somewhere/else"])
@pytest.mark.parametrize("given", [None, "mine"])
def test_command_line_chapters_and_reproduce_choose_the_same_folder(variable, given, tmp_path,
                                                                     monkeypatch):
    """``msresnet train``, a chapter's parameters, ``msresnet reproduce``'s record and
    ``msresnet launch``'s config name the same folder, from the repository root and from
    notebooks/ alike."""
    from msresnet.data.source import resolve_data_dir
    from msresnet.jobs.launch import job_config
    from msresnet.config.run import build_run_config

    if variable is None:
        monkeypatch.delenv(DATA_DIR_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(DATA_DIR_VARIABLE, variable)
    mine = str(tmp_path / "mine") if given else None  # given folders: absolute, so any cwd
    overrides = {"data_dir": mine} if mine else {}
    expected = Path(mine) if mine else REPO_ROOT / (variable or "data")
    seen = set()
    for folder in (REPO_ROOT, REPO_ROOT / "notebooks"):
        monkeypatch.chdir(folder)
        seen.add(resolve_data_dir(build_run_config("smoke", overrides).data_dir))
        seen.add(resolve_data_dir(config_from_parameters({"profile": "smoke", **overrides})
                                  .data_dir))
        seen.add(resolve_data_dir(job_config("smoke", overrides, None).data_dir))
    assert seen == {resolve_data_dir(expected)}


def test_one_folder_spelled_many_ways_is_one_folder(tmp_path, monkeypatch):
    """Issue 38: a data folder compared without resolving it (a mutant of
    same_data_dir) survived the quick tests; a resume and a sweep compare recorded and
    current folders written differently (relative, trailing slash, through a link)."""
    from msresnet.data.source import same_data_dir
    from msresnet.config.run import build_run_config
    from msresnet.training.resume import config_differences

    monkeypatch.chdir(REPO_ROOT)
    link = tmp_path / "link-to-data"
    link.symlink_to(REPO_ROOT / "data")
    spellings = ["data", "data/", "./data", str(REPO_ROOT / "data"), str(link)]
    for one in spellings:
        for other in spellings:
            assert same_data_dir(one, other), (one, other)
    assert not same_data_dir("data", "data-variant")
    recorded = build_run_config("smoke", {"data_dir": "data/"})
    for spelled in spellings:
        current = build_run_config("smoke", {"data_dir": spelled})
        assert "data_dir" not in config_differences(recorded, current), spelled
    other = build_run_config("smoke", {"data_dir": str(tmp_path)})
    assert "data_dir" in config_differences(recorded, other)


def test_a_data_link_inside_the_checkout_is_recorded_and_printed_as_data(tmp_path, monkeypatch):
    """A reader who links ``data`` to a shared copy of CIFAR-10 (as the test checkout of
    chapter 2 does) keeps ``data`` in the run's ``config.yaml`` and in the chapters'
    printed paths: the link is made absolute, not resolved, so a moved checkout's
    runs still find it and stored outputs do not name the shared copy."""
    from msresnet.chapters import helpers
    from msresnet import paths
    from msresnet.config import run as run_config

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "data").symlink_to(REPO_ROOT / "data")
    monkeypatch.setattr(run_config, "REPO_ROOT", checkout)
    monkeypatch.setattr(paths, "REPO_ROOT", checkout)  # in_repo: what records write
    monkeypatch.setattr(helpers, "REPO_ROOT", checkout)
    config = run_config.build_run_config("smoke", {"data_dir": str(checkout / "data")})
    assert config.data_dir == str(checkout / "data")
    assert "data_dir: data\n" in run_config.recording(config)
    assert helpers.rel(config.data_dir) == "data"
    assert helpers.rel(REPO_ROOT / "data") == str((REPO_ROOT / "data").resolve())
