"""Run the book's chapters with papermill under one profile and write a report.

    msresnet reproduce --profile smoke|cpu|gpu|ascend \\
        [-p KEY VALUE ...] [--only 1,4,5] [--resume] --out runs/NAME

The chapters run in order in one output folder: chapter 4 trains into
``OUT/train`` and chapter 5 sweeps the checkpoints found there. Under ``OUT``:

- ``NN_chapter.ipynb``: each executed notebook (also when it failed);
- ``metrics/NN_chapter.json``: the figures each notebook recorded itself
  (:func:`msresnet.chapters.notebook.record_metrics`);
- ``run.json``: profile, effective parameters (``lr_max`` as one device trains
  with it, ``lr_rule`` the line that says how it came from the profile's),
  versions, device, machine, git commit, timings and metrics per notebook;
- ``report.md`` and ``figures/``: a human summary with the metrics and figures.

Parameters are checked before anything runs: a name that is neither a config key
nor a parameter of a selected chapter, or a value the config rejects, stops the
command with a message naming it. ``--resume`` skips the chapters that already
completed with the same parameters.
"""

from __future__ import annotations

import ast
import base64
import datetime as dt
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import shlex
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import yaml

from msresnet import atomic
from msresnet.spelling import did_you_mean
from msresnet.cpu_speed import cpu_model
from msresnet.config.profile import FIELDS, Overrides, parse_overrides
from msresnet.data.prepare import provenance
from msresnet.chapters.notebook import METRICS_DIR_VARIABLE, PATH_FIELDS
from msresnet.config.run import build_run_config, for_devices, lr_rule
from msresnet.paths import REPO_ROOT, in_repo

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
TRAIN_DIR = "train"  # chapter 4's output folder, inside --out (chapter 5 sweeps it)
# Config fields that may name a local file or folder: the chapters run in their own
# folder, so a relative path given on the command line is made absolute first.
LOCAL_PATH_FIELDS = (*PATH_FIELDS, "data_url", "resume_from")
VERSIONED_PACKAGES = ("mindspore", "numpy", "papermill", "nbclient", "matplotlib", "msresnet")


class ReproduceError(RuntimeError):
    """A run that cannot start (bad parameters) or a chapter that failed."""


@dataclass(frozen=True)
class Chapter:
    number: int
    path: Path

    @property
    def name(self) -> str:
        return self.path.stem


def chapters(folder: Path = NOTEBOOK_DIR) -> list[Chapter]:
    """The numbered chapter notebooks, in order."""
    found = []
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        found.append(Chapter(int(path.name[:2]), path))
    return found


def select(all_chapters: Sequence[Chapter], only: str | None) -> list[Chapter]:
    """``--only 1,4,5`` by chapter number; every chapter when not given (None). An
    empty ``--only ''`` is a mistake, not "all ten chapters": refused like any typo."""
    if only is None:
        return list(all_chapters)
    wanted = []
    for part in only.split(","):
        try:
            wanted.append(int(part))
        except ValueError:
            raise ReproduceError(f"--only: '{part}' is not a chapter number") from None
    numbers = {c.number for c in all_chapters}
    missing = [n for n in wanted if n not in numbers]
    if missing:
        raise ReproduceError(f"--only: no chapter {missing[0]}; chapters are "
                             f"{', '.join(str(n) for n in sorted(numbers))}")
    return [c for c in all_chapters if c.number in wanted]


def declared_parameters(path: Path) -> dict[str, str]:
    """Names and default expressions of a notebook's ``parameters`` cell.

    Read with :mod:`ast` rather than ``papermill.inspect_notebook``, whose line
    parser skips an assignment whose comment contains ``=``.
    """
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells
             if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ReproduceError(f"{path.name}: needs exactly one code cell tagged 'parameters', "
                             f"found {len(cells)}")
    try:
        tree = ast.parse(cells[0].source)
    except SyntaxError as exc:
        raise ReproduceError(f"{path.name}: the parameters cell is not valid Python: {exc}") from exc
    declared = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            if isinstance(target, ast.Name) and node.value is not None:
                declared[target.id] = ast.unparse(node.value)
    return declared


def typed_parameters(pairs: Sequence[Sequence[str]], known_extras: set[str]) -> dict[str, Any]:
    """``-p KEY VALUE`` pairs to Python values: config keys by the config's types,
    a chapter's own parameters as YAML scalars (like papermill's ``-y``)."""
    values: dict[str, Any] = {}
    for key, text in pairs:
        if key in FIELDS:
            values.update(parse_overrides([f"--{key}", text], source="-p parameters"))
            if key in LOCAL_PATH_FIELDS and isinstance(values[key], str):
                values[key] = absolute_path(values[key])
        elif key in known_extras:
            values[key] = yaml.safe_load(text)
        else:
            hint = did_you_mean(key, sorted(set(FIELDS) | known_extras))
            raise ReproduceError(f"-p {key}: unknown parameter{hint}; it is neither a config "
                                 "key nor a parameter of the selected chapters")
    return values


def as_recorded(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as ``run.json`` keeps them: a local folder inside the checkout
    relative to it (the chapters are handed absolute paths), so the record reads the
    same on any machine and names no machine's folders."""
    return {key: in_repo(value) if key in LOCAL_PATH_FIELDS and isinstance(value, str)
            else value for key, value in params.items()}


def absolute_path(text: str) -> str:
    """A relative local path made absolute (from the current folder); URLs as given."""
    if "://" in text or os.path.isabs(text):
        return text
    return os.path.abspath(text)


def papermill_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as a notebook receives them: in a notebook None means "the
    profile's value", so an explicit null for a config field travels as "null"
    (which :func:`msresnet.chapters.notebook.config_from_parameters` turns back into None)."""
    return {k: ("null" if v is None and k in FIELDS else v) for k, v in params.items()}


def params_hash(params: Mapping[str, Any]) -> str:
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def machine() -> dict[str, Any]:
    return {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "hostname": platform.node()}


def git_state() -> dict[str, Any]:
    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        return {"commit": run("rev-parse", "HEAD"), "dirty": bool(run("status", "--porcelain"))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "dirty": None}


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, data: Any) -> None:
    """``run.json`` and friends, atomically (a reader never sees half a record)."""
    atomic.write_json(path, data, default=str)


def extract_figures(notebook: Path, folder: Path) -> list[Path]:
    """Save the PNG outputs of an executed notebook, for the report."""
    nb = nbformat.read(notebook, as_version=4)
    saved = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                path = folder / f"{notebook.stem}-{len(saved) + 1}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(base64.b64decode(data["image/png"]))
                saved.append(path)
    return saved


def format_metric(value: Any) -> str:
    """A recorded metric as the report and the results page show it (floats to 4 digits)."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def write_report(out: Path, run: Mapping[str, Any]) -> Path:
    """``report.md``: what ran where, how long, the metrics and the figures."""
    lines = [f"# Reproduction: profile `{run['profile']}`", "",
             f"- command: `{run['command']}`",
             f"- machine: {run['machine']['cpu_model']}, {run['machine']['cpu_count']} cores "
             f"({run['machine']['platform']})",
             f"- MindSpore {run['versions']['mindspore']} on {run['device']['device_target']}, "
             f"{run['device']['mode']} mode",
             f"- git commit: {run['git']['commit']}{' (uncommitted changes)' if run['git']['dirty'] else ''}",
             f"- started {run['started']}, finished {run.get('finished') or '-'}", "",
             "## Chapters", "", "| chapter | status | seconds |", "| --- | --- | ---: |"]
    for entry in run["notebooks"]:
        lines.append(f"| {entry['name']} | {entry['status']} | {entry.get('seconds', 0):.1f} |")
    lines += ["", "## Metrics", "", "| chapter | metric | value |", "| --- | --- | --- |"]
    for entry in run["notebooks"]:
        for key, value in sorted((entry.get("metrics") or {}).items()):
            lines.append(f"| {entry['name']} | {key} | {format_metric(value)} |")
    lines += ["", "## Figures", ""]
    for entry in run["notebooks"]:
        for figure in entry.get("figures", []):
            lines.append(f"![{entry['name']}]({figure})")
            lines.append("")
    path = out / "report.md"
    atomic.write_text(path, "\n".join(lines) + "\n")
    return path


class _CheckedNames(logging.Filter):
    """Drop papermill's "Passed unknown parameter: NAME" for names this command checked.

    Papermill warns about every injected name that a notebook's parameters cell does
    not list, as a guard against typos. This command has already checked every name
    (:func:`typed_parameters`: a config key, which each chapter's ParameterGuard
    accepts and uses, or a parameter a selected chapter declares), and it passes
    config keys to every chapter so that all chapters see the run's settings; for
    those names the warning is wrong, so it is not shown. Any other warning stays.
    """

    PREFIX = "Passed unknown parameter: "

    def __init__(self, names: Iterable[str]) -> None:
        super().__init__()
        self.names = set(names)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith(self.PREFIX) and message[len(self.PREFIX):] in self.names)


def run_chapter(chapter: Chapter, params: dict[str, Any], out: Path) -> dict[str, Any]:
    """Execute one notebook with papermill; the executed copy is saved even on failure."""
    import papermill

    output = out / chapter.path.name
    metrics_file = out / "metrics" / f"{chapter.name}.json"
    metrics_file.unlink(missing_ok=True)  # never report an earlier run's figures
    started, t0 = now(), time.perf_counter()
    entry: dict[str, Any] = {"name": chapter.name, "output": output.name, "started": started,
                             "params_hash": params_hash(params), "parameters": as_recorded(params)}
    checked = _CheckedNames(params)
    logging.getLogger("papermill").addFilter(checked)
    try:
        papermill.execute_notebook(str(chapter.path), str(output),
                                   parameters=papermill_values(params),
                                   cwd=str(chapter.path.parent), kernel_name="python3",
                                   progress_bar=True, request_save_on_cell_execute=True)
        entry["status"] = "ok"
    except papermill.PapermillExecutionError as exc:
        entry["status"] = "failed"
        first_line = next((line for line in exc.source.splitlines() if line.strip()), "")
        entry["error"] = (f"{chapter.path.name} failed in cell {exc.cell_index} "
                          f"(In [{exc.exec_count}], starting {first_line.strip()!r}): "
                          f"{exc.ename}: {exc.evalue}; the failed notebook is saved as {output}")
    except Exception as exc:  # noqa: BLE001 - a dead kernel or timeout: record it too
        entry["status"] = "failed"
        entry["error"] = (f"{chapter.path.name} did not run to the end: "
                          f"{type(exc).__name__}: {exc}; see {output}")
    finally:
        logging.getLogger("papermill").removeFilter(checked)
    entry["finished"] = now()
    entry["seconds"] = round(time.perf_counter() - t0, 2)
    entry["metrics"] = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    if output.exists():
        entry["figures"] = [str(p.relative_to(out))
                            for p in extract_figures(output, out / "figures")]
    return entry


def run_selected(selected: Sequence[Chapter], declared: Mapping[str, Any],
                 shared: Mapping[str, Any], user: Mapping[str, Any],
                 previous: Mapping[str, Any], out: Path, run: dict[str, Any]) -> None:
    """Run the chapters in order, updating ``run`` and ``run.json`` after each."""
    run_file = out / "run.json"
    for index, chapter in enumerate(selected, 1):
        # The profile goes to every chapter, the shared output folder only to the chapters
        # that declare output_dir (papermill warns about any other name it injects), and
        # the user's config keys to all: each chapter's guard accepts every config key.
        params = {**{k: v for k, v in shared.items()
                     if k == "profile" or k in declared[chapter.name]},
                  **{k: v for k, v in user.items() if k in FIELDS or k in declared[chapter.name]}}
        done = previous.get(chapter.name)
        if (done and done.get("status") == "ok" and done.get("params_hash") == params_hash(params)
                and (out / done["output"]).exists()):
            print(f"[{index}/{len(selected)}] {chapter.path.name}: done before with the same "
                  "parameters, skipped (--resume)", flush=True)
            run["notebooks"].append({**done, "skipped": True})
            continue
        print(f"[{index}/{len(selected)}] {chapter.path.name}", flush=True)
        entry = run_chapter(chapter, params, out)
        run["notebooks"].append(entry)
        write_json(run_file, run)
        if entry["status"] != "ok":
            run["finished"] = now()
            write_json(run_file, run)
            write_report(out, run)
            raise ReproduceError(entry["error"])
        print(f"    ok in {entry['seconds']:.1f} s", flush=True)


def reproduce(profile: str, out: Path, pairs: Sequence[Sequence[str]] = (),
              only: str | None = None, resume: bool = False,
              command: str = "", notebook_dir: Path = NOTEBOOK_DIR) -> dict[str, Any]:
    """Run the selected chapters; returns the run record (also in ``run.json``).

    ``notebook_dir`` is where the chapters are (``notebooks/``; tests pass others).
    """
    found = chapters(Path(notebook_dir))
    if not found:  # before --only, whose message would list no chapters
        what = "no chapter notebooks (NN_name.ipynb) in" if Path(notebook_dir).is_dir() else \
            "no such folder"
        raise ReproduceError(f"--notebooks: {what} {notebook_dir}")
    selected = select(found, only)
    declared = {c.name: declared_parameters(c.path) for c in selected}
    extras = {name for names in declared.values() for name in names} - set(FIELDS)
    user = typed_parameters(pairs, extras)
    config_overrides = Overrides({k: v for k, v in user.items() if k in FIELDS and k != "profile"},
                                 source="-p parameters")
    if "profile" in user and user["profile"] != profile:
        raise ReproduceError("-p profile: use --profile to choose the profile")
    given_out = Path(out).as_posix()
    out = out.resolve()
    # Chapter 4's training folder: OUT/train, unless -p output_dir names another (then
    # chapters 5 and 8 read that run, and the record says so).
    train_dir = Path(user.get("output_dir") or out / TRAIN_DIR)
    shared = {"profile": profile, "output_dir": str(train_dir)}
    # the chapters' Config, as config_from_parameters builds it (the data folder's rule)
    config = build_run_config(profile, Overrides(
        {**config_overrides, "output_dir": shared["output_dir"]}, source="-p parameters"))

    out.mkdir(parents=True, exist_ok=True)
    run_file = out / "run.json"
    previous = {}
    if resume and run_file.exists():
        previous = {e["name"]: e for e in json.loads(run_file.read_text()).get("notebooks", [])}
    run: dict[str, Any] = {
        "profile": profile, "command": command,
        # Typed locations, for readers of the record on any machine (parameters.output_dir
        # is repository-relative only inside the checkout): --out as given, and chapter
        # 4's training folder relative to it.
        "out": given_out, "train_dir": Path(os.path.relpath(train_dir, out)).as_posix(),
        "user_parameters": as_recorded(user),
        # The chapters train in one process each: one device, so the rate the rule
        # gives one device (chapter 2), with the profile's lr_max and lr_devices beside it.
        "parameters": as_recorded(for_devices(config, 1).to_dict()),
        "lr_rule": lr_rule(config, 1),
        "versions": versions(),
        "device": {"device_target": config.device_target, "mode": config.mode},
        "machine": machine(), "git": git_state(), "started": now(), "finished": None,
        "notebooks": []}
    saved_metrics_dir = os.environ.get(METRICS_DIR_VARIABLE)
    os.environ[METRICS_DIR_VARIABLE] = str(out / "metrics")  # the kernels inherit it
    t0 = time.perf_counter()
    try:
        run_selected(selected, declared, shared, user, previous, out, run)
    finally:
        if saved_metrics_dir is None:
            os.environ.pop(METRICS_DIR_VARIABLE, None)
        else:
            os.environ[METRICS_DIR_VARIABLE] = saved_metrics_dir
    run["finished"] = now()
    run["seconds"] = round(time.perf_counter() - t0, 2)
    dataset = provenance(Path(config.data_dir))
    run["dataset"] = {**dataset, "folder": in_repo(dataset["folder"])}
    write_json(run_file, run)
    write_report(out, run)
    return run


def command_line(argv: Sequence[str]) -> str:
    """The command as recorded in ``run.json``: quoted for a POSIX shell, so that
    copying it (or ``shlex.split``) gives back exactly these arguments."""
    return shlex.join(["msresnet", "reproduce", *argv])
