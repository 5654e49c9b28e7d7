"""Run the book's training data-parallel with ``msrun``, MindSpore's own launcher.

``msrun`` starts one *scheduler* process and N *worker* processes, each running the
same command (here ``msresnet train``) with ``MS_ROLE``, ``MS_WORKER_NUM``,
``MS_SCHED_HOST``/``MS_SCHED_PORT`` and ``RANK_ID`` in its environment. In every
process ``mindspore.communication.init()`` (called by the training function) registers
with the scheduler; the scheduler hands out ranks, then the workers train, and each
step's gradients are averaged across them (``ParallelMode.DATA_PARALLEL``,
``gradients_mean=True``). This module only builds that command, prints it so it can
be copied to a cluster, runs it, and turns the ways it fails into one clear error::

    msresnet launch --workers 2 --profile smoke --output_dir runs/dp2 --epoch_size 1
    msresnet launch --workers 8 --profile gpu --output_dir runs/gpu8 --dry_run

What it adds to plain ``msrun``:

* a free ``--master_port`` by default, and a check that a given one is free
  (``msrun`` would otherwise wait ``--cluster_time_out`` seconds and fail with a
  generic message);
* the config is loaded and checked *once*, before any process starts (a typo
  fails in a second, not after N processes imported MindSpore), and that checked
  config is what every worker trains with: the job writes it, everything resolved,
  to ``<output>/launch.yaml`` when it starts, and each worker runs
  ``msresnet train --profile <output>/launch.yaml`` with no overrides to parse again
  (on several nodes, each node's ``msresnet launch`` writes its own copy);
* the learning rate the job will train at, printed before it starts: each worker
  applies the device-count rule (:func:`msresnet.config.run.for_devices`: the profile's
  ``lr_max`` x N workers / its ``lr_devices``) when it learns the group size, and
  the launcher says the same line first (``--lr_devices R`` overrides the
  profile's count like any other field);
* when a worker dies, the scheduler fails, or ``--timeout`` passes, every process
  of the job is stopped and the error names the rank, its exit code and the tail of
  its log (a dead worker ends the job within seconds of msrun logging it: msrun
  alone would wait for its scheduler's heartbeat timeout, about 30 s);
  ``msresnet launch`` exits with 2.

All logs (``scheduler.log``, ``worker_<rank>.log``, ``msrun.log``) go to
``<output>/logs`` by default, next to the checkpoints that rank 0 writes. The command
line, ``msresnet launch``, is :mod:`msresnet.commands.launch`, a thin adapter over
:func:`build_plan` and :func:`run`.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import psutil

from msresnet.atomic import write_text
from msresnet.command_line import DEBUG_VARIABLE
from msresnet.compile_cache import refuse as refuse_compile_cache
from msresnet.config.profile import Config, Overrides
from msresnet.data.source import DATA_DIR_VARIABLE
from msresnet.jobs.worker_logs import describe_exit, log_tail
from msresnet.jobs.ports import free_port, is_local_address, port_is_free, port_owner
from msresnet.config.run import build_run_config, for_devices
from msresnet.training.distributed import DUMP_VARIABLE  # where --rank_dump tells the workers to write

MSRUN_MODULE = "mindspore.parallel.cluster.run"  # what the ``msrun`` console script runs
TRAIN_ENTRY = ("python", "-m", "msresnet", "train")
LOG_FOLDER = "logs"
LAUNCH_CONFIG = "launch.yaml"      # in the job folder: the checked config every worker loads
RANK_DUMP_FOLDER = "ranks"
MSRUN_LOG = "msrun.log"
SCHEDULER_LOG = "scheduler.log"
DEFAULT_CLUSTER_TIME_OUT = 120     # seconds for all workers to register (msrun's default: 600)
SCHEDULER_GRACE = 5.0              # seconds msrun gets to notice a failed scheduler itself
STOP_GRACE = 10.0                  # seconds between asking msrun to stop and killing
_WORKER_EXIT = re.compile(r"Worker process (\d+) exit with exception\. Error code: (-?\d+)")


class LaunchError(RuntimeError):
    """The job could not start or did not finish; the message says which rank and why.

    ``rank`` is the failing worker's rank (``"scheduler"`` for the scheduler, None
    when unknown), ``log`` its log file and ``tail`` the last lines of that log.
    """

    def __init__(self, message: str, *, rank: int | str | None = None,
                 exit_code: int | None = None, log: Path | None = None,
                 tail: Sequence[str] = ()) -> None:
        self.rank = rank
        self.exit_code = exit_code
        self.log = log
        self.tail = list(tail)
        self.summary = message  # the one line, without the log's tail
        text = message
        if log is not None and self.tail:
            text += f"\n--- last lines of {log} ---\n" + "\n".join(self.tail)
        super().__init__(text)


# --------------------------------------------------------------------------- the plan
@dataclass
class LaunchPlan:
    """Everything needed to start the job on this node; ``command`` is what runs.

    ``config`` is the checked config every worker trains with; :func:`run` writes it
    to ``config_file`` (relative to the job's working folder), which ``train_args``
    name. A plan without a config runs its ``entry`` and ``train_args`` as they are
    (chapter 7 times an all-reduce that way). ``changes`` are the values the launch
    set on top of the profile (overrides, ``output_dir``), to show them; ``lr_max``
    is the rate the workers will train at (the device-count rule for ``workers``).
    """

    workers: int
    local_workers: int
    master_addr: str
    master_port: int
    node_rank: int | None
    log_dir: str
    output_dir: str
    cluster_time_out: int
    train_args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    entry: tuple[str, ...] = TRAIN_ENTRY
    lr_max: float | None = None
    config: Config | None = None
    config_file: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)

    def msrun_options(self) -> list[str]:
        options = [f"--worker_num={self.workers}", f"--local_worker_num={self.local_workers}",
                   f"--master_addr={self.master_addr}", f"--master_port={self.master_port}"]
        if self.node_rank is not None:
            options.append(f"--node_rank={self.node_rank}")
        options += [f"--log_dir={self.log_dir}", "--join=True",
                    f"--cluster_time_out={self.cluster_time_out}", "--tail_worker_log=0"]
        return options

    @property
    def command(self) -> list[str]:
        """``msrun <options> msresnet train <args>``."""
        return ["msrun", *self.msrun_options(), *self.entry, *self.train_args]

    def shell(self, width: int = 80) -> str:
        """The command as you would type it (environment first), wrapped with ``\\``."""
        words = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        words += [shlex.quote(w) for w in self.command]
        lines, line = [], ""
        for word in words:
            if line and len(line) + 1 + len(word) > width - 2:
                lines.append(line)
                line = "    " + word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
        return " \\\n".join(lines)

    def config_text(self) -> str:
        """What :func:`run` writes to ``config_file``: the config as YAML, with a header."""
        assert self.config is not None
        return (f"# Written by msresnet launch: the checked config every worker loads "
                f"({' '.join(self.entry[2:])} --profile {self.config_file}).\n"
                + self.config.to_yaml())

    def describe_config(self, width: int = 80) -> str:
        """One comment saying which file the workers load and what it sets."""
        assert self.config is not None
        changes = ", ".join(f"{key}={'null' if value is None else value}"
                            for key, value in self.changes.items())
        text = (f"every worker loads {self.config_file} (written when the job starts): "
                f"profile {self.config.profile}" + (f" with {changes}" if changes else ""))
        return textwrap.fill(text, width, initial_indent="# ", subsequent_indent="#   ",
                             break_on_hyphens=False)


def _check_layout(workers: int, local_workers: int | None, node_rank: int | None,
                  master_port: int | None, cluster_time_out: int) -> int:
    """Check how the workers spread over the nodes; returns the workers on this node."""
    for name, value in (("workers", workers), ("cluster_time_out", cluster_time_out)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LaunchError(f"{name}: must be a positive integer, got {value!r}")
    local = workers if local_workers is None else local_workers
    if isinstance(local, bool) or not isinstance(local, int) or not 1 <= local <= workers:
        raise LaunchError(f"local_workers: must be 1..workers ({workers}), got {local!r}")
    if local < workers and master_port is None:
        raise LaunchError("several nodes (local_workers < workers): pass --master_port, the "
                          "same on every node, and open it on the master node's firewall")
    if node_rank is not None and (not isinstance(node_rank, int) or node_rank < 0
                                  or node_rank * local >= workers):
        raise LaunchError(f"node_rank: must be 0..{workers // local - 1} for {workers} workers "
                          f"with {local} per node, got {node_rank!r}")
    if master_port is not None and not 1024 <= master_port <= 65535:
        raise LaunchError(f"master_port: must be 1024..65535 (what msrun accepts), got {master_port}")
    return local


def job_config(profile: str, overrides: Mapping[str, Any] | None,
               output: str | None) -> Config:
    """The config every worker loads: the profile, the overrides, ``output`` as
    ``output_dir``, loaded and checked once. Its ``lr_max`` is the profile's, for its
    ``lr_devices``: each worker scales it to the group size (the device-count rule,
    :func:`msresnet.config.run.for_devices`, applied in the training, once)."""
    values = Overrides(overrides or {}, getattr(overrides, "source", "overrides"))
    if output is not None:
        values["output_dir"] = output
    # the data folder by the book's one rule, decided here once for every worker
    return build_run_config(profile, values)


def build_plan(workers: int, profile: str = "smoke", overrides: Mapping[str, Any] | None = None,
               output: str | None = None, *, master_port: int | None = None,
               master_addr: str = "127.0.0.1", local_workers: int | None = None,
               node_rank: int | None = None, log_dir: str | None = None,
               cluster_time_out: int = DEFAULT_CLUSTER_TIME_OUT,
               rank_dump: bool = False,
               progress: bool = False, entry: Sequence[str] = TRAIN_ENTRY) -> LaunchPlan:
    """Check the config and build the command for ``workers`` processes in total.

    ``overrides`` are Config fields for the training (as
    :func:`msresnet.config.profile.load_config` takes them); ``output`` sets ``output_dir``.
    The workers get the checked config itself (:func:`job_config`), as the file
    ``<output_dir>/launch.yaml`` that :func:`run` writes: ``--profile`` that file.
    ``local_workers`` (default: all) start on this node; with fewer than
    ``workers``, the others run on other nodes, started with the same command but
    their own ``node_rank``, and ``master_port`` must be given (all nodes must agree).
    ``rank_dump`` sets :data:`DUMP_VARIABLE` to ``<output>/ranks``.
    Raises :class:`~msresnet.config.profile.ConfigError` or :class:`LaunchError`.
    """
    local = _check_layout(workers, local_workers, node_rank, master_port, cluster_time_out)
    config = job_config(profile, overrides, output)
    # What the workers will train at; a rate the rule makes invalid fails here, at once.
    rate = for_devices(config, workers).lr_max
    given = [*(overrides or {}), *(["output_dir"] if output is not None else [])]
    config_file = str(Path(config.output_dir) / LAUNCH_CONFIG)
    args = ["--profile", config_file] + ([] if progress else ["--no_progress"])
    env = {DUMP_VARIABLE: str(Path(config.output_dir) / RANK_DUMP_FOLDER)} if rank_dump else {}
    return LaunchPlan(
        workers=workers, local_workers=local, master_addr=master_addr,
        master_port=free_port(master_addr) if master_port is None else master_port,
        node_rank=node_rank, log_dir=log_dir or str(Path(config.output_dir) / LOG_FOLDER),
        output_dir=config.output_dir, cluster_time_out=cluster_time_out, train_args=args,
        env=env, entry=tuple(entry), lr_max=rate,
        config=config, config_file=config_file,
        changes={key: getattr(config, key) for key in dict.fromkeys(given)})


# --------------------------------------------------------------------------- running
@dataclass
class LaunchResult:
    """A finished job."""

    plan: LaunchPlan
    seconds: float
    log_dir: Path
    worker_logs: dict[int, Path]

    def log_lines(self, rank: int, pattern: str = r"\b(INFO|WARNING|ERROR) msresnet\.") -> list[str]:
        """Lines of rank ``rank``'s log matching ``pattern`` (default: the book's own
        log records, ``... INFO msresnet.training.train: ...``)."""
        text = self.worker_logs[rank].read_text(errors="replace")
        return [line for line in text.splitlines() if re.search(pattern, line)]


class _Job:
    """One running ``msrun``: its process, its descendants, its logs."""

    def __init__(self, plan: LaunchPlan, cwd: Path, echo: TextIO | None) -> None:
        self.plan = plan
        self.cwd = cwd
        self.log_dir = cwd / plan.log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # msrun rewrites these; an old one must not be mistaken for this job's.
        for old in [self.log_dir / SCHEDULER_LOG, *self.log_dir.glob("worker_*.log")]:
            old.unlink(missing_ok=True)
        env = dict(os.environ)
        # Tracebacks in the rank logs (not msresnet.command_line's one line): whoever reads a
        # rank's log wants them, and this launcher finds the failed process by them.
        env[DEBUG_VARIABLE] = "1"
        # msrun starts the workers as "python ..." from PATH: make it this interpreter.
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        env.update(plan.env)
        if plan.config is not None:  # the workers' rule finds the folder the launcher chose
            env[DATA_DIR_VARIABLE] = str(cwd / plan.config.data_dir)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MSRUN_MODULE, *plan.command[1:]], cwd=cwd, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.ranks: dict[int, int | str] = {}        # pid -> rank ("scheduler")
        self.processes: dict[int, psutil.Process] = {}
        self._reader = threading.Thread(target=self._copy_output, args=(echo,), daemon=True)
        self._reader.start()

    def _copy_output(self, echo: TextIO | None) -> None:
        assert self.proc.stdout is not None
        with open(self.log_dir / MSRUN_LOG, "wb") as log:
            for line in iter(self.proc.stdout.readline, b""):
                log.write(line)
                log.flush()
                if echo is not None:
                    echo.write(line.decode(errors="replace"))
                    echo.flush()

    def track(self) -> None:
        """Remember every process msrun started and its rank (workers run in their
        own sessions, so they are found by ancestry, not by process group)."""
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            if child.pid in self.ranks:
                continue
            # Not "seen once, done": between msrun's fork and exec a worker still shows
            # msrun's environment (no MS_ROLE yet), so a process without a role is read
            # again on the next call. Remembering it at first sight lost the rank of a
            # worker killed early (its failure was then reported as the scheduler's).
            self.processes.setdefault(child.pid, child)
            try:
                env = child.environ()
            except psutil.Error:
                continue
            if env.get("MS_ROLE") == "MS_SCHED":
                self.ranks[child.pid] = "scheduler"
            elif env.get("MS_ROLE") == "MS_WORKER" and env.get("RANK_ID", "").isdigit():
                self.ranks[child.pid] = int(env["RANK_ID"])

    def worker_failed(self) -> bool:
        """msrun logged a worker's failure. It notices within a second, but exits itself
        only after the scheduler's heartbeat timeout (about 30 s, measured with a killed
        worker): the job is over already, so it is stopped at once."""
        try:
            text = (self.log_dir / MSRUN_LOG).read_text(errors="replace")
        except OSError:
            return False
        return _WORKER_EXIT.search(text) is not None

    def scheduler_failed(self) -> bool:
        path = self.log_dir / SCHEDULER_LOG
        try:
            return "Traceback (most recent call last)" in path.read_text(errors="replace")
        except OSError:
            return False

    def stop(self) -> None:
        """Ask msrun to stop (SIGINT: it kills its workers), then kill what is left."""
        self.track()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for process in self.processes.values():
            try:
                if process.is_running():
                    process.kill()
            except psutil.Error:
                pass
        self._reader.join(5)

    def worker_log(self, rank: int) -> Path:
        return self.log_dir / f"worker_{rank}.log"


def _failure(job: _Job, reason: str) -> LaunchError:
    """The most useful error for a failed job: the first rank that failed and its log."""
    msrun_text = (job.log_dir / MSRUN_LOG).read_text(errors="replace") \
        if (job.log_dir / MSRUN_LOG).is_file() else ""
    exits = _WORKER_EXIT.findall(msrun_text)
    for pid_text, code_text in exits:
        rank = job.ranks.get(int(pid_text))
        code = int(code_text)
        if isinstance(rank, int):
            log = job.worker_log(rank)
            return LaunchError(f"{reason}: rank {rank} (pid {pid_text}) {describe_exit(code)}; "
                               f"every rank's log is in {job.plan.log_dir}",
                               rank=rank, exit_code=code, log=log, tail=log_tail(log))
    if exits:  # a worker died first, though its rank is unknown: still the cause, not the scheduler
        pid_text, code_text = exits[0]
        log = job.log_dir / MSRUN_LOG
        return LaunchError(f"{reason}: a worker (pid {pid_text}) {describe_exit(int(code_text))}; "
                           f"every rank's log is in {job.plan.log_dir}",
                           exit_code=int(code_text), log=log, tail=log_tail(log))
    if job.scheduler_failed():
        log = job.log_dir / SCHEDULER_LOG
        return LaunchError(f"{reason}: the scheduler failed (port {job.plan.master_port} on "
                           f"{job.plan.master_addr}); every log is in {job.plan.log_dir}",
                           rank="scheduler", log=log, tail=log_tail(log))
    for rank in range(job.plan.workers):
        log = job.worker_log(rank)
        if log.is_file() and "Traceback (most recent call last)" in log.read_text(errors="replace"):
            return LaunchError(f"{reason}: rank {rank} raised an error; every rank's log is "
                               f"in {job.plan.log_dir}", rank=rank, log=log, tail=log_tail(log))
    log = job.log_dir / MSRUN_LOG
    return LaunchError(f"{reason}; every rank's log is in {job.plan.log_dir}", log=log,
                       tail=log_tail(log))


def run(plan: LaunchPlan, *, timeout: float | None = None, cwd: str | os.PathLike[str] = ".",
        echo: TextIO | None = None, check_port: bool = True, poll: float = 0.5) -> LaunchResult:
    """Run the plan's msrun command and wait for it; raise :class:`LaunchError` on failure.

    ``timeout`` (seconds, None: no limit) bounds the whole job; ``echo`` gets msrun's
    console output (rank 0's log) as it comes; ``cwd`` is where relative paths in the
    plan are taken from. ``check_port=False`` skips the free-port check (to test what
    happens without it). Once the port is known to be free, the plan's config is
    written to its ``config_file``, which every worker then loads.
    """
    cwd = Path(cwd)
    if plan.entry == TRAIN_ENTRY:
        refuse_compile_cache()  # every worker would, once msrun had started them all
    if check_port and is_local_address(plan.master_addr) \
            and not port_is_free(plan.master_port, plan.master_addr):
        raise LaunchError(f"master_port {plan.master_port} on {plan.master_addr} is already in "
                          f"use{port_owner(plan.master_port)}; pass another --master_port, or "
                          f"none to pick a free one")
    if plan.config is not None:
        (cwd / plan.config_file).parent.mkdir(parents=True, exist_ok=True)
        write_text(cwd / plan.config_file, plan.config_text())
    started = time.monotonic()
    job = _Job(plan, cwd, echo)
    scheduler_failed_at: float | None = None
    try:
        while job.proc.poll() is None:
            job.track()
            now = time.monotonic()
            if timeout is not None and now - started > timeout:
                job.stop()
                raise _failure(job, f"timed out after {timeout:g} s")
            if job.worker_failed():
                job.stop()
                raise _failure(job, "a worker failed")
            if not job.scheduler_failed():
                scheduler_failed_at = None
            elif scheduler_failed_at is None:
                scheduler_failed_at = now
            elif now - scheduler_failed_at > SCHEDULER_GRACE:
                job.stop()
                raise _failure(job, "the job could not start")
            time.sleep(poll)
    except BaseException:
        job.stop()  # KeyboardInterrupt included: never leave workers behind
        raise
    job.stop()
    if job.proc.returncode != 0:
        raise _failure(job, f"msrun exited with code {job.proc.returncode}")
    logs = {rank: job.worker_log(rank) for rank in range(plan.workers)
            if job.worker_log(rank).is_file()}
    return LaunchResult(plan=plan, seconds=round(time.monotonic() - started, 3),
                        log_dir=job.log_dir, worker_logs=logs)
