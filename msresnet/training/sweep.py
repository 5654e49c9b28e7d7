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
goes on, because one bad file should not hide the other epochs' results. It is
absent everywhere after that: in the choice, in the final test's "last"
checkpoint (the newest readable one) and in the records, which list it and why.

What is chosen, and when an existing ``best.ckpt`` stays, is
:mod:`msresnet.training.selection`'s: the sweep hands it the scores.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from mindspore import nn
from mindspore.train import Model

from msresnet.atomic import write_csv, write_json
from msresnet.text_table import format_table  # the chapters import it from here
from msresnet.data.cifar10 import FOLDER_NAME, NUM_CLASSES, dataset_folder
from msresnet.model.losses import SparseCrossEntropy
from msresnet.training.checkpoints import (BEST_JSON, PREFIX, CheckpointCorruptError,
                                           CheckpointError, checkpoint_meta, list_checkpoints,
                                           load_strict)
from msresnet.training.selection import (TEST_JSON, SelectionError, final_test, select_best,
                                         settle_best)

log = logging.getLogger("msresnet.training.sweep")

SWEEP_FIELDS = ("file", "epoch", "step", "top1", "top5", "loss", "seconds")
DATA_FIELDS = ("split", "images", "images_sha256", "data_folder")
"""Columns of ``sweep.csv`` after a record's: the images every row was scored on."""
SWEEP_CSV = "sweep.csv"
SWEEP_JSON = "sweep.json"


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
    # Which images were scored (msresnet.data.identity.evaluation_images), and the settings
    # the sweep used that differ from the run's recording: {key: [recorded, used]}.
    evaluated_on: dict[str, Any] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> SweepRecord | None:
        """The best scored checkpoint (:func:`msresnet.training.selection.select_best`)."""
        return select_best(self.records)

    @property
    def last(self) -> SweepRecord | None:
        return self.records[-1] if self.records else None

    @property
    def suffix(self) -> str:
        """How this sweep's tables are told apart: ``""`` on the run's own data folder,
        ``"-<folder name>"`` on another (``sweep-<name>.csv``, beside the run's own)."""
        if "data_dir" not in self.overrides or not self.evaluated_on:
            return ""
        folder = Path(self.evaluated_on["folder"])
        name = folder.parent.name if folder.name == FOLDER_NAME else folder.name
        return "-" + (re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "other")

    def named(self, name: str) -> str:
        """``name`` of this sweep's file: ``sweep.csv``, or ``sweep-<name>.csv`` on another
        data folder (:attr:`suffix`)."""
        stem, _, extension = name.rpartition(".")
        return f"{stem}{self.suffix}.{extension}"

    def rows(self, digits: int = 4) -> list[list[Any]]:
        """Header + one row per checkpoint, numbers rounded (for printing)."""
        rows: list[list[Any]] = [["file", "epoch", "step", "top1", "top5", "loss"]]
        for r in self.records:
            rows.append([r.file, r.epoch, r.step, round(r.top1, digits), round(r.top5, digits),
                         round(r.loss, digits)])
        return rows

    def write_csv(self, path: str | os.PathLike[str]) -> Path:
        """``sweep.csv``, written atomically (a killed sweep leaves the previous file): one
        row per checkpoint, each naming the images it was scored on (:data:`DATA_FIELDS`)."""
        on = self.evaluated_on or {}
        data = {"split": on.get("split"), "images": on.get("images"),
                "images_sha256": on.get("sha256"), "data_folder": on.get("folder")}
        return write_csv(path, SWEEP_FIELDS + DATA_FIELDS,
                         ({**r.to_dict(), **data} for r in self.records))


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
        self.source: Any = None  # the run's DataSource (msresnet.data.source), set by for_run

    @classmethod
    def for_run(cls, run_dir: str | os.PathLike[str],
                data_dir: str | os.PathLike[str] | None = None, eval_samples: int | None = None,
                batch_size: int | None = None, split: str | None = None,
                flip: bool = False) -> CheckpointEvaluator:
        """Build ResNet50 and the run's validation pipeline as its ``config.yaml`` describes.

        The run's recording decides everything that must match its checkpoints or its
        data: stem, image size, number of classes, and the data folder. ``data_dir``
        (the folder that contains ``cifar-10-batches-bin``, or that folder itself)
        overrides the recorded folder only when given and, once resolved, another
        folder; that is reported (a warning, and ``overrides`` in the evaluator and in
        ``sweep.json``), never silently used. ``eval_samples``: the first N images
        scored (None: all).

        ``split``: ``"valid"`` scores the run's held-out validation images (its
        ``valid_split`` and ``seed``, rebuilt from the data folder), ``"test"`` the
        test set; None (the default) is what the run validated on during training:
        the held-out images when ``valid_split`` > 0, else the test set. ``flip``:
        horizontal-flip test-time augmentation (:class:`msresnet.model.tta.FlipAverage`).
        """
        from msresnet.training.factories import make_loss, make_network, set_context

        if split not in (None, "valid", "test"):
            raise ValueError(f"split must be 'valid', 'test' or None, got {split!r}")
        config, overrides = _run_config(run_dir, data_dir)
        split = split or ("valid" if config.valid_split else "test")
        if split == "valid" and not config.valid_split:
            raise ValueError(f"{Path(run_dir) / 'config.yaml'} has valid_split 0: the run held "
                             "out no validation images (use split 'test')")
        set_context(config)
        net = make_network(config)
        dataset, evaluated_on, source = _evaluation_data(config, split, eval_samples, batch_size)
        evaluator = cls(net, dataset, make_loss(config), flip=flip)
        evaluator.config, evaluator.split, evaluator.source = config, split, source
        evaluator.evaluated_on, evaluator.overrides = evaluated_on, overrides
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


def _run_config(run_dir: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None,
                ) -> tuple[Any, dict[str, list[Any]]]:
    """The run's recorded config (``data_dir`` replaced when it names another folder)
    and ``{key: [recorded, used]}`` of what differs; the data folder must exist."""
    from msresnet.config.run import CONFIG_FILE, recorded_config, with_data_dir
    from msresnet.training.resume import config_differences

    config_path = Path(run_dir) / CONFIG_FILE
    recorded = recorded_config(run_dir)
    if recorded is None:
        raise FileNotFoundError(f"{config_path} not found: is {run_dir} a training run folder?")
    config = with_data_dir(dataclasses.replace(recorded, resume_from=None), data_dir)
    overrides = {key: list(pair) for key, pair in
                 config_differences(recorded, config, ("resume_from",)).items()}
    folder = dataset_folder(config.data_dir)
    if not folder.is_dir():
        where = "given with --data_dir" if data_dir is not None else f"recorded in {config_path}"
        raise FileNotFoundError(f"the data folder {folder} ({where}) does not exist; "
                                "pass the folder that holds cifar-10-batches-bin with --data_dir")
    for key, (old, new) in overrides.items():
        log.warning("evaluating with %s=%s, but %s recorded %s", key, new, config_path, old)
    return config, overrides


def _evaluation_data(config: Any, split: str, eval_samples: int | None, batch_size: int | None,
                     ) -> tuple[Any, dict[str, Any], Any]:
    """The pipeline of ``split``'s first ``eval_samples`` images, which images they are,
    and the run's data (:class:`msresnet.data.source.DataSource`, opened once)."""
    from msresnet.data.source import open_data_source
    from msresnet.training.factories import make_test_dataset, make_valid_dataset

    source = open_data_source(dataclasses.replace(config, eval_samples=eval_samples))
    if split == "valid":
        return (make_valid_dataset(config, batch_size, source=source), source.evaluated_on,
                source)
    return make_test_dataset(config, batch_size, source=source), source.tested_on, source


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
                         eval_samples: int | None = None, skipped: Sequence[tuple[str, str]] = (),
                         name: str = TEST_JSON) -> dict[str, Any]:
    """Score the run's chosen checkpoint and its last readable one on the test set, once
    (:func:`msresnet.training.selection.final_test`, ``test.json`` or ``name``).

    For a run that chose on held-out images: the evaluator's network and model are
    reused (the graph is compiled already), only the dataset is the test set.
    ``skipped``: the files the sweep could not read (left out of "last" too).
    """
    from msresnet.training.factories import make_test_dataset

    config = dataclasses.replace(evaluator.config, eval_samples=eval_samples)
    source = evaluator.source.with_eval_samples(eval_samples)  # not validated again
    test_ds = make_test_dataset(config, evaluator.dataset.get_batch_size(), source=source)
    return final_test(folder, evaluator.net, evaluator.model, test_ds, source.tested_on,
                      skipped, name)


def confusion_matrix(labels: np.ndarray, preds: np.ndarray,
                     num_classes: int = NUM_CLASSES) -> np.ndarray:
    """``cm[true, predicted]`` counts."""
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (np.asarray(labels, dtype=np.int64), np.asarray(preds, dtype=np.int64)), 1)
    return cm


def per_class_accuracy(cm: np.ndarray) -> np.ndarray:
    """Recall of each class: correct / images of that class (nan for an absent class)."""
    totals = cm.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, np.diag(cm) / np.maximum(totals, 1), np.nan)


def _settle(folder: Path, result: SweepResult, evaluator: CheckpointEvaluator,
            replace: bool) -> dict[str, Any]:
    """``best.*`` after the sweep (:func:`msresnet.training.selection.settle_best`), as
    ``sweep.json`` records it: ``promoted`` or ``kept``, and the standing choice's scores."""
    settled = settle_best(folder, result.best, result.evaluated_on,
                          f"checkpoint sweep on {result.samples} {evaluator.split} images",
                          evaluator.evaluate, replace=replace, trust=not evaluator.flip)
    result.skipped.extend(settled.skipped)
    record: dict[str, Any] = {settled.action: settled.best}
    if settled.standing is not None:
        record["standing"] = settled.standing
    return record


def _records(result: SweepResult) -> dict[str, Any]:
    """``sweep.json``'s scores: which images (and any setting other than the run's), the
    table it wrote, every checkpoint's scores and every file skipped, and why."""
    return {"samples": result.samples, "evaluated_on": result.evaluated_on,
            "overrides": result.overrides, "table": result.named(SWEEP_CSV),
            "records": [r.to_dict() for r in result.records],
            "skipped": [{"file": f, "reason": why} for f, why in result.skipped],
            "best": result.best.to_dict() if result.best is not None else None}


@dataclass
class SweepOutcome:
    """What :func:`run_sweep` did to a run folder: the scores (``result``), the
    evaluator it built (its network and compiled graph, for further predictions),
    what became of ``best.*`` (``record``'s ``promoted``, ``kept`` or
    ``not_promoted``; nothing with ``promote=False``), the test of the choice
    (``test``, None when there was none), and the error that refused a promotion
    (``refused``: recorded first, for the caller to raise)."""

    folder: Path
    evaluator: CheckpointEvaluator
    result: SweepResult
    record: dict[str, Any]
    refused: Exception | None = None

    @property
    def test(self) -> dict[str, Any] | None:
        return self.record.get("test")

    @property
    def best(self) -> dict[str, Any] | None:
        """What ``best.json`` holds now (None: the run has no choice)."""
        from msresnet.training.selection import read_best

        return read_best(self.folder)


def run_sweep(run_dir: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None = None,
              eval_samples: int | None = None, batch_size: int | None = None,
              split: str | None = None, *, promote: bool = True,
              replace_best: bool = False) -> SweepOutcome:
    """``msresnet sweep``, whole: the one function the command and chapter 5 call.

    Scores every checkpoint of ``run_dir`` (:func:`sweep`), writes the table
    (``sweep.csv``), settles ``best.*`` (:func:`_settle`, unless ``promote`` is
    False), scores the choice and the last readable checkpoint on the test set when
    the run chose on held-out images (``test.json``), and writes ``sweep.json``
    once, at the end. On another data folder than the run's, every file goes beside
    the run's own with the folder's name (``sweep-<name>.csv``, ``sweep-<name>.json``,
    ``test-<name>.json``), and the run's records are left as they are. A promotion
    refused (other images, an unreadable ``best.ckpt`` of another model) is recorded
    in ``sweep.json`` and returned in ``refused``; nothing is tested then.
    """
    folder = Path(run_dir)
    if (folder / "config.yaml").is_file() and not list_checkpoints(folder):  # refused unwritten
        raise FileNotFoundError(f"no {PREFIX}-<epoch>_<step>.ckpt files in {folder}: nothing to "
                                "sweep (name the run folder that holds the checkpoints)")
    evaluator = CheckpointEvaluator.for_run(run_dir, data_dir, eval_samples, batch_size,
                                            split=split)
    result = sweep(folder, evaluator)
    result.write_csv(folder / result.named(SWEEP_CSV))
    settled: dict[str, Any] = {}
    refused = None
    if result.best is not None and promote:
        try:
            settled = _settle(folder, result, evaluator, replace_best)
        except (SelectionError, CheckpointError) as err:
            refused, settled = err, {"not_promoted": str(err)}
    record = {**_records(result), **settled}
    if (result.best is not None and evaluator.split == "valid" and refused is None
            and (folder / BEST_JSON).is_file()):
        record["test"] = test_chosen_and_last(evaluator, folder, eval_samples, result.skipped,
                                              result.named(TEST_JSON))
    write_json(folder / result.named(SWEEP_JSON), record)
    return SweepOutcome(folder, evaluator, result, record, refused)


__all__ = ["SWEEP_CSV", "SWEEP_JSON", "SweepRecord", "SweepResult", "SweepOutcome",
           "CheckpointEvaluator", "run_sweep", "sweep", "test_chosen_and_last", "confusion_matrix", "per_class_accuracy",
           "format_table"]
