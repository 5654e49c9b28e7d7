"""The device a run trains on, and the collective library an 8-card run needs
(``device`` and ``msrun`` lines of ``msresnet doctor``)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
from pathlib import Path
from typing import Any

from msresnet.config.profile import Config
from msresnet.cpu_speed import cpu_model
from msresnet.doctor.checks import FAIL, OK, Check, skip
from msresnet.doctor.software import (cann_home, cuda_found, runnable_build,
                                      wheel_facts)
from msresnet.jobs.launch import MSRUN_MODULE

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


# --------------------------------------------------------------------------- the device
def missing_device(target: str) -> str | None:
    """Why this machine has no ``target`` device (None: its driver is there, or CPU)."""
    if target not in DRIVER_SIGNS:
        return None
    tool, interface = DRIVER_SIGNS[target]
    return None if shutil.which(tool) or interface.exists() else NO_DEVICE[target]


def run_check(ms: Any, target: str) -> str:
    """``mindspore.run_check()`` on ``target``; what it printed (it prints its errors)."""
    from msresnet.training.factories import select_device

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        select_device(target)
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
        return skip("msrun", f"a working {target}")
    build = None
    if target == "GPU":
        builds = wheel_facts(Path(ms.__file__).parent)["cuda_builds"]
        build = runnable_build(cuda_found()["cuda"], builds)
        if build is None and loaded_gpu_plugin() is None:
            return skip("msrun", "a CUDA runtime that runs MindSpore's kernels (the toolkit line)")
    name, library = collective_library(target, Path(ms.__file__).parent, build)
    details[name] = str(library)
    if not library.is_file():
        return Check("msrun", FAIL, f"{where}; no {name} at {library}",
                     BACKEND_FIX[target], details)
    return Check("msrun", OK, f"{where}; {name}: {library}", details=details)


