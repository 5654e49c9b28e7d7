"""Every ``msresnet`` verb alike (issue 37): ``--help`` exits 0, options are declared
with the config keys' spelling (underscores) and accepted with hyphens, and each
verb's ``main`` is a thin adapter over a library function of the package."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from msresnet import cli, command_line

PACKAGE = Path(cli.__file__).resolve().parent
MAIN_LINES = 30
"""The longest a verb's ``main`` may be: parse, call the library, print."""


def _module_file(module: str) -> Path:
    return PACKAGE.parent / (module.replace(".", "/") + ".py")


@pytest.mark.parametrize("verb", sorted(cli.COMMANDS))
def test_help_exits_0_and_names_the_verb(verb, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main([verb, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: msresnet {verb}")


def test_one_spelling_is_declared_and_both_are_read():
    parser = command_line.ArgumentParser(prog="msresnet demo")
    parser.add_argument("--batch_size", type=int)
    parser.add_argument("--output_dir")
    parser.add_argument("--no_promote", action="store_true")
    for argv in (["--batch_size", "8", "--output_dir", "o", "--no_promote"],
                 ["--batch-size=8", "--output-dir", "o", "--no-promote"],
                 ["--batch", "8", "--out", "o", "--no_promote"]):
        args = parser.parse_args(argv)
        assert (args.batch_size, args.output_dir, args.no_promote) == (8, "o", True), argv
    with pytest.raises(ValueError, match="declare --dry-run as --dry_run"):
        parser.add_argument("--dry-run", action="store_true")
    with pytest.raises(SystemExit):  # no abbreviations
        parser.parse_args(["--batch_si", "8"])


def test_no_parser_outside_the_one_spelling():
    """Every verb builds its parser with msresnet.command_line.ArgumentParser."""
    plain = [path.relative_to(PACKAGE.parent).as_posix() for path in PACKAGE.rglob("*.py")
             if "argparse.ArgumentParser(" in path.read_text() and path.name != "command_line.py"]
    assert plain == []


@pytest.mark.parametrize("verb", sorted(cli.COMMANDS))
def test_main_is_a_thin_adapter_over_a_library_function(verb):
    """``main`` parses, calls the package's own function for the verb and prints:
    short, and it calls at least one public function defined in the package."""
    module = cli.COMMANDS[verb][0]
    tree = ast.parse(_module_file(module).read_text())
    (main,) = [node for node in tree.body if isinstance(node, ast.FunctionDef)
               and node.name == "main"]
    assert main.end_lineno - main.lineno + 1 <= MAIN_LINES, f"{module}.main is too long"
    loaded = importlib.import_module(module)
    called = {node.func.id for node in ast.walk(main)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    library = {name for name in called if not name.startswith("_") and name != "main"
               and "pars" not in name and inspect.isfunction(getattr(loaded, name, None))
               and getattr(loaded, name).__module__.startswith("msresnet")}
    assert library, f"{module}.main calls no public function of the package: {sorted(called)}"


BAD_VALUES = {
    "prepare": ["--md5", "xyz"],
    "train": ["smoke", "--batch_size", "0"],
    "sweep": ["runs/x", "--eval_samples", "many"],
    "export": ["x.ckpt", "--output_dir", "x", "--batch_size", "0"],
    "predict": ["m.onnx", "a.png", "--top", "0"],
    "doctor": ["--profile", "cpu", "--steps", "0"],
    "launch": ["--workers", "0"],
    "job": ["--data_url", "d", "--train_url", "t", "--threads", "-1"],
    "sync": ["a", "b", "--world", "0"],
    "reproduce": ["--profile", "cpux", "--output_dir", "x"],
    "results-page": [],
    "lab": ["--port", "eighty"],
    "convert-mindrecord": ["data"],
    "bench": ["--isa", "BOGUS"],
    "pipeline-bench": ["--repeat", "0"],
    "ablation": ["run", "no-such-row"],
    "lr-range": ["--steps", "0"],
    "local-s3": ["--port", "1"],
}
"""One wrong command line per verb (issue 38: some exited 0 or 3 on bad input)."""


def test_every_verb_is_walked_with_a_bad_value():
    assert set(BAD_VALUES) == set(cli.COMMANDS)


@pytest.mark.parametrize("verb", sorted(BAD_VALUES))
def test_a_bad_value_is_one_line_and_exit_2_before_any_work(verb, capsys, tmp_path,
                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written: the folder stays empty
    try:
        code = cli.main([verb, *BAD_VALUES[verb]])
    except SystemExit as exited:  # argparse's own usage errors
        code = exited.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err and err[-1].startswith(f"msresnet {verb}: error: "), err
    assert list(tmp_path.iterdir()) == []


PROFILE_VERBS = {"train", "export", "predict", "doctor", "launch", "job", "reproduce", "lr-range"}
"""The verbs that take a profile (issue 43: train, job, export and predict said
``--config``, lr-range took a positional word only)."""


@pytest.mark.parametrize("verb", sorted(cli.COMMANDS))
def test_a_profile_is_named_with_profile_in_every_verb(verb, capsys):
    """One spelling in every verb's help: ``--profile``; none offers ``--config``,
    which the verbs still read as ``--profile`` (the older spelling)."""
    with pytest.raises(SystemExit):
        cli.main([verb, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--config" not in shown, shown
    assert ("--profile" in shown) == (verb in PROFILE_VERBS), shown


def test_the_older_spelling_config_reads_as_profile():
    parser = command_line.ArgumentParser(prog="msresnet demo")
    parser.add_argument("--profile", default=None)
    assert parser.parse_args(["--config", "gpu"]).profile == "gpu"
    assert parser.parse_args(["--config=cpu"]).profile == "cpu"
    with pytest.raises(SystemExit, match="two profiles given: 'cpu' and --profile 'gpu'"):
        command_line.one_profile("cpu", "gpu")
    assert command_line.one_profile("cpu", None) == "cpu"
    assert command_line.one_profile(None, None, default="cpu") == "cpu"
    assert command_line.one_profile(None, "", default="cpu") == ""  # refused later, by name
    assert command_line.first_word(["cpu", "--epoch_size", "3"]) == (
        "cpu", ["--epoch_size", "3"])
    assert command_line.first_word(["--epoch_size", "3"]) == (None, ["--epoch_size", "3"])
