"""``msresnet doctor``: every check runs for real on the CPU profile; a GPU or Ascend
profile on a machine without that device fails with one line, and the checks that
need the device are skipped rather than failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from msresnet import cli
from msresnet.commands import doctor as doctor_command
from msresnet.config.profile import load_config
from msresnet.doctor import checks, command, hardware, software, speed

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
from prerequisites import needs_data  # noqa: E402  (skipped without the data; CI=true: failed)


def _installed_status() -> str:
    """The ``mindspore`` check's status here: ``ok`` under the pinned MindSpore, ``warn``
    under another supported one (``make compat-test MINDSPORE=2.7.0`` runs these tests)."""
    import mindspore

    return checks.OK if mindspore.__version__ == software.pinned_mindspore() else checks.WARN


def _no_drivers(monkeypatch, tmp_path):
    """No accelerator driver, whatever this machine has (the test means the absence)."""
    monkeypatch.setattr(hardware, "DRIVER_SIGNS", {
        "GPU": ("no-such-tool-nvidia-smi", tmp_path / "no-proc-nvidia"),
        "Ascend": ("no-such-tool-npu-smi", tmp_path / "no-davinci")})


def _lines(text: str, status: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(status)]


@needs_data
@pytest.mark.parametrize("profile, driver", [("gpu", "NVIDIA"), ("ascend", "Ascend")])
def test_accelerator_profile_without_the_device_fails_with_one_line(
        profile, driver, monkeypatch, tmp_path, capsys):
    out_json = tmp_path / "doctor.json"
    code = doctor_command.main(["--profile", profile, "--data_dir", str(DATA), "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 1
    failed = _lines(out, "FAIL")
    assert failed == [f"FAIL  device: no {driver} driver here; {hardware.NO_DEVICE_FIX}"], out
    record = json.loads(out_json.read_text())
    status = {c["name"]: c["status"] for c in record["checks"]}
    assert status == {"mindspore": _installed_status(), "device": "FAIL", "toolkit": "skip",
                      "msrun": "skip", "data": "ok", "speed": "skip"}
    assert record["ok"] is False and record["failed"] == ["device"]
    assert record["profile"] == profile and record["config"]["device_target"] in ("GPU", "Ascend")


def test_a_present_driver_is_not_reported_missing(monkeypatch, tmp_path):
    sign = tmp_path / "proc-nvidia-version"
    sign.write_text("NVRM version: 535.00\n")
    monkeypatch.setattr(hardware, "DRIVER_SIGNS", {"GPU": ("no-such-tool", sign)})
    assert hardware.missing_device("GPU") is None
    assert hardware.missing_device("CPU") is None
    sign.unlink()
    assert hardware.missing_device("GPU") == hardware.NO_DEVICE["GPU"]


@pytest.mark.parametrize("target, why", [
    ("GPU", ""),  # no CUDA driver library: MindSpore does not even try its GPU plugin
    ("Ascend", " (Load dynamic library: libmindspore_ascend.so.2 failed."),
])
def test_a_driver_without_mindspores_back_end_fails_saying_what_to_set(
        target, why, monkeypatch, tmp_path):
    # this CPU machine with a driver's sign: MindSpore's back end for it still cannot load
    sign = tmp_path / "driver"
    sign.touch()
    monkeypatch.setattr(hardware, "DRIVER_SIGNS", {target: ("no-such-tool", sign)})
    _, ms = software.check_mindspore()
    check = hardware.check_device(load_config(target.lower()), ms)
    assert check.status == checks.FAIL and check.fix == hardware.BACKEND_FIX[target]
    assert check.summary.startswith(f"MindSpore's {target} back end did not load{why}")


def test_the_device_check_passes_in_a_process_whose_runtime_already_ran():
    """MindSpore refuses set_device once an operator has run; the doctor called from a
    notebook (or after another test) on the same device must still pass, not report
    that refusal as a missing device."""
    _, ms = software.check_mindspore()
    assert float((ms.Tensor([1.0]) + ms.Tensor([2.0])).asnumpy()[0]) == 3.0  # runtime up
    check = hardware.check_device(load_config("cpu"), ms)
    assert check.status == checks.OK, check.summary


def test_missing_data_fails_with_the_prepare_command_and_skips_the_timing(tmp_path, capsys):
    empty = tmp_path / "nothing-here"
    code = doctor_command.main(["--profile", "cpu", "--data_dir", str(empty), "--steps", "2",
                        "--batch_size", "8", "--json", str(tmp_path / "d.json")])
    out = capsys.readouterr().out
    assert code == 1
    assert _lines(out, "FAIL") == [
        f"FAIL  data: no dataset folder at {empty / 'cifar-10-batches-bin'}; "
        f"run: msresnet prepare --root {empty}"], out
    record = json.loads((tmp_path / "d.json").read_text())
    status = {c["name"]: c["status"] for c in record["checks"]}
    # everything but the data ran for real on this CPU
    assert status == {"mindspore": _installed_status(), "device": "ok", "toolkit": "ok",
                      "msrun": "ok", "data": "FAIL", "speed": "skip"}
    device = next(c for c in record["checks"] if c["name"] == "device")
    assert "installed on platform [CPU] successfully" in device["details"]["run_check"]


def test_the_build_check_reads_the_installed_wheel():
    check, ms = software.check_mindspore()
    assert check.status == _installed_status() and ms is not None
    assert check.details["version"] == ms.__version__
    assert "CPU" in check.details["backends"]
    # the GPU kernels the wheel ships: lib/plugin/libmindspore_gpu.so.<cuda>
    plugin = Path(ms.__file__).parent / "lib" / "plugin"
    assert check.details["cuda_builds"] == sorted(
        p.name.rsplit(".so.", 1)[1] for p in plugin.glob("libmindspore_gpu.so.*"))
    from mindspore.run_check._check_version import AscendEnvChecker
    assert check.details["cann_accepted"] == list(AscendEnvChecker(None).version)


def test_pinned_version_is_read_from_requirements(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy==1.26.4\nmindspore==2.10.0\nmindspore-lite==2.10.0\n")
    assert software.pinned_mindspore(requirements) == "2.10.0"
    assert software.pinned_mindspore(tmp_path / "absent.txt") is None


@pytest.mark.parametrize("value, library, expected", [
    (11060, "cuda", "11.6"), (11010, "cuda", "11.1"), (12020, "cuda", "12.2"),
    (8500, "cudnn", "8.5"), (8906, "cudnn", "8.9"), (90100, "cudnn", "9.1"),
])
def test_nvidia_version_numbers(value, library, expected):
    assert software.version_number(value, library) == expected


@pytest.mark.parametrize("cuda, builds, expected", [
    ("11.6", ["11.1", "11.6"], "11.6"), ("11.8", ["11.1", "11.6"], "11.6"),
    ("11.4", ["11.1", "11.6"], "11.1"), ("11.8", ["11.6"], "11.6"), ("11.1", ["11.6"], None),
    ("12.2", ["11.1", "11.6"], None), ("10.1", ["11.1", "11.6"], None), (None, ["11.6"], None),
])
def test_a_cuda_runtime_runs_the_newest_build_of_its_major_at_or_below_it(cuda, builds,
                                                                           expected):
    assert software.runnable_build(cuda, builds) == expected


CUDA_FAIL = ("MindSpore's GPU kernels (built for CUDA 11.1, 11.6) need a CUDA 11.x runtime at "
             "or above 11.1")


@pytest.mark.parametrize("found, status, summary, note", [
    ({"cuda": "11.6", "cudnn": "8.5"}, "ok", "CUDA 11.6, cuDNN 8.5 (recommended with CUDA 11.6: "
                                             "cuDNN 8.5)", None),
    # what the H200 had (results/gpu): a newer 11.x runs the 11.6 kernels, with a note
    ({"cuda": "11.8", "cudnn": "8.9"}, "ok", "CUDA 11.8, cuDNN 8.9 (recommended with CUDA 11.6: "
                                             "cuDNN 8.5)",
     "CUDA 11.8 runs MindSpore's CUDA 11.6 kernels (minor-version compatibility)"),
    ({"cuda": "12.2", "cudnn": "8.9"}, "FAIL", f"CUDA 12.2 found; {CUDA_FAIL}", None),
    ({"cuda": "10.1", "cudnn": "7.6"}, "FAIL", f"CUDA 10.1 found; {CUDA_FAIL}", None),
    ({"cuda": None, "cudnn": None}, "FAIL", f"no CUDA runtime (libcudart) found; {CUDA_FAIL}",
     None),
    ({"cuda": "11.1", "cudnn": "9.1"}, "FAIL", "cuDNN 9.1 found; MindSpore links cuDNN 8 "
                                               "(libcudnn.so.8)", None),
])
def test_cuda_and_cudnn_against_the_wheels_builds(found, status, summary, note, monkeypatch):
    monkeypatch.setattr(software, "cuda_found", lambda: dict(found))
    check = software.check_cuda(["11.1", "11.6"])
    assert (check.status, check.summary) == (status, summary)
    assert check.notes == ([note] if note else [])
    if status == "FAIL":
        assert check.fix.startswith("install CUDA 11.6 with cuDNN 8.5")


def test_nccl_is_looked_for_beside_the_gpu_plugin_mindspore_loaded(tmp_path, monkeypatch):
    """The wheel's NCCL lives in plugin/gpu<build>/ of the plugin that was loaded: with
    CUDA 11.8 found, that is gpu11.6/, not gpu11.8/ (the false FAIL of issue 35)."""
    plugin = tmp_path / "site" / "mindspore" / "lib" / "plugin"
    maps = tmp_path / "maps"
    maps.write_text(f"7f00-7f01 r--p 00000000 00:2a 1 /usr/lib/libc.so.6\n"
                    f"7f02-7f03 r-xp 00000000 00:2a 2 {plugin}/libmindspore_gpu.so.11.6\n")
    assert hardware.loaded_gpu_plugin(maps) == (plugin, "11.6")
    monkeypatch.setattr(hardware, "PROC_MAPS", maps)
    name, library = hardware.collective_library("GPU", tmp_path / "elsewhere", "11.8")
    assert (name, library) == ("NCCL", plugin / "gpu11.6" / "libnccl.so.2")
    # before MindSpore loaded a plugin: the build the CUDA runtime runs
    monkeypatch.setattr(hardware, "PROC_MAPS", tmp_path / "no-maps")
    assert hardware.loaded_gpu_plugin() is None
    _, library = hardware.collective_library("GPU", tmp_path / "ms", "11.6")
    assert library == tmp_path / "ms" / "lib" / "plugin" / "gpu11.6" / "libnccl.so.2"


@pytest.mark.parametrize("failing, speed", [
    ("toolkit", "ok"), ("msrun", "ok"),  # versions and files: the timed steps still run
    ("device", "skip"), ("data", "skip"), ("mindspore", "skip"),
])
def test_only_what_the_timed_steps_cannot_run_without_skips_them(failing, speed, monkeypatch):
    def check(name):
        return checks.Check(name, checks.FAIL if name == failing else checks.OK, name, "fix",
                            {"train_images": 64} if name == "data" else {})
    monkeypatch.setattr(command, "check_mindspore", lambda: (check("mindspore"), object()))
    monkeypatch.setattr(command, "check_device", lambda config, ms: check("device"))
    monkeypatch.setattr(command, "check_toolkit", lambda *args: check("toolkit"))
    monkeypatch.setattr(command, "check_msrun", lambda *args: check("msrun"))
    monkeypatch.setattr(command, "check_data", lambda config: (check("data"), None))
    monkeypatch.setattr(command, "check_speed", lambda *args: check("speed"))
    found = list(command.diagnose(load_config("gpu"), 2, 8))
    assert [c.name for c in found] == ["mindspore", "device", "toolkit", "msrun", "data",
                                       "speed"]
    assert found[-1].status == speed


O3_RECORD = REPO / "results" / "gpu" / "h200-2026-12-04" / "doctor_gpu_O3.json"


def test_a_kernel_rejected_at_o3_is_mindsporess_own_line_with_the_fix(monkeypatch):
    """The error MindSpore raised on the H200 (kept in the record's traceback) becomes
    one line, its own words, and the fix names O2."""
    record = json.loads(O3_RECORD.read_text())
    traceback_text = record["checks"][-1]["details"]["traceback"]
    message = traceback_text.split("TypeError: ", 1)[1]
    assert message.lstrip().startswith("-----")  # MindSpore's framing, not the message
    line = speed.mindspore_line(message)
    assert line == "Select GPU operator[BatchNorm] fail! Unsupported data type!"
    config = load_config("gpu", {"amp_level": "O3"})
    assert speed.fix_for(line, config).startswith(
        "amp_level O3 casts BatchNorm's scale, bias, mean and variance to float16")
    assert speed.fix_for("something else", config) == speed.GENERIC_FIX

    def rejected(*args):
        raise TypeError(message)
    monkeypatch.setattr(speed, "timed_run", rejected)
    check = speed.check_speed(config, 5, 32, 50_000)
    assert check.line() == (
        "FAIL  speed: training steps failed: TypeError: Select GPU operator[BatchNorm] fail! "
        "Unsupported data type!; amp_level O3 casts BatchNorm's scale, bias, mean and variance "
        "to float16 and MindSpore's GPU BatchNorm takes them in float32 only: use amp_level O2 "
        "(float16 with BatchNorm in float32), e.g. --amp_level O2")
    assert record["checks"][-1]["summary"] + "; " + record["checks"][-1]["fix"] in check.line()


class _Source:
    """A DataSource stand-in: the timed run asks it only for its evaluation images."""

    def with_eval_samples(self, images):
        return self


class _Model:
    """``Model`` for the timed run: training passes, ``eval`` does what ``evaluate`` says."""

    def __init__(self, evaluate):
        self.trained, self.evaluated, self.evaluate = [], [], evaluate

    def train(self, epochs, dataset, callbacks, dataset_sink_mode):
        self.trained.append((epochs, dataset))

    def eval(self, dataset, dataset_sink_mode):
        self.evaluated.append((dataset, dataset_sink_mode))
        return self.evaluate()


def _timed_run_with(monkeypatch, model):
    """timed_run's own code around ``model``: the factories and the clock replaced."""
    from msresnet.training import callbacks, factories

    class Batches:
        def get_dataset_size(self):
            return 5

    class History:
        def __init__(self, *args):
            epoch = {"train_seconds": 1.0, "images_per_second": 160.0, "train_loss": 2.0}
            self.records = [dict(epoch), dict(epoch)]

    monkeypatch.setattr(factories, "set_context", lambda config: None)
    monkeypatch.setattr(factories, "make_datasets", lambda config, source: (Batches(), "eval"))
    monkeypatch.setattr(factories, "make_model", lambda config, steps: (None, None, model, None))
    monkeypatch.setattr(callbacks, "EpochHistory", History)


def test_the_timed_run_validates_as_training_does_and_fails_where_validation_fails(
        monkeypatch):
    """Issue 45 (a mutant no test saw): without the doctor's validation pass, a GPU at O3,
    which trains and then rejects validation, passed the doctor. The real timed_run here
    (its factories replaced) must run validation twice as training runs it (no data sink),
    and a model whose validation raises MindSpore's recorded O3 error fails the check."""
    record = json.loads(O3_RECORD.read_text())
    message = record["checks"][-1]["details"]["traceback"].split("TypeError: ", 1)[1]
    config = load_config("gpu", {"amp_level": "O3"})
    working = _Model(lambda: {"top1": 0.1})
    _timed_run_with(monkeypatch, working)
    timing = speed.timed_run(config, 5, 32, _Source())
    assert working.trained == [(2, working.trained[0][1])]
    assert working.evaluated == [("eval", False), ("eval", False)]
    assert timing["eval_images_per_second"] > 0 and timing["first_eval_seconds"] >= 0

    def rejected():
        raise TypeError(message)
    _timed_run_with(monkeypatch, _Model(rejected))
    check = speed.check_speed(config, 5, 32, 50_000, _Source())
    assert check.status == checks.FAIL
    assert check.line().startswith(f"FAIL  speed: {record['checks'][-1]['summary']}; amp_level O3")


def test_cann_version_is_read_as_mindspore_reads_it(tmp_path):
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "version.info").write_text("Version=8.5.0\nversion_dir=8.5\n")
    assert software.cann_version(tmp_path) == "8.5"
    assert software.cann_version(tmp_path / "missing") is None


def test_cann_outside_the_accepted_versions_fails_naming_both(tmp_path, monkeypatch):
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "version.info").write_text("Version=7.0.0\n")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))
    check = software.check_cann(["8.2", "9.1"])
    assert check.status == checks.FAIL
    assert check.summary == "CANN 7.0; MindSpore accepts 8.2, 9.1" and "set_env.sh" in check.fix
    assert software.check_cann(["7.0"]).status == checks.OK


def test_projection_is_the_profile_epoch_at_the_measured_speed():
    config = load_config("cpu")
    plan = speed.projection(config, images_per_second=100.0, images=45_000)
    assert plan["steps_per_epoch"] == 45_000 // 64 == 703
    assert plan["epoch_seconds"] == round(703 * 64 / 100.0, 1)
    assert plan["run_seconds"] == round(703 * 64 / 100.0 * config.epoch_size, 1)


def test_accelerator_profiles_cite_the_intro_figures():
    gpu = speed.cited_figures(load_config("gpu"))
    ascend = speed.cited_figures(load_config("ascend"))
    assert [(c["ms_per_step"], c["run_minutes"], c["top1"]) for c in gpu] == [(69.0, 20.2, 91.37)]
    assert (18.4, 6.0, 91.44) in [(c.get("ms_per_step"), c["run_minutes"], c["top1"])
                                  for c in ascend]
    intro = (REPO / "book" / "intro.md").read_text()
    for figure in ("69 ms per step, 20.2 min", "18.4 ms per step, 6 min", "91.37 %", "91.44 %",
                   "48 min 38 s", "93.87 %"):
        assert figure in intro


def test_the_cpu_reference_is_read_from_its_records():
    metrics = json.loads((REPO / "results/cpu/metrics/04_train_eval.json").read_text())
    (cited,) = speed.cited_figures(load_config("cpu"))
    assert cited["images_per_second"] == metrics["train_images_per_second"]
    assert cited["run_minutes"] == round(metrics["train_seconds"] / 60, 1)
    assert speed.reference_run(Path("/nonexistent")) == []


def test_bad_command_lines_are_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exited:  # argparse's exit, passed through by command_line.run
        cli.main(["doctor", "--profile", "cpu", "--steps", "0"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "msresnet doctor: error: argument --steps: must be a positive integer, got '0'"
    assert cli.main(["doctor", "--profile", "cpux"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown profile 'cpux'" in err[0] and "'cpu'" in err[0]


DOCTOR_TIMING = ["--steps", "3", "--batch_size", "8"]
"""How the tests time the doctor's training steps: 3 steps at batch 8 instead of 30 at 64."""


def check_timed_cpu_run(stdout: str, record: dict) -> None:
    """What ``msresnet doctor --profile cpu`` with :data:`DOCTOR_TIMING` must report:
    every check passed (MindSpore's maybe a warning, :func:`_installed_status`), the
    timing at that size, and the epoch projected from it at the profile's batch.
    ``tests/test_source_archive.py`` checks the same on the command of the setup page,
    run from the unpacked source archive in ``make test``."""
    statuses = [c["status"] for c in record["checks"]]
    assert record["ok"] and statuses == [_installed_status()] + ["ok"] * 5, statuses
    speed = record["checks"][-1]["details"]
    timing, plan = speed["timing"], speed["projection"]
    assert timing["steps"] == 3 and timing["batch_size"] == 8
    assert timing["images_per_second"] > 0 and timing["seconds"] > 0
    assert plan["train_images"] == 45_000 and plan["steps_per_epoch"] == 703
    assert plan["epoch_seconds"] == pytest.approx(703 * 64 / timing["images_per_second"], abs=0.1)
    assert speed["cited"][0]["source"].startswith("the book's reference CPU run")
    assert "FAIL" not in stdout and "timed at batch 8, not the profile's 64" in stdout


@pytest.mark.slow
@pytest.mark.twin  # make test: the source-archive test runs the same command (browser)
@needs_data
def test_cpu_profile_runs_every_check_and_a_timed_training_run(tmp_path):
    out_json = tmp_path / "doctor.json"
    proc = subprocess.run(
        [sys.executable, "-m", "msresnet", "doctor", "--profile", "cpu", "--data_dir",
         str(DATA), *DOCTOR_TIMING, "--json", str(out_json)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.rstrip().endswith(f"wrote {out_json}")
    check_timed_cpu_run(proc.stdout, json.loads(out_json.read_text()))


@pytest.mark.parametrize("installed, status", [("2.10.0", "ok"), ("2.7.0", "warn"),
                                               ("2.9.1", "warn"), ("2.7.0rc1", "FAIL"),
                                               ("2.6.1", "FAIL"), ("2.11.0", "FAIL")])
def test_a_supported_mindspore_other_than_the_pin_warns_not_fails(installed, status,
                                                                  monkeypatch):
    """Issue 36: a ModelArts image's MindSpore 2.7 failed the doctor; the range the
    package declares (and make compat-test tests at its oldest end) warns instead, as
    pip compares versions (a pre-release of 2.7.0 is below 2.7)."""
    import mindspore

    monkeypatch.setattr(mindspore, "__version__", installed)
    monkeypatch.setattr(software, "pinned_mindspore", lambda: "2.10.0")
    check, _ = software.check_mindspore()
    assert check.status == status, check.line()
    if status == "warn":
        assert check.line().startswith(f"warn  mindspore: {installed}; loaded: ")
        assert check.notes == ["in the package's range (2.7 to below 2.11); the book pins "
                               "2.10.0, with which its chapters were executed (results/compat/)"]
    if status == "FAIL":
        assert check.summary == (f"MindSpore {installed}, outside the package's range "
                                 "(2.7 to below 2.11; the book pins 2.10.0)")
        assert check.fix == "pip install mindspore==2.10.0"


def test_the_supported_range_is_the_one_pyproject_declares():
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (mindspore,) = [d for d in declared if d.startswith("mindspore")]
    low, high = software.SUPPORTED
    assert mindspore.replace(" ", "") == f"mindspore>={low},<{high}"
