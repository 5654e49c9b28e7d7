"""Copy a finished run's records into results/cpu/ and draw its two figures.

    python -m msresnet.train cpu --output runs/cpu
    python -m msresnet.sweep runs/cpu --data_dir data --eval_samples null
    python results/cpu/make_report.py runs/cpu

Copies history.json/.csv, sweep.csv/.json, best.json, config.yaml and result.json
(no checkpoints: they are 180 MB each) and writes training_curves.png and
accuracy_vs_epoch.png next to this script.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
FILES = ("history.json", "history.csv", "sweep.csv", "sweep.json", "best.json", "config.yaml",
         "result.json")


def main(run_dir: str) -> None:
    run = Path(run_dir)
    for name in FILES:
        if (run / name).is_file():
            shutil.copyfile(run / name, HERE / name)
    history = json.loads((run / "history.json").read_text())
    epochs = [r["epoch"] for r in history]

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), dpi=90)
    axes[0].plot(epochs, [r["train_loss"] for r in history], "o-", label="training (mean of epoch)")
    axes[0].plot(epochs, [r["val_loss"] for r in history], "s--", label="validation")
    axes[0].set(title="Loss", xlabel="epoch", ylabel="cross-entropy (nats)")
    axes[1].plot(epochs, [100 * r["val_top1"] for r in history], "o-", label="top-1")
    axes[1].plot(epochs, [100 * r["val_top5"] for r in history], "s--", label="top-5")
    axes[1].set(title="Validation accuracy", xlabel="epoch", ylabel="accuracy (%)")
    axes[2].plot(epochs, [r["lr"] for r in history], "o-")
    axes[2].set(title="Learning rate at the end of each epoch", xlabel="epoch",
                ylabel="learning rate")
    for ax in axes[:2]:
        ax.legend()
    for ax in axes:
        ax.set_xticks(epochs)
    fig.tight_layout()
    fig.savefig(HERE / "training_curves.png")

    sweep = json.loads((run / "sweep.json").read_text())
    records = sweep["records"]
    fig, ax = plt.subplots(figsize=(6, 3.4), dpi=90)
    ax.plot([r["epoch"] for r in records], [100 * r["top1"] for r in records], "o-", label="top-1")
    ax.plot([r["epoch"] for r in records], [100 * r["top5"] for r in records], "s--", label="top-5")
    best = sweep["best"]
    ax.plot([best["epoch"]], [100 * best["top1"]], "r*", ms=14, label=f"best: epoch {best['epoch']}")
    ax.set(title=f"Test accuracy per checkpoint ({sweep['samples']} images)", xlabel="epoch",
           ylabel="accuracy (%)", xticks=[r["epoch"] for r in records])
    ax.legend()
    fig.tight_layout()
    fig.savefig(HERE / "accuracy_vs_epoch.png")
    print("written to", HERE)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/cpu")
