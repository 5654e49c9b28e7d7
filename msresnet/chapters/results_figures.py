"""The results page's own figures, drawn from the reference run's records.

The chapters draw their figures for a notebook: three panels side by side at 80
dpi, whose text is about 7 px high once the page scales them to its width. The
results page draws what the records allow again, one idea per figure, with
labelled axes and units, at :data:`DPI` and :data:`SIZE` (704 x 374 px: the text is
as large as the prose's at the page's width), drawn with :data:`SHARP` times the
pixels so they stay crisp on a 2x screen. Each figure comes with a caption that
says what every line and mark is, built from the same records, so the caption
cannot name a split, a count or a schedule the run did not have.

Drawn from ``train/history.json`` (per-epoch loss, accuracy and learning rate),
``train/test.json`` (the chosen checkpoint's test score) and ``run.json``'s
parameters (the schedule, redrawn per step with :func:`msresnet.model.lr_schedule.get_lr`
and checked against the rates the run recorded). Matplotlib's object API is used,
not pyplot, so drawing changes no global state of the caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from msresnet.model.lr_schedule import get_lr

DPI = 110
"""Dots per inch of every figure (the page shows them at about their pixel size)."""

SIZE = (6.4, 3.4)
"""Width and height in inches: 704 x 374 px at :data:`DPI`."""

SHARP = 2
"""The files hold this many pixels for each one the page shows (:data:`WIDTH` wide),
so the figures stay crisp on a screen with two device pixels to a CSS pixel."""

WIDTH = f"{round(SIZE[0] * DPI)}px"
"""The width the page shows a figure at: its size at :data:`DPI`."""

CHANCE = 0.1
"""Top-1 accuracy of a guess among CIFAR-10's ten classes."""


class FigureError(ValueError):
    """The records cannot give a figure (a missing field, a schedule that disagrees)."""


def _axes(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Axes]:
    figure = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    axes = figure.subplots()
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    return figure, axes


def _epochs(history: list[dict[str, Any]]) -> list[int]:
    return [row["epoch"] for row in history]


def loss_figure(history: list[dict[str, Any]], params: dict[str, Any]) -> tuple[Figure, str]:
    """Training and validation loss per epoch."""
    figure, axes = _axes("Loss per epoch", "epoch", "cross-entropy (nats)")
    epochs = _epochs(history)
    axes.plot(epochs, [r["train_loss"] for r in history], "o-", label="training (epoch mean)")
    axes.plot(epochs, [r["val_loss"] for r in history], "s--", label="validation")
    axes.set_xticks(epochs)
    # A fixed place: loc="best" searches the data, and matplotlib warns on stderr
    # when that search is slow, which a loaded machine makes it (a stored output
    # would then depend on the machine's load).
    axes.legend(loc="upper right")
    smoothing = params.get("label_smoothing") or 0
    caption = ("Loss per epoch. Training: the mean loss of the epoch's steps"
               + (f", with label smoothing {smoothing:g} (so it cannot reach 0)" if smoothing
                  else "")
               + "; validation: the loss on the held-out images after the epoch.")
    return figure, caption


def accuracy_figure(history: list[dict[str, Any]], test: dict[str, Any] | None,
                    validated_on: str) -> tuple[Figure, str]:
    """Validation top-1 and top-5 per epoch, chance, and the chosen checkpoint's test top-1."""
    figure, axes = _axes("Validation accuracy per epoch", "epoch", "accuracy (%)")
    epochs = _epochs(history)
    axes.plot(epochs, [100 * r["val_top1"] for r in history], "o-", label="top-1")
    axes.plot(epochs, [100 * r["val_top5"] for r in history], "s--", label="top-5")
    axes.axhline(100 * CHANCE, color="grey", linestyle=":", label="chance (top-1)")
    caption = (f"Accuracy on the {validated_on} after each epoch: "
               "top-1 counts an image right when the true class is ranked first, top-5 when "
               f"it is among the first five; the dotted line is chance ({100 * CHANCE:.0f} %).")
    chosen = (test or {}).get("chosen") or {}
    if "epoch" in chosen and "top1" in chosen:  # a test.json that scored its choice
        images = test.get("evaluated_on", {}).get("images")
        axes.plot([chosen["epoch"]], [100 * chosen["top1"]], "*", markersize=14, color="red",
                  label="test top-1, chosen checkpoint")
        caption += (f" The star is the test top-1 of the chosen checkpoint (epoch "
                    f"{chosen['epoch']}) on " + (f"all {images:,} test images" if images else
                                                 "the test images") + ", scored once.")
    axes.set_xticks(epochs)
    axes.set_ylim(0, 100)
    axes.legend(loc="lower center")
    return figure, caption


def schedule(history: list[dict[str, Any]], params: dict[str, Any]) -> np.ndarray:
    """The learning rate of every step, from the recorded parameters, checked against
    the rate the run recorded for the last step of each epoch (a record whose schedule the
    formula does not give back is refused)."""
    steps_per_epoch = history[0]["step"]
    try:
        rates = get_lr(params["lr_schedule"], params["lr_init"], params["lr_max"],
                       params["lr_end"], params["warmup_epochs"], params["epoch_size"],
                       steps_per_epoch)
    except KeyError as missing:
        raise FigureError(f"run.json parameters: no {missing} to redraw the schedule") from None
    for row in history:
        # The rate recorded with epoch e is the one of its last step.
        recorded, redrawn = row["lr"], float(rates[row["step"] - 1])
        if not np.isclose(recorded, redrawn, rtol=1e-4, atol=1e-9):
            raise FigureError(f"history epoch {row['epoch']}: recorded lr {recorded:g}, the "
                              f"schedule gives {redrawn:g}")
    return rates


def lr_figure(history: list[dict[str, Any]], params: dict[str, Any]) -> tuple[Figure, str]:
    """The learning rate of every step, with the rates recorded at the end of each epoch."""
    figure, axes = _axes("Learning rate per step", "epoch", "learning rate")
    rates = schedule(history, params)
    steps_per_epoch = history[0]["step"]
    axes.plot(np.arange(len(rates)) / steps_per_epoch, rates, "-", label="every step")
    axes.plot([r["step"] / steps_per_epoch for r in history], [r["lr"] for r in history], "o",
              label="recorded, last step of each epoch")
    axes.set_xticks(range(0, params["epoch_size"] + 1))
    axes.legend(loc="upper right")  # fixed, as in loss_figure
    warmup = params["warmup_epochs"]
    caption = (f"Learning rate of each of the {len(rates):,} steps ({steps_per_epoch:,} per "
               f"epoch): the `{params['lr_schedule']}` schedule, "
               + (f"warming up from {params['lr_init']:g} to {params['lr_max']:g} over "
                  f"{warmup} epoch{'s' if warmup != 1 else ''}, then decaying to "
                  if warmup else f"from {params['lr_max']:g} down to ")
               + f"{params['lr_end']:g}; the dots are the rates the run recorded for the last "
               "step of each epoch.")
    return figure, caption


DRAWN: tuple[tuple[str, Callable[..., tuple[Figure, str]]], ...] = (
    ("page-loss.png", lambda r: loss_figure(r["history"], r["params"])),
    ("page-accuracy.png", lambda r: accuracy_figure(r["history"], r["test"], r["validated_on"])),
    ("page-learning-rate.png", lambda r: lr_figure(r["history"], r["params"])),
)
"""The page's own figures, in page order: file name under ``figures/`` and drawer."""


def captions(records: dict[str, Any]) -> list[tuple[str, str]]:
    """(file name, caption) of every drawn figure, without writing anything."""
    return [(name, draw(records)[1]) for name, draw in DRAWN]


def draw_all(records: dict[str, Any], folder: Path) -> list[Path]:
    """Draw every figure of :data:`DRAWN` into ``folder``; return the files written.

    ``records``: ``history`` (history.json), ``test`` (test.json or None),
    ``params`` (run.json's parameters) and ``validated_on`` (which images, in words). PNGs carry no
    software version, so a redraw with the same libraries gives the same bytes.
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in DRAWN:
        figure, _ = draw(records)
        figure.savefig(folder / name, dpi=SHARP * DPI, metadata={"Software": None})
        written.append(folder / name)
    return written
