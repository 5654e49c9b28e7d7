"""msresnet.command_line: one line for an error, the traceback with --debug."""

from __future__ import annotations

import pytest

from msresnet import command_line
from msresnet.config.profile import ConfigError


def failing(error: BaseException):
    def main(argv):
        raise error
    return main


def test_a_book_error_is_one_line_naming_the_program(capsys, monkeypatch) -> None:
    monkeypatch.delenv(command_line.DEBUG_VARIABLE, raising=False)
    code = command_line.run(failing(ConfigError("batch_size: must be a positive integer, got 0")), [],
                   prog="msresnet train")
    err = capsys.readouterr().err
    assert code == command_line.USAGE_ERROR
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("msresnet train: error: batch_size: must be a positive")
    assert "--debug" in err


def test_an_os_error_names_the_path(capsys, monkeypatch) -> None:
    monkeypatch.delenv(command_line.DEBUG_VARIABLE, raising=False)
    code = command_line.run(failing(FileNotFoundError(2, "No such file or directory", "runs/x")), [],
                   prog="p")
    assert code == command_line.USAGE_ERROR and "runs/x" in capsys.readouterr().err


def test_an_unexpected_error_keeps_its_type_and_another_code(capsys, monkeypatch) -> None:
    monkeypatch.delenv(command_line.DEBUG_VARIABLE, raising=False)
    code = command_line.run(failing(KeyError("epoch")), [], prog="p")
    assert code == command_line.UNEXPECTED_ERROR
    assert capsys.readouterr().err.startswith("p: error: KeyError: 'epoch'")


def test_debug_flag_or_variable_reraises_and_the_flag_is_removed(monkeypatch) -> None:
    seen = []

    def main(argv):
        seen.append(list(argv))
        raise ConfigError("boom")

    monkeypatch.delenv(command_line.DEBUG_VARIABLE, raising=False)
    with pytest.raises(ConfigError):
        command_line.run(main, ["a", "--debug", "b"], prog="p")
    assert seen == [["a", "b"]]
    monkeypatch.setenv(command_line.DEBUG_VARIABLE, "1")
    with pytest.raises(ConfigError):
        command_line.run(main, [], prog="p")


def test_exit_codes_pass_through() -> None:
    assert command_line.run(lambda argv: 0, [], prog="p") == 0
    assert command_line.run(lambda argv: None, [], prog="p") == 0
    assert command_line.run(lambda argv: 4, [], prog="p") == 4
    with pytest.raises(SystemExit):
        command_line.run(lambda argv: (_ for _ in ()).throw(SystemExit(2)), [], prog="p")
