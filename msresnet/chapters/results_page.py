"""Record a reproduction as the book's reference result and write its page.

``msresnet reproduce --profile cpu --only 1,4,5 --out runs/cpu-reference``
leaves executed notebooks, checkpoints (about 180 MB each), ``run.json``,
``report.md``, the figures the notebooks drew and the metrics they recorded. This
module copies the small, durable part into the repository (``results/cpu/``) and
writes ``book/results.md`` from those copies, so the page shows the run's own
figures and numbers and a test can check that the page still matches them::

    msresnet results-page runs/cpu-reference --dest results/cpu --page book/results.md

Nothing on the page is typed by hand: change the run, re-record it. The page and
the README row are laid out by the Jinja2 templates in ``msresnet/chapters/templates/``
(installed as package data); this module reads the records and hands them the values.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import jinja2

from msresnet.atomic import write_text
from msresnet.data.cifar10 import TEST_IMAGES, TRAIN_IMAGES
from msresnet.paths import in_repo
from msresnet.chapters.reproduce import format_metric
from msresnet.chapters import results_figures
from msresnet.chapters.helpers import FIGURE_DPI

# What the page needs from the training folder (chapter 4's output_dir, OUT/train):
# the per-epoch history, the best checkpoint's record and the effective config.
TRAIN_FILES = ("history.json", "history.csv", "best.json", "config.yaml", "result.json")
# Written only by a run that chose on held-out images (valid_split > 0): copied when there.
OPTIONAL_TRAIN_FILES = ("test.json",)

# Figures drawn by the chapters, in the order extract_figures numbers them, with
# the caption the page gives each, or None for one the page does not show: the
# per-epoch curves are drawn again from the records, one idea per figure
# (msresnet.chapters.results_figures), and chapter 5's recorded 1,000-image run is not
# this run. All are copied. A chapter that draws more or fewer figures must update
# this table (record() checks the counts).
FIGURES: dict[str, tuple[str | None, ...]] = {
    "04_train_eval": (None,),  # loss, accuracy and rate side by side: redrawn one by one
    "05_checkpoint_sweep": (None,  # validation accuracy of each checkpoint: the accuracy figure
                            "Confusion matrix of the chosen checkpoint on the 10,000 test "
                            "images, as chapter 5 drew it: row = true class, column = predicted "
                            "class, each cell the number of images; the diagonal holds the "
                            "images classified right (1,000 per class would be perfect).",
                            "Test images the chosen checkpoint gets wrong, as chapter 5 drew "
                            "them: above each, the true class, then the predicted one "
                            "(32x32 pixels, enlarged).",
                            None),  # chapter 5's sweep-pays run, not this one
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
        raise ResultsError(f"{run_file}: the run did not finish cleanly (failed: "
                           f"{', '.join(failed) or 'none'}, finished: {run.get('finished')})")
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
        metrics = Path("metrics") / f"{entry['name']}.json"
        copy(run_dir / metrics, dest / metrics)
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


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.2f}%"


def _fixed(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def _unwrap(text: str) -> str:
    """One Markdown line from a block the template wraps for reading: the page stores
    each paragraph and table row on one line."""
    return " ".join(line.strip() for line in text.strip().split("\n")) + "\n"


@functools.cache
def _templates() -> jinja2.Environment:
    """The package's templates (``msresnet/chapters/templates``, installed as package data).

    Undefined names raise instead of printing nothing, so a renamed record field is
    an error, not a blank cell; block tags leave no blank lines of their own.
    """
    env = jinja2.Environment(loader=jinja2.PackageLoader("msresnet.chapters", "templates"),
                             undefined=jinja2.StrictUndefined, autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(minutes=_minutes, percent=_percent, fixed=_fixed, unwrap=_unwrap,
                       thousands="{:,}".format, metric=format_metric)
    return env


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
    return held_out, params["train_samples"] or TRAIN_IMAGES - held_out


def _facts(dest: Path) -> dict[str, Any]:
    """What the page and the README row both show, read once from ``dest/run.json``."""
    run = _load_run(dest)
    entries = {e["name"]: e for e in run["notebooks"]}
    params = run["parameters"]
    held_out, train_images = _split_sizes(params)
    return {"run": run, "params": params, "machine": run["machine"], "entries": entries,
            "train": entries["04_train_eval"]["metrics"],
            "sweep": entries["05_checkpoint_sweep"]["metrics"],
            "held_out": held_out, "train_images": train_images,
            "valid_images": min(params["eval_samples"] or held_out, held_out),
            "started": min(e["started"] for e in run["notebooks"]),
            "finished": max(e["finished"] for e in run["notebooks"]),
            "total_seconds": sum(e["seconds"] for e in run["notebooks"])}


def _test_record(dest: Path, facts: dict[str, Any]) -> dict[str, Any] | None:
    """``train/test.json`` of a run that chose on held-out images, else None."""
    test_path = dest / "train" / "test.json"
    return (json.loads(test_path.read_text())
            if facts["held_out"] and test_path.is_file() else None)


def _figure_records(dest: Path, facts: dict[str, Any]) -> dict[str, Any]:
    """What :mod:`msresnet.chapters.results_figures` draws from, read from ``dest``."""
    params = facts["params"]
    return {"history": json.loads((dest / "train" / "history.json").read_text()),
            "test": _test_record(dest, facts), "params": params,
            "validated_on": (f"{facts['valid_images']:,} held-out validation images"
                             if facts["held_out"] else
                             f"{params['eval_samples'] or TEST_IMAGES:,} test images (the run "
                             "validated on the test set)")}


def _figures(dest: Path, page: Path,
             facts: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(path from the page, caption, width) of every figure the page shows: its own,
    drawn from the records into ``dest/figures`` at twice the pixels they are shown
    at, then the chapters' it shows, at their own size (width None)."""
    figures_dir = Path(os.path.relpath(dest, page.parent)).as_posix()
    drawn = [(f"{figures_dir}/figures/{name}", caption, results_figures.WIDTH)
             for name, caption in results_figures.captions(_figure_records(dest, facts))]
    return drawn + [(f"{figures_dir}/{figure}", caption, shown_width(dest / figure))
                    for chapter, captions in FIGURES.items()
                    for figure, caption in zip(facts["entries"][chapter].get("figures", []),
                                               captions) if caption]


def shown_width(png: Path) -> str | None:
    """The width a chapter showed its figure at, as the notebook did: drawn at
    :data:`~msresnet.chapters.helpers.FIGURE_DPI` and saved at twice that density
    (``retina``, the PNG's own dpi says so), it is shown at half its pixels, crisp on
    a 2x screen; a figure saved at the density it was drawn at keeps its own size."""
    from PIL import Image

    with Image.open(png) as image:
        width, dpi = image.width, image.info.get("dpi", (FIGURE_DPI,))[0]
    return f"{round(width * FIGURE_DPI / dpi)}px" if dpi > 1.5 * FIGURE_DPI else None


def precision(params: dict[str, Any], device_target: str) -> str:
    """What the run computed in, as training decided it: the device's policy first (a CPU
    trains in float32 whatever ``amp_level`` says), then the AMP level."""
    from msresnet.training.device import device_policy

    mixed = device_policy(device_target).mixed_precision
    if not mixed or params["amp_level"] == "O0":
        return "float32"
    return f"float16 ({params['amp_level']})"


def _page_context(dest: Path, page: Path) -> dict[str, Any]:
    """Everything ``templates/results.md.j2`` shows, from the records under ``dest``."""
    facts = _facts(dest)
    run, params, sweep = facts["run"], facts["params"], facts["sweep"]
    held_out = facts["held_out"]
    versions = run["versions"]
    best = json.loads((dest / "train" / "best.json").read_text())
    return {
        **facts,
        "records": Path(os.path.relpath(dest, page.parent.parent)).as_posix(),
        "results_command": shlex.join(["msresnet", "results-page", out_folder(run), "--dest",
                                       "results/cpu", "--page", "book/results.md"]),
        "versions": {"mindspore": versions["mindspore"], "python": versions.get("python", "?"),
                     "numpy": versions.get("numpy", "?")},
        "precision": precision(params, run["device"]["device_target"]),
        "dirty": bool(run["git"].get("dirty")),
        "dataset": _dataset(run),
        "chose_on_held_out": bool(held_out and "test_top1" in sweep),
        "eval_images": params["eval_samples"] or TEST_IMAGES,
        "seed": params.get("seed"),
        "history": json.loads((dest / "train" / "history.json").read_text()),
        "best": best,
        "best_selected_by": best.get("selected_by", ""),
        "figures": _figures(dest, page, facts),
        "skipped": [e["name"] for e in run["notebooks"] if e.get("skipped")],
    }


def render_page(dest: Path, page: Path) -> str:
    """The Markdown of the results page, from the records under ``dest``
    (``templates/results.md.j2``)."""
    dest, page = Path(dest), Path(page)
    return _templates().get_template("results.md.j2").render(_page_context(dest, page))


README_ROW_START = "| CPU, 2 cores (the results page) |"
"""How the README's reproduction table row for the recorded run begins (the rest is generated)."""


def readme_row(dest: Path) -> str:
    """The README's reproduction-table row for the run recorded under ``dest``
    (``templates/readme_row.md.j2``).

    Every figure comes from the records (``run.json``, ``train/history.json``,
    ``train/test.json``), so the README cannot drift from them;
    ``tests/test_results_page.py`` checks the committed row.
    """
    dest = Path(dest)
    facts = _facts(dest)
    test = _test_record(dest, facts)
    context = {**facts, "row_start": README_ROW_START, "records": in_repo(dest), "test": test,
               "chosen_was_last": bool(test) and
               test["chosen"].get("source") == test["last"]["file"]}
    return _templates().get_template("readme_row.md.j2").render(context).rstrip("\n")


def write_readme_row(dest: Path, readme: Path) -> Path:
    """Replace the line of ``readme`` that starts with :data:`README_ROW_START`."""
    lines = Path(readme).read_text(encoding="utf-8").split("\n")
    found = [i for i, line in enumerate(lines) if line.startswith(README_ROW_START)]
    if len(found) != 1:
        raise ResultsError(f"{readme}: expected one line starting with {README_ROW_START!r}, "
                           f"found {len(found)}")
    lines[found[0]] = readme_row(dest)
    return write_text(readme, "\n".join(lines))


def draw_figures(dest: Path) -> list[Path]:
    """Draw the page's own figures from the records under ``dest`` into ``dest/figures``."""
    dest = Path(dest)
    try:
        return results_figures.draw_all(_figure_records(dest, _facts(dest)), dest / "figures")
    except results_figures.FigureError as error:
        raise ResultsError(f"{dest}: {error}") from None


def write_page(dest: Path, page: Path) -> Path:
    """Draw the page's figures (:func:`draw_figures`), then write :func:`render_page`
    to ``page``."""
    draw_figures(dest)
    return write_text(page, render_page(dest, page))
