"""Copy a finished run's records into results/cpu/, draw its figures, write README.md.

    python -m msresnet.train cpu --output runs/cpu > runs/cpu.log 2>&1
    python -m msresnet.sweep runs/cpu --data_dir data --eval_samples null
    python results/cpu/make_report.py runs/cpu

Copies history.json/.csv, sweep.csv/.json, best.json, config.yaml and result.json
(no checkpoints: they are 180 MB each), writes training_curves.png and
accuracy_vs_epoch.png, and a README.md with date, machine, command, wall time and
best top-1, all read from the run's own files.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from msresnet.cpu_speed import cpu_model  # noqa: E402

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
    write_readme(run, history, sweep)
    print("written to", HERE)


def write_readme(run: Path, history: list[dict], sweep: dict) -> None:
    import yaml

    result = json.loads((run / "result.json").read_text())
    eval_images = yaml.safe_load((run / "config.yaml").read_text()).get("eval_samples") or 10_000
    first_log = (run / "train.log").read_text().splitlines()[0]
    started = first_log[:19]
    best = sweep["best"]
    last = history[-1]
    steps = result["steps"]
    train_seconds = sum(r["train_seconds"] for r in history)
    eval_seconds = sum(r["eval_seconds"] or 0 for r in history)
    rows = "\n".join(
        f"| {r['epoch']} | {r['step']} | {r['lr']:.6f} | {r['train_loss']:.4f} | "
        f"{r['val_loss']:.4f} | {100 * r['val_top1']:.2f} | {100 * r['val_top5']:.2f} | "
        f"{r['train_seconds']:.0f} | {r['images_per_second']:.1f} |" for r in history)
    sweep_rows = "\n".join(
        f"| {r['file']} | {r['epoch']} | {100 * r['top1']:.2f} | {100 * r['top5']:.2f} | "
        f"{r['loss']:.4f} |" for r in sweep["records"])
    text = f"""# Reference CPU run (`cpu` profile)

The book's reference result for the `cpu` profile, trained once on the CI machine.

- **Date**: {started} (UTC, start of training)
- **Machine**: {os.cpu_count()} cores, {cpu_model()}; MindSpore CPU, graph mode, float32
- **Command**: `python -m msresnet.train cpu --output runs/cpu`, then
  `python -m msresnet.sweep runs/cpu --data_dir data --eval_samples null` and
  `python results/cpu/make_report.py runs/cpu`
- **Wall time of training**: {result["seconds"] / 60:.1f} min ({steps} steps; {train_seconds / 60:.1f} min
  of training steps, {eval_seconds / 60:.1f} min of validation on {eval_images:,} test images)
- **Best top-1** (checkpoint sweep on {sweep["samples"]} test images): **{100 * best["top1"]:.2f}%**
  ({best["file"]}, epoch {best["epoch"]}); last epoch: {100 * last["val_top1"]:.2f}%

Per epoch (`history.csv`):

| epoch | step | lr | train loss | val loss | top-1 % | top-5 % | train s | images/s |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
{rows}

Checkpoint sweep (`sweep.csv`, {sweep["samples"]:,} test images):

| checkpoint | epoch | top-1 % | top-5 % | loss |
| --- | --- | --- | --- | --- |
{sweep_rows}

Files: `config.yaml` (the effective config), `history.json`/`history.csv`,
`sweep.json`/`sweep.csv`, `best.json`, `result.json`, `training_curves.png`,
`accuracy_vs_epoch.png`. Checkpoints are not kept here (180 MB each).
Other jobs shared the machine's two cores during some runs, so the speeds are a
lower bound; the numbers (losses, accuracies) do not depend on it.
"""
    (HERE / "README.md").write_text(text)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/cpu")
