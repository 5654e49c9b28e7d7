"""Measure the data pipeline on this CPU: alone, and feeding a training step (chapter 9).

``msresnet pipeline-bench --grid alone|knobs|train --json FILE`` runs every
setting of a grid in a fresh Python process (``--worker``), so that each one starts
with MindSpore's default global configuration, its own thread count and, when it
pins the process to fewer cores (``cores``), an affinity set *before* MindSpore
starts any thread (threads inherit the affinity of the thread that creates them).

Each setting reports, measured inside its process:

* ``images_per_s``: images delivered per second after the first batch (pipeline
  alone), or images trained per second over the timed steps (``train_steps > 0``);
* ``threads_added``: the most threads the process had while iterating, minus the
  threads it had before the dataset's iterator was created (counted from
  ``/proc/self/task``, sampled every 10 ms; the sampling thread itself excluded);
* ``cpu_cores``: process CPU time over wall time while iterating (2.0 = both cores
  of a 2-core machine busy); ``machine_cores``: the same for the whole machine, from
  ``/proc/stat``, which also counts worker *processes* (``python_multiprocessing``)
  and anything else running, hence the idle machine the book's records need;
* ``rss_mb`` / ``rss_added_mb``: peak resident memory, and how much of it came
  after MindSpore was imported;
* in training, ``data_wait_share``: the share of each step spent waiting for the
  next batch (``next(iterator)``) rather than computing.

The grids, and the command that recorded the book's figures, are in
:data:`GRIDS` and ``results/pipeline/README.md``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from msresnet.compile_cache import refuse as refuse_compile_cache
from msresnet.cpu_speed import cpu_model

RESULT_MARKER = "MSRESNET_PIPELINE_RESULT "
SOURCES = ("binary", "mindrecord", "numpy")  # msresnet.data.pipeline.SOURCES (tested equal)
TRANSFORMS = ("cpp", "python", "batch")
"""``cpp``: the book's C++ vision operations per image; ``python``: the same
arithmetic as one NumPy function per image (run by the pipeline's threads, under
the GIL); ``batch``: C++ crop and flip per image, then normalise and transpose a
whole batch at once in NumPy (``batch(per_batch_map=...)``)."""


class PipelineBenchError(ValueError):
    """A benchmark setting is invalid; the message names it."""


@dataclass
class Setting:
    """One measured configuration (the JSON the parent passes to its worker)."""

    source: str = "binary"          # msresnet.data.pipeline.SOURCES
    workers: int = 1                # num_parallel_workers of every stage
    batch_size: int = 32
    images: int = 20000             # pipeline alone: images pushed through
    global_workers: int | None = None  # mindspore.dataset.config default; None: the pipeline's cap
    prefetch: int | None = None     # mindspore.dataset.config.set_prefetch_size; None: default
    transforms: str = "cpp"         # see TRANSFORMS
    multiprocessing: bool = False   # python transforms in worker processes instead of threads
    shared_mem: bool | None = None  # set_enable_shared_mem (multiprocessing only); None: default
    autotune: bool = False          # set_enable_autotune(True)
    train_steps: int = 0            # 0: the pipeline alone; else timed ResNet50 training steps
    warmup: int = 3                 # untimed training steps first (graph compilation)
    cores: int | None = None        # pin the process to cores 0..cores-1; None: not pinned
    synthetic: bool = False         # train on one fixed batch: no pipeline at all
    seed: int = 1
    label: str = ""

    def check(self) -> None:
        if self.source not in SOURCES:
            raise PipelineBenchError(f"source must be one of {SOURCES}, got {self.source!r}")
        if self.transforms not in TRANSFORMS:
            raise PipelineBenchError(f"transforms must be one of {TRANSFORMS}, got {self.transforms!r}")
        for name in ("workers", "batch_size", "images"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PipelineBenchError(f"{name} must be a positive int, got {value!r}")
        if self.cores is not None and not 1 <= self.cores <= (os.cpu_count() or 1):
            raise PipelineBenchError(f"cores must be in 1..{os.cpu_count()}, got {self.cores!r}")


@dataclass
class Result:
    """What one setting measured."""

    setting: dict
    images_per_s: float
    threads_before: int
    threads_max: int
    threads_added: int
    cpu_cores: float
    machine_cores: float
    rss_mb: float
    rss_added_mb: float
    seconds: float
    data_wait_share: float | None = None
    step_ms: list[float] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------
# Worker side

def thread_count() -> int:
    """Threads of this process right now (Linux: one entry per thread in /proc/self/task)."""
    return len(os.listdir("/proc/self/task"))


def machine_busy_seconds() -> float:
    """CPU seconds all cores of the machine spent not idle since boot (``/proc/stat``)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(v) for v in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def memory_mb(key: str = "VmHWM") -> float:
    """``VmHWM`` (peak resident set) or ``VmRSS`` of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {key}")


class ThreadSampler:
    """Counts this process's threads every ``interval`` s in a thread of its own."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, thread_count() - 1)  # minus this sampler
            self._stop.wait(self.interval)

    def __enter__(self) -> ThreadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _numpy_transform(training: bool):
    """The book's per-image transforms as one NumPy function (the ``python`` variant):
    crop and flip here, then :func:`msresnet.data.images.normalize` (the pipeline's arithmetic)."""
    import numpy as np

    from msresnet.data.images import normalize
    rng = np.random.default_rng(0)

    def transform(image):
        if training:
            padded = np.pad(image, ((4, 4), (4, 4), (0, 0)))
            top, left = rng.integers(0, 9, size=2)
            image = padded[top:top + 32, left:left + 32]
            if rng.random() < 0.5:
                image = image[:, ::-1]
        return normalize(np.ascontiguousarray(image))
    return transform


def _batch_normalise(images, labels, batch_info):
    """``per_batch_map``: normalise and transpose a whole batch of HWC uint8 images at once."""
    import numpy as np

    from msresnet.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD
    stack = np.stack(images).astype(np.float32) / 255.0
    stack = (stack - np.array(CIFAR10_MEAN, np.float32)) / np.array(CIFAR10_STD, np.float32)
    return list(np.ascontiguousarray(stack.transpose(0, 3, 1, 2))), labels


def build_dataset(setting: Setting, dataset_dir: str, mindrecord_dir: str | None):
    """The training pipeline of :func:`msresnet.data.pipeline.create_dataset`, with the knobs applied."""
    import mindspore.dataset as ds
    import mindspore.dataset.vision as vision

    from msresnet.data.pipeline import (cap_global_workers, cast_labels, image_transforms,
                                        source_dataset)

    workers = setting.workers
    if setting.global_workers is not None:
        ds.config.set_num_parallel_workers(setting.global_workers)
    else:
        cap_global_workers(workers)  # what create_dataset does
    if setting.prefetch is not None:
        ds.config.set_prefetch_size(setting.prefetch)
    if setting.shared_mem is not None:
        ds.config.set_enable_shared_mem(setting.shared_mem)
    if setting.autotune:
        ds.config.set_enable_autotune(True)
    ds.config.set_seed(setting.seed)
    samples = (setting.images if setting.train_steps == 0
               else (setting.train_steps + setting.warmup + 1) * setting.batch_size)
    data = source_dataset(setting.source, dataset_dir, "train", shuffle=True,
                          num_samples=samples, num_workers=workers, mindrecord_dir=mindrecord_dir)
    data = cast_labels(data, workers)
    if setting.transforms == "cpp":
        data = data.map(operations=image_transforms(True), input_columns="image",
                        num_parallel_workers=workers)
        return data.batch(setting.batch_size, drop_remainder=True, num_parallel_workers=workers)
    if setting.transforms == "python":
        data = data.map(operations=_numpy_transform(True), input_columns="image",
                        num_parallel_workers=workers,
                        python_multiprocessing=setting.multiprocessing)
        return data.batch(setting.batch_size, drop_remainder=True, num_parallel_workers=workers)
    data = data.map(operations=[vision.RandomCrop(32, padding=4),
                                vision.RandomHorizontalFlip(prob=0.5)],
                    input_columns="image", num_parallel_workers=workers)
    return data.batch(setting.batch_size, drop_remainder=True, num_parallel_workers=workers,
                      per_batch_map=_batch_normalise, input_columns=["image", "label"],
                      python_multiprocessing=setting.multiprocessing)


def _pipeline_alone(dataset) -> tuple[float, float, float, float]:
    """Iterate once; return (images/s after the first batch, wall s, CPU s, machine CPU s)."""
    iterator = dataset.create_tuple_iterator(output_numpy=True, num_epochs=1)
    wall0, cpu0, busy0 = time.perf_counter(), time.process_time(), machine_busy_seconds()
    first = True
    seen, start = 0, wall0
    for images, _ in iterator:
        if first:  # the first batch pays for starting the threads
            first, start = False, time.perf_counter()
            continue
        seen += images.shape[0]
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    busy = machine_busy_seconds() - busy0
    return seen / max(time.perf_counter() - start, 1e-9), wall, cpu, busy


def _train(setting: Setting, dataset) -> tuple[float, float, float, float, float, list[float]]:
    """Timed training steps fed by ``dataset`` (or a fixed batch); returns
    (images/s, wall s, CPU s, machine CPU s, data-wait share, step ms)."""
    import mindspore

    from msresnet.data.cifar10 import IMAGE_SHAPE, NUM_CLASSES
    from msresnet.experiments.bench import make_train_step, synthetic_batch
    from msresnet.config.run import build_run_config
    from msresnet.training.factories import make_network

    net = make_network(build_run_config("smoke", {"seed": setting.seed}))  # ImageNet stem
    step = make_train_step(net)
    fixed = (synthetic_batch(setting.batch_size, IMAGE_SHAPE[0], NUM_CLASSES, setting.seed)
             if dataset is None else None)
    iterator = None if dataset is None else dataset.create_tuple_iterator(num_epochs=1)
    waits, totals = [], []
    wall0 = cpu0 = busy0 = 0.0
    for index in range(setting.warmup + setting.train_steps):
        if index == setting.warmup:
            wall0, cpu0, busy0 = time.perf_counter(), time.process_time(), machine_busy_seconds()
        start = time.perf_counter()
        images, labels = fixed if iterator is None else next(iterator)
        got = time.perf_counter()
        float(step(images, labels).asnumpy())
        if index >= setting.warmup:
            waits.append(got - start)
            totals.append(time.perf_counter() - start)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    busy = machine_busy_seconds() - busy0
    del mindspore
    return (setting.batch_size * len(totals) / sum(totals), wall, cpu, busy,
            sum(waits) / sum(totals), [round(1000 * t, 1) for t in totals])


def run_worker(setting: Setting, dataset_dir: str, mindrecord_dir: str | None) -> Result:
    """Measure one setting in THIS process (call it in a fresh one: see the module docstring)."""
    setting.check()
    if setting.cores is not None:
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:setting.cores]))
    import mindspore

    refuse_compile_cache()
    mindspore.set_device("CPU")
    mindspore.set_context(mode=mindspore.GRAPH_MODE)
    mindspore.set_seed(setting.seed)
    rss_before = memory_mb("VmRSS")
    dataset = None if setting.synthetic else build_dataset(setting, dataset_dir, mindrecord_dir)
    threads_before = thread_count()
    wait_share, step_ms = None, []
    with ThreadSampler() as sampler:
        if setting.train_steps:
            rate, wall, cpu, busy, wait_share, step_ms = _train(setting, dataset)
        else:
            rate, wall, cpu, busy = _pipeline_alone(dataset)
    peak = memory_mb("VmHWM")
    return Result(setting=asdict(setting), images_per_s=round(rate, 1),
                  threads_before=threads_before, threads_max=sampler.peak,
                  threads_added=sampler.peak - threads_before,
                  cpu_cores=round(cpu / max(wall, 1e-9), 2),
                  machine_cores=round(busy / max(wall, 1e-9), 2),
                  rss_mb=round(peak, 1),
                  rss_added_mb=round(peak - rss_before, 1), seconds=round(wall, 2),
                  data_wait_share=None if wait_share is None else round(wait_share, 3),
                  step_ms=step_ms)


# ----------------------------------------------------------------------------------------------
# Parent side

def _train_grid() -> list[Setting]:
    grid = []
    for cores in (None, 1, 2):
        grid.append(Setting(synthetic=True, batch_size=64, train_steps=12, cores=cores,
                            label="synthetic batch (no pipeline)"))
        for source in SOURCES:
            for workers in (1, 2):
                grid.append(Setting(source=source, workers=workers, batch_size=64, train_steps=12,
                                    cores=cores))
    return grid


GRIDS = {
    # Each of the three ways alone, against the worker count of every stage.
    # (MindSpore refuses more workers than cores: 1..cores, at most 8.)
    "alone": lambda: [Setting(source=s, workers=w) for s in ("binary", "mindrecord", "numpy")
                      for w in range(1, min(8, os.cpu_count() or 1) + 1)],
    # One knob at a time, from the book's default (binary files, 1 worker per stage).
    "knobs": lambda: [
        Setting(label="default: 1 worker per stage"),
        Setting(global_workers=8, label="global default left at 8 (MindSpore's), stages 1"),
        Setting(global_workers=2, label="global default 2, stages 1"),
        Setting(prefetch=2, label="prefetch 2 rows"),
        Setting(prefetch=64, label="prefetch 64 rows"),
        Setting(autotune=True, label="autotune on"),
        Setting(transforms="batch", label="normalise per batch (per_batch_map, NumPy)"),
        Setting(transforms="python", label="Python (NumPy) transforms, 1 thread"),
        Setting(transforms="python", workers=2, label="Python (NumPy) transforms, 2 threads"),
        Setting(transforms="python", workers=2, multiprocessing=True, shared_mem=True,
                label="Python transforms, 2 processes, shared memory"),
        Setting(transforms="python", workers=2, multiprocessing=True, shared_mem=False,
                label="Python transforms, 2 processes, no shared memory"),
    ],
    # Training (batch 64, the cpu profile's) fed by each way, 1 or 2 workers per stage,
    # unpinned / pinned to 1 core / pinned to 2 cores.
    "train": _train_grid,
}


def _worker_command(setting: Setting, dataset_dir: str, mindrecord_dir: str | None) -> list[str]:
    command = [sys.executable, "-m", "msresnet", "pipeline-bench", "--worker", json.dumps(asdict(setting)),
               "--batches_dir", dataset_dir]
    return command + (["--mindrecord_dir", mindrecord_dir] if mindrecord_dir else [])


def run_one(setting: Setting, dataset_dir: str, mindrecord_dir: str | None = None,
            timeout: float = 900) -> Result:
    """Measure one setting in a fresh process and return its result."""
    setting.check()
    from msresnet.experiments.bench import run_tied  # the worker dies with its caller

    completed = run_tied(_worker_command(setting, dataset_dir, mindrecord_dir), timeout)
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            return Result(**json.loads(line[len(RESULT_MARKER):]))
    tail = "\n".join((completed.stderr or completed.stdout).strip().splitlines()[-8:])
    raise RuntimeError(f"pipeline benchmark worker ({setting}) exited with code "
                       f"{completed.returncode} and no result:\n{tail}")


def run_grid(settings: list[Setting], dataset_dir: str, mindrecord_dir: str | None = None,
             repeat: int = 1, progress: bool = False) -> dict:
    """Every setting ``repeat`` times (interleaved, so slow minutes hit every setting)."""
    machine = {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
               "python": platform.python_version(), "load_average_before": os.getloadavg()}
    runs: list[list[dict]] = [[] for _ in settings]
    for round_index in range(repeat):
        for index, setting in enumerate(settings):
            if progress:
                print(f"  [{round_index + 1}/{repeat}] {index + 1}/{len(settings)} "
                      f"{setting.label or setting}", file=sys.stderr, flush=True)
            try:
                runs[index].append(asdict(run_one(setting, dataset_dir, mindrecord_dir)))
            except RuntimeError as err:  # e.g. MindSpore refusing a worker count: a finding
                runs[index].append({"setting": asdict(setting), "error": _error_line(str(err))})
    machine["load_average_after"] = os.getloadavg()
    return {"machine": machine, "repeat": repeat,
            "results": [summarise(one) for one in runs]}


def _error_line(text: str) -> str:
    """MindSpore's own message out of a failed worker's error text."""
    for line in text.splitlines():
        if "Invalid Parameter" in line or "error:" in line:
            start = line.find("Invalid Parameter")
            return line[start:].split(" ----")[0].strip() if start >= 0 else line.strip()
    return text.strip().splitlines()[-1]


def summarise(runs: list[dict]) -> dict:
    """The median of each number over repeated runs of one setting, and every run's images/s."""
    errors = [r["error"] for r in runs if "error" in r]
    if errors:
        return {"setting": runs[0]["setting"], "runs": len(runs), "error": errors[0]}
    summary = {"setting": runs[0]["setting"], "runs": len(runs),
               "images_per_s_runs": [r["images_per_s"] for r in runs]}
    for key in ("images_per_s", "threads_before", "threads_max", "threads_added", "cpu_cores",
                "machine_cores", "rss_mb", "rss_added_mb", "data_wait_share"):
        values = [r[key] for r in runs if r.get(key) is not None]
        summary[key] = statistics.median(values) if values else None
    return summary


def format_table(report: dict) -> str:
    """One line per setting: images/s, threads added, CPU cores busy, memory."""
    lines = [f"{'setting':<58} {'img/s':>8} {'threads+':>8} {'cores':>5} {'machine':>7} "
             f"{'MB+':>6} {'wait':>5}"]
    for row in report["results"]:
        s = row["setting"]
        name = s["label"] or (f"{s['source']}, {s['workers']} worker(s)"
                              + (f", {s['cores']} core(s)" if s["cores"] else ""))
        if s["label"] and s["train_steps"] and s["cores"]:
            name += f", {s['cores']} core(s)"
        if "error" in row:
            lines.append(f"{name:<58} error: {row['error'][:80]}")
            continue
        wait = "" if row["data_wait_share"] is None else f"{100 * row['data_wait_share']:.0f}%"
        machine = "" if row.get("machine_cores") is None else f"{row['machine_cores']:.2f}"
        lines.append(f"{name:<58} {row['images_per_s']:>8.0f} {row['threads_added']:>8.0f} "
                     f"{row['cpu_cores']:>5.2f} {machine:>7} {row['rss_added_mb']:>6.0f} {wait:>5}")
    return "\n".join(lines)


def batches_dir(data_dir: str | None) -> str:
    """The ``cifar-10-batches-bin`` folder the workers read: inside the data folder that
    :func:`~msresnet.config.run.build_run_config` chooses, as every verb does."""
    from msresnet.data.cifar10 import dataset_folder
    from msresnet.config.run import build_run_config

    overrides = {"data_dir": data_dir} if data_dir else {}
    return str(dataset_folder(build_run_config("cpu", overrides).data_dir))


def check_data(batches: str, mindrecord_dir: str | None) -> None:
    """The data the workers read, checked once before the first starts (a
    :class:`~msresnet.data.cifar10.DatasetError` or :class:`PipelineBenchError` naming
    the folder): a missing folder made every worker fail, and the command printed a
    table of errors and exited 0."""
    from msresnet.data.source import check_folder

    check_folder(Path(batches))
    if mindrecord_dir is not None and not Path(mindrecord_dir).is_dir():
        raise PipelineBenchError(f"--mindrecord_dir: no such folder {mindrecord_dir}")
