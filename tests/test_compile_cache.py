"""MindSpore's compile cache: why the package refuses it, and that every command does.

The premise is MindSpore's own behaviour, checked on a two-line network: a second
process whose graph differs only in its input's shape is handed the first one's
graph, silently. The refusal is :mod:`msresnet.compile_cache`, called before a graph
is compiled or a file written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

from fresh_cli import run_in_fresh_process
from msresnet import compile_cache
from msresnet.compile_cache import VARIABLE, CompileCacheError
from msresnet.config.profile import load_config

DENSE = """
import sys
import numpy as np
import mindspore as ms
from mindspore import nn
ms.set_context(mode=ms.GRAPH_MODE)
rows = int(sys.argv[1])
print(nn.Dense(3, 2)(ms.Tensor(np.ones((rows, 3), np.float32))).shape)
"""


@pytest.mark.twin  # make test: the troubleshooting page asserts the same run (ts-compile-cache)
def test_mindspore_hands_a_later_process_a_graph_compiled_for_another_shape(tmp_path):
    script = tmp_path / "dense.py"  # the cache hashes the entry script: one file, two runs
    script.write_text(DENSE)
    env = {**os.environ, VARIABLE: "1",
           "MS_COMPILER_CACHE_PATH": str(tmp_path / "cache")}
    shapes = []
    for rows in (4, 5):
        done = subprocess.run([sys.executable, str(script), str(rows)], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        shapes.append(done.stdout.strip().splitlines()[-1])
    # 5 rows in, 4 out: the first process's graph, with no error. Should a MindSpore
    # compare shapes one day, this fails and the refusal can be reconsidered.
    assert shapes == ["(4, 2)", "(4, 2)"]


def _context(monkeypatch, enable_compile_cache) -> None:
    """A loaded MindSpore whose context says ``enable_compile_cache``; None: not loaded."""
    if enable_compile_cache is None:
        monkeypatch.delitem(sys.modules, "mindspore", raising=False)
    else:
        monkeypatch.setitem(sys.modules, "mindspore", SimpleNamespace(
            get_context={"enable_compile_cache": enable_compile_cache}.__getitem__))


@pytest.mark.parametrize("value", [None, "", "0", "true"])
def test_values_mindspore_ignores_are_let_through(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, value)
    for context in (None, False):  # MindSpore not loaded; loaded, the setting off
        _context(monkeypatch, context)
        compile_cache.refuse()


def test_the_variable_and_the_context_setting_are_refused_by_name(monkeypatch):
    monkeypatch.setenv(VARIABLE, "1")
    with pytest.raises(CompileCacheError, match=rf"^{VARIABLE}=1: .*; unset {VARIABLE} "):
        compile_cache.refuse()
    monkeypatch.delenv(VARIABLE)
    _context(monkeypatch, True)
    with pytest.raises(CompileCacheError,
                       match=r"^mindspore\.set_context\(enable_compile_cache=True\): "):
        compile_cache.refuse()


def test_training_reads_the_context_setting(monkeypatch):
    """set_context, which every training, evaluation and replay calls, asks MindSpore's
    context (the environment is the other tests'); the device is not touched."""
    from msresnet.training import factories

    read = []
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.setattr(factories.ms, "get_context", lambda key: read.append(key) or True)
    with pytest.raises(CompileCacheError, match="enable_compile_cache=True"):
        factories.set_context(load_config("smoke"))
    assert read == ["enable_compile_cache"]


def test_a_launch_refuses_it_before_msrun_starts(tmp_path, monkeypatch):
    from msresnet.jobs import launch

    plan = launch.build_plan(2, "smoke", output=str(tmp_path / "dp2"))
    monkeypatch.setenv(VARIABLE, "1")
    with pytest.raises(CompileCacheError, match=f"^{VARIABLE}=1: "):
        launch.run(plan, cwd=tmp_path)
    assert list(tmp_path.iterdir()) == []  # not even the workers' config file


def test_commands_refuse_it_with_one_line_before_writing(tmp_path, monkeypatch):
    """train, export, predict and bench in one fresh process: exit 2, one line naming
    the variable, and no run folder, export folder or compile cache left behind. The
    checkpoint is not read (the refusal comes first), so any bytes do; predict reads
    its pictures first, so the picture is a real one."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(load_config("smoke").to_yaml())
    (run / "best.ckpt").write_bytes(b"not read")
    Image.new("RGB", (32, 32), (200, 120, 40)).save(tmp_path / "cat.png")
    monkeypatch.setenv(VARIABLE, "1")
    monkeypatch.setenv("MS_COMPILER_CACHE_PATH", str(tmp_path / "cache"))
    commands = [["train", "smoke", "--output_dir", "out/train", "--epoch_size", "1"],
                ["export", "run/best.ckpt", "--output_dir", "out/export"],
                ["predict", "run/best.ckpt", "cat.png"],
                ["bench", "--steps", "1", "--json", "out/bench.json"]]
    fresh = run_in_fresh_process(commands, cwd=tmp_path)
    assert fresh.codes == [2, 2, 2, 2], fresh.stderr_lines
    verbs = [argv[0] for argv in commands]
    assert [line.split(": error: ")[0] for line in fresh.stderr_lines] == \
        [f"msresnet {verb}" for verb in verbs], fresh.stderr_lines  # one line each
    assert all(f": error: {VARIABLE}=1: " in line for line in fresh.stderr_lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cat.png", "run"]
    assert sorted(p.name for p in run.iterdir()) == ["best.ckpt", "config.yaml"]


def test_the_record_shows_the_saving_and_the_mix_up_the_pages_quote():
    """results/compile-cache/runs.json (measure.py): loading the cache gave the same
    results in less CPU; the batch-16 run on the batch-32 cache loaded those graphs and
    did not finish. The README's figures are the record's."""
    root = Path(__file__).resolve().parents[1]
    runs = {run["run"]: run for run in json.loads(
        (root / "results/compile-cache/runs.json").read_text())["runs"]}
    plain, saved, loaded = runs["no cache"], runs["cache saved"], runs["cache loaded"]
    mixed = runs["batch 16 on the batch-32 cache"]
    assert plain["summary"] == saved["summary"] == loaded["summary"] is not None
    assert [r["cache_loaded_warnings"] for r in (plain, saved, loaded)] == [0, 0, 2]
    assert loaded["cpu_s"] < plain["cpu_s"]
    assert mixed["cache_loaded_warnings"] == 2 and mixed["exit_status"] != 0
    assert mixed["summary"] is None
    readme = " ".join((root / "README.md").read_text().split())
    assert f"from {plain['cpu_s']} to {loaded['cpu_s']} CPU-s" in readme
    earlier = (root / "results/compile-cache/earlier_try.log").read_text()
    assert "train_loss 5.4502" in earlier and "val_loss nan" in earlier
