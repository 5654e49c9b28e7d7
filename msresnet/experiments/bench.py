"""Measure a ResNet50 training step on this CPU, with and without the oneDNN ISA cap.

``msresnet bench`` times the step that training runs (forward, loss,
backward, Momentum update with the weight-decay groups of
:func:`msresnet.model.resnet.param_groups`, i.e. what ``Model.fit`` builds: a
``TrainOneStepCell`` around a ``WithLossCell``) on synthetic data, for every
combination of execution mode (``graph``/``pynative``) and ``ONEDNN_MAX_CPU_ISA``
value. oneDNN reads that variable once, when MindSpore runs its first operator,
so each combination runs in a fresh subprocess (``--worker``), which sets or
removes the variable before MindSpore is imported. ISA values:

* ``default``: the variable is removed, i.e. oneDNN's own choice (AVX-512 here);
* ``AVX2``, ``AVX512_CORE``, ``ALL``, ...: passed to oneDNN as they are
  (``ALL`` means "no cap" and should time like ``default``).

Example::

    msresnet bench --batch-size 32 --image-size 32 --modes graph,pynative \\
        --isa AVX2,default --steps 5 --warmup 2 --json runs/bench.json

Re-run it when MindSpore or the machine changes: the AVX2 cap is a measured
choice (see :mod:`msresnet.cpu_speed`), not a law.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from msresnet.compile_cache import refuse as refuse_compile_cache
from msresnet.cpu_speed import ISA_VARIABLE, cpu_model
from msresnet.data.cifar10 import NUM_CLASSES

MODES = ("graph", "pynative")
DEFAULT_ISA = "default"
RESULT_MARKER = "MSRESNET_BENCH_RESULT "
NETWORK_PROFILE = "smoke"
"""The profile whose network the step times (with the bench's stem, classes and seed):
the one factory of the package builds it, as for training."""


@dataclass
class BenchSettings:
    """What one benchmark run measures (shared by every mode/ISA combination)."""

    batch_size: int = 32
    image_size: int = 32
    stem: str = "imagenet"
    num_classes: int = NUM_CLASSES
    steps: int = 5
    warmup: int = 2
    device_target: str = "CPU"
    seed: int = 1
    threads: int | None = None    # CPU kernel threads (op_tuning.threads_num); None: MindSpore's
    jit_level: str | None = None  # graph compile level O0/O1/O2 (jit_config); None: default
    graph_kernel: bool = False    # AKG graph-kernel fusion (needs the `decorator` package)


@dataclass
class BenchResult:
    """Timing of one mode/ISA combination; times are wall-clock seconds."""

    mode: str
    isa: str
    isa_env: str | None          # the variable as the worker saw it (None: unset)
    ms_per_step: float           # median of the timed steps
    images_per_s: float          # batch_size / median step time
    first_step_s: float          # includes graph compilation in graph mode
    step_times_s: list[float] = field(default_factory=list)
    final_loss: float = float("nan")


def load_average() -> list[float] | None:
    """1/5/15-minute load averages: other work on the CPU slows every number here."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


# ----------------------------------------------------------------------------------------------
# Worker side: runs in the fresh process, after the ISA variable is settled.

def make_train_step(net, weight_decay: float = 1e-4, learning_rate: float = 0.01,
                    momentum: float = 0.9):
    """The training step ``Model.fit`` runs for us: loss, gradients, Momentum
    update."""
    from mindspore import nn

    from msresnet.model.losses import SparseCrossEntropy
    from msresnet.model.resnet import param_groups

    loss_fn = SparseCrossEntropy()
    optimizer = nn.Momentum(param_groups(net, weight_decay),
                            learning_rate=learning_rate, momentum=momentum)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), optimizer)
    step.set_train()
    return step


def synthetic_batch(batch_size: int, image_size: int, num_classes: int = NUM_CLASSES,
                    seed: int = 0):
    """Normalised-looking random images (N, 3, H, W) float32 and int32 labels, as MindSpore tensors."""
    import numpy as np
    import mindspore

    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch_size, 3, image_size, image_size), dtype=np.float32)
    labels = rng.integers(0, num_classes, size=batch_size).astype(np.int32)
    return mindspore.Tensor(images), mindspore.Tensor(labels)


def time_steps(step, images, labels, steps: int, warmup: int) -> tuple[float, list[float], float]:
    """Run ``warmup`` + ``steps`` training steps; return (first step s, timed step s, last loss).

    ``asnumpy()`` on the loss waits for the step to finish, so each time covers
    the whole forward and backward pass and the update.
    """
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0; got steps={steps}, warmup={warmup}")
    times: list[float] = []
    loss = float("nan")
    for _ in range(warmup + steps):
        start = time.perf_counter()
        loss = float(step(images, labels).asnumpy())
        times.append(time.perf_counter() - start)
    return times[0], times[warmup:], loss


def run_worker(settings: BenchSettings, mode: str, isa: str) -> BenchResult:
    """Time one mode/ISA combination in THIS process (the ISA must be set before MindSpore loads)."""
    if "mindspore" in sys.modules:
        raise RuntimeError(f"{ISA_VARIABLE} cannot take effect: mindspore was imported before the "
                           "benchmark worker started; run it through `msresnet bench`")
    if isa == DEFAULT_ISA:
        os.environ.pop(ISA_VARIABLE, None)
    else:
        os.environ[ISA_VARIABLE] = isa
    isa_env = os.environ.get(ISA_VARIABLE)

    import mindspore

    from msresnet.config.run import build_run_config
    from msresnet.training.factories import make_network

    mode_value = {"graph": mindspore.GRAPH_MODE, "pynative": mindspore.PYNATIVE_MODE}[mode]
    refuse_compile_cache()
    mindspore.set_device(settings.device_target)
    mindspore.set_context(mode=mode_value)
    if settings.threads is not None:
        mindspore.device_context.cpu.op_tuning.threads_num(settings.threads)
    if settings.jit_level is not None:
        mindspore.set_context(jit_config={"jit_level": settings.jit_level})
    if settings.graph_kernel:
        # Deprecated in 2.10 in favour of jit_level O1, which on the CPU does not
        # call AKG: this flag is the one way left to measure AKG's fused kernels.
        mindspore.set_context(enable_graph_kernel=True)
    net = make_network(build_run_config(NETWORK_PROFILE, {
        "stem": settings.stem, "num_classes": settings.num_classes, "seed": settings.seed}))
    step = make_train_step(net)
    images, labels = synthetic_batch(settings.batch_size, settings.image_size,
                                     settings.num_classes, settings.seed)
    first, timed, loss = time_steps(step, images, labels, settings.steps, settings.warmup)
    median = statistics.median(timed)
    return BenchResult(mode=mode, isa=isa, isa_env=isa_env, ms_per_step=1000.0 * median,
                       images_per_s=settings.batch_size / median, first_step_s=first,
                       step_times_s=timed, final_loss=loss)


# ----------------------------------------------------------------------------------------------
# Parent side: one subprocess per combination.

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _tie_to_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has Linux kill the child when the process that started it
    dies (None on other systems).

    ``subprocess.run`` kills its child when the caller raises, but not when the caller is
    killed: a stopped ``msresnet reproduce`` kills the chapter's kernel, and a benchmark
    worker the kernel had started ran on with parent 1 (issue 45). The C function is
    looked up here, before the fork, so the child only calls it.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def tie() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)
    return tie


def run_tied(command: list[str], timeout: float | None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run`` of a worker command, its output captured as text, the worker
    killed with its parent (:func:`_tie_to_parent`); ``msresnet pipeline-bench`` too."""
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                          preexec_fn=_tie_to_parent())


def _worker_command(settings: BenchSettings, mode: str, isa: str) -> list[str]:
    command = [sys.executable, "-m", "msresnet", "bench", "--worker",
            "--batch_size", str(settings.batch_size), "--image_size", str(settings.image_size),
            "--stem", settings.stem, "--num_classes", str(settings.num_classes),
            "--steps", str(settings.steps), "--warmup", str(settings.warmup),
            "--device_target", settings.device_target, "--seed", str(settings.seed),
            "--modes", mode, "--isa", isa]
    if settings.threads is not None:
        command += ["--threads", str(settings.threads)]
    if settings.jit_level is not None:
        command += ["--jit_level", settings.jit_level]
    if settings.graph_kernel:
        command += ["--graph_kernel"]
    return command


def run_one(settings: BenchSettings, mode: str, isa: str, timeout: float | None = 1800) -> BenchResult:
    """Time one mode/ISA combination in a fresh Python process and return its result."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    completed = run_tied(_worker_command(settings, mode, isa), timeout, env=dict(os.environ))
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            return BenchResult(**json.loads(line[len(RESULT_MARKER):]))
    tail = "\n".join((completed.stderr or completed.stdout).splitlines()[-15:])
    raise RuntimeError(f"benchmark worker (mode={mode}, isa={isa}) exited with code "
                       f"{completed.returncode} and no result:\n{tail}")


def check_settings(settings: BenchSettings) -> None:
    """Check the settings the network and the device take by the config's own rules,
    raising :class:`~msresnet.config.profile.ConfigError` naming the first bad one.

    Before any worker starts: a wrong stem or device target failed only inside the
    first worker, as an unexpected error (exit 3), and an image size under 32, which
    training refuses, was timed as if it were a run the book could make.
    """
    from msresnet.config.profile import Overrides
    from msresnet.config.run import build_run_config

    refuse_compile_cache()  # every worker would refuse it
    build_run_config(NETWORK_PROFILE, Overrides({
        "stem": settings.stem, "num_classes": settings.num_classes, "seed": settings.seed,
        "image_size": settings.image_size, "device_target": settings.device_target},
        source="bench settings"))


def run_benchmark(settings: BenchSettings, modes: list[str], isas: list[str],
                  timeout: float | None = 1800, progress: bool = False) -> dict:
    """Time every mode x ISA combination, one fresh process each; return a JSON-ready dict."""
    check_settings(settings)
    machine = {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
               "python": platform.python_version(), "mindspore": _version("mindspore"),
               "load_average_before": load_average()}
    results = []
    for mode in modes:
        for isa in isas:
            if progress:
                print(f"  timing mode={mode} isa={isa} ...", file=sys.stderr, flush=True)
            results.append(asdict(run_one(settings, mode, isa, timeout)))
    machine["load_average_after"] = load_average()
    return {"settings": asdict(settings), "machine": machine, "results": results}


def format_table(report: dict) -> str:
    """A plain-text table of the results, with each row's speed-up over the slowest row."""
    rows = report["results"]
    slowest = max(r["ms_per_step"] for r in rows)
    s = report["settings"]
    header = (f"ResNet50 training step, batch {s['batch_size']}, {s['image_size']}x{s['image_size']}, "
              f"stem {s['stem']}, {s['steps']} timed steps after {s['warmup']} warm-up, "
              f"threads {s.get('threads') or 'default'}, jit level {s.get('jit_level') or 'default'}"
              + (", AKG graph kernels" if s.get("graph_kernel") else ""))
    lines = [header,
             f"{'mode':<9} {'ONEDNN_MAX_CPU_ISA':<19} {'ms/step':>9} {'images/s':>9} "
             f"{'first step s':>12} {'speed-up':>8}"]
    for r in rows:
        isa = r["isa"] if r["isa_env"] is not None else f"{r['isa']} (unset)"
        lines.append(f"{r['mode']:<9} {isa:<19} {r['ms_per_step']:>9.1f} {r['images_per_s']:>9.1f} "
                     f"{r['first_step_s']:>12.2f} {slowest / r['ms_per_step']:>7.1f}x")
    m = report["machine"]
    lines.append(f"CPU: {m['cpu']} ({m['cpu_count']} cores), MindSpore {m['mindspore']}, "
                 f"load average before/after: {m['load_average_before']} / {m['load_average_after']}")
    return "\n".join(lines)


def report_rows(folder: str | os.PathLike[str]) -> list[dict]:
    """Every result of every report (``*.json``, as ``--json`` writes them) in
    ``folder``, one flat dict each: the file's stem, the machine's CPU, the settings
    that vary between reports and the timings. Chapter 10 tables and compares the
    recorded reports through this, whichever folder they are in."""
    rows = []
    for path in sorted(Path(folder).glob("*.json")):
        report = json.loads(path.read_text())
        s = report["settings"]
        for r in report["results"]:
            rows.append({"file": path.stem, "cpu": report["machine"]["cpu"],
                         "isa": r["isa"], "mode": r["mode"], "batch": s["batch_size"],
                         "size": s["image_size"], "threads": s.get("threads") or "default",
                         "jit": s.get("jit_level") or "default",
                         "images/s": r["images_per_s"], "ms/step": r["ms_per_step"],
                         "first step s": r["first_step_s"]})
    return rows
