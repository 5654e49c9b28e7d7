"""The CPU benchmark (msresnet.experiments.bench) and its command line
(msresnet.commands.bench): a tiny real run through a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from msresnet.commands import bench as bench_command
from msresnet.experiments import bench


@pytest.mark.slow
def test_cli_writes_json_with_positive_timings(tmp_path):
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [sys.executable, "-m", "msresnet", "bench", "--batch-size", "4", "--image-size", "32",
         "--stem", "imagenet", "--steps", "2", "--warmup", "1", "--modes", "pynative",
         "--isa", "AVX2,default", "--threads", "2", "--jit-level", "O0", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "ONEDNN_MAX_CPU_ISA" in completed.stdout and "images/s" in completed.stdout

    report = json.loads(out.read_text())
    assert set(report) == {"settings", "machine", "results"}
    assert report["settings"]["batch_size"] == 4 and report["settings"]["stem"] == "imagenet"
    assert (report["settings"]["threads"], report["settings"]["jit_level"]) == (2, "O0")
    assert "threads 2, jit level O0" in completed.stdout
    assert report["machine"]["cpu_count"] >= 1
    results = report["results"]
    assert [(r["mode"], r["isa"]) for r in results] == [("pynative", "AVX2"), ("pynative", "default")]
    # the worker really saw the setting: AVX2 set, or the variable removed for "default"
    assert [r["isa_env"] for r in results] == ["AVX2", None]
    for r in results:
        assert r["ms_per_step"] > 0 and r["images_per_s"] > 0 and r["first_step_s"] > 0
        assert len(r["step_times_s"]) == 2
        assert r["images_per_s"] == pytest.approx(4 / (r["ms_per_step"] / 1000))
        assert r["final_loss"] > 0


def test_cli_rejects_unknown_mode():
    completed = subprocess.run([sys.executable, "-m", "msresnet", "bench", "--modes", "eager"],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode != 0
    assert "'eager'" in completed.stderr


def test_worker_refuses_when_mindspore_already_loaded(monkeypatch):
    import mindspore  # noqa: F401  (the point: too late to choose the ISA)

    with pytest.raises(RuntimeError, match="ONEDNN_MAX_CPU_ISA"):
        bench.run_worker(bench.BenchSettings(), "graph", "AVX2")


def test_time_steps_counts_warmup_separately():
    calls = []

    class FakeLoss:
        def asnumpy(self):
            return 2.5

    def step(images, labels):
        calls.append(1)
        return FakeLoss()

    first, timed, loss = bench.time_steps(step, None, None, steps=3, warmup=2)
    assert len(calls) == 5 and len(timed) == 3 and first >= 0 and loss == 2.5
    with pytest.raises(ValueError, match="steps=0"):
        bench.time_steps(step, None, None, steps=0, warmup=0)


def test_format_table_shows_speedup():
    report = {"settings": bench.asdict(bench.BenchSettings(batch_size=8)),
              "machine": {"cpu": "test", "cpu_count": 2, "mindspore": "x",
                          "load_average_before": None, "load_average_after": None},
              "results": [
                  {"mode": "graph", "isa": "AVX2", "isa_env": "AVX2", "ms_per_step": 100.0,
                   "images_per_s": 80.0, "first_step_s": 9.0},
                  {"mode": "graph", "isa": "default", "isa_env": None, "ms_per_step": 1000.0,
                   "images_per_s": 8.0, "first_step_s": 20.0}]}
    table = bench.format_table(report)
    assert "10.0x" in table and "default (unset)" in table


def test_graph_kernel_reaches_the_worker_and_the_table():
    """AKG fusion is a setting of the worker process, like the ISA: the parent passes
    it on, and the report says it was on (timing it needs the `decorator` package,
    which the book does not install; results/budget/levers/ has the measurement)."""
    settings = bench.BenchSettings(graph_kernel=True)
    assert "--graph_kernel" in bench._worker_command(settings, "graph", "AVX2")
    assert "--graph_kernel" not in bench._worker_command(bench.BenchSettings(), "graph", "AVX2")
    args = bench_command.build_parser().parse_args(["--graph-kernel"])
    assert args.graph_kernel is True
    report = {"settings": bench.asdict(settings), "results": [
        {"mode": "graph", "isa": "AVX2", "isa_env": "AVX2", "ms_per_step": 1.0,
         "images_per_s": 32.0, "first_step_s": 1.0}],
        "machine": {"cpu": "test", "cpu_count": 2, "mindspore": "x",
                    "load_average_before": None, "load_average_after": None}}
    assert bench.format_table(report).splitlines()[0].endswith(", AKG graph kernels")


def test_report_rows_flatten_every_recorded_report(tmp_path):
    """One row per result of every report in a folder, named by its file; settings a
    report leaves out (threads, jit level) read as MindSpore's defaults."""
    def report(settings, *speeds):
        return {"settings": {"batch_size": 64, "image_size": 32, **settings},
                "machine": {"cpu": "test CPU"},
                "results": [{"mode": "graph", "isa": isa, "images_per_s": v,
                             "ms_per_step": 64000 / v, "first_step_s": 5.0}
                            for isa, v in speeds]}
    (tmp_path / "isa.json").write_text(json.dumps(report({}, ("AVX2", 80.0), ("default", 10.0))))
    (tmp_path / "jit-O2.json").write_text(json.dumps(report({"jit_level": "O2"}, ("AVX2", 82.0))))
    (tmp_path / "notes.txt").write_text("not a report")
    rows = bench.report_rows(tmp_path)
    assert [(r["file"], r["isa"], r["jit"], r["images/s"]) for r in rows] == [
        ("isa", "AVX2", "default", 80.0), ("isa", "default", "default", 10.0),
        ("jit-O2", "AVX2", "O2", 82.0)]
    assert rows[0]["ms/step"] == 800.0 and rows[0]["threads"] == "default"
    assert {r["cpu"] for r in rows} == {"test CPU"}


@pytest.fixture()
def no_worker(monkeypatch):
    """run_one replaced by a stub that records a worker start: a refusal must come first."""
    started = []

    def run_one(*args, **kwargs):
        started.append(args)
        raise RuntimeError("a worker was started")

    monkeypatch.setattr(bench, "run_one", run_one)
    return started


@pytest.mark.parametrize("argv, line", [
    (["--stem", "resnet"], "stem: must be one of 'imagenet', 'cifar', got 'resnet'"),
    (["--device_target", "TPU"], "device_target: must be one of 'CPU', 'GPU', 'Ascend', "
                                 "got 'TPU'"),
    (["--image_size", "7"], "image_size: must be an integer >= 32, got 7"),
    (["--json", "."], "--json: . is a folder; name the file to write"),
    (["--json", "report.txt/bench.json"], "report.txt is a file, not a folder"),
])
def test_a_bad_setting_is_one_line_and_exit_2_before_any_worker(argv, line, no_worker, capsys,
                                                                 tmp_path, monkeypatch):
    """Issue 45: a wrong stem or device exited 3 from inside the first worker, image size 7
    was timed, and --json naming a folder failed only after the whole benchmark."""
    from msresnet import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.txt").write_text("notes")
    assert cli.main(["bench", "--modes", "pynative", "--isa", "default", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("msresnet bench: error: ") and line in err[0], err
    assert no_worker == [] and sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]


@pytest.mark.parametrize("module", ["bench", "pipeline_bench"])
def test_a_worker_dies_with_the_process_that_started_it(module, tmp_path):
    """Issue 45: stopping msresnet reproduce killed a chapter's kernel, and the benchmark
    worker the kernel had started ran on with parent 1. Here the parent is killed with
    SIGKILL (no cleanup of its own can run) while its worker sleeps."""
    import psutil

    start = {"bench": "m.run_one(m.BenchSettings(), 'graph', 'default', 120)",
             "pipeline_bench": "m.run_one(m.Setting(), 'no-data', None, 120)"}[module]
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys\n"
        f"from msresnet.experiments import {module} as m\n"
        "m._worker_command = lambda *a: [sys.executable, '-c', 'import time; time.sleep(120)']\n"
        f"{start}\n")])
    try:
        deadline = time.monotonic() + 60
        while not (children := psutil.Process(parent.pid).children()):
            assert parent.poll() is None and time.monotonic() < deadline, "no worker started"
            time.sleep(0.1)
        (worker,) = children
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while psutil.pid_exists(worker.pid) and time.monotonic() < deadline:
        try:
            if worker.status() == psutil.STATUS_ZOMBIE:  # dead, waiting for its new parent
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        if psutil.pid_exists(worker.pid):
            worker.kill()
            pytest.fail(f"the worker {worker.pid} outlived its parent")
