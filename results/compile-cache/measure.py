"""MindSpore's compile cache on a smoke training: what it saves, and what it does to a
run whose settings differ (results/compile-cache/README.md).

Four runs of ``msresnet train smoke`` one after another, each in a fresh process:
without the cache, with it (saving the graphs), again with it (loading them), and at
batch 16 with the batch-32 run's cache. ``msresnet.compile_cache`` refuses the cache,
so this script lets MindSpore have it by running the training through
``measure.py --unguarded``, which turns the refusal off in that process only.

    .venv/bin/python results/compile-cache/measure.py    # about 3 minutes on 2 cores
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SIZE = ["--epoch_size", "2", "--train_samples", "256", "--eval_samples", "128",
        "--valid_split", "128", "--no_progress"]
RUNS = [("no cache", False, []), ("cache saved", True, []), ("cache loaded", True, []),
        ("batch 16 on the batch-32 cache", True, ["--batch_size", "16"])]


def unguarded(argv: list[str]) -> int:
    """``msresnet`` with :func:`msresnet.compile_cache.refuse` turned off."""
    from msresnet import compile_cache
    compile_cache.refuse = lambda: None
    from msresnet.training import factories
    factories.refuse_compile_cache = compile_cache.refuse
    from msresnet import cli
    return cli.main(argv)


def one_run(label: str, cached: bool, extra: list[str], cache: Path, out: Path) -> dict:
    env = dict(os.environ)
    env.pop("MS_COMPILER_CACHE_ENABLE", None)
    if cached:
        env.update(MS_COMPILER_CACHE_ENABLE="1", MS_COMPILER_CACHE_PATH=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(Path(__file__)), "--unguarded", "train", "smoke",
                           "--output_dir", str(out), *SIZE, *extra], cwd=REPO, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = done.stdout.strip().splitlines()
    summary = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
    epochs = [line.split(": ", 1)[1] for line in (done.stdout + done.stderr).splitlines()
              if "msresnet.training.train: epoch " in line]
    errors = [line.split(" ---")[0][:200] for line in done.stderr.splitlines()
              if line.startswith("msresnet train: error:")]
    return {"run": label, "command_options": ["smoke", *SIZE, *extra],
            "compile_cache": cached, "exit_status": done.returncode,
            "wall_s": round(wall, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "cache_loaded_warnings": done.stderr.count("Use the compilation cache"),
            "epochs": epochs, "error": errors[0] if errors else None,
            "summary": summary and {k: summary[k] for k in (
                "steps", "final_loss", "best_top1", "test_top1")}}


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        runs = [one_run(label, cached, extra, Path(scratch) / "cache", Path(scratch) / f"run{i}")
                for i, (label, cached, extra) in enumerate(RUNS)]
    import mindspore
    record = {"date": time.strftime("%Y-%m-%d"), "mindspore": mindspore.__version__,
              "cpu_count": os.cpu_count(), "runs": runs}
    (HERE / "runs.json").write_text(json.dumps(record, indent=1) + "\n")
    for run in runs:
        print(run["run"], run["exit_status"], run["wall_s"], run["cpu_s"], run["summary"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--unguarded"]:
        sys.exit(unguarded(sys.argv[2:]))
    main()
