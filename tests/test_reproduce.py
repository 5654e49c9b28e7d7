"""msresnet reproduce: parameter checks, --resume, failures, metrics.

Fast: bad parameters stop the command before anything runs, the real chapter run
here is chapter 2 (no MindSpore operator, seconds), and the other runs use tiny
notebooks written into a temporary folder (``--notebooks``). Every chapter runs in
the test command under strict nbval, which records their metrics for
tests/test_chapter_metrics.py.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from msresnet.chapters import reproduce
from msresnet.chapters.notebook import METRICS_DIR_VARIABLE
from msresnet.paths import REPO_ROOT


def run_cli(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != METRICS_DIR_VARIABLE}
    return subprocess.run([sys.executable, "-m", "msresnet", "reproduce", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def write_chapter(folder: Path, name: str, body: str, extras: dict[str, object] | None = None,
                  fields: tuple[str, ...] = ("epoch_size",)) -> Path:
    """A minimal chapter following the book's pattern, ending with ``body``."""
    extras = extras or {}
    params = ['profile = "smoke"  # config profile']
    params += [f"{name_} = None  # a config key (None: the profile's)" for name_ in fields]
    params += [f"{k} = {v!r}  # this notebook's own" for k, v in extras.items()]
    cells = [
        new_code_cell("import msresnet\nfrom msresnet.chapters.notebook import ParameterGuard, record_metrics\n"
                      "guard = ParameterGuard(globals())"),
        new_code_cell("\n".join(params), metadata={"tags": ["parameters"]}),
        new_code_cell(f"config = guard.config(globals(), extras={set(extras) or set()!r})"),
        new_code_cell(body),
    ]
    path = folder / f"{name}.ipynb"
    nbformat.write(new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}), path)
    return path


# ----------------------------------------------------------------- before anything runs
@pytest.mark.parametrize("pair, words", [
    (("batch_size", "0"), ["batch_size", "must be a positive integer, got 0"]),
    (("epoch_sise", "3"), ["-p epoch_sise", "did you mean 'epoch_size'?"]),
    (("lr_schedule", "exponential"), ["lr_schedule", "'exponential'"]),
    (("plot_epoch", "3"), ["-p plot_epoch", "did you mean 'plot_epochs'?"]),
])
def test_a_bad_parameter_stops_the_command_before_anything_runs(tmp_path, pair, words):
    out = tmp_path / "run"
    result = run_cli("--profile", "smoke", "-p", *pair, "--out", str(out))
    assert result.returncode != 0
    assert result.returncode == 2  # bad input, as every msresnet verb ends it
    assert result.stderr.startswith("msresnet reproduce: error: ")
    for word in words:
        assert word in result.stderr
    assert not out.exists()


def test_profile_must_not_be_given_as_a_parameter(tmp_path):
    result = run_cli("--profile", "smoke", "-p", "profile", "cpu", "--out", str(tmp_path / "run"))
    assert result.returncode != 0 and "--profile" in result.stderr


def test_only_must_name_existing_chapters(tmp_path):
    result = run_cli("--profile", "smoke", "--only", "2,42", "--out", str(tmp_path / "run"))
    assert result.returncode != 0 and "no chapter 42" in result.stderr


@pytest.mark.parametrize("argv, line", [
    (["--only", "2", "--notebooks", "{tmp}/nonexistent"],
     "--notebooks: no such folder {tmp}/nonexistent"),
    (["--only", "2", "--notebooks", "{tmp}"],
     "--notebooks: no chapter notebooks (NN_name.ipynb) in {tmp}"),
    (["--only", ""], "--only: '' is not a chapter number"),
])
def test_an_empty_selection_or_folder_is_named_before_anything_runs(tmp_path, capsys, argv,
                                                                     line):
    """Issue 45: a folder without chapters gave "--only: no chapter 2; chapters are "
    (the folder never named), and --only '' ran all ten chapters."""
    from msresnet import cli

    argv = [arg.format(tmp=tmp_path) for arg in argv]
    code = cli.main(["reproduce", "--profile", "smoke", "--output_dir", str(tmp_path / "run"),
                     *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"msresnet reproduce: error: {line.format(tmp=tmp_path)}"), err
    assert list(tmp_path.iterdir()) == []


def test_parameters_are_checked_against_the_selected_chapters_only(tmp_path):
    # plot_epochs belongs to chapter 2; with chapter 3 alone it is unknown.
    result = run_cli("--profile", "smoke", "--only", "3", "-p", "plot_epochs", "5",
                     "--out", str(tmp_path / "run"))
    assert result.returncode != 0 and "-p plot_epochs: unknown parameter" in result.stderr


def test_relative_paths_are_made_absolute_and_null_travels_as_text():
    params = reproduce.typed_parameters([("data_dir", "data"), ("data_url", "https://x.org/a.tgz"),
                                         ("train_samples", "none")], set())
    assert params["data_dir"] == os.path.abspath("data")
    assert params["data_url"] == "https://x.org/a.tgz"
    assert params["train_samples"] is None
    assert reproduce.papermill_values(params)["train_samples"] == "null"


# ----------------------------------------------------------------- a real chapter, --resume
@pytest.mark.slow
def test_chapter_2_runs_records_metrics_and_resume_skips_it(tmp_path):
    out = tmp_path / "run"
    # momentum is a config key chapter 2's parameters cell does not list: it reaches the
    # chapter's guard, without papermill's "unknown parameter" warning.
    first = run_cli("--profile", "smoke", "--only", "2", "-p", "epoch_size", "3",
                    "-p", "momentum", "0.8", "--out", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    assert "unknown parameter" not in first.stderr + first.stdout
    run = json.loads((out / "run.json").read_text())
    (entry,) = run["notebooks"]
    assert entry["name"] == "02_config_lr" and entry["status"] == "ok" and entry["seconds"] > 0
    assert run["parameters"]["epoch_size"] == 3 and run["profile"] == "smoke"
    assert run["parameters"]["momentum"] == 0.8
    assert entry["metrics"]["total_steps"] == 3 * entry["metrics"]["steps_per_epoch"]
    assert (out / "02_config_lr.ipynb").exists() and (out / "report.md").exists()
    assert json.loads((out / "metrics" / "02_config_lr.json").read_text()) == entry["metrics"]
    assert "skipped" not in first.stdout
    # the copy of CIFAR-10 the chapters read, from its folder's marker (not the config's URL)
    from msresnet.data.prepare import provenance
    from msresnet.paths import DATA_ROOT
    # ... named relative to the checkout, as every folder inside it in the record
    assert run["dataset"] == {**json.loads(json.dumps(provenance(DATA_ROOT))),
                              "folder": "data/cifar-10-batches-bin"}
    assert run["parameters"]["data_dir"] == "data"
    assert str(REPO_ROOT) not in (out / "run.json").read_text()

    second = run_cli("--profile", "smoke", "--only", "2", "-p", "epoch_size", "3",
                     "-p", "momentum", "0.8", "--resume", "--out", str(out))
    assert second.returncode == 0, second.stderr[-3000:]
    assert "02_config_lr.ipynb: done before with the same parameters, skipped" in second.stdout
    (again,) = json.loads((out / "run.json").read_text())["notebooks"]
    assert again["skipped"] is True and again["metrics"] == entry["metrics"]


# ----------------------------------------------------------------- tiny notebooks
@pytest.mark.slow
def test_a_failing_cell_is_reported_with_notebook_and_cell(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    write_chapter(book, "01_fine", 'record_metrics("01_fine", {"epochs": config.epoch_size});')
    write_chapter(book, "02_broken", 'value = 1\nraise RuntimeError("the cell broke")')
    write_chapter(book, "03_never", 'record_metrics("03_never", {"x": 1});')
    out = tmp_path / "run"

    result = run_cli("--profile", "smoke", "--notebooks", str(book), "-p", "epoch_size", "5",
                     "--out", str(out))
    assert result.returncode != 0
    assert "02_broken.ipynb failed in cell" in result.stderr
    assert "starting 'value = 1'" in result.stderr
    assert "RuntimeError: the cell broke" in result.stderr
    run = json.loads((out / "run.json").read_text())
    assert [(e["name"], e["status"]) for e in run["notebooks"]] == [("01_fine", "ok"),
                                                                    ("02_broken", "failed")]
    assert run["notebooks"][0]["metrics"] == {"epochs": 5}
    assert (out / "02_broken.ipynb").exists()  # the failed notebook is kept for reading
    assert not (out / "03_never.ipynb").exists()


@pytest.mark.slow
def test_parameters_reach_the_kernel_as_the_notebook_expects(tmp_path, monkeypatch):
    book = tmp_path / "book"
    book.mkdir()
    write_chapter(book, "01_echo",
                  'record_metrics("01_echo", {"profile": config.profile,\n'
                  '    "train_samples": config.train_samples, "epoch_size": config.epoch_size,\n'
                  '    "data_dir": config.data_dir, "output_dir": config.output_dir,\n'
                  '    "steps": steps});',
                  extras={"steps": 1},
                  fields=("epoch_size", "train_samples", "data_dir", "output_dir"))
    write_chapter(book, "02_quiet", 'record_metrics("02_quiet", {"output_dir": config.output_dir});')
    monkeypatch.chdir(tmp_path)
    run = reproduce.reproduce("cpu", Path("run"), [("train_samples", "null"), ("steps", "7"),
                                                   ("data_dir", "mydata")],
                              notebook_dir=book)
    metrics = run["notebooks"][0]["metrics"]
    assert metrics == {"profile": "cpu", "train_samples": None, "steps": 7,
                       "epoch_size": run["parameters"]["epoch_size"],
                       "data_dir": str(tmp_path / "mydata"),
                       "output_dir": str(tmp_path / "run" / "train")}
    # the shared output folder goes only to chapters that declare output_dir
    profile_output = (book / run["notebooks"][1]["metrics"]["output_dir"]).resolve()
    assert profile_output == REPO_ROOT / "runs" / "cpu"  # the profile's, from the chapter's folder
    assert "output_dir" not in run["notebooks"][1]["parameters"]
    assert METRICS_DIR_VARIABLE not in os.environ  # restored after the run
    # typed locations for readers on other machines: --out as given, training inside it
    assert (run["out"], run["train_dir"]) == ("run", "train")
    assert (tmp_path / run["out"] / run["train_dir"]).as_posix() == metrics["output_dir"]


def test_the_recorded_command_is_quoted_for_the_shell():
    argv = ["--profile", "cpu", "-p", "data_url", "/data/my copy.tgz", "--out", "runs/a b"]
    command = reproduce.command_line(argv)
    assert command == ("msresnet reproduce --profile cpu -p data_url "
                       "'/data/my copy.tgz' --out 'runs/a b'")
    assert shlex.split(command)[2:] == argv


def test_stale_metrics_are_not_reported(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    write_chapter(book, "01_quiet", "x = 1")
    out = tmp_path / "run"
    (out / "metrics").mkdir(parents=True)
    (out / "metrics" / "01_quiet.json").write_text('{"old": 1}')
    run = reproduce.reproduce("smoke", out, notebook_dir=book)
    assert run["notebooks"][0]["metrics"] == {}


@pytest.mark.slow
def test_a_training_folder_given_as_a_parameter_is_the_one_recorded(tmp_path, monkeypatch):
    """``-p output_dir`` points chapters 5 and 8 at another run (the results page's
    chapter-5 figures were drawn so): ``run.json`` names that folder, relative to the
    repository inside it and to ``--output_dir`` as ``train_dir``, not the default
    OUT/train the chapters never read, and records no machine path for it."""
    book = tmp_path / "book"
    book.mkdir()
    write_chapter(book, "05_echo", 'record_metrics("05_echo", {"output_dir": config.output_dir});',
                  fields=("output_dir",))
    monkeypatch.chdir(tmp_path)
    elsewhere = REPO_ROOT / "runs" / "elsewhere-for-a-test"
    run = reproduce.reproduce("cpu", Path("run"), [("output_dir", str(elsewhere))],
                              notebook_dir=book)
    assert run["notebooks"][0]["metrics"]["output_dir"] == str(elsewhere)
    assert run["parameters"]["output_dir"] == "runs/elsewhere-for-a-test"
    assert run["user_parameters"] == {"output_dir": "runs/elsewhere-for-a-test"}
    assert run["notebooks"][0]["parameters"]["output_dir"] == "runs/elsewhere-for-a-test"
    assert (tmp_path / run["out"] / run["train_dir"]).resolve() == elsewhere
