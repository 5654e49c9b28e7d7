"""The budget ablations: one short, recorded run per trick, against a profile's recipe.

A :class:`Plan` names the profile, what makes a row short, its rows and where runs
and records go. There are two:

* :data:`CPU`, chapter 10's: each row changes one thing in the ``cpu`` profile and
  trains 3 epochs of 4,800 of the 45,000 training images (the same one-epoch warmup
  and linear decay to zero, about 5 minutes on 2 cores), validated once at the end
  on the 5,000 held-out images; the test set (its first 5,000 images) scores the
  same last checkpoint. Two rows train nothing: they score the ``recipe`` run's
  checkpoint differently (flip test-time augmentation, :mod:`msresnet.model.tta`;
  the weight average the run kept, :mod:`msresnet.training.ema`).
* :data:`GPU`, the GPU page's: 20 of ``gpu-fast``'s epochs per row (about 2 minutes
  on one H100), validated every epoch, the test set scoring the last checkpoint
  once; its rows ran alone on one card, so their seconds compare.

The ``seed-N`` rows are the noise floor: the same recipe with other seeds (weights,
shuffles and the held-out images all change), so a difference smaller than their
spread is not evidence of anything. Short runs because full ones do not fit: what a
trick does in a short run is a hint for the full one, not proof, and the pages say
so beside their tables.

Commands (from the repository root; ``msresnet.commands.ablation``)::

    msresnet ablation run                      # train and record every missing cpu row
    msresnet ablation run nesterov             # one row
    msresnet ablation run --profile gpu-fast   # the GPU plan
    msresnet ablation table [--profile gpu-fast]

A row's run goes to ``runs/ablation/<row>`` (``runs/ablation-gpu/``; checkpoints,
not committed) and its record to ``results/budget/ablation/<row>/``
(``results/gpu/ablation/``): ``row.json`` with the command, scores and speed, and a
training row's ``history.json``, ``config.yaml``, ``train.log`` and ``test.json``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from msresnet.atomic import write_json
from msresnet.paths import REPO_ROOT

log = logging.getLogger("msresnet.experiments.ablation")

EMA_DECAY = 0.99  # ~100-step average: a third of the short run's 225 steps
ROW_JSON = "row.json"
COPIED = ("history.json", "config.yaml", "train.log", "test.json")


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the ablation: what changes and how it is scored.

    ``overrides``: Config keys set on top of the recipe (and :data:`SHORT`).
    ``scores``: ``"last"`` (the run's last checkpoint, as trained), ``"flip"``
    (the same with flip TTA) or ``"ema"`` (its weight average); the last two
    score the run of row ``run_of`` and train nothing.
    """

    name: str
    change: str
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scores: str = "last"
    run_of: str | None = None

    @property
    def trains(self) -> bool:
        return self.run_of is None

    @property
    def run_name(self) -> str:
        return self.run_of or self.name


SEED_2 = Row("seed-2", "seed 2 (noise floor: weights, shuffles and held-out images)",
             {"seed": 2})
FLIP_TTA = Row("flip-tta", "flip test-time augmentation (scores the recipe run)",
               scores="flip", run_of="recipe")
NO_LABEL_SMOOTHING = Row("no-label-smoothing", "label smoothing 0 instead of 0.1",
                         {"label_smoothing": 0.0})
"""The rows both plans have, written once."""

CPU_ROWS: tuple[Row, ...] = (
    Row("recipe", "the cpu recipe with plain momentum, short (batch 64, peak 0.1, warmup 1 epoch, "
        "label smoothing 0.1)", {"ema_decay": EMA_DECAY}),
    SEED_2,
    Row("seed-3", "seed 3 (noise floor, a third draw)", {"seed": 3}),
    FLIP_TTA,
    Row("ema", f"weight average, decay {EMA_DECAY} per step (scores the recipe run)",
        scores="ema", run_of="recipe"),
    Row("nesterov", "Nesterov momentum (msresnet.model.nesterov on the CPU)", {"nesterov": True}),
    Row("bn-momentum-0.97", "BatchNorm momentum 0.97 (PyTorch 0.03) instead of 0.9",
        {"bn_momentum": 0.97}),
    NO_LABEL_SMOOTHING,
    Row("no-warmup", "no warmup: linear decay from 0.1 at the first step",
        {"warmup_epochs": 0}),
    Row("lr-0.05", "peak learning rate 0.05", {"lr_max": 0.05}),
    Row("lr-0.2", "peak learning rate 0.2", {"lr_max": 0.2}),
    Row("batch-128", "batch 128 with peak 0.2 (batch and rate scaled together)",
        {"batch_size": 128, "lr_max": 0.2}),
    Row("progressive-16", "progressive resizing: epochs 1-2 at 16x16, epoch 3 at 32x32 "
        "(the same images, fewer pixels)", {"progressive_size": 16, "progressive_epochs": 2}),
    Row("progressive-16-4ep", "progressive resizing for about the recipe's time: "
        "4 epochs, 1-3 at 16x16, the 4th at 32x32",
        {"epoch_size": 4, "valid_frequency": 4, "progressive_size": 16,
         "progressive_epochs": 3}),
)
"""Chapter 10's rows, in the order its table shows them."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """One ablation: the profile its rows change, what makes a row short, the rows,
    and where runs and records go. ``timed``: the rows ran alone on one device, so
    their seconds compare (the table shows them)."""

    profile: str
    short: Mapping[str, Any]
    rows: tuple[Row, ...]
    runs: Path
    records: Path
    timed: bool = False

    @property
    def by_name(self) -> dict[str, Row]:
        return {row.name: row for row in self.rows}


GPU_ROWS: tuple[Row, ...] = (
    Row("recipe", "gpu-fast, short: 20 epochs (warmup 2 epochs to 0.2, linear decay to 0)"),
    FLIP_TTA,
    SEED_2,
    Row("size-40", "40x40 inputs (resized), the CIFAR stem: 1.56 times the pixels",
        {"image_size": 40}),
    Row("lr-0.4", "peak learning rate 0.4", {"lr_max": 0.4}),
    NO_LABEL_SMOOTHING,
    Row("lr-0.1", "peak learning rate 0.1", {"lr_max": 0.1}),
    Row("progressive-16", "progressive resizing: epochs 1-10 at 16x16, 11-20 at 32x32",
        {"progressive_size": 16, "progressive_epochs": 10}),
)
"""The GPU rows, in the order a lease runs them (the most telling first)."""

CPU = Plan("cpu", {"epoch_size": 3, "train_samples": 4800, "valid_frequency": 3,
                   "eval_samples": 5000, "keep_checkpoint_max": 1, "nesterov": False},
           CPU_ROWS, Path("runs/ablation"), REPO_ROOT / "results" / "budget" / "ablation")
"""Chapter 10's ablation of the ``cpu`` recipe: 3 epochs of 4,800 images, one validation
at the end. The rows compare against the recipe as it was when they ran, with plain
momentum (``nesterov`` false); the ``nesterov`` row's result is why the profile now has it."""

GPU = Plan("gpu-fast", {"epoch_size": 20, "save_checkpoint_epochs": 5,
                        "keep_checkpoint_max": 2},
           GPU_ROWS, Path("runs/ablation-gpu"),
           REPO_ROOT / "results" / "gpu" / "ablation", timed=True)
"""The GPU page's ablation of ``gpu-fast``: 20 of its epochs (about 2.5 minutes on one
H100), validated every epoch on the 5,000 held-out images, the test set scoring the
last checkpoint once."""

PLANS = {plan.profile: plan for plan in (CPU, GPU)}

# The CPU plan's parts under their old names (chapter 10 reads them)
PROFILE, SHORT, ROWS, RUNS, RECORDS = CPU.profile, CPU.short, CPU.rows, CPU.runs, CPU.records
BY_NAME = CPU.by_name


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def train_command(row: Row, runs: Path | None = None, plan: Plan = CPU) -> list[str]:
    """The ``msresnet train`` command line that trains ``row``'s run in ``runs``."""
    source = plan.by_name[row.run_name]
    folder = (plan.runs if runs is None else runs) / source.name
    args = ["msresnet", "train", plan.profile, "--output_dir", str(folder)]
    for key, value in {**plan.short, **source.overrides}.items():
        args += [f"--{key}", _value(value)]
    return args + ["--no_progress"]


def score_command(row: Row, plan: Plan = CPU) -> list[str] | None:
    """The command that scores an evaluation-only row (None for a training row)."""
    if row.trains:
        return None
    named = [] if plan is CPU else ["--profile", plan.profile]
    return ["msresnet", "ablation", "run", *named, row.name]


def _evaluate(row: Row, run_dir: Path, plan: Plan) -> dict[str, Any]:
    """Scores of an evaluation-only row on the held-out images and the test images."""
    from msresnet.training.checkpoints import list_checkpoints
    from msresnet.training.ema import EMA_PREFIX
    from msresnet.training.sweep import CheckpointEvaluator

    prefix = EMA_PREFIX if row.scores == "ema" else None
    files = list_checkpoints(run_dir, prefix) if prefix else list_checkpoints(run_dir)
    if not files:
        raise FileNotFoundError(f"{run_dir}: no {'ema-' if prefix else ''}checkpoint to score "
                                f"for row {row.name!r}; train row {row.run_name!r} first")
    flip = row.scores == "flip"
    scores: dict[str, Any] = {"checkpoint": files[-1].name}
    for split in ("valid", "test"):
        evaluator = CheckpointEvaluator.for_run(run_dir, split=split, flip=flip,
                                                eval_samples=plan.short.get("eval_samples"))
        record = evaluator.evaluate(files[-1].path)
        scores[split] = {"top1": round(record.top1, 6), "top5": round(record.top5, 6),
                         "loss": round(record.loss, 6), "seconds": round(record.seconds, 3)}
    return scores


def record_row(row: Row, runs: Path | None = None, records: Path | None = None,
               plan: Plan = CPU) -> dict[str, Any]:
    """Score ``row`` from its run folder and write ``<records>/<row>/row.json`` (+ run files)."""
    from msresnet.training.callbacks import read_history
    from msresnet.training.selection import read_test

    runs = plan.runs if runs is None else runs
    run_dir = runs / row.run_name
    history = read_history(run_dir)
    if not history:
        raise FileNotFoundError(f"{run_dir}: no history.json records: did the run start?")
    last = history[-1]
    command, scorer = train_command(row, plan=plan), score_command(row, plan)
    record: dict[str, Any] = {
        "row": row.name, "change": row.change, "scores": row.scores,
        "run": row.run_name, "overrides": dict(plan.by_name[row.run_name].overrides),
        "short": dict(plan.short), "command": shlex.join(command),
        "score_command": shlex.join(scorer) if scorer else None,
        "train_seconds": round(sum(r["train_seconds"] for r in history), 1),
        "images_per_second": last.get("images_per_second"),
        "train_loss": last["train_loss"],
    }
    if row.trains:
        test = read_test(run_dir)
        if test is None:
            raise FileNotFoundError(f"{run_dir}: no test.json: did the run finish?")
        record["valid"] = {"top1": last["val_top1"], "top5": last["val_top5"],
                           "loss": last["val_loss"]}
        record["test"] = {k: test["last"][k] for k in ("top1", "top5", "loss")}
        record["checkpoint"] = test["last"].get("file")
    else:
        record.update(_evaluate(row, run_dir, plan))
    folder = (plan.records if records is None else records) / row.name
    folder.mkdir(parents=True, exist_ok=True)
    if row.trains:
        for name in COPIED:
            if (run_dir / name).is_file():
                shutil.copyfile(run_dir / name, folder / name)
    write_json(folder / ROW_JSON, record)
    log.info("recorded %s: valid top-1 %.4f, test top-1 %.4f", row.name,
             record["valid"]["top1"], record["test"]["top1"])
    return record


def run_row(row: Row, runs: Path | None = None, records: Path | None = None,
            plan: Plan = CPU) -> dict[str, Any]:
    """Train the row's run when it has no ``test.json`` yet, then record the row."""
    run_dir = (plan.runs if runs is None else runs) / row.run_name
    if not (run_dir / "test.json").is_file():
        command = train_command(row, runs, plan)
        log.info("training %s: %s", row.run_name, shlex.join(command))
        subprocess.run([sys.executable, "-m", *command], check=True)
    return record_row(row, runs, records, plan)


def read_rows(records: Path | None = None, plan: Plan = CPU) -> list[dict[str, Any]]:
    """The recorded rows, in the plan's order (rows not recorded yet are left out)."""
    records = plan.records if records is None else records
    rows = []
    for row in plan.rows:
        path = records / row.name / ROW_JSON
        if path.is_file():
            rows.append(json.loads(path.read_text(encoding="utf-8")))
    return rows


SEED_ROWS = ("recipe", "seed-2", "seed-3")
"""The same recipe with other seeds: their spread is the noise floor."""


def noise_floor(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Range (max - min) of validation top-1 over the seed rows; None if fewer than two."""
    seeds = [r["valid"]["top1"] for r in rows if r["row"] in SEED_ROWS]
    return max(seeds) - min(seeds) if len(seeds) >= 2 else None


def table(rows: Sequence[Mapping[str, Any]], timed: bool = False) -> list[list[str]]:
    """Rows of the ablation table: change, validation and test top-1, difference from the recipe.

    A speed column only when ``timed`` (:attr:`Plan.timed`): the CPU rows were trained
    while other work shared the CPU, so their images/s (kept in ``row.json``) are not
    comparable; speed is measured apart there (``msresnet bench``,
    ``results/budget/throughput.json``).
    """
    base = next((r for r in rows if r["row"] == "recipe"), None)
    out = [["row", "change", "valid top-1 %", "vs recipe", "test top-1 %"]]
    out[0] += ["train s"] if timed else []
    for r in rows:
        valid, test = 100 * r["valid"]["top1"], 100 * r["test"]["top1"]
        delta = "" if base is None or r is base else \
            f"{valid - 100 * base['valid']['top1']:+.1f}"
        line = [r["row"], r["change"], f"{valid:.1f}", delta, f"{test:.1f}"]
        seconds = r["train_seconds"] if r["scores"] == "last" else None
        out.append(line + ([f"{seconds:.0f}" if seconds else ""] if timed else []))
    return out
