"""Run a selection of the unit tests with a given Python and record what happened.

``make quick-test-record`` writes ``results/tests/quick-test.json`` (the README quotes
its counts and time; ``tests/test_figures.py`` checks the quotation), and ``make
compat-test`` writes ``results/compat/mindspore-<version>.json`` and ``.txt`` (the
unit tests under another MindSpore, in a venv of its own; ``book/setup.md`` states
the supported range from them, ``tests/test_packaging.py`` checks the statement).

The record holds the command, the commit (and whether the working tree differed
from it), the date, the CPU, the Python and the versions of MindSpore, numpy and
onnxruntime that the tests ran with, pytest's summary counts and its wall time,
and the names of the tests that failed. The ``.txt`` beside it, when asked for,
is the same for a reader plus the last lines of pytest's output.

Usage: python tests/record_tests.py --out FILE.json [--txt FILE.txt]
       [--python PY] [--markers EXPR] [--workers N] [--taskset CPUS] [TEST ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHECKS_OF_RECORDS = (
    "tests/test_figures.py::test_the_readme_quotes_the_recorded_quick_test",
    "tests/test_packaging.py::test_the_oldest_mindspore_of_the_range_was_tested",
)
"""Tests that check these records and the pages that quote them: a recording run leaves
them out (pytest's ``--deselect``), since each would judge the record being replaced
(a run after a failing record would record its own failure, and so on for ever).
``make test`` and ``make quick-test`` run them against the record once it is written."""

VERSIONS = """
import json, platform, importlib.metadata as m
found = {"python": platform.python_version()}
for name in ("mindspore", "numpy", "onnxruntime", "onnx", "pytest"):
    try:
        found[name] = m.version(name)
    except m.PackageNotFoundError:
        found[name] = None
print(json.dumps(found))
"""


def cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def shown(word: str) -> str:
    """A path as the record shows it: relative inside the repository, ``VENV/...``
    for a Python outside it, so no record carries a machine's absolute paths."""
    if not os.path.isabs(word):
        return word
    path = Path(word)
    if path.is_relative_to(REPO):
        return str(path.relative_to(REPO))
    return "VENV/" + "/".join(path.parts[-2:]) if path.parent.name == "bin" else word


def summary_counts(output: str) -> dict[str, int]:
    """pytest's last summary line as counts: {"passed": 796, "skipped": 3, ...}."""
    lines = [line for line in output.splitlines()
             if re.search(r"\b\d+ (passed|failed|error|errors)\b", line)]
    if not lines:
        return {}
    counts = {}
    for number, word in re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|"
                                   r"xpassed|warnings?)", lines[-1]):
        key = {"error": "errors", "warning": "warnings"}.get(word, word)
        counts[key] = int(number)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--txt", type=Path)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--markers", default="not slow and not browser and not params")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--taskset", help="run on these CPUs only (taskset -c)")
    parser.add_argument("--make", help="the make command this record stands for")
    parser.add_argument("tests", nargs="*", default=["tests"])
    args = parser.parse_args(argv)

    command = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-m", args.markers, "-rfE"]
    if args.workers:
        command += ["-n", str(args.workers), "--dist", "loadfile"]
    command += [f"--deselect={name}" for name in CHECKS_OF_RECORDS] + args.tests
    if args.taskset:
        command = ["taskset", "-c", args.taskset, *command]
    versions = json.loads(subprocess.run([args.python, "-c", VERSIONS], capture_output=True,
                                         text=True, check=True).stdout)
    load = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.timezone.utc)
    clock = time.monotonic()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - clock
    output = result.stdout + result.stderr
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.M)))
    record = {
        "make": args.make,
        "command": shlex.join(shown(word) for word in command),
        "commit": git("rev-parse", "--short", "HEAD"),
        "working_tree_changed": bool(git("status", "--porcelain", "--untracked-files=no")),
        "started_utc": started.strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu(),
        "cores": len(os.sched_getaffinity(0)) if not args.taskset
        else len(args.taskset.split(",")),
        "load_average_before": round(load, 2),
        "versions": versions,
        "exit_status": result.returncode,
        "counts": summary_counts(output),
        "seconds": round(seconds, 1),
        "failed": failed,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    if args.txt:
        tail = "\n".join(output.splitlines()[-60:])
        args.txt.write_text(
            f"{args.make or 'python tests/record_tests.py'}\n\n"
            f"command: {record['command']}\n"
            f"commit:  {record['commit']}"
            f"{' (working tree changed)' if record['working_tree_changed'] else ''}\n"
            f"started: {record['started_utc']} UTC on {record['cpu']}, "
            f"{record['cores']} core(s), load average {load:.2f} before\n"
            f"versions: {json.dumps(versions)}\n"
            f"exit status {result.returncode} after {seconds:.1f} s; "
            f"counts: {json.dumps(record['counts'])}\n\n"
            f"failed ({len(failed)}):\n" + "".join(f"  {name}\n" for name in failed)
            + f"\nthe last lines of pytest's output:\n{tail}\n")
    print(output.splitlines()[-1] if output.strip() else "(no output)")
    print(f"recorded in {args.out}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
