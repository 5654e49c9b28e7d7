"""Score the chosen checkpoint, and the last one, on the test set: once, at the end.

A run with ``valid_split`` > 0 validates on held-out training images and chooses
its checkpoint there (during training, or with the sweep). The test set is then
used for what it is for: one score for the chosen model, reported, never used
to choose. The last checkpoint is scored beside it, for comparison: with a
schedule that decays to zero they are often the same file; when they are not,
the difference is what choosing bought (or cost), measured on images neither
choice saw.

Both :func:`msresnet.training.train.train_and_evaluate` and ``msresnet sweep``
write the result as ``test.json`` in the run folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mindspore import nn
from mindspore.train import Model

from msresnet.atomic import write_json
from msresnet.training.callbacks import read_best
from msresnet.training.checkpoints import BEST_CKPT, CheckpointError, list_checkpoints, load_strict

TEST_JSON = "test.json"


def _scores(result: dict[str, Any]) -> dict[str, float]:
    return {"top1": round(float(result["top1"]), 6), "top5": round(float(result["top5"]), 6),
            "loss": round(float(result["loss"]), 6)}


def score_chosen_and_last(folder: str | os.PathLike[str], net: nn.Cell, model: Model,
                          test_ds: Any, evaluated_on: dict[str, Any],
                          ) -> dict[str, Any]:
    """Test scores of ``best.ckpt`` (the choice ``best.json`` records) and of the newest
    periodic checkpoint, written to ``test.json`` and returned.

    ``net`` is the network inside ``model`` (weights are loaded into it strictly, so
    it ends holding the chosen weights); ``evaluated_on`` names the test images
    (:func:`msresnet.data.cifar10.evaluation_images`). Raises
    :class:`~msresnet.training.checkpoints.CheckpointError` when the folder has no
    ``best.json``/``best.ckpt`` or no periodic checkpoint.
    """
    folder = Path(folder)
    best = read_best(folder)
    checkpoints = list_checkpoints(folder)
    if best is None or not (folder / BEST_CKPT).is_file():
        raise CheckpointError(f"{folder}: no best.json/best.ckpt: nothing was chosen to test")
    if not checkpoints:
        raise CheckpointError(f"{folder}: no periodic checkpoint to compare the choice with")
    last = checkpoints[-1]
    load_strict(net, last.path)
    last_scores = _scores(model.eval(test_ds, dataset_sink_mode=False))
    if best.get("source") == last.name:
        chosen_scores = dict(last_scores)
    else:
        load_strict(net, folder / BEST_CKPT)
        chosen_scores = _scores(model.eval(test_ds, dataset_sink_mode=False))
    record = {
        "evaluated_on": evaluated_on,
        "selected_on": best.get("evaluated_on"),
        "selected_by": best.get("selected_by"),
        "chosen": {"file": BEST_CKPT, "source": best.get("source"), "epoch": best.get("epoch"),
                   "valid_top1": best.get("top1"), **chosen_scores},
        "last": {"file": last.name, "epoch": last.epoch, **last_scores},
    }
    write_json(folder / TEST_JSON, record)
    return record


def read_test(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run's ``test.json``, or None when the run validated on the test set itself."""
    import json

    path = Path(folder) / TEST_JSON
    return json.loads(path.read_text()) if path.is_file() else None


__all__ = ["TEST_JSON", "score_chosen_and_last", "read_test"]
