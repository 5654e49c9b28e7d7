"""One copy per node: in a multi-device job the first process copies, the others wait.

On a ModelArts node with 8 devices, 8 training processes start at once and all want
the dataset in ``/cache``. The models repo's ``moxing_adapter.sync_data`` lets device
``0 mod 8`` copy and the rest poll for ``/tmp/copy_sync.lock<N>``, where ``N`` counts
calls in each process. That breaks in three ways: the names depend on call order (a
process that skips one sync waits on the wrong file), the files are never removed (a
second job on the node finds them and does not wait for its own copy), and the wait
has no timeout (a crashed copier hangs the whole job).

Here the markers are named by a hash of the job id, the source and the destination,
so each copy has its own; whoever first creates the lock file with
``O_CREAT | O_EXCL`` (atomic on local file systems) does the copy and then writes a
*done* (or *failed*) marker; the others poll for it, give up after ``timeout`` with
:class:`SyncTimeoutError`, notice at once if the copier died, and acknowledge; the
last to acknowledge removes all markers.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from msresnet.atomic import write_json
from msresnet.storage.staging import (CopyResult, StagingError, copy, copy_parallel, is_directory,
                                      parse_url)

T = TypeVar("T")
MARKER_PREFIX = ".msresnet-sync-"


class SyncError(StagingError):
    """The copying process of this node failed or died."""


class SyncTimeoutError(SyncError):
    """No done marker appeared within the timeout."""


def job_id(environ: dict[str, str] | None = None) -> str:
    """The id shared by all processes of this job on this node.

    ModelArts sets ``JOB_ID``; ``MSRESNET_JOB_ID`` lets you set one. Without either,
    the parent process id stands in: processes started by one launcher (msrun,
    mpirun, a shell loop) share it.
    """
    env = os.environ if environ is None else environ
    return env.get("MSRESNET_JOB_ID") or env.get("JOB_ID") or f"ppid-{os.getppid()}"


def local_world_size(environ: dict[str, str] | None = None) -> int:
    """Processes per node that call :func:`sync_data`: ``LOCAL_WORLD_SIZE`` if set,
    else ``RANK_SIZE`` (or ``DEVICE_NUM``) capped at 8 devices per server."""
    env = os.environ if environ is None else environ
    if env.get("LOCAL_WORLD_SIZE"):
        return max(1, int(env["LOCAL_WORLD_SIZE"]))
    return max(1, min(int(env.get("RANK_SIZE") or env.get("DEVICE_NUM") or 1), 8))


def marker_tag(job: str, *parts: str) -> str:
    """16 hex digits naming one synchronised action of one job."""
    text = "\0".join((job, *parts))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _default_lock_dir(dst: str) -> Path:
    loc = parse_url(dst)
    if not loc.remote:
        return Path(loc.path).parent
    return Path(tempfile.gettempdir())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # missing, or being written right now


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    # A unique temporary name: a marker may be written by more than one process.
    write_json(path, data, indent=None, unique=True)


@dataclass
class Markers:
    """The files one synchronised action uses in ``folder``."""

    folder: Path
    tag: str

    @property
    def lock(self) -> Path:
        return self.folder / f"{MARKER_PREFIX}{self.tag}.lock"

    @property
    def done(self) -> Path:
        return self.folder / f"{MARKER_PREFIX}{self.tag}.done"

    @property
    def failed(self) -> Path:
        return self.folder / f"{MARKER_PREFIX}{self.tag}.failed"

    def ack(self, pid: int) -> Path:
        return self.folder / f"{MARKER_PREFIX}{self.tag}.ack.{pid}"

    def acks(self) -> list[Path]:
        return sorted(self.folder.glob(f"{MARKER_PREFIX}{self.tag}.ack.*"))

    def all(self) -> list[Path]:
        return sorted(self.folder.glob(f"{MARKER_PREFIX}{self.tag}.*"))

    def remove(self) -> None:
        # lock last: while it exists nobody else starts a second copy
        for path in [*self.acks(), self.done, self.failed, self.lock]:
            path.unlink(missing_ok=True)


@dataclass
class OnceResult:
    """How :func:`once_per_node` went in this process."""

    owner: bool  # True in the process that ran the action
    value: Any  # the action's return value (owner) or its JSON summary (waiters)
    waited: float  # seconds spent waiting (0 for the owner)
    tag: str


def _try_lock(markers: Markers, token: str) -> bool:
    try:
        fd = os.open(markers.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "token": token}, handle)
    return True


def _take_over(markers: Markers, dead_owner: dict[str, Any]) -> None:
    """Move a dead owner's lock aside; put it back if it turns out to be a new one."""
    aside = markers.folder / f"{markers.lock.name}.stale.{os.getpid()}"
    try:
        os.replace(markers.lock, aside)
    except FileNotFoundError:
        return  # another waiter was faster
    moved = _read_json(aside)
    if moved is not None and moved.get("token") != dead_owner.get("token"):
        try:  # we grabbed a live process's fresh lock: restore it unless replaced
            os.link(aside, markers.lock)
        except FileExistsError:
            pass
    aside.unlink(missing_ok=True)


def _finish_if_last(markers: Markers, expected_acks: int) -> None:
    if len(markers.acks()) >= expected_acks:
        markers.remove()


def _run_as_owner(markers: Markers, token: str, action: Callable[[], T],
                  summary: Callable[[T], dict] | None, world: int) -> OnceResult:
    """Run the action, then tell the waiters how it went (done or failed marker)."""
    for stale in (markers.done, markers.failed, *markers.acks()):
        stale.unlink(missing_ok=True)
    try:
        value = action()
    except BaseException as exc:
        _write_json_atomic(markers.failed, {
            "token": token, "pid": os.getpid(), "error": f"{type(exc).__name__}: {exc}"})
        _finish_if_last(markers, world - 1)
        raise
    _write_json_atomic(markers.done, {
        "token": token, "pid": os.getpid(), "summary": summary(value) if summary else None})
    _finish_if_last(markers, world - 1)
    return OnceResult(True, value, 0.0, markers.tag)


def _verdict(markers: Markers, owner: dict[str, Any], world: int, what: str,
             started: float) -> OnceResult | None:
    """The owner's outcome once its done/failed marker is there (acknowledged), else None."""
    for marker, ok in ((markers.done, True), (markers.failed, False)):
        verdict = _read_json(marker)
        if verdict and verdict.get("token") == owner.get("token"):
            markers.ack(os.getpid()).touch()
            _finish_if_last(markers, world - 1)
            if not ok:
                raise SyncError(f"process {verdict.get('pid')} failed while doing {what}: "
                                f"{verdict.get('error')}")
            return OnceResult(False, verdict.get("summary"), time.monotonic() - started,
                              markers.tag)
    return None


def _wait_for_owner(markers: Markers, world: int, what: str, started: float, timeout: float,
                    poll_interval: float) -> OnceResult | None:
    """Poll until the owner's verdict (returned), or None when its lock is gone or
    its process died (the caller competes for the lock again)."""
    while True:
        owner = _read_json(markers.lock)
        if owner is None and not markers.lock.exists():
            return None  # lock gone (stale lock taken over): try to become the owner
        if owner is not None:
            if (outcome := _verdict(markers, owner, world, what, started)) is not None:
                return outcome
            if owner.get("host") == socket.gethostname() and not _pid_alive(
                    int(owner.get("pid", 0))):
                # The owner died without a verdict: take its lock away (rename is
                # atomic, so only one waiter wins) and compete for a fresh one.
                _take_over(markers, owner)
                return None
        if time.monotonic() - started > timeout:
            holder = f"process {owner.get('pid')}" if owner else "another process"
            raise SyncTimeoutError(
                f"waited {timeout:g} s for {holder} to finish {what}; no marker "
                f"{markers.done.name} in {markers.folder}")
        time.sleep(poll_interval)


def once_per_node(name: tuple[str, ...], action: Callable[[], T], *,
                  lock_dir: str | os.PathLike[str], summary: Callable[[T], dict] | None = None,
                  timeout: float = 3600.0, poll_interval: float = 0.2,
                  job: str | None = None, world: int | None = None) -> OnceResult:
    """Run ``action`` in exactly one of the ``world`` processes that call this with
    the same ``name``; the others wait for it (at most ``timeout`` seconds)."""
    world = world or local_world_size()
    folder = Path(lock_dir)
    folder.mkdir(parents=True, exist_ok=True)
    markers = Markers(folder, marker_tag(job or job_id(), *name))
    token = uuid.uuid4().hex
    started = time.monotonic()
    while True:
        if _try_lock(markers, token):
            return _run_as_owner(markers, token, action, summary, world)
        outcome = _wait_for_owner(markers, world, " -> ".join(name), started, timeout,
                                  poll_interval)
        if outcome is not None:
            return outcome


@dataclass
class SyncResult:
    """What :func:`sync_data` did in this process."""

    owner: bool
    copied: int | None  # files the owner copied (as reported to the waiters)
    skipped: int | None
    bytes: int | None
    seconds: float | None  # the owner's copy time
    waited: float
    tag: str


def _copy_summary(result: CopyResult) -> dict[str, Any]:
    return {"copied": result.copied, "skipped": result.skipped, "bytes": result.bytes,
            "seconds": round(result.seconds, 3)}


def sync_data(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
              timeout: float = 3600.0, lock_dir: str | os.PathLike[str] | None = None,
              job: str | None = None, world: int | None = None,
              poll_interval: float = 0.2, **copy_kwargs: Any) -> SyncResult:
    """Copy ``src`` to ``dst`` once per node (folder: :func:`copy_parallel`, file:
    :func:`copy`) while the node's other processes wait for the copy to finish.

    Markers live in ``lock_dir`` (default: the parent of a local ``dst``, else the
    temp folder) and are removed once every process (``world``, default
    :func:`local_world_size`) has seen the outcome.
    """
    src_text, dst_text = os.fspath(src), os.fspath(dst)

    def action() -> CopyResult:
        if is_directory(src_text):
            return copy_parallel(src_text, dst_text, **copy_kwargs)
        return copy(src_text, dst_text, **copy_kwargs)

    outcome = once_per_node(
        ("sync_data", src_text, dst_text), action,
        lock_dir=lock_dir if lock_dir is not None else _default_lock_dir(dst_text),
        summary=_copy_summary, timeout=timeout, poll_interval=poll_interval,
        job=job, world=world)
    counts = _copy_summary(outcome.value) if outcome.owner else (outcome.value or {})
    return SyncResult(outcome.owner, counts.get("copied"), counts.get("skipped"),
                      counts.get("bytes"), counts.get("seconds"), outcome.waited, outcome.tag)
