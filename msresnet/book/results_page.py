"""Record a reproduction as the book's reference result and write its page.

``msresnet reproduce --profile cpu --only 1,4,5 --out runs/cpu-reference``
leaves executed notebooks, checkpoints (about 180 MB each), ``run.json``,
``report.md``, the figures the notebooks drew and the metrics they recorded. This
module copies the small, durable part into the repository (``results/cpu/``) and
writes ``book/results.md`` from those copies, so the page shows the run's own
figures and numbers and a test can check that the page still matches them::

    msresnet results-page runs/cpu-reference --dest results/cpu --page book/results.md

Nothing on the page is typed by hand: change the run, re-record it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

from msresnet.atomic import write_text
from msresnet.paths import in_repo
from msresnet.book.reproduce import format_metric

# What the page needs from the training folder (chapter 4's output_dir, OUT/train):
# the per-epoch history, the best checkpoint's record and the effective config.
TRAIN_FILES = ("history.json", "history.csv", "best.json", "config.yaml", "result.json")
# Written only by a run that chose on held-out images (valid_split > 0): copied when there.
OPTIONAL_TRAIN_FILES = ("test.json",)

# Figures drawn by the chapters, in the order extract_figures numbers them, with
# the caption the page gives each. A chapter that draws more or fewer figures
# must update this table (record() checks the counts).
FIGURES: dict[str, tuple[str, ...]] = {
    "04_train_eval": ("Training and validation loss, validation accuracy and the learning "
                      "rate per epoch (chapter 4).",),
    "05_checkpoint_sweep": ("Accuracy of every checkpoint on the images the run validated on "
                            "(chapter 5's sweep).",
                            "Confusion matrix of the chosen checkpoint on the test set.",
                            "Test images the chosen checkpoint gets wrong (true / predicted label).",
                            "A recorded run on 1,000 training images (results/sweep-pays) whose "
                            "chosen checkpoint beat the last (the same in every reproduction)."),
}


class ResultsError(ValueError):
    """The run folder is incomplete or did not succeed; the message names what is wrong."""


def _load_run(run_dir: Path) -> dict[str, Any]:
    run_file = run_dir / "run.json"
    if not run_file.is_file():
        raise ResultsError(f"{run_file}: no run.json; is {run_dir} a reproduce --out folder?")
    run = json.loads(run_file.read_text())
    failed = [e["name"] for e in run.get("notebooks", []) if e.get("status") != "ok"]
    if failed or not run.get("finished"):
        raise ResultsError(f"{run_file}: the run did not finish cleanly "
                           f"(failed: {', '.join(failed) or 'none'}, finished: {run.get('finished')})")
    return run


def record(run_dir: Path, dest: Path) -> list[Path]:
    """Copy run.json, report.md, metrics, the chapter 4/5 figures and the training records.

    Checkpoints and executed notebooks stay in ``run_dir`` (too big to commit).
    Returns the files written under ``dest``.
    """
    run_dir, dest = Path(run_dir), Path(dest)
    run = _load_run(run_dir)
    names = {e["name"] for e in run["notebooks"]}
    missing = [n for n in ("04_train_eval", "05_checkpoint_sweep") if n not in names]
    if missing:
        raise ResultsError(f"{run_dir / 'run.json'}: chapters {missing} did not run; "
                           "reproduce with --only 1,4,5 (or all chapters)")
    written: list[Path] = []

    def copy(source: Path, target: Path) -> None:
        if not source.is_file():
            raise ResultsError(f"{source}: missing from the run folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(target)

    copy(run_dir / "run.json", dest / "run.json")
    copy(run_dir / "report.md", dest / "report.md")
    for entry in run["notebooks"]:
        copy(run_dir / "metrics" / f"{entry['name']}.json", dest / "metrics" / f"{entry['name']}.json")
    for chapter, captions in FIGURES.items():
        drawn = [f for e in run["notebooks"] if e["name"] == chapter for f in e.get("figures", [])]
        if len(drawn) != len(captions):
            raise ResultsError(f"{chapter} drew {len(drawn)} figures, the page expects "
                               f"{len(captions)}: update results_page.FIGURES")
        for figure in drawn:
            copy(run_dir / figure, dest / figure)
    train_dir = run_dir / train_folder(run)
    for name in TRAIN_FILES:
        copy(train_dir / name, dest / "train" / name)
    for name in OPTIONAL_TRAIN_FILES:
        if (train_dir / name).is_file():
            copy(train_dir / name, dest / "train" / name)
        elif (dest / "train" / name).is_file():
            (dest / "train" / name).unlink()  # an older run's: not this run's record
    return written


def train_folder(run: dict[str, Any]) -> str:
    """Chapter 4's training folder, relative to the run folder: ``run.json``'s
    ``train_dir``; records written before that field existed used ``train``."""
    return run.get("train_dir") or "train"


def out_folder(run: dict[str, Any]) -> str:
    """The reproduction's ``--out`` as given: ``run.json``'s ``out``, or, in records
    written before that field existed, read from the recorded command."""
    if run.get("out"):
        return run["out"]
    words = shlex.split(run["command"])
    for i, word in enumerate(words):
        if word == "--out" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--out="):
            return word.split("=", 1)[1]
    raise ResultsError(f"run.json: no 'out' field and no --out in the command {run['command']!r}")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _dataset(run: dict[str, Any]) -> str:
    """Which copy of CIFAR-10 the run read (``run.json``'s ``dataset``, from the
    folder's marker), or that the record predates the field."""
    data = run.get("dataset")
    if not data:
        return ("not recorded (this run.json predates the field; the config's data_url, "
                f"`{run['parameters'].get('data_url', '?')}`, is only the default source)")
    if not data.get("source"):
        return f"not recorded: {data.get('note', 'no marker')}"
    return f"`{data['source']}`, {data['checksum']}"


def _split_sizes(params: dict[str, Any]) -> tuple[int, int]:
    """Held-out validation images and training images per epoch, from the run's parameters."""
    held_out = params.get("valid_split") or 0
    return held_out, params["train_samples"] or 50_000 - held_out


def render_page(dest: Path, page: Path) -> str:
    """The Markdown of the results page, from the records under ``dest``."""
    dest, page = Path(dest), Path(page)
    run = _load_run(dest)
    history = json.loads((dest / "train" / "history.json").read_text())
    best = json.loads((dest / "train" / "best.json").read_text())
    entries = {e["name"]: e for e in run["notebooks"]}
    train = entries["04_train_eval"]["metrics"]
    sweep = entries["05_checkpoint_sweep"]["metrics"]
    params = run["parameters"]
    machine = run["machine"]
    rel = Path(os.path.relpath(dest, page.parent)).as_posix()
    held_out, train_images = _split_sizes(params)
    eval_images = params["eval_samples"] or 10_000
    valid_images = min(params["eval_samples"] or held_out, held_out)
    if held_out and "test_top1" in sweep:
        reached = [
            f"| test top-1 of the chosen checkpoint ({eval_images:,} test images) | "
            f"**{100 * sweep['test_top1']:.2f}%** (epoch {sweep['best_epoch']}) |",
            f"| last checkpoint's test top-1 | {100 * sweep['last_test_top1']:.2f}% |",
            f"| chosen by | the sweep's best top-1 on {valid_images:,} held-out training images "
            f"(`valid_split` {held_out:,}, seed {params.get('seed')}): "
            f"{100 * sweep['best_top1']:.2f}% (top-5 {100 * sweep['best_top5']:.2f}%) |",
        ]
    else:
        reached = [
            f"| best top-1 (sweep, {eval_images:,} test images; chosen on the test set) | "
            f"**{100 * sweep['best_top1']:.2f}%** "
            f"(epoch {sweep['best_epoch']}; top-5 {100 * sweep['best_top5']:.2f}%) |",
            f"| last checkpoint's top-1 | {100 * sweep['last_top1']:.2f}% |",
        ]

    lines = [
        "(results)=",
        "# Results: the reference CPU run",
        "",
        "<!-- Written by `msresnet results-page` from the files in "
        f"`{Path(os.path.relpath(dest, page.parent.parent)).as_posix()}/`; do not edit by hand. -->",
        "",
        f"This page is the `{run['profile']}` profile reproduced end to end by the book's own "
        "command on a small CPU machine: chapter 1 prepared the data, chapter 4 trained and "
        "validated ResNet50, chapter 5 swept every checkpoint. The numbers and figures below "
        "are the run's own records, copied into the repository by "
        "`msresnet results-page`; nothing is redrawn or retyped.",
        "",
        "```bash",
        run["command"],
        shlex.join(["msresnet", "results-page", out_folder(run),
                    "--dest", "results/cpu", "--page", "book/results.md"]),
        "```",
        "",
        "## Where and when",
        "",
        "| | |",
        "| --- | --- |",
        f"| machine | {machine['cpu_model']}, {machine['cpu_count']} cores, {machine['platform']} |",
        f"| software | MindSpore {run['versions']['mindspore']}, Python {run['versions'].get('python', '?')}, "
        f"NumPy {run['versions'].get('numpy', '?')} |",
        f"| device and mode | {run['device']['device_target']}, {run['device']['mode']} mode, "
        f"{'float32' if params['amp_level'] == 'O0' else params['amp_level']} |",
        f"| started / finished (UTC) | {min(e['started'] for e in run['notebooks'])} / "
        f"{max(e['finished'] for e in run['notebooks'])} |",
        f"| git commit | `{run['git']['commit'][:12]}`"
        f"{' (with uncommitted changes)' if run['git'].get('dirty') else ''} |",
        f"| CIFAR-10 archive | {_dataset(run)} |",
        "",
        "## What it reached",
        "",
        "| | |",
        "| --- | --- |",
        *reached,
        f"| training | {params['epoch_size']} epochs x {train_images:,} images, batch "
        f"{params['batch_size']}, {train['steps']} steps, lr {params['lr_schedule']} "
        f"{params['lr_init']} -> {params['lr_max']} -> {params['lr_end']} |",
        f"| training time | {_minutes(train['train_seconds'])} at "
        f"{train['train_images_per_second']:.1f} images/s |",
        f"| validation time | {_minutes(train['eval_seconds'])} at "
        f"{train['eval_images_per_second']:.0f} images/s |",
        f"| sweep | {sweep['checkpoints']} checkpoints, {sweep['seconds_per_checkpoint']:.0f} s each |",
        f"| whole reproduction | {_minutes(sum(e['seconds'] for e in run['notebooks']))} "
        "(the chapters' own times) |",
        "",
        "For scale: the recipe this book follows trains 90 epochs at 224x224 and reaches "
        "91-94% top-1 on Ascend and GPU (cited figures, see the README's reproduction table). "
        f"This run trains {params['epoch_size']} epochs at {params['image_size']}x"
        f"{params['image_size']} on a {machine['cpu_count']}-core CPU: it shows the whole loop "
        "(data, fused training and validation, checkpoints, sweep) working on the real data "
        "in well under an hour, far from convergence.",
        "",
        "## Per epoch (chapter 4's history)",
        "",
        "| epoch | step | lr | train loss | val loss | val top-1 | val top-5 | train s | images/s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in history:
        lines.append(f"| {r['epoch']} | {r['step']} | {r['lr']:.5f} | {r['train_loss']:.4f} | "
                     f"{r['val_loss']:.4f} | {100 * r['val_top1']:.2f}% | {100 * r['val_top5']:.2f}% | "
                     f"{r['train_seconds']:.0f} | {r['images_per_second']:.1f} |")
    lines += ["", f"Best checkpoint: `{best['source']}` ({best.get('selected_by', '')}).", "",
              "## Figures", ""]
    for chapter, captions in FIGURES.items():
        for figure, caption in zip(entries[chapter].get("figures", []), captions):
            lines += [f"```{{figure}} {rel}/{figure}", f":alt: {caption}", "", caption, "```", ""]
    lines += ["## Every recorded metric", "", "| chapter | metric | value |", "| --- | --- | --- |"]
    for entry in run["notebooks"]:
        for key, value in sorted(entry["metrics"].items()):
            lines.append(f"| {entry['name']} | `{key}` | {format_metric(value)} |")
    skipped = [e["name"] for e in run["notebooks"] if e.get("skipped")]
    if skipped:
        lines += ["", f"Chapters {', '.join(skipped)} were completed by an earlier invocation of "
                  "the same command and skipped by `--resume` in the one recorded here; their "
                  "times and metrics are the earlier invocation's."]
    lines += ["", "Seconds per chapter: " + ", ".join(
        f"{e['name']} {e['seconds']:.0f} s" for e in run["notebooks"]) + "."]
    return "\n".join(lines) + "\n"


README_ROW_START = "| CPU, 2 cores (the results page) |"
"""How the README's reproduction table row for the recorded run begins (the rest is generated)."""


def readme_row(dest: Path) -> str:
    """The README's reproduction-table row for the run recorded under ``dest``.

    Every figure comes from the records (``run.json``, ``train/history.json``,
    ``train/test.json``), so the README cannot drift from them;
    ``tests/test_results_page.py`` checks the committed row.
    """
    dest = Path(dest)
    run = _load_run(dest)
    entries = {e["name"]: e for e in run["notebooks"]}
    train = entries["04_train_eval"]["metrics"]
    params, machine = run["parameters"], run["machine"]
    held_out, train_images = _split_sizes(params)
    day = max(e["finished"] for e in run["notebooks"])[:10]
    total = sum(e["seconds"] for e in run["notebooks"])
    where = (f"measured on {machine['cpu_count']} cores ({machine['cpu_model']}, {day}, "
             f"recorded in `{in_repo(dest)}/`)")
    test_path = dest / "train" / "test.json"
    if held_out and test_path.is_file():
        test = json.loads(test_path.read_text())
        chosen, last = test["chosen"], test["last"]
        same = ("the last checkpoint was the chosen one" if chosen.get("source") == last["file"]
                else f"the last checkpoint: {100 * last['top1']:.2f}%")
        reached = (f"{100 * chosen['top1']:.2f}% top-1 on the {test['evaluated_on']['images']:,} "
                   f"test images for the checkpoint chosen on {held_out:,} held-out training "
                   f"images ({100 * chosen['valid_top1']:.2f}% there; {same})")
    else:
        sweep = entries["05_checkpoint_sweep"]["metrics"]
        reached = f"{100 * sweep['best_top1']:.2f}% top-1, chosen on the test set"
    return (f"{README_ROW_START} `{run['command']}` | {where}: {reached}, after "
            f"{params['epoch_size']} epochs of {train_images:,} images (batch "
            f"{params['batch_size']}); {_minutes(total)} in all, of which "
            f"{_minutes(train['train_seconds'])} training at "
            f"{train['train_images_per_second']:.1f} images/s. Chapter 10 shows what limits "
            "it and what each budget trick changed |")


def write_readme_row(dest: Path, readme: Path) -> Path:
    """Replace the line of ``readme`` that starts with :data:`README_ROW_START`."""
    lines = Path(readme).read_text(encoding="utf-8").split("\n")
    found = [i for i, line in enumerate(lines) if line.startswith(README_ROW_START)]
    if len(found) != 1:
        raise ResultsError(f"{readme}: expected one line starting with {README_ROW_START!r}, "
                           f"found {len(found)}")
    lines[found[0]] = readme_row(dest)
    return write_text(readme, "\n".join(lines))


def write_page(dest: Path, page: Path) -> Path:
    """Write :func:`render_page` to ``page``."""
    return write_text(page, render_page(dest, page))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="msresnet results-page",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a finished reproduce --out folder")
    parser.add_argument("--dest", type=Path, default=Path("results/cpu"))
    parser.add_argument("--page", type=Path, default=Path("book/results.md"))
    parser.add_argument("--readme", type=Path, default=Path("README.md"),
                        help="README whose reproduction-table row for this run is rewritten")
    args = parser.parse_args(argv)
    try:
        written = record(args.run_dir, args.dest)
        write_page(args.dest, args.page)
        write_readme_row(args.dest, args.readme)
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{len(written)} files in {args.dest}; page {args.page}")
    return 0
