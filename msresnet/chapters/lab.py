"""Open the chapters in JupyterLab on this environment's kernel (``make lab``).

A reader's own Jupyter would start the chapters in whatever ``python3`` it knows,
often an interpreter without MindSpore or this package. So this launcher:

1. registers a kernel of *this* interpreter inside its own prefix (the venv), named
   :data:`KERNEL_NAME` and shown as :func:`display_name` ("ResNet50 book
   (MindSpore 2.10)"), so nothing outside the checkout changes;
2. starts JupyterLab in ``notebooks/``, headless, on loopback by default, offering
   only that kernel: a chapter whose metadata still names ``python3`` is started on
   it too (JupyterLab falls back to the one kernel of the notebook's language);
3. keeps checkpoints (JupyterLab's "revert" copies) out of the repository, so that
   running a chapter changes nothing but the chapter itself;
4. waits until the server answers, then prints the URL with its token and the ssh
   line a remote reader uses to forward the port.

Ctrl-C (or SIGTERM) stops the server, which shuts its kernels down.

Usage: ``msresnet lab [--port 8888] [--ip 127.0.0.1] [--register-only]``.
"""

from __future__ import annotations

import getpass
import hashlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from msresnet.paths import REPO_ROOT

KERNEL_NAME = "msresnet-book"
"""The kernelspec name the chapters' metadata should carry (see book/setup.md)."""

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
DEFAULT_PORT = 8888
READY_TIMEOUT_S = 300.0  # a cold start on a loaded 2-core machine takes tens of seconds


class LabError(RuntimeError):
    """The server could not be started or did not come up; the message says why."""


def display_name() -> str:
    """"ResNet50 book (MindSpore X.Y)" from the installed wheel (no slow MindSpore import)."""
    version = importlib.metadata.version("mindspore")
    return f"ResNet50 book (MindSpore {'.'.join(version.split('.')[:2])})"


def register_kernel(prefix: str = sys.prefix) -> Path:
    """Install the kernelspec of this interpreter under ``prefix`` and return its folder.

    ``--sys-prefix`` style: the spec lives in ``<venv>/share/jupyter/kernels`` and is
    seen only by Jupyter run from this venv, so a reader's other environments and their
    user-wide kernels are left alone. Idempotent: it rewrites the same files.
    """
    from ipykernel.kernelspec import install  # imported here: only this step needs it

    return Path(install(kernel_name=KERNEL_NAME, display_name=display_name(), prefix=prefix))


def checkpoint_dir(notebook_dir: Path) -> Path:
    """A per-checkout folder outside the repository for JupyterLab's checkpoints.

    Jupyter's default, ``.ipynb_checkpoints`` beside each notebook, would put copies
    into ``notebooks/``; these are the reader's, so they go to the user's cache.
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha1(str(notebook_dir.resolve()).encode()).hexdigest()[:12]
    return cache / "msresnet-book" / "checkpoints" / digest


def server_command(notebook_dir: Path, ip: str, port: int, checkpoints: Path) -> list[str]:
    """The ``jupyter lab`` command line (run with this interpreter, so from this venv)."""
    return [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        f"--ServerApp.ip={ip}",
        f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={notebook_dir}",
        # Only the book's kernel: a chapter cannot start in another interpreter.
        f"--KernelSpecManager.allowed_kernelspecs={KERNEL_NAME}",
        f"--MappingKernelManager.default_kernel_name={KERNEL_NAME}",
        f"--FileCheckpoints.checkpoint_dir={checkpoints}",
        # No requests to the internet (news feed, update check): the book works offline.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # Jupyter refuses to start as root (containers, CI, ModelArts images) without it.
        *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
    ]


def check_ip(ip: str) -> None:
    """Raise :class:`LabError` naming ``ip`` unless this machine can listen on it.

    Checked before the kernel is registered or the server started: JupyterLab given an
    address it cannot bind (``999.1.1.1``, another machine's) printed three tracebacks
    and exited 1. ``''`` and ``*`` (every interface, in Jupyter's spelling) pass.
    """
    if ip in ("", "*"):
        return
    try:
        family, kind, _, _, address = socket.getaddrinfo(
            ip, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind) as probe:
            probe.bind(address)
    except OSError as err:  # socket.gaierror included: not an address at all
        raise LabError(f"--ip: {ip!r} is not an address this machine can listen on "
                       f"({err.strerror or err}); e.g. 127.0.0.1, or 0.0.0.0 for every "
                       "interface") from None


@dataclass(frozen=True)
class Server:
    """What a running server wrote into its runtime file (``jpserver-<pid>.json``)."""

    pid: int
    port: int
    token: str
    runtime_file: Path

    def url(self, host: str, path: str = "lab") -> str:
        """The address a reader opens; the token logs the browser in."""
        return f"http://{host}:{self.port}/{path}?token={self.token}"


def runtime_dir() -> Path:
    """Where Jupyter writes ``jpserver-<pid>.json`` (honours ``JUPYTER_RUNTIME_DIR``)."""
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir())


def wait_until_ready(process: subprocess.Popen, timeout: float = READY_TIMEOUT_S) -> Server:
    """Wait for the server's runtime file and a successful ``/api/status`` call.

    Polls a condition (no fixed sleep decides anything); raises :class:`LabError` if
    the process exits first or ``timeout`` seconds pass.
    """
    runtime_file = runtime_dir() / f"jpserver-{process.pid}.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LabError(f"jupyter lab exited with code {process.returncode} before it "
                           "was ready (its log is above)")
        if runtime_file.exists():
            try:
                info = json.loads(runtime_file.read_text())
                server = Server(process.pid, int(info["port"]), info["token"], runtime_file)
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{server.port}/api/status?token={server.token}",
                        timeout=10) as response:
                    if response.status == 200:
                        return server
            except (ValueError, KeyError, OSError, urllib.error.URLError):
                pass  # half-written file or not listening yet: poll again
        time.sleep(0.2)
    raise LabError(f"jupyter lab did not answer within {timeout:.0f} s ({runtime_file})")


def banner(server: Server, ip: str, display: str) -> str:
    """The lines printed once the server is up: URL, ssh forwarding, kernel, how to stop."""
    host = "127.0.0.1" if ip in ("127.0.0.1", "localhost", "") else ip
    user, machine = getpass.getuser(), socket.gethostname()
    lines = [
        "",
        f"JupyterLab is running the chapters in {NOTEBOOK_DIR.relative_to(REPO_ROOT)}/ "
        f'on the kernel "{display}".',
        "Open this URL in a browser on this machine:",
        f"    {server.url(host)}",
    ]
    if host == "127.0.0.1":
        lines += [
            "From another computer, forward the port over ssh, then open the same URL there:",
            f"    ssh -N -L {server.port}:127.0.0.1:{server.port} {user}@{machine}",
        ]
    lines += [
        "Running a chapter rewrites its stored outputs; `make restore` puts them back.",
        "Stop the server with Ctrl-C.",
        "",
    ]
    return "\n".join(lines)


def serve(ip: str, port: int, notebook_dir: Path = NOTEBOOK_DIR) -> int:
    """Register the kernel, run JupyterLab until it stops, return its exit code."""
    check_ip(ip)  # before anything is registered or started
    register_kernel()
    checkpoints = checkpoint_dir(notebook_dir)
    checkpoints.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(server_command(notebook_dir, ip, port, checkpoints))

    def forward(signum: int, _frame: object) -> None:
        # Ctrl-C in a terminal reaches the server too (same process group); SIGTERM
        # sent to this launcher alone is passed on so the kernels are shut down.
        if signum != signal.SIGINT and process.poll() is None:
            process.send_signal(signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    try:
        server = wait_until_ready(process)
    except LabError as error:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=60)
        print(f"make lab: {error}", file=sys.stderr)
        return 1
    print(banner(server, ip, display_name()), flush=True)
    return process.wait()
