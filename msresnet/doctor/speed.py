"""The data and the timed steps: the ``data`` and ``speed`` lines of ``msresnet
doctor``, the projected run time, and the figures the book cites beside it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import traceback
from pathlib import Path
from typing import Any

from msresnet.config.profile import Config
from msresnet.data.cifar10 import (TEST_IMAGES, DatasetError, dataset_folder, split_counts,
                                   validate)
from msresnet.data.source import DataSource, open_data_source
from msresnet.doctor.checks import FAIL, OK, Check
from msresnet.paths import REPO_ROOT, in_repo

REFERENCE_RUN = REPO_ROOT / "results" / "cpu"

MODELS_README = ("MindSpore models repository, official/cv/ResNet/README.md at "
                 "145444c (MindSpore 1.3.0)")
CITED: dict[str, list[dict[str, Any]]] = {
    "GPU": [{"source": MODELS_README, "devices": 8, "batch_size": 32, "ms_per_step": 69.0,
             "run_minutes": 20.2, "epochs": 90, "top1": 91.37,
             "text": "8 x V100, batch 32 per card: 69 ms/step, 20.2 min for 90 epochs"}],
    "Ascend": [{"source": MODELS_README, "devices": 8, "batch_size": 32, "ms_per_step": 18.4,
                "run_minutes": 6.0, "epochs": 90, "top1": 91.44,
                "text": "8 x Ascend 910, batch 32 per card: 18.4 ms/step, 6 min for 90 epochs"},
               {"source": "the tutorial this book grew from (its author's run)", "devices": 1,
                "batch_size": 32, "run_minutes": 48.6, "epochs": 90, "top1": 93.87,
                "text": "1 x Ascend 910: 'about 20 s per epoch' and '48 min 38 s' in all"}],
}
"""The figures the book cites for the accelerator profiles (the intro's table);
the CPU's come from the reference run's records (:data:`REFERENCE_RUN`)."""


# --------------------------------------------------------------------------- data
def train_images(config: Config, counts: dict[str, int]) -> int:
    """Training images per epoch under the profile (held-out images excluded)."""
    available = split_counts(counts)[0] - config.valid_split
    return min(available, config.train_samples) if config.train_samples else available


def check_data(config: Config) -> tuple[Check, DataSource | None]:
    """The data folder, validated as training validates it, and the run's data opened
    from it for the timed steps (None when it failed): validated once."""
    folder = dataset_folder(config.data_dir)
    try:
        counts = validate(folder)
    except DatasetError as err:
        where = "" if str(folder) in str(err) else f"{in_repo(folder)}: "
        return Check("data", FAIL, f"{where}{err}", f"run: msresnet prepare --root "
                     f"{config.data_dir}", {"folder": str(folder)}), None
    train, test = split_counts(counts)
    return Check("data", OK, f"{train:,} train, {test:,} test images in {in_repo(folder)}",
                 details={"folder": str(folder), "counts": counts,
                          "train_images": train_images(config, counts)}), \
        open_data_source(config, validated=True)


# --------------------------------------------------------------------------- speed
def timed_run(config: Config, steps: int, batch_size: int,
              source: DataSource | None = None) -> dict[str, Any]:
    """Two epochs of ``steps`` steps of the profile's training on its device, then
    validation on as many images, twice.

    The network, optimizer, mixed precision, loss scale and data pipelines come from
    :mod:`msresnet.training.factories`, the loop is ``Model.train`` (with data sink
    off the CPU, as training runs it) and the clock is training's own
    :class:`~msresnet.training.callbacks.EpochHistory`. The first epoch compiles
    the graph; the second is the steady speed a long run would see. Validation
    compiles a graph of its own (BatchNorm in inference mode), which can fail where
    training's did not: at O3 on a GPU, MindSpore 2.10 trains and then rejects the
    first validation (``results/gpu/``), so the doctor runs it as training does
    (``Model.eval``, no data sink); its first pass compiles, the second is timed.
    """
    from msresnet.training.callbacks import EpochHistory
    from msresnet.training.device import device_policy
    from msresnet.training.factories import make_datasets, make_model, set_context

    images = steps * batch_size
    # validation reads the held-out images, or the test set when none are held out
    evaluated = min(images, config.valid_split or TEST_IMAGES)
    short = dataclasses.replace(config, batch_size=batch_size, train_samples=images,
                                eval_samples=evaluated)
    set_context(short)
    source = (source or open_data_source(config)).with_eval_samples(evaluated)
    train_ds, eval_ds = make_datasets(short, source=source)
    steps_per_epoch = train_ds.get_dataset_size()
    _, _, model, lr = make_model(short, steps_per_epoch)
    history = EpochHistory(None, lr, batch_size)
    model.train(2, train_ds, callbacks=[history],
                dataset_sink_mode=device_policy(short.device_target).data_sink)
    first, timed = history.records[:2]
    clock = []
    for _ in range(2):
        start = time.perf_counter()
        model.eval(eval_ds, dataset_sink_mode=False)
        clock.append(time.perf_counter() - start)
    return {"steps": steps_per_epoch, "batch_size": batch_size,
            "first_epoch_seconds": first["train_seconds"], "seconds": timed["train_seconds"],
            "images_per_second": timed["images_per_second"],
            "ms_per_step": round(1000 * timed["train_seconds"] / steps_per_epoch, 1),
            "train_loss": timed["train_loss"], "first_eval_seconds": round(clock[0], 2),
            "eval_images_per_second": round(evaluated / clock[1], 1)}


def projection(config: Config, images_per_second: float, images: int) -> dict[str, Any]:
    """Epoch and run time of the whole profile at the measured speed (training only:
    validation and checkpoints come on top)."""
    steps = images // config.batch_size
    epoch = steps * config.batch_size / images_per_second
    return {"train_images": images, "steps_per_epoch": steps, "epoch_seconds": round(epoch, 1),
            "epochs": config.epoch_size, "run_seconds": round(epoch * config.epoch_size, 1)}


def reference_run(folder: Path = REFERENCE_RUN) -> list[dict[str, Any]]:
    """The reference CPU run's speed, from its records (empty outside a checkout)."""
    try:
        metrics = json.loads((folder / "metrics" / "04_train_eval.json").read_text())
        run = json.loads((folder / "run.json").read_text())
        machine, rate = run["machine"], metrics["train_images_per_second"]
        minutes = metrics["train_seconds"] / 60
        return [{"source": f"the book's reference CPU run ({in_repo(folder)})",
                 "images_per_second": rate, "run_minutes": round(minutes, 1),
                 "epochs": metrics["epochs"], "top1": round(100 * metrics["test_top1"], 2),
                 "text": f"{rate:.1f} images/s, {minutes:.1f} min for {metrics['epochs']} "
                         f"epochs on {machine['cpu_count']} cores ({run['started'][:10]})"}]
    except (OSError, KeyError, TypeError, ValueError):
        return []


def cited_figures(config: Config) -> list[dict[str, Any]]:
    return CITED.get(config.device_target) or reference_run()


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


KNOWN_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Select GPU operator\[BatchNorm\] fail"),
     "amp_level {amp_level} casts BatchNorm's scale, bias, mean and variance to float16 "
     "and MindSpore's GPU BatchNorm takes them in float32 only: use amp_level O2 "
     "(float16 with BatchNorm in float32), e.g. --amp_level O2"),
)
"""Failures of the timed steps whose cause is known, and what to do about each
(measured on an H200 with MindSpore 2.10: ``results/gpu/``)."""
GENERIC_FIX = "see the book's troubleshooting page; the traceback is in --json"


def mindspore_line(message: str) -> str:
    """The line of an error that says what went wrong: MindSpore frames its errors
    with rules (``-----``) and headings (``- Kernel select failed:``); the first line
    that is neither, cut after its first two sentences (the rest lists data types)."""
    for line in message.splitlines():
        text = line.strip().strip("-").strip()
        if text and not text.endswith(":"):
            sentences = re.split(r"(?<=[!.])\s+", text)
            return " ".join(sentences[:2])
    return message.strip() or "no message"


def fix_for(line: str, config: Config) -> str:
    """What to do about a failure of the timed steps, where its cause is known."""
    for pattern, fix in KNOWN_FAILURES:
        if pattern.search(line):
            return fix.format(amp_level=config.amp_level)
    return GENERIC_FIX


def check_speed(config: Config, steps: int, batch_size: int, images: int,
                source: DataSource | None = None) -> Check:
    """Time the profile's training step here and project the whole run from it."""
    from msresnet.experiments.bench import load_average

    before = load_average()
    try:
        timing = timed_run(config, steps, batch_size, source)
        timing["load_average"] = [before, load_average()]
    except Exception as err:  # noqa: BLE001 - report what a run would hit, as one line
        said = mindspore_line(str(err))
        return Check("speed", FAIL, f"training steps failed: {type(err).__name__}: {said}",
                     fix_for(said, config), {"traceback": traceback.format_exc()})
    plan = projection(config, timing["images_per_second"], images)
    cited = cited_figures(config)
    load = timing["load_average"]
    notes = [f"timed {timing['steps']} steps after {timing['steps']} that compiled the graph "
             f"({duration(timing['first_epoch_seconds'])})",
             f"validation: {timing['eval_images_per_second']:.0f} images/s, after a first pass "
             f"that compiled its graph ({duration(timing['first_eval_seconds'])})",
             f"load average before/after: {load[0] and load[0][0]} / {load[1] and load[1][0]} "
             f"on {len(os.sched_getaffinity(0))} cores (other work slows these figures)",
             f"projected: {plan['steps_per_epoch']} steps of batch {config.batch_size} per epoch, "
             f"{duration(plan['epoch_seconds'])} each,",
             f"  {duration(plan['run_seconds'])} for {plan['epochs']} epochs (training only: "
             "validation comes on top)"]
    if batch_size != config.batch_size:
        notes.append(f"timed at batch {batch_size}, not the profile's {config.batch_size}: "
                     "the speed differs")
    for figure in cited:
        notes += [f"cited: {figure['text']}", f"  source: {figure['source']}"]
    summary = (f"{timing['images_per_second']:.1f} images/s, {timing['ms_per_step']:.0f} ms/step "
               f"at batch {batch_size}")
    return Check("speed", OK, summary, details={"timing": timing, "projection": plan,
                                                "cited": cited}, notes=notes)


