"""Evaluate every checkpoint of a run, pick the best, and look inside it.

A run folder holds ``resnet50-<epoch>_<step>.ckpt`` files. :func:`sweep` scores
each one on the same evaluation data, oldest first, with one network and one
compiled evaluation graph: :class:`CheckpointEvaluator` builds them once and, per
checkpoint, only loads new weights into the existing parameters (a fresh network
per checkpoint would recompile the graph every time).

Loading is strict (:func:`msresnet.training.checkpoints.load_strict`): a checkpoint that
does not fit the network stops the sweep with an error naming the parameters,
because it means the sweep is pointed at the wrong run or the wrong model
settings. A damaged file (unreadable, bad checksum, truncated) is different: it
is skipped with a warning naming it (logger ``msresnet.training.sweep``), and the sweep
goes on, because one bad file should not hide the other epochs' results.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from mindspore import nn
from mindspore.train import Model

from msresnet.model.losses import SparseCrossEntropy
from msresnet.atomic import copy_file, write_csv, write_json
from msresnet.training.checkpoints import (BEST_CKPT, BEST_JSON, PREFIX, CheckpointCorruptError,
                                  checkpoint_meta, choice_key, list_checkpoints,
                                  load_strict)

log = logging.getLogger("msresnet.training.sweep")

SWEEP_FIELDS = ("file", "epoch", "step", "top1", "top5", "loss", "seconds")


@dataclass
class SweepRecord:
    """One checkpoint's scores (``seconds``: load + evaluate, the first includes compiling)."""

    file: str
    epoch: int
    step: int
    top1: float
    top5: float
    loss: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SweepResult:
    """All scored checkpoints (oldest first) and the files that were skipped."""

    records: list[SweepRecord]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    samples: int | None = None
    # Which images were scored (msresnet.data.cifar10.evaluation_images), and the settings
    # the sweep used that differ from the run's recording: {key: [recorded, used]}.
    evaluated_on: dict[str, Any] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> SweepRecord | None:
        return select_best(self.records)

    @property
    def last(self) -> SweepRecord | None:
        return self.records[-1] if self.records else None

    def rows(self, digits: int = 4) -> list[list[Any]]:
        """Header + one row per checkpoint, numbers rounded (for printing)."""
        rows: list[list[Any]] = [["file", "epoch", "step", "top1", "top5", "loss"]]
        for r in self.records:
            rows.append([r.file, r.epoch, r.step, round(r.top1, digits), round(r.top5, digits),
                         round(r.loss, digits)])
        return rows

    def write_csv(self, path: str | os.PathLike[str]) -> Path:
        """``sweep.csv``, written atomically (a killed sweep leaves the previous file)."""
        return write_csv(path, SWEEP_FIELDS, (r.to_dict() for r in self.records))


def select_best(records: Iterable[SweepRecord]) -> SweepRecord | None:
    """Highest top-1; ties go to the lower loss, then to the earlier checkpoint."""
    records = list(records)
    if not records:
        return None
    return max(records, key=lambda r: (*choice_key(r.top1, r.loss), -r.epoch, -r.step))


def format_table(rows: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width text table (header first), for notebooks and logs."""
    text = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in text) for i in range(len(text[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in text]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


class CheckpointEvaluator:
    """One network, one ``Model``, one evaluation dataset; weights swapped per checkpoint.

    ``net`` is any Cell (ResNet50 for the book, a tiny one in tests); ``dataset``
    yields ``(image, label)`` batches. :meth:`evaluate` loads a checkpoint strictly
    and returns its scores; only the first call compiles the evaluation graph.
    """

    def __init__(self, net: nn.Cell, dataset: Any, loss_fn: nn.Cell | None = None,
                 flip: bool = False) -> None:
        from msresnet.training.factories import make_metrics
        from msresnet.model.tta import FlipAverage

        self.net = net  # checkpoints load into this one
        self.flip = flip  # score the mean logits of each image and its mirror
        self.scored = FlipAverage(net) if flip else net
        self.dataset = dataset
        self.loss_fn = loss_fn or SparseCrossEntropy()
        self.model = Model(self.scored, loss_fn=self.loss_fn, metrics=make_metrics())
        self.loaded: Path | None = None
        self.config: Any = None  # the run's Config when built by for_run
        self.split = "test"  # which images ``dataset`` holds: "valid" or "test" (for_run)
        self.evaluated_on: dict[str, Any] | None = None  # set by for_run
        self.overrides: dict[str, Any] = {}  # {key: [recorded, used]}, set by for_run

    @classmethod
    def for_run(cls, run_dir: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None = None,
                eval_samples: int | None = None, batch_size: int | None = None,
                split: str | None = None, flip: bool = False) -> CheckpointEvaluator:
        """Build ResNet50 and the run's validation pipeline as its ``config.yaml`` describes.

        The run's recording decides everything that must match its checkpoints or its
        data: stem, image size, number of classes, and the data folder. ``data_dir``
        (the folder that contains ``cifar-10-batches-bin``) overrides the recorded
        folder only when given; a folder other than the recorded one is reported
        (a warning, and ``overrides`` in the evaluator and in ``sweep.json``), never
        silently used. ``eval_samples``: the first N images scored (None: all).

        ``split``: ``"valid"`` scores the run's held-out validation images (its
        ``valid_split`` and ``seed``, rebuilt from the data folder), ``"test"`` the
        test set; None (the default) is what the run validated on during training:
        the held-out images when ``valid_split`` > 0, else the test set. ``flip``:
        horizontal-flip test-time augmentation (:class:`msresnet.model.tta.FlipAverage`).
        """
        from msresnet.data.cifar10 import evaluation_images
        from msresnet.training.factories import (dataset_folder, make_loss, make_network,
                                        make_test_dataset, make_valid_dataset, set_context,
                                        validation_images)
        from msresnet.training.train import CONFIG_FILE, config_differences, recorded_config

        if split not in (None, "valid", "test"):
            raise ValueError(f"split must be 'valid', 'test' or None, got {split!r}")

        config_path = Path(run_dir) / CONFIG_FILE
        recorded = recorded_config(run_dir)
        if recorded is None:
            raise FileNotFoundError(f"{config_path} not found: is {run_dir} a training run folder?")
        config = dataclasses.replace(recorded, resume_from=None)
        if data_dir is not None:
            config = dataclasses.replace(config, data_dir=str(data_dir))
        overrides = {key: list(pair) for key, pair in
                     config_differences(recorded, config, ("resume_from",)).items()}
        folder = dataset_folder(config.data_dir)
        if not folder.is_dir():
            where = "given with --data_dir" if data_dir is not None else f"recorded in {config_path}"
            raise FileNotFoundError(f"the data folder {folder} ({where}) does not exist; "
                                    "pass the folder that holds cifar-10-batches-bin with --data_dir")
        for key, (old, new) in overrides.items():
            log.warning("evaluating with %s=%s, but %s recorded %s", key, new, config_path, old)
        split = split or ("valid" if config.valid_split else "test")
        if split == "valid" and not config.valid_split:
            raise ValueError(f"{config_path} has valid_split 0: the run held out no "
                             "validation images (use split 'test')")
        set_context(config)
        net = make_network(config)
        scored = dataclasses.replace(config, eval_samples=eval_samples)
        if split == "valid":
            dataset = make_valid_dataset(scored, batch_size)
            evaluated_on = validation_images(scored)
        else:
            dataset = make_test_dataset(scored, batch_size)
            evaluated_on = evaluation_images(folder, eval_samples)
        evaluator = cls(net, dataset, make_loss(config), flip=flip)
        evaluator.config = config
        evaluator.split = split
        evaluator.evaluated_on = evaluated_on
        evaluator.overrides = overrides
        return evaluator

    def load(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Load ``path`` into the network (strict); returns the checkpoint's parameters."""
        params = load_strict(self.net, path)
        self.loaded = Path(path)
        return params

    def evaluate(self, path: str | os.PathLike[str]) -> SweepRecord:
        """Scores of one checkpoint on the evaluation data."""
        start = time.perf_counter()
        params = self.load(path)
        meta = checkpoint_meta(params)
        result = self.model.eval(self.dataset, dataset_sink_mode=False)
        return SweepRecord(file=Path(path).name, epoch=meta["epoch"] or 0, step=meta["step"] or 0,
                           top1=float(result["top1"]), top5=float(result["top5"]),
                           loss=float(result["loss"]), seconds=time.perf_counter() - start)

    def predict(self, path: str | os.PathLike[str] | None = None, dataset: Any = None,
                ) -> tuple[np.ndarray, np.ndarray]:
        """``(labels, predicted classes)`` over the evaluation data, in dataset order.

        Loads ``path`` first when given. ``dataset``: other batches to predict (e.g.
        the test set after choosing on validation images); default the evaluator's.
        Evaluation pipelines are not shuffled, so position ``i`` is the ``i``-th
        image they read (of ``test_batch.bin`` for the test set).
        """
        if path is not None:
            self.load(path)
        self.scored.set_train(False)
        labels, preds = [], []
        for image, label in (dataset or self.dataset).create_tuple_iterator(num_epochs=1):
            logits = self.scored(image)
            labels.append(label.asnumpy())
            preds.append(logits.asnumpy().argmax(axis=1))
        return np.concatenate(labels).astype(np.int64), np.concatenate(preds).astype(np.int64)


def sweep(folder: str | os.PathLike[str], evaluator: CheckpointEvaluator,
          prefix: str = PREFIX) -> SweepResult:
    """Evaluate every ``<prefix>-<epoch>_<step>.ckpt`` in ``folder``, oldest first.

    Damaged files are skipped with a warning naming them; a checkpoint that does
    not fit the network raises :class:`~msresnet.training.checkpoints.CheckpointMismatchError`,
    and one MindSpore will not load for lack of memory a plain ``CheckpointError``
    (an intact file left out would change which checkpoint wins).
    """
    records: list[SweepRecord] = []
    skipped: list[tuple[str, str]] = []
    files = list_checkpoints(folder, prefix)
    if not files:
        log.warning("no %s-<epoch>_<step>.ckpt files in %s", prefix, folder)
    for item in files:
        try:
            record = evaluator.evaluate(item.path)
        except CheckpointCorruptError as error:
            log.warning("skipping %s: %s", item.name, error)
            skipped.append((item.name, str(error)))
            continue
        if (record.epoch, record.step) == (0, 0):  # no append_dict: take the file name's
            record.epoch, record.step = item.epoch, item.step
        records.append(record)
    samples = _dataset_rows(evaluator.dataset)
    return SweepResult(records, skipped, samples, evaluator.evaluated_on, dict(evaluator.overrides))


def _dataset_rows(dataset: Any) -> int | None:
    """Images the evaluation scores: the rows feeding the batch step.

    Batches times batch size would over-count: evaluation keeps its last partial
    batch (10,000 test images in batches of 32 are 313 batches, not 10,016 images).
    """
    try:
        import mindspore.dataset as ds

        while isinstance(dataset, ds.BatchDataset):
            dataset = dataset.children[0]
        return int(dataset.get_dataset_size())
    except Exception:  # noqa: BLE001 - informational only
        return None


def test_chosen_and_last(evaluator: CheckpointEvaluator, folder: str | os.PathLike[str],
                         eval_samples: int | None = None) -> dict[str, Any]:
    """Score the run's chosen checkpoint and its last one on the test set (``test.json``).

    For a run that chose on held-out images: the evaluator's network and model are
    reused (the graph is compiled already), only the dataset is the test set.
    """
    from msresnet.data.cifar10 import evaluation_images
    from msresnet.training.factories import dataset_folder, make_test_dataset
    from msresnet.training.final_test import score_chosen_and_last

    config = dataclasses.replace(evaluator.config, eval_samples=eval_samples)
    on = evaluation_images(dataset_folder(config.data_dir), eval_samples)
    return score_chosen_and_last(folder, evaluator.net, evaluator.model,
                                 make_test_dataset(config, evaluator.dataset.get_batch_size()), on)


class SelectionError(ValueError):
    """A best checkpoint that a new selection must not silently replace."""


def promote_best(folder: str | os.PathLike[str], record: SweepRecord,
                 selected_by: str = "checkpoint sweep",
                 evaluated_on: dict[str, Any] | None = None, *, replace: bool = False,
                 ) -> dict[str, Any]:
    """Copy the chosen checkpoint to ``best.ckpt`` and write ``best.json`` (both atomically).

    ``evaluated_on`` (:func:`msresnet.data.cifar10.evaluation_images`, e.g. the sweep
    result's) names the images the choice was made on. An existing selection is
    replaced only when it was made on the same images (these may be more: all 10,000
    test images where training validated on the first 512), because a choice made
    on other data (another copy of CIFAR-10, a wrong folder) is not a better choice,
    only a different one. Otherwise :class:`SelectionError` says why, unless
    ``replace`` (the sweep's ``--replace-best``). The replaced selection is kept as
    ``best.previous.json``/``best.previous.ckpt``.
    """
    from msresnet.training.callbacks import keep_previous_best, read_best
    from msresnet.data.cifar10 import same_images_as

    folder = Path(folder)
    current = read_best(folder)
    if current is not None and not replace:
        before = current.get("evaluated_on")
        if not before or not evaluated_on or not same_images_as(before, evaluated_on):
            def describe(on: dict[str, Any] | None) -> str:
                if not on:
                    return "images it did not record"
                return f"{on['images']} {on['split']} images of {on['folder']} (sha256 {str(on['sha256'])[:12]})"
            raise SelectionError(
                f"{folder / BEST_JSON} was selected on {describe(before)}; this selection was "
                f"made on {describe(evaluated_on)}, which do not include them: best.json and "
                "best.ckpt are left as they are (pass --replace-best to replace them anyway)")
    if current is not None:
        keep_previous_best(folder)
    copy_file(folder / record.file, folder / BEST_CKPT)
    best = {"epoch": record.epoch, "step": record.step, "top1": round(record.top1, 6),
            "top5": round(record.top5, 6), "loss": round(record.loss, 6),
            "source": record.file, "selected_by": selected_by, "evaluated_on": evaluated_on}
    write_json(folder / BEST_JSON, best)
    return best


def confusion_matrix(labels: np.ndarray, preds: np.ndarray, num_classes: int = 10) -> np.ndarray:
    """``cm[true, predicted]`` counts."""
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (np.asarray(labels, dtype=np.int64), np.asarray(preds, dtype=np.int64)), 1)
    return cm


def per_class_accuracy(cm: np.ndarray) -> np.ndarray:
    """Recall of each class: correct / images of that class (nan for an absent class)."""
    totals = cm.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, np.diag(cm) / np.maximum(totals, 1), np.nan)


SWEEP_CSV = "sweep.csv"
SWEEP_JSON = "sweep.json"


def main(argv: Sequence[str] | None = None) -> int:
    """``msresnet sweep RUN_DIR [--data_dir DIR] [--eval_samples N|null] ...``

    Sweeps the run, prints the table, writes ``sweep.csv``/``sweep.json`` into the run
    folder and (unless ``--no-promote``) promotes the best checkpoint.
    """
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="msresnet sweep",
                                     description="Evaluate every checkpoint of a training run.")
    parser.add_argument("run_dir", help="the run folder (holds config.yaml and the checkpoints)")
    parser.add_argument("--data_dir", default=None,
                        help="folder containing cifar-10-batches-bin (default: the run's own, "
                             "from its config.yaml)")
    parser.add_argument("--eval_samples", default="null",
                        help="first N images per checkpoint; null: all of the split")
    parser.add_argument("--split", choices=("valid", "test"), default=None,
                        help="choose on the run's held-out validation images or on the test "
                             "set (default: what the run validated on)")
    parser.add_argument("--batch_size", type=int, default=None, help="evaluation batch size")
    parser.add_argument("--no-promote", action="store_true", help="do not write best.ckpt/best.json")
    parser.add_argument("--replace-best", action="store_true",
                        help="replace best.ckpt/best.json even when they were selected on "
                             "other images (they are kept as best.previous.*)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(levelname)s %(name)s: %(message)s")
    samples = None if args.eval_samples.lower() in ("null", "none") else int(args.eval_samples)
    evaluator = CheckpointEvaluator.for_run(args.run_dir, args.data_dir, samples, args.batch_size,
                                            split=args.split)
    result = sweep(args.run_dir, evaluator)
    print(format_table(result.rows()))
    folder = Path(args.run_dir)
    result.write_csv(folder / SWEEP_CSV)
    payload: dict[str, Any] = {
        "samples": result.samples, "evaluated_on": result.evaluated_on,
        "overrides": result.overrides, "records": [r.to_dict() for r in result.records],
        "skipped": [{"file": f, "reason": why} for f, why in result.skipped]}
    refused = None
    if result.best is not None:
        payload["best"] = result.best.to_dict()
        if not args.no_promote:
            try:
                payload["promoted"] = promote_best(
                    folder, result.best,
                    f"checkpoint sweep on {result.samples} {evaluator.split} images",
                    result.evaluated_on, replace=args.replace_best)
            except SelectionError as err:
                refused = err
                payload["not_promoted"] = str(err)
        if evaluator.split == "valid" and refused is None and (folder / BEST_JSON).is_file():
            payload["test"] = test_chosen_and_last(evaluator, folder, samples)
            print(json.dumps({role: payload["test"][role] for role in ("chosen", "last")}))
    write_json(folder / SWEEP_JSON, payload)
    print(json.dumps(payload.get("best")))
    if refused is not None:
        raise refused
    return 0 if result.records else 1


__all__ = ["SweepRecord", "SweepResult", "CheckpointEvaluator", "sweep", "select_best",
           "test_chosen_and_last",
           "promote_best", "SelectionError", "confusion_matrix", "per_class_accuracy", "format_table", "main"]
