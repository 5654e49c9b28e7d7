"""The run's chosen checkpoint: ``best.json``, the rule that chooses, and its one test.

Training (:class:`msresnet.training.callbacks.BestCheckpoint`) and the sweep
(``msresnet sweep``) both choose a checkpoint and record the choice; this module is
the one place that says how, so that the two cannot drift apart:

* **the choice rule** (:func:`rank_key`, :func:`select_best`): the higher top-1;
  a tie goes to the lower loss, then to the earlier checkpoint. Values are compared
  as ``best.json`` keeps them (6 digits), so a record read back ranks as it did;
* **the same-images rule**: a choice's scores are comparable with new ones only when
  both were measured on the same images (:func:`same_images`: the same split, count
  and SHA-256, wherever the folder is), and a new choice may replace a recorded one
  when its images include the recorded ones (:func:`includes`: all 5,000 held-out
  images where training validated on the first 512). Images are named by
  :func:`msresnet.data.identity.evaluation_images`;
* **the record**: ``best.ckpt`` beside ``best.json``, written by :func:`write_best`
  alone (the epoch, step, scores, the periodic checkpoint it came from, who chose it,
  on which images, and ``best.ckpt``'s own SHA-256, which lets a later sweep trust
  the record without scoring the file again);
* **the sweep's settlement** (:func:`settle_best`): the existing choice, when its
  file is readable and it was made on these images, stays unless a readable
  checkpoint beats it; a damaged periodic checkpoint is no reason to give it up;
* **the final test** (:func:`final_test`): the chosen checkpoint and the newest
  readable periodic one, scored once on the test set (``test.json``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msresnet.atomic import copy_file, write_json
from msresnet.data.identity import same_images_as
from msresnet.training.checkpoints import (BEST_CKPT, BEST_JSON, CheckpointCorruptError,
                                           CheckpointError, list_checkpoints, load_strict)

log = logging.getLogger("msresnet.training.selection")

TEST_JSON = "test.json"
DIGITS = 6
"""Decimals ``best.json`` and ``test.json`` keep (and the choice compares)."""
IDENTITY = ("split", "images", "sha256", "held_out", "seed")
"""The fields of an ``evaluated_on`` record that say which images were scored."""

Skipped = list[tuple[str, str]]
"""``(file name, why)`` of each checkpoint left out as unreadable."""


class SelectionError(ValueError):
    """A best checkpoint that a new selection must not silently replace."""


# ----------------------------------------------------------------------- the choice rule

def choice_key(top1: float, loss: float) -> tuple[float, float]:
    """What makes a checkpoint the better choice: higher top-1, ties to the lower loss.

    A NaN loss never wins a tie (nor loses one: the earlier checkpoint stays).
    """
    return (top1, -loss)


def _rounded(value: float | None) -> float | None:
    return None if value is None else float(round(float(value), DIGITS))


def rank_key(top1: float, loss: float | None, epoch: int, step: int) -> tuple[float, ...]:
    """The order of the choice: :func:`choice_key` on the values as ``best.json`` keeps
    them, then the earlier checkpoint (a full tie keeps the earlier epoch)."""
    rounded_loss = float("nan") if loss is None else float(round(loss, DIGITS))
    return (*choice_key(float(round(top1, DIGITS)), rounded_loss), -int(epoch), -int(step))


def _rank(record: Any) -> tuple[float, ...]:
    get = record.get if isinstance(record, dict) else lambda key: getattr(record, key)
    return rank_key(get("top1"), get("loss"), get("epoch"), get("step"))


def select_best(records: Iterable[Any]) -> Any | None:
    """The best of scored checkpoints (anything with top1, loss, epoch, step), or None."""
    records = list(records)
    return max(records, key=_rank) if records else None


# ----------------------------------------------------------------------- the same images

def same_images(recorded: dict[str, Any] | None, current: dict[str, Any] | None) -> bool:
    """True when both records name exactly the same images (their folder aside).

    Two records that name no images are the same (a choice made without saying where,
    as tests and older runs do); one that names none is never the same as one that does.
    """
    if recorded is None or current is None:
        return recorded is current
    return all(recorded.get(key) == current.get(key) for key in IDENTITY)


def includes(current: dict[str, Any] | None, recorded: dict[str, Any] | None) -> bool:
    """True when ``current``'s images are ``recorded``'s, or begin with them byte for byte
    (a new choice on them may replace the recorded one)."""
    if not recorded or not current:
        return False
    return same_images(recorded, current) or same_images_as(recorded, current)


def describe_images(on: dict[str, Any] | None) -> str:
    """``512 valid images of /data/cifar-10-batches-bin (sha256 0123456789ab)``."""
    if not on:
        return "images it did not record"
    sha = str(on["sha256"])[:12]
    return f"{on['images']} {on['split']} images of {on['folder']} (sha256 {sha})"


# ----------------------------------------------------------------------- the record

def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def read_best(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The record in ``directory/best.json``, or None."""
    path = Path(directory) / BEST_JSON
    return json.loads(path.read_text()) if path.is_file() else None


def write_best(directory: str | os.PathLike[str], *, epoch: int, step: int, top1: float,
               top5: float, loss: float | None, source: str | None, selected_by: str,
               evaluated_on: dict[str, Any] | None) -> dict[str, Any]:
    """Write ``best.json`` for the ``best.ckpt`` now in ``directory`` (atomically); return it.

    ``source``: the periodic checkpoint of the same weights (None when that epoch
    saved none); ``evaluated_on``: the images the scores were measured on. The record
    ends with ``file_sha256``, the hash of ``best.ckpt`` as it is now.
    """
    directory = Path(directory)
    record = {"epoch": int(epoch), "step": int(step), "top1": _rounded(top1),
              "top5": _rounded(top5), "loss": _rounded(loss), "source": source,
              "selected_by": selected_by, "evaluated_on": evaluated_on,
              "file_sha256": file_sha256(directory / BEST_CKPT)}
    write_json(directory / BEST_JSON, record)
    return record


def keep_previous_best(directory: str | os.PathLike[str]) -> list[Path]:
    """Copy ``best.json``/``best.ckpt`` to ``best.previous.*`` before they are replaced.

    A selection replaced by one made on other data (or by an explicit choice)
    stays beside it, so nothing is lost by replacing it. Returns the copies made.
    """
    directory = Path(directory)
    kept = []
    for name in (BEST_JSON, BEST_CKPT):
        if (directory / name).is_file():
            target = directory / name.replace("best.", "best.previous.", 1)
            kept.append(copy_file(directory / name, target))
    return kept


def promote_best(folder: str | os.PathLike[str], record: Any,
                 selected_by: str = "checkpoint sweep",
                 evaluated_on: dict[str, Any] | None = None, *, replace: bool = False,
                 ) -> dict[str, Any]:
    """Copy the scored checkpoint ``record.file`` to ``best.ckpt`` and write ``best.json``.

    ``record``: a scored periodic checkpoint (``file``, ``epoch``, ``step``, ``top1``,
    ``top5``, ``loss``, e.g. a :class:`msresnet.training.sweep.SweepRecord`);
    ``evaluated_on`` the images it was scored on. An existing selection is replaced
    only when these images include the ones it was made on (:func:`includes`),
    because a choice made on other data (another copy of CIFAR-10, a wrong folder)
    is not a better choice, only a different one. Otherwise :class:`SelectionError`
    says why, unless ``replace`` (the sweep's ``--replace-best``). The replaced
    selection is kept as ``best.previous.json``/``best.previous.ckpt``.
    """
    folder = Path(folder)
    current = read_best(folder)
    if current is not None and not replace and not includes(evaluated_on,
                                                            current.get("evaluated_on")):
        raise SelectionError(
            f"{folder / BEST_JSON} was selected on {describe_images(current.get('evaluated_on'))}"
            f"; this selection was made on {describe_images(evaluated_on)}, which do not "
            "include them: best.json and best.ckpt are left as they are (pass --no-promote "
            "to score without choosing, or --replace-best to replace them anyway)")
    if current is not None:
        keep_previous_best(folder)
    copy_file(folder / record.file, folder / BEST_CKPT)
    return write_best(folder, epoch=record.epoch, step=record.step, top1=record.top1,
                      top5=record.top5, loss=record.loss, source=record.file,
                      selected_by=selected_by, evaluated_on=evaluated_on)


# ----------------------------------------------------------------------- the sweep's choice

@dataclass
class Settled:
    """What a sweep did with ``best.*``: ``"promoted"`` its winner or ``"kept"`` the
    existing choice. ``standing``: the existing choice's scores on the sweep's images
    (``"how"``: trusted from its record or re-scored), None when it did not compete;
    ``skipped``: ``best.ckpt`` when it could not be read."""

    action: str
    best: dict[str, Any]
    standing: dict[str, Any] | None = None
    skipped: Skipped = field(default_factory=list)


def _standing(folder: Path, current: dict[str, Any], evaluated_on: dict[str, Any] | None,
              rescore: Callable[[Path], Any], trust: bool) -> tuple[dict[str, Any] | None, Skipped]:
    """The existing choice's scores on ``evaluated_on``: its record's, when it was made
    on exactly these images and ``best.ckpt`` is the file it describes; else ``best.ckpt``
    scored again. None (and why) when ``best.ckpt`` cannot be read."""
    path = folder / BEST_CKPT
    place = {"epoch": current["epoch"], "step": current["step"], "source": current.get("source")}
    if (trust and same_images(current.get("evaluated_on"), evaluated_on) and path.is_file()
            and current.get("file_sha256") == file_sha256(path)):
        return {**place, "top1": current["top1"], "top5": current.get("top5"),
                "loss": current.get("loss"), "how": "trusted: same images, same file"}, []
    try:
        scored = rescore(path)
    except CheckpointCorruptError as error:
        log.warning("%s cannot compete: %s", BEST_CKPT, error)
        return None, [(BEST_CKPT, str(error))]
    return {**place, "top1": scored.top1, "top5": scored.top5, "loss": scored.loss,
            "how": "re-scored on these images"}, []


def settle_best(folder: str | os.PathLike[str], winner: Any, evaluated_on: dict[str, Any] | None,
                selected_by: str, rescore: Callable[[Path], Any], *, replace: bool = False,
                trust: bool = True) -> Settled:
    """Keep the run's choice unless the sweep's ``winner`` beats it; else promote the winner.

    ``winner``: the best readable periodic checkpoint (:func:`select_best` of the
    sweep's records); ``rescore(path)`` scores a checkpoint on the sweep's images
    (raising :class:`~msresnet.training.checkpoints.CheckpointCorruptError` for a
    damaged file). An existing ``best.json`` made on images the sweep's include
    competes with its scores on the sweep's images (:func:`_standing`; ``trust``
    False always re-scores, e.g. for flipped scores) and stays unless the winner
    ranks higher (:func:`rank_key`). A winner that is the choice's own periodic file
    (same source, epoch and step) holds the same weights: nothing is copied and the
    choice is kept, saying so (copying the 188 MB periodic file, optimizer state
    included, over training's 94 MB ``best.ckpt`` bought nothing). An unreadable
    ``best.ckpt`` does not compete. A choice made on other images is
    :func:`promote_best`'s to refuse.
    """
    folder = Path(folder)
    current = read_best(folder)
    standing, skipped = None, []
    if current is not None and not replace and includes(evaluated_on, current.get("evaluated_on")):
        standing, skipped = _standing(folder, current, evaluated_on, rescore, trust)
    if current is not None and standing is not None:
        if (winner.file, winner.epoch, winner.step) == (
                current.get("source"), current["epoch"], current["step"]):
            log.info("%s kept: epoch %d already chosen (%s)", BEST_CKPT, winner.epoch, winner.file)
            return Settled("kept", current, standing, skipped)
        if _rank(winner) <= _rank(standing):
            log.info("%s kept: %s (top-1 %.4f) is not better", BEST_CKPT, winner.file, winner.top1)
            return Settled("kept", current, standing, skipped)
    best = promote_best(folder, winner, selected_by, evaluated_on, replace=replace)
    return Settled("promoted", best, standing, skipped)


# ----------------------------------------------------------------------- the final test

def _scores(result: dict[str, Any]) -> dict[str, float]:
    return {key: float(round(float(result[key]), DIGITS)) for key in ("top1", "top5", "loss")}


def _last_readable(folder: Path, net: Any, model: Any, test_ds: Any,
                   skipped: Skipped) -> tuple[dict[str, Any], dict[str, float]]:
    """The newest periodic checkpoint that loads, scored; unreadable ones join ``skipped``."""
    known = {name for name, _ in skipped}
    newer = []
    for item in reversed(list_checkpoints(folder)):
        if item.name not in known:
            try:
                load_strict(net, item.path)
            except CheckpointCorruptError as error:
                log.warning("final test: skipping %s: %s", item.name, error)
                skipped.append((item.name, str(error)))
            else:
                last = {"file": item.name, "epoch": item.epoch, "newer_skipped": newer[::-1]}
                return last, _scores(model.eval(test_ds, dataset_sink_mode=False))
        newer.append(item.name)
    raise CheckpointError(f"{folder}: no readable periodic checkpoint to compare the choice with")


def final_test(folder: str | os.PathLike[str], net: Any, model: Any, test_ds: Any,
               tested_on: dict[str, Any], skipped: Sequence[tuple[str, str]] = (),
               name: str = TEST_JSON) -> dict[str, Any]:
    """Score ``best.ckpt`` and the newest readable periodic checkpoint on the test set once.

    A run with ``valid_split`` > 0 chose on held-out images; the test set then
    measures the choice, never makes it. The last checkpoint is scored beside it:
    with a schedule that decays to zero they are often the same file; when they are
    not, the difference is what choosing bought (or cost), on images neither saw.
    A periodic checkpoint that cannot be read is left out as if absent: ``last`` is
    the newest readable one (``newer_skipped`` names the newer files left out), and
    ``skipped`` lists every file left out and why (``skipped`` given: already known).

    ``net`` is the network inside ``model`` (loaded strictly; it ends holding the
    chosen weights), ``test_ds`` the test images and ``tested_on`` which they are
    (:attr:`msresnet.data.source.DataSource.tested_on`). Written to ``folder/name``
    (``test.json``; a sweep on other data writes beside it) and returned. Raises
    :class:`~msresnet.training.checkpoints.CheckpointError` when nothing was chosen
    (no ``best.json``/``best.ckpt``) or no periodic checkpoint can be read.
    """
    folder = Path(folder)
    best = read_best(folder)
    if best is None or not (folder / BEST_CKPT).is_file():
        raise CheckpointError(f"{folder}: no best.json/best.ckpt: nothing was chosen to test")
    skipped = list(skipped)
    last, last_scores = _last_readable(folder, net, model, test_ds, skipped)
    if best.get("source") == last["file"]:
        chosen_scores = dict(last_scores)
    else:
        load_strict(net, folder / BEST_CKPT)
        chosen_scores = _scores(model.eval(test_ds, dataset_sink_mode=False))
    record = {
        "evaluated_on": tested_on,
        "selected_on": best.get("evaluated_on"), "selected_by": best.get("selected_by"),
        "chosen": {"file": BEST_CKPT, "source": best.get("source"), "epoch": best.get("epoch"),
                   "valid_top1": best.get("top1"), **chosen_scores},
        "last": {**last, **last_scores},
        "skipped": [{"file": file, "reason": why} for file, why in skipped],
    }
    write_json(folder / name, record)
    return record


def read_test(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run's ``test.json``, or None when the run validated on the test set itself."""
    path = Path(folder) / TEST_JSON
    return json.loads(path.read_text()) if path.is_file() else None


__all__ = ["TEST_JSON", "SelectionError", "Settled", "choice_key", "rank_key", "select_best",
           "same_images", "includes", "describe_images", "file_sha256", "read_best",
           "write_best", "keep_previous_best", "promote_best", "settle_best", "final_test",
           "read_test"]
