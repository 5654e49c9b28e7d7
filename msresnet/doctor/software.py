"""The software a run needs: MindSpore (the build, its back ends, the CUDA and CANN
versions it was made for) and the CUDA runtime with cuDNN, or the CANN toolkit, that
this machine has (``mindspore`` and ``toolkit`` lines of ``msresnet doctor``)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msresnet.config.profile import Config
from msresnet.doctor.checks import FAIL, OK, WARN, Check, skip
from msresnet.paths import REPO_ROOT

CUDNN_FOR_CUDA = {"10.1": "7.6", "11.1": "8.0", "11.6": "8.5"}
"""The cuDNN MindSpore recommends with each CUDA (its own warning text,
``mindspore/run_check/_check_version.py`` of the 2.10 wheel)."""

CUDA_RUNTIME = ("libcudart.so.11.0", "libcudart.so", "libcudart.so.12")
CUDNN = ("libcudnn.so.8", "libcudnn.so", "libcudnn.so.9")
CANN_VERSION_FILE = "compiler/version.info"
CANN_DEFAULT_HOME = Path("/usr/local/Ascend/ascend-toolkit/latest")


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


SUPPORTED = ("2.7", "2.11")
"""The MindSpore versions the package supports: from the first (included) to the
second (excluded), as ``pyproject.toml`` declares ``mindspore>=2.7,<2.11``; the
oldest end is tested by ``make compat-test`` (``results/compat/``)."""
SUPPORTED_TEXT = f"{SUPPORTED[0]} to below {SUPPORTED[1]}"


def supported_mindspore(version: str) -> bool:
    """``version`` lies in :data:`SUPPORTED`, as pip compares versions: a pre-release
    comes before its release (``2.7.0rc1`` is below 2.7, ``2.10.0rc1`` inside)."""
    found = re.match(r"(\d+(?:\.\d+)*)(.*)", version.strip())
    if found is None:
        return False
    release = parse_version(found.group(1))
    pre = bool(re.search(r"(a|b|rc|dev|alpha|beta)\d*", found.group(2)))
    low, high = (parse_version(bound) for bound in SUPPORTED)
    padded = release + (0,) * (3 - len(release))
    low_padded, high_padded = (b + (0,) * (3 - len(b)) for b in (low, high))
    at_or_above = padded > low_padded or (padded == low_padded and not pre)
    return at_or_above and padded < high_padded


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
    pinned = details["pinned"]
    status, notes = OK, []
    if pinned and ms.__version__ != pinned:
        if not supported_mindspore(ms.__version__):
            return Check("mindspore", FAIL, f"MindSpore {ms.__version__}, outside the package's "
                         f"range ({SUPPORTED_TEXT}; the book pins {pinned})",
                         f"pip install mindspore=={pinned}", details), ms
        status = WARN
        notes.append(f"in the package's range ({SUPPORTED_TEXT}); the book pins {pinned}, with "
                     "which its chapters were executed (results/compat/)")
    cuda = ",".join(details["cuda_builds"]) or "none"
    cann = ",".join(details["cann_accepted"]) or "unknown"
    return Check("mindspore", status, f"{ms.__version__}; loaded: {','.join(backends)}; "
                 f"CUDA {cuda}; CANN {cann}", details=details, notes=notes), ms


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
        return skip("toolkit", f"a working {target}")
    if target == "GPU":
        return check_cuda(wheel.get("cuda_builds", []))
    return check_cann(wheel.get("cann_accepted", []))


