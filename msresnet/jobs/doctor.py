"""``msresnet doctor``: what a reader should know before starting a 90-epoch run.

A long run that fails in its first minute (a CUDA 12 toolkit where MindSpore needs
11.x, a shell without CANN's ``set_env.sh``, a truncated data file) costs little;
one that runs at a tenth of the expected speed costs a day. So before a run this
command checks, on this machine and for one profile:

* ``mindspore``: the installed build against the book's pin (``requirements.txt``),
  the back ends it loaded, the CUDA versions its GPU kernels were built for and the
  CANN versions it accepts (read from the installed wheel, not from a table here);
* ``device``: the profile's device is there (its driver), MindSpore's back end for
  it loaded, and ``mindspore.run_check()`` passes on it; its name and memory;
* ``toolkit``: the CUDA runtime and cuDNN, or the CANN toolkit, found against the
  ones this MindSpore needs;
* ``msrun``: the launcher of ``msresnet launch`` and, on GPU and Ascend, the
  collective library an 8-card run needs (NCCL, HCCL);
* ``data``: the CIFAR-10 folder, validated as training validates it;
* ``speed``: a few dozen training steps of the profile on the device, through the
  training's own factories (network, mixed precision, loss scale, data sink), the
  projected epoch and run time, and the figures the book cites beside them.

A check that fails prints one line saying what to do; the checks that need what it
lacks are skipped, so a machine without a GPU gets one line for the ``gpu``
profile, not five. The exit status is 1 when a check failed (2 for a bad command
line), and ``--json`` keeps everything found. Example::

    msresnet doctor --profile cpu --data_dir data --json runs/doctor.json
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import importlib.util
import io
import json
import os
import platform
import re
import shutil
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msresnet.cli import ArgumentParser
from msresnet.atomic import write_json
from msresnet.config import AMP_LEVELS, Config
from msresnet.cpu_speed import cpu_model
from msresnet.data.cifar10 import (TEST_IMAGES, DatasetError, dataset_folder, split_counts,
                                   validate)
from msresnet.run_config import build_run_config
from msresnet.jobs.launch import MSRUN_MODULE
from msresnet.paths import REPO_ROOT, in_repo

OK, FAIL, SKIP = "ok", "FAIL", "skip"
DEFAULT_STEPS = 30

DRIVER_SIGNS: dict[str, tuple[str, Path]] = {
    "GPU": ("nvidia-smi", Path("/proc/driver/nvidia/version")),
    "Ascend": ("npu-smi", Path("/dev/davinci_manager")),
}
"""What an installed driver leaves on a machine: its command-line tool and its
kernel interface. Neither present means there is no such device to use."""

NO_DEVICE = {"GPU": "no NVIDIA driver here", "Ascend": "no Ascend driver here"}
NO_DEVICE_FIX = "use a machine with one, or --profile cpu"
BACKEND_FIX = {
    "GPU": "put CUDA 11.6 and cuDNN 8.5 on LD_LIBRARY_PATH (book: Setup, Add an NVIDIA GPU)",
    "Ascend": "source /usr/local/Ascend/ascend-toolkit/set_env.sh in this shell "
              "(book: Setup, Add Ascend)",
}

CUDNN_FOR_CUDA = {"10.1": "7.6", "11.1": "8.0", "11.6": "8.5"}
"""The cuDNN MindSpore recommends with each CUDA (its own warning text,
``mindspore/run_check/_check_version.py`` of the 2.10 wheel)."""

CUDA_RUNTIME = ("libcudart.so.11.0", "libcudart.so", "libcudart.so.12")
CUDNN = ("libcudnn.so.8", "libcudnn.so", "libcudnn.so.9")
CANN_VERSION_FILE = "compiler/version.info"
CANN_DEFAULT_HOME = Path("/usr/local/Ascend/ascend-toolkit/latest")
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


@dataclass
class Check:
    """One finding: ``status`` is ok, FAIL or skip; ``fix`` says what to do on FAIL."""

    name: str
    status: str
    summary: str
    fix: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # printed under the line, indented

    def line(self) -> str:
        if self.status == FAIL:
            return f"FAIL  {self.name}: {self.summary}; {self.fix}"
        return f"{self.status:<5} {self.name}: {self.summary}"


def _skip(name: str, need: str) -> Check:
    return Check(name, SKIP, f"needs {need}")


# --------------------------------------------------------------------------- the build
def pinned_mindspore(requirements: Path = REPO_ROOT / "requirements.txt") -> str | None:
    """The MindSpore version the book pins (None outside a checkout)."""
    try:
        text = requirements.read_text()
    except OSError:
        return None
    found = re.search(r"^mindspore==(\S+)", text, re.MULTILINE)
    return found.group(1) if found else None


def wheel_facts(package_dir: Path) -> dict[str, Any]:
    """What the installed wheel says about itself: its commit, the CUDA versions its
    GPU kernels were built for (``lib/plugin/libmindspore_gpu.so.X.Y``) and the CANN
    versions its own check accepts."""
    commit = None
    with contextlib.suppress(OSError):
        commit = (package_dir / ".commit_id").read_text().strip()
    cuda = sorted(p.name.rsplit(".so.", 1)[1]
                  for p in (package_dir / "lib" / "plugin").glob("libmindspore_gpu.so.*"))
    try:
        from mindspore.run_check._check_version import AscendEnvChecker
        cann = list(AscendEnvChecker(None).version)
    except (ImportError, AttributeError):  # a private module: report, do not fail
        cann = []
    return {"commit": commit, "cuda_builds": cuda, "cann_accepted": cann}


def check_mindspore() -> tuple[Check, Any]:
    """Import MindSpore; its version against the pin and the back ends it loaded."""
    try:
        import mindspore as ms
        from mindspore._c_expression import MSContext
    except ImportError as err:
        return Check("mindspore", FAIL, f"cannot import mindspore ({err})",
                     "pip install -r requirements.txt"), None
    context = MSContext.get_instance()
    backends = [t for t in ("CPU", "GPU", "Ascend") if context.is_pkg_support_device(t)]
    details = {"version": ms.__version__, "pinned": pinned_mindspore(), "backends": backends,
               "plugin_errors": context.load_plugin_error().strip().splitlines(),
               **wheel_facts(Path(ms.__file__).parent)}
    if details["pinned"] and ms.__version__ != details["pinned"]:
        return Check("mindspore", FAIL, f"MindSpore {ms.__version__}, the book pins "
                     f"{details['pinned']}", f"pip install mindspore=={details['pinned']}",
                     details), ms
    cuda = ",".join(details["cuda_builds"]) or "none"
    cann = ",".join(details["cann_accepted"]) or "unknown"
    return Check("mindspore", OK, f"{ms.__version__}; loaded: {','.join(backends)}; "
                 f"CUDA {cuda}; CANN {cann}", details=details), ms


# --------------------------------------------------------------------------- the device
def missing_device(target: str) -> str | None:
    """Why this machine has no ``target`` device (None: its driver is there, or CPU)."""
    if target not in DRIVER_SIGNS:
        return None
    tool, interface = DRIVER_SIGNS[target]
    return None if shutil.which(tool) or interface.exists() else NO_DEVICE[target]


def run_check(ms: Any, target: str) -> str:
    """``mindspore.run_check()`` on ``target``; what it printed (it prints its errors)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        ms.set_device(target)
        ms.run_check()
    return buffer.getvalue()


def device_properties(ms: Any, target: str) -> dict[str, Any]:
    """Name, count and memory of the device (the CPU: model, cores and RAM)."""
    if target == "CPU":
        import psutil

        memory = psutil.virtual_memory()
        return {"name": cpu_model(), "count": 1, "cores": os.cpu_count(),
                "usable_cores": len(os.sched_getaffinity(0)),
                "memory_gb": round(memory.total / 2**30, 1),
                "available_gb": round(memory.available / 2**30, 1)}
    props = ms.hal.get_device_properties(0, target)
    return {"name": props.name, "count": ms.hal.device_count(target),
            "memory_gb": round(props.total_memory / 2**30, 1)}


def plugin_error(target: str) -> str:
    """`` (the line of MindSpore's plugin-loading report about target)``, or nothing:
    the report lists every back end that failed to load, and none when it did not try
    (no CUDA driver library, for the GPU)."""
    from mindspore._c_expression import MSContext

    lines = MSContext.get_instance().load_plugin_error().strip().splitlines()
    about = [line for line in lines if target.lower() in line.lower()]
    return f" ({about[0]})" if about else ""


def describe(ms: Any, target: str) -> tuple[str, dict[str, Any]]:
    """The device in a few words, and its properties (what MindSpore reports of it)."""
    try:
        props = device_properties(ms, target)
    except (RuntimeError, AttributeError, ValueError) as err:  # a deprecated API: report it
        return f"{target} (its properties: {err})", {"properties_error": str(err)}
    if target == "CPU":
        return (f"{props['name']}, {props['usable_cores']} cores, {props['memory_gb']} GB RAM "
                f"({props['available_gb']} free)"), props
    return f"{props['name']}, {props['count']} visible, {props['memory_gb']} GB each", props


def check_device(config: Config, ms: Any) -> Check:
    """The profile's device: its driver, MindSpore's back end for it, run_check."""
    from mindspore._c_expression import MSContext

    target = config.device_target
    if missing_device(target):
        tool, interface = DRIVER_SIGNS[target]
        return Check("device", FAIL, missing_device(target), NO_DEVICE_FIX,
                     {"looked_for": [tool + " on PATH", str(interface)]})
    fix = BACKEND_FIX.get(target, "pip install -r requirements.txt")
    if not MSContext.get_instance().is_pkg_support_device(target):
        return Check("device", FAIL, f"MindSpore's {target} back end did not load"
                     f"{plugin_error(target)}", fix)
    try:
        printed = run_check(ms, target)
    except RuntimeError as err:  # set_device refused the target
        return Check("device", FAIL, f"{target}: {str(err).strip().splitlines()[0]}", fix)
    if "successfully" not in printed:
        last = printed.strip().splitlines()[-1] if printed.strip() else "no output"
        return Check("device", FAIL, f"mindspore.run_check() failed on {target}: {last}", fix,
                     {"run_check": printed})
    words, props = describe(ms, target)
    return Check("device", OK, f"{target} passes run_check: {words}",
                 details={"run_check": printed, **props})


# --------------------------------------------------------------------------- toolkits
def load_first(names: Sequence[str]) -> tuple[str, Any] | None:
    """The first of these shared libraries the dynamic loader finds, loaded."""
    for name in names:
        try:
            return name, ctypes.CDLL(name)
        except OSError:
            continue
    return None


def version_number(value: int, library: str) -> str:
    """``major.minor`` of the integer NVIDIA's libraries report: CUDA ``1000*major +
    10*minor``; cuDNN 8 ``1000*major + 100*minor + patch``, cuDNN 9 ``10000*major + ...``."""
    if library == "cuda":
        return f"{value // 1000}.{value % 1000 // 10}"
    if value >= 90000:
        return f"{value // 10000}.{value % 10000 // 100}"
    return f"{value // 1000}.{value % 1000 // 100}"


def cuda_found() -> dict[str, Any]:
    """The CUDA runtime and cuDNN the loader finds, with their versions."""
    found: dict[str, Any] = {"cuda": None, "cudnn": None}
    runtime = load_first(CUDA_RUNTIME)
    if runtime is not None:
        number = ctypes.c_int()
        runtime[1].cudaRuntimeGetVersion(ctypes.byref(number))
        found.update(cuda=version_number(number.value, "cuda"), cudart_file=runtime[0])
    cudnn = load_first(CUDNN)
    if cudnn is not None:
        cudnn[1].cudnnGetVersion.restype = ctypes.c_size_t
        found.update(cudnn=version_number(cudnn[1].cudnnGetVersion(), "cudnn"),
                     cudnn_file=cudnn[0])
    return found


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def runnable_build(cuda: str | None, builds: Sequence[str]) -> str | None:
    """The build of MindSpore's GPU kernels a CUDA runtime ``cuda`` runs: the newest
    one of the same major version at or below it (CUDA's minor-version
    compatibility: a CUDA 11.8 runtime runs code built with CUDA 11.6, not the
    other way round, and never across a major version). None: no build runs."""
    if cuda is None:
        return None
    found = parse_version(cuda)
    usable = [b for b in builds if parse_version(b)[0] == found[0] and parse_version(b) <= found]
    return max(usable, key=parse_version, default=None)


def check_cuda(builds: Sequence[str]) -> Check:
    """CUDA and cuDNN against the versions the wheel's GPU kernels were built for.

    Any CUDA 11.x runtime at or above a build runs it (measured: the CUDA 11.6
    plugin trained on CUDA 11.8's libraries on an H200, ``results/gpu/``), so a newer
    minor version is a note, not a failure; another major version is a failure."""
    found = cuda_found()
    build = runnable_build(found["cuda"], builds)
    details = {**found, "needed_cuda": list(builds), "runs_build": build,
               "recommended_cudnn": CUDNN_FOR_CUDA}
    newest = builds[-1] if builds else "11.6"
    fix = (f"install CUDA {newest} with cuDNN {CUDNN_FOR_CUDA.get(newest, '8')} and put it "
           "first on LD_LIBRARY_PATH (book: Setup, Add an NVIDIA GPU)")
    if build is None:
        what = f"CUDA {found['cuda']}" if found["cuda"] else "no CUDA runtime (libcudart)"
        oldest = min(builds, key=parse_version) if builds else "11.6"
        return Check("toolkit", FAIL, f"{what} found; MindSpore's GPU kernels (built for CUDA "
                     f"{', '.join(builds)}) need a CUDA {oldest.split('.')[0]}.x runtime at "
                     f"or above {oldest}", fix, details)
    if not found["cudnn"] or not found["cudnn"].startswith("8."):
        return Check("toolkit", FAIL, f"cuDNN {found['cudnn'] or 'not'} found; MindSpore "
                     "links cuDNN 8 (libcudnn.so.8)", fix, details)
    notes = []
    if build != found["cuda"]:
        notes.append(f"CUDA {found['cuda']} runs MindSpore's CUDA {build} kernels "
                     "(minor-version compatibility)")
    return Check("toolkit", OK, f"CUDA {found['cuda']}, cuDNN {found['cudnn']} (recommended "
                 f"with CUDA {build}: cuDNN {CUDNN_FOR_CUDA.get(build)})", details=details,
                 notes=notes)


def cann_home() -> Path:
    """Where CANN is: ``ASCEND_HOME_PATH`` (set by ``set_env.sh``) or its default."""
    return Path(os.environ.get("ASCEND_HOME_PATH") or CANN_DEFAULT_HOME)


def cann_version(home: Path) -> str | None:
    """``major.minor`` from CANN's ``compiler/version.info`` (what MindSpore reads)."""
    try:
        text = (home / CANN_VERSION_FILE).read_text()
    except OSError:
        return None
    found = re.search(r"^Version=(\d+)\.(\d+)", text, re.MULTILINE)
    return f"{found.group(1)}.{found.group(2)}" if found else None


def check_cann(accepted: Sequence[str]) -> Check:
    """The CANN toolkit against the versions this MindSpore's own check accepts."""
    home = cann_home()
    found = cann_version(home)
    details = {"home": str(home), "cann": found, "accepted": list(accepted)}
    fix = (f"install CANN {accepted[-1] if accepted else ''} and source its set_env.sh "
           "(book: Setup, Add Ascend)")
    if found is None:
        return Check("toolkit", FAIL, f"no CANN in {home} (no {CANN_VERSION_FILE})", fix,
                     details)
    if accepted and found not in accepted:
        return Check("toolkit", FAIL, f"CANN {found}; MindSpore accepts {', '.join(accepted)}",
                     fix, details)
    return Check("toolkit", OK, f"CANN {found} in {home} (accepted: {', '.join(accepted)})",
                 details=details)


def check_toolkit(config: Config, device_ok: bool, wheel: dict[str, Any]) -> Check:
    target = config.device_target
    if target == "CPU":
        return Check("toolkit", OK, "the CPU back end needs no CUDA or CANN")
    if not device_ok:
        return _skip("toolkit", f"a working {target}")
    if target == "GPU":
        return check_cuda(wheel.get("cuda_builds", []))
    return check_cann(wheel.get("cann_accepted", []))


# --------------------------------------------------------------------------- msrun
PROC_MAPS = Path("/proc/self/maps")
"""The libraries this process has loaded (Linux): where MindSpore's GPU plugin is."""
GPU_PLUGIN = re.compile(r"(\S*/plugin)/libmindspore_gpu\.so\.(\d+\.\d+)$")


def loaded_gpu_plugin(maps: Path | None = None) -> tuple[Path, str] | None:
    """The folder and CUDA version of the GPU plugin MindSpore loaded in this process
    (``.../lib/plugin/libmindspore_gpu.so.11.6``; ``maps``: :data:`PROC_MAPS`), or
    None before it loaded one."""
    with contextlib.suppress(OSError):
        for line in (maps or PROC_MAPS).read_text().splitlines():
            found = GPU_PLUGIN.search(line.strip())
            if found:
                return Path(found.group(1)), found.group(2)
    return None


def collective_library(target: str, ms_dir: Path, build: str | None) -> tuple[str, Path]:
    """The library an 8-card run's all-reduce loads: the NCCL beside the GPU plugin
    MindSpore loaded (``plugin/gpu<its CUDA build>/``, whatever CUDA runtime runs it),
    or CANN's HCCL."""
    if target == "GPU":
        plugin = loaded_gpu_plugin()
        folder, build = plugin if plugin else (ms_dir / "lib" / "plugin", build)
        return "NCCL", folder / f"gpu{build}" / "libnccl.so.2"
    return "HCCL", cann_home() / "lib64" / "libhccl.so"


def check_msrun(config: Config, device_ok: bool, ms: Any) -> Check:
    """``msrun`` for ``msresnet launch``; NCCL or HCCL for a multi-card profile."""
    target = config.device_target
    try:
        spec = importlib.util.find_spec(MSRUN_MODULE)
    except ModuleNotFoundError:  # a parent package is missing
        spec = None
    if spec is None:
        return Check("msrun", FAIL, f"no {MSRUN_MODULE} in this MindSpore",
                     "pip install -r requirements.txt")
    script = shutil.which("msrun")
    details: dict[str, Any] = {"module": MSRUN_MODULE, "script": script}
    where = script or MSRUN_MODULE
    if target == "CPU":
        return Check("msrun", OK, f"{where}; CPU workers: MindSpore's own collective",
                     details=details)
    if not device_ok or ms is None:
        return _skip("msrun", f"a working {target}")
    build = None
    if target == "GPU":
        builds = wheel_facts(Path(ms.__file__).parent)["cuda_builds"]
        build = runnable_build(cuda_found()["cuda"], builds)
        if build is None and loaded_gpu_plugin() is None:
            return _skip("msrun", "a CUDA runtime that runs MindSpore's kernels (the toolkit line)")
    name, library = collective_library(target, Path(ms.__file__).parent, build)
    details[name] = str(library)
    if not library.is_file():
        return Check("msrun", FAIL, f"{where}; no {name} at {library}",
                     BACKEND_FIX[target], details)
    return Check("msrun", OK, f"{where}; {name}: {library}", details=details)


# --------------------------------------------------------------------------- data
def train_images(config: Config, counts: dict[str, int]) -> int:
    """Training images per epoch under the profile (held-out images excluded)."""
    available = split_counts(counts)[0] - config.valid_split
    return min(available, config.train_samples) if config.train_samples else available


def check_data(config: Config) -> Check:
    """The data folder, validated as training validates it."""
    folder = dataset_folder(config.data_dir)
    try:
        counts = validate(folder)
    except DatasetError as err:
        where = "" if str(folder) in str(err) else f"{in_repo(folder)}: "
        return Check("data", FAIL, f"{where}{err}", f"run: msresnet prepare --root "
                     f"{config.data_dir}", {"folder": str(folder)})
    train, test = split_counts(counts)
    return Check("data", OK, f"{train:,} train, {test:,} test images in {in_repo(folder)}",
                 details={"folder": str(folder), "counts": counts,
                          "train_images": train_images(config, counts)})


# --------------------------------------------------------------------------- speed
def timed_run(config: Config, steps: int, batch_size: int) -> dict[str, Any]:
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
    from msresnet.training.factories import make_datasets, make_model, set_context

    images = steps * batch_size
    # validation reads the held-out images, or the test set when none are held out
    evaluated = min(images, config.valid_split or TEST_IMAGES)
    short = dataclasses.replace(config, batch_size=batch_size, train_samples=images,
                                eval_samples=evaluated)
    set_context(short)
    train_ds, eval_ds = make_datasets(short)
    steps_per_epoch = train_ds.get_dataset_size()
    _, _, model, lr = make_model(short, steps_per_epoch)
    history = EpochHistory(None, lr, batch_size)
    model.train(2, train_ds, callbacks=[history], dataset_sink_mode=short.device_target != "CPU")
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


def check_speed(config: Config, steps: int, batch_size: int, images: int) -> Check:
    """Time the profile's training step here and project the whole run from it."""
    from msresnet.experiments.bench import load_average

    before = load_average()
    try:
        timing = timed_run(config, steps, batch_size)
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


# --------------------------------------------------------------------------- the report
def diagnose(config: Config, steps: int, batch_size: int) -> Iterator[Check]:
    """Yield the checks in order; the ones whose need failed are skipped."""
    build, ms = check_mindspore()
    yield build
    device = check_device(config, ms) if ms is not None else _skip("device", "MindSpore")
    yield device
    device_ok = device.status == OK
    found = [build, device, check_toolkit(config, device_ok, build.details),
             check_msrun(config, device_ok, ms), check_data(config)]
    yield from found[2:]
    # The toolkit and msrun lines are versions and files: the timed steps are the
    # real test of them, so only what the steps cannot run without skips them.
    if any(check.status == FAIL for check in (build, device, found[-1])):
        yield _skip("speed", "MindSpore, the device and the data")
    else:
        yield check_speed(config, steps, batch_size, found[-1].details["train_images"])


def header(config: Config) -> str:
    return (f"doctor: profile {config.profile} ({config.device_target}, "
            f"{config.image_size}x{config.image_size}, batch {config.batch_size}, "
            f"{config.epoch_size} epochs, {config.amp_level}, loss scale {config.loss_scale:g})")


def record(config: Config, checks: Sequence[Check], argv: Sequence[str]) -> dict[str, Any]:
    """Everything found, for ``--json``."""
    failed = [c.name for c in checks if c.status == FAIL]
    return {"command": " ".join(["msresnet", "doctor", *argv]), "ok": not failed,
            "failed": failed, "profile": config.profile, "config": config.to_dict(),
            "machine": {"cpu": cpu_model(), "cpu_count": os.cpu_count(),
                        "platform": platform.platform(), "python": platform.python_version()},
            "checks": [dataclasses.asdict(c) for c in checks]}


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet doctor",
        description="Check this machine for a profile before a long run: MindSpore and its "
                    "back ends, the device, CUDA/cuDNN or CANN, msrun and NCCL/HCCL, the "
                    "data, and a timed run of training steps with the projected run time.")
    parser.add_argument("--profile", required=True, help="smoke, cpu, gpu, ascend or a YAML path")
    parser.add_argument("--data_dir", default=None,
                        help="folder with cifar-10-batches-bin (default: the profile's)")
    parser.add_argument("--steps", type=_positive, default=DEFAULT_STEPS,
                        help=f"timed training steps, after as many that compile "
                             f"(default {DEFAULT_STEPS})")
    parser.add_argument("--batch_size", type=_positive, default=None,
                        help="batch of the timed steps (default: the profile's)")
    parser.add_argument("--amp_level", choices=AMP_LEVELS, default=None,
                        help="mixed precision of the timed steps (default: the profile's)")
    parser.add_argument("--json", type=Path, default=None, help="write everything found here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when every check passed, 1 when one failed, 2 for a bad command line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    overrides = {"data_dir": args.data_dir, "amp_level": args.amp_level}
    # the folder training would read: the one given, else $MSRESNET_DATA_DIR, else the profile's
    config = build_run_config(args.profile, {k: v for k, v in overrides.items() if v is not None})
    print(header(config), flush=True)
    checks: list[Check] = []
    for check in diagnose(config, args.steps, args.batch_size or config.batch_size):
        checks.append(check)
        print("\n".join([check.line(), *("      " + note for note in check.notes)]), flush=True)
    failed = [c.name for c in checks if c.status == FAIL]
    print(f"failed: {', '.join(failed)}" if failed else "every check passed")
    if args.json is not None:
        write_json(args.json, record(config, checks, argv))
        print(f"wrote {args.json}")
    return 1 if failed else 0
