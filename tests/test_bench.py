"""The CPU benchmark CLI (msresnet.experiments.bench): a tiny real run through a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
    args = bench.build_parser().parse_args(["--graph-kernel"])
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
