"""Every ``msresnet COMMAND`` ends a user error with one clear line (issue 14, section 2).

Each entry is run as the reader runs it, in a subprocess, with a realistic wrong
input: a truncated archive, data cut on a record boundary, other class names, a bad
config value, a run folder that does not exist, an object-store endpoint on a closed
loopback port. The exit code is 2 (every verb ends bad input alike), the last line of
stderr names the wrong thing, and stderr holds no traceback; ``--debug`` brings the
traceback back. Every input fails before anything is trained or compiled (train and sweep import
MindSpore first, 2-4 s each); the job's connection attempts with retries take
longer than 5 s, so that test is marked slow.
"""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from msresnet.data import cifar10
from msresnet import cli, command_line
from msresnet.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "msresnet"


def run_entry(module: str, *args: str, cwd: Path, extra_env: dict[str, str] | None = None,
              timeout: float = 300, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != command_line.DEBUG_VARIABLE}
    env.update({"PYTHONPATH": str(REPO_ROOT), **(extra_env or {})})
    return subprocess.run([sys.executable, "-m", "msresnet", module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, input=stdin)


def last_line(result: subprocess.CompletedProcess[str], *words: str,
              status: int = command_line.USAGE_ERROR) -> str:
    """Assert a one-line failure naming ``words``, with exit status 2 (bad input, as
    ``msresnet.cli`` ends it) unless ``status`` says otherwise; return that line."""
    assert result.returncode != 0, result.stdout[-2000:]
    assert result.returncode == status, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert lines, f"nothing on stderr; stdout: {result.stdout[-2000:]}"
    for word in words:
        assert word in lines[-1], lines[-1]
    return lines[-1]


def write_dataset(folder: Path, records: int, classes: tuple[str, ...] = cifar10.CLASSES) -> Path:
    """A cifar-10-batches-bin in the right layout with ``records`` records per file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / cifar10.META_FILE).write_text("\n".join(classes) + "\n")
    record = bytes([3]) + bytes(cifar10.RECORD_BYTES - 1)
    for name in (*cifar10.TRAIN_FILES, *cifar10.TEST_FILES):
        (folder / name).write_bytes(record * records)
    return folder


def write_truncated_archive(path: Path) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in cifar10.REQUIRED_FILES:
            data = os.urandom(2 * cifar10.RECORD_BYTES)  # random: does not compress away
            info = tarfile.TarInfo(f"{cifar10.FOLDER_NAME}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    path.write_bytes(data[: len(data) // 2])
    return path


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------- the wiring

def test_every_command_names_a_module_with_main() -> None:
    """Each verb of ``msresnet --help`` imports (lazily) a module that has ``main(argv)``."""
    for verb, (module, line) in cli.COMMANDS.items():
        path = PACKAGE.parent / (module.replace(".", "/") + ".py")
        assert re.search(r"^def main\(argv", path.read_text(), re.M), (verb, path)
        assert line and len(f"  {verb:<18}  {line}") <= 80, verb


def test_every_module_with_main_is_a_command() -> None:
    """No tool is left out of ``msresnet --help``, and no module runs as ``python -m`` itself."""
    with_main = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
                 for p in PACKAGE.rglob("*.py") if re.search(r"^def main\(", p.read_text(), re.M)}
    assert with_main - {"msresnet.cli"} == {module for module, _ in cli.COMMANDS.values()}
    run_as_files = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                          if p.name != "__main__.py" and re.search(
                              r"^if __(name__ == .__main__.|package__ in)", p.read_text(), re.M))
    # The one file that runs by its path: ModelArts starts a job's boot file by path.
    assert run_as_files == ["jobs/job.py"], run_as_files


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"^  {re.escape(verb)} +\S", out, re.M) for verb in cli.COMMANDS)
    assert cli.main([]) == command_line.USAGE_ERROR


def test_an_unknown_command_is_one_line_with_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["trian", "smoke"]) == command_line.USAGE_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["msresnet: error: unknown command 'trian' (did you mean 'train'?);"
                   " 'msresnet --help' lists them"]


def test_the_console_script_and_python_m_are_the_same(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "msresnet"
    for command in ([str(script)], [sys.executable, "-m", "msresnet"]):
        result = subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0 and "lr-range" in result.stdout, result.stderr


# ------------------------------------------------------------------------- each entry

def test_prepare_truncated_archive(tmp_path: Path) -> None:
    archive = write_truncated_archive(tmp_path / "cifar-10-binary.tar.gz")
    result = run_entry("prepare", "--source", str(archive), "--root", str(tmp_path / "data"),
                       "--quiet", cwd=tmp_path)
    line = last_line(result, "cifar-10-binary.tar.gz: not a readable .tar.gz archive")
    assert line.startswith("msresnet prepare: error: ") and result.returncode == 2
    assert not (tmp_path / "data").exists()  # no lock, partial folder or empty root left


def test_prepare_cut_on_a_record_boundary(tmp_path: Path) -> None:
    source = write_dataset(tmp_path / "mine" / cifar10.FOLDER_NAME, records=9)
    result = run_entry("prepare", "--source", str(source), "--root", str(tmp_path / "data"),
                       "--quiet", cwd=tmp_path)
    last_line(result, "data_batch_1.bin: 9 records", "needs exactly 10000 per file")
    assert not (tmp_path / "data").exists()


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    archive = write_truncated_archive(tmp_path / "cifar-10-binary.tar.gz")
    args = ("--source", str(archive), "--root", str(tmp_path / "data"), "--quiet")
    for how in ({"args": ("--debug",)}, {"extra_env": {command_line.DEBUG_VARIABLE: "1"}}):
        result = run_entry("prepare", *args, *how.get("args", ()), cwd=tmp_path,
                           extra_env=how.get("extra_env"))
        assert result.returncode != 0
        assert "Traceback (most recent call last)" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith(
            "msresnet.data.cifar10.DatasetError: cifar-10-binary.tar.gz: not a readable")


def test_train_other_class_names(tmp_path: Path) -> None:
    names = list(cifar10.CLASSES)
    names[3] = "kitten"
    write_dataset(tmp_path / "mine" / cifar10.FOLDER_NAME, records=10, classes=tuple(names))
    result = run_entry("train", "smoke", "--data_dir", str(tmp_path / "mine"),
                       "--output", str(tmp_path / "run"), cwd=tmp_path)
    last_line(result, "msresnet train: error: batches.meta.txt: class 3 is 'kitten',"
                      " expected 'cat'", str(tmp_path / "mine"))


def test_train_bad_config_value(tmp_path: Path) -> None:
    result = run_entry("train", "smoke", "--batch_size", "0", "--output", str(tmp_path / "run"),
                       cwd=tmp_path)
    last_line(result, "batch_size: must be a positive integer, got 0")


def test_sweep_run_folder_that_does_not_exist(tmp_path: Path) -> None:
    result = run_entry("sweep", str(tmp_path / "runs" / "nope"), cwd=tmp_path)
    last_line(result, "msresnet sweep: error: ", str(tmp_path / "runs" / "nope"))


@pytest.mark.slow
def test_job_unreachable_object_store(tmp_path: Path) -> None:
    port = closed_port()
    result = run_entry("job", "--data_url", "s3://bucket/cifar10/",
                       "--train_url", "s3://bucket/runs/x/", "--cache_dir", str(tmp_path / "cache"),
                       cwd=tmp_path, extra_env={"S3_ENDPOINT": f"http://127.0.0.1:{port}",
                                                "AWS_ACCESS_KEY_ID": "placeholder",
                                                "AWS_SECRET_ACCESS_KEY": "placeholder",
                                                "S3_CONNECT_TIMEOUT": "2"})
    # the store named by S3_ENDPOINT did not answer: one line naming it and what to
    # check, exit 2 as for any store the job was pointed at wrongly (3 is for a bug)
    last_line(result, "msresnet job: error: cannot reach ", f"127.0.0.1:{port}",
              "s3://bucket/cifar10/", "S3_ENDPOINT")


def test_launch_bad_config_value(tmp_path: Path) -> None:
    result = run_entry("launch", "--workers", "2", "--profile", "smoke", "--output",
                       str(tmp_path / "dp"), "--dry-run", "--batch_size", "0", cwd=tmp_path)
    last_line(result, "batch_size: must be a positive integer, got 0")
    assert not (tmp_path / "dp").exists()


def test_reproduce_notebook_folder_that_does_not_exist(tmp_path: Path) -> None:
    result = run_entry("reproduce", "--profile", "smoke", "--out", str(tmp_path / "out"),
                       "--notebooks", str(tmp_path / "nowhere"), cwd=tmp_path)
    last_line(result, str(tmp_path / "nowhere"))


def test_bench_bad_mode(tmp_path: Path) -> None:
    result = run_entry("bench", "--modes", "eager", cwd=tmp_path)
    last_line(result, "--modes", "'eager'")


def test_results_page_run_folder_that_does_not_exist(tmp_path: Path) -> None:
    result = run_entry("results-page", str(tmp_path / "nope"), "--dest", str(tmp_path / "res"),
                       "--page", str(tmp_path / "results.md"), cwd=tmp_path)
    last_line(result, str(tmp_path / "nope"))
    assert not (tmp_path / "results.md").exists()


def test_sync_source_that_does_not_exist(tmp_path: Path) -> None:
    result = run_entry("sync", str(tmp_path / "nope"), str(tmp_path / "dst"), "--world", "1",
                       "--job", "t", cwd=tmp_path)
    last_line(result, "msresnet sync: error: ", str(tmp_path / "nope"))
    assert re.search(r'"error": "\w+"', result.stdout)  # the JSON line the ranks parse stays


def test_lab_port_out_of_range(tmp_path: Path) -> None:
    result = run_entry("lab", "--port", "70000", cwd=tmp_path)
    last_line(result, "--port: 70000 is not a TCP port")


def test_export_checkpoint_without_its_run_config(tmp_path: Path) -> None:
    (tmp_path / "best.ckpt").write_bytes(b"not a checkpoint")
    last_line(run_entry("export", "best.ckpt", "--out", "out", cwd=tmp_path),
              "best.ckpt: no config.yaml beside it")


def test_predict_model_that_does_not_exist(tmp_path: Path) -> None:
    last_line(run_entry("predict", "gone.onnx", "cat.png", cwd=tmp_path),
              "cat.png: no such image file")


def test_convert_mindrecord_data_folder_that_does_not_exist(tmp_path: Path) -> None:
    last_line(run_entry("convert-mindrecord", str(tmp_path / "nope"), "--out", "mr", cwd=tmp_path),
              "no dataset folder at", "nope")


def test_convert_mindrecord_keeps_a_file_it_did_not_write(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_dataset(tmp_path / cifar10.FOLDER_NAME, records=10_000)
    (tmp_path / "mr").mkdir()
    (tmp_path / "mr" / "cifar10_test.mindrecord").write_bytes(b"mine")
    line = last_line(run_entry("convert-mindrecord", str(data), "--out", "mr", "--usage", "test",
                               cwd=tmp_path), "cifar10_test.mindrecord", "--overwrite")
    assert "no conversion record" in line
    assert (tmp_path / "mr" / "cifar10_test.mindrecord").read_bytes() == b"mine"


def test_pipeline_bench_bad_repeat(tmp_path: Path) -> None:
    last_line(run_entry("pipeline-bench", "--repeat", "0", cwd=tmp_path), "--repeat", "0")



def test_lr_range_bad_range(tmp_path: Path) -> None:
    last_line(run_entry("lr-range", "smoke", "--lr-min", "1", "--lr-max", "0.5", cwd=tmp_path),
              "lr_min=1.0", "lr_max=0.5")


def test_doctor_unknown_profile(tmp_path: Path) -> None:
    last_line(run_entry("doctor", "--profile", "nosuch", cwd=tmp_path),
              "msresnet doctor: error: ", "unknown profile 'nosuch'")


def test_ablation_unknown_row_and_missing_records(tmp_path: Path) -> None:
    last_line(run_entry("ablation", "run", "nesterof", "--runs", str(tmp_path / "runs"),
                        "--records", str(tmp_path / "records"), cwd=tmp_path),
              "msresnet ablation: error: unknown row 'nesterof'")
    assert not (tmp_path / "runs").exists()
    last_line(run_entry("ablation", "table", "--records", str(tmp_path / "nope"), cwd=tmp_path),
              f"--records {tmp_path / 'nope'}: no such folder")


def test_local_s3_credentials_line_that_is_not_json(tmp_path: Path) -> None:
    line = last_line(run_entry("local-s3", cwd=tmp_path, stdin="key=AKIA secret=s3cr3t\n"),
                     "msresnet local-s3: error: standard input: expected one JSON line")
    assert "s3cr3t" not in line
