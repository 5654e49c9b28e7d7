"""A ModelArts training job: get the data, train, deliver the results.

::

    msresnet job --data_url obs://bucket/cifar10/ --train_url obs://bucket/runs/r1/ \\
        [--profile PROFILE_OR_YAML] [--cache_dir DIR] [--KEY VALUE ...]
    python msresnet/jobs/job.py --data_url /local/input/ --train_url /local/output/   # boot file

Two flows are accepted, told apart by what the URLs are:

* **The older flow** (the blog post's, and the models repository's): ``--data_url``
  and ``--train_url`` are ``obs://`` URLs and the job copies data in and results out
  itself, below. ``s3://``, ``file://`` and paths work the same way off the platform.
* **Today's flow** (ModelArts "input/output parameters"): the console downloads each
  input to a local folder in the container before the boot file starts and passes
  that *local path* as the parameter (``--data_url``, or an environment variable of
  the same name when "obtain from: environment variable" is chosen), and it uploads
  the local output folder it passes as ``--train_url`` to OBS itself. A local
  ``--data_url`` is therefore read where it is (no copy), and a local
  ``--train_url`` becomes the output folder (no upload).

What the older flow does, as a ModelArts job does with MoXing
(:mod:`msresnet.storage.staging` uses ``moxing.file`` when it can be imported,
fsspec/s3fs otherwise):

1. ``--data_url`` (a folder holding ``cifar-10-binary.tar.gz`` or
   ``cifar-10-batches-bin/``, or the archive itself) is copied to
   ``<cache_dir>/input`` by one process per node (:func:`msresnet.storage.sync.sync_data`);
2. :func:`msresnet.data.prepare.prepare_dataset` extracts/validates it into
   ``<cache_dir>/data``;
3. :func:`msresnet.training.train.train_and_evaluate` trains with
   ``output_dir = <cache_dir>/output``;
4. rank 0 uploads that folder (checkpoints, ``best.ckpt``, history, ``train.log``,
   ``job.log``, ``result.json``) to ``--train_url``.

The job logs the platform's variables it sees (``MA_JOB_DIR``, ``VC_TASK_INDEX``,
``MA_NUM_HOSTS``, ``MA_NUM_GPUS``, ``RANK_TABLE_FILE``, ...; :data:`PLATFORM_VARIABLES`).
The platform adds arguments of its own (``--init_method``, ``--num_gpus``, ...):
arguments that are Config fields become config overrides, anything else is
ignored with a note in the log. ``cache_dir`` defaults to ``/cache`` (the node's
local SSD on ModelArts) when it exists and is writable, else a folder in the
system's temp folder. Credentials and endpoint come from the environment only
(:data:`msresnet.storage.staging.ENVIRONMENT`), and only for the open path: with MoXing the
platform's own authorisation is used. The log names the endpoint, never a key.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file (a ModelArts boot file): the folder that
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # holds msresnet/, not jobs/

from msresnet.command_line import ArgumentParser, is_ours, positive_int, positive_number
from msresnet.compile_cache import refuse as refuse_compile_cache
from msresnet.storage import staging
from msresnet.storage.settings import missing_credentials
from msresnet.storage.sync import sync_data

log = logging.getLogger("msresnet.jobs.job")

JOB_LOG = "job.log"
# Config fields the job sets itself (they point into the cache folder).
JOB_OWNED_FIELDS = ("data_dir", "output_dir", "data_url")
#: ModelArts variables the job reports when set (see chapter 6 for their sources).
PLATFORM_VARIABLES = ("MA_JOB_DIR", "MA_MOUNT_PATH", "MA_LOG_DIR", "MA_NUM_HOSTS",
                      "VC_TASK_INDEX", "VC_WORKER_NUM", "MA_NUM_GPUS", "RANK_TABLE_FILE",
                      "RANK_SIZE", "RANK_ID", "ASCEND_DEVICE_ID", "DEVICE_ID")


@dataclass
class JobArguments:
    """The parsed command line."""

    data_url: str
    train_url: str
    profile: str = "smoke"
    cache_dir: Path | None = None
    threads: int = 8
    sync_timeout: float = 3600.0
    progress: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)  # names of ignored arguments


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="msresnet job", allow_abbrev=False,
        description="Stage CIFAR-10 from object storage, train ResNet50, upload the "
                    "results. Extra --KEY VALUE pairs that are config fields override "
                    "the profile; other extra arguments are ignored.")
    parser.add_argument("--data_url", default=None,
                        help="dataset folder or archive: obs://, s3://, file:// or a local "
                             "path (default: the environment variable data_url)")
    parser.add_argument("--train_url", default=None,
                        help="where outputs go: obs://, s3://, file:// or a local path "
                             "(default: the environment variable train_url)")
    parser.add_argument("--profile", default="smoke",
                        help="profile name (smoke, cpu, gpu, ascend) or YAML path")
    parser.add_argument("--cache_dir", type=Path, default=None,
                        help="local staging folder (default /cache if writable)")
    parser.add_argument("--threads", type=positive_int, default=8, help="parallel transfers")
    parser.add_argument("--sync_timeout", type=positive_number, default=3600.0,
                        help="seconds the other processes of a node wait for the copy")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars (default: when stderr is a terminal)")
    return parser


def split_extra(extra: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split unknown arguments into Config overrides (as ``--key value`` tokens)
    and the names of arguments to ignore. ``--key=value``, ``--key value`` and bare
    flags (``--foo`` followed by another option) are understood."""
    from msresnet.config.profile import FIELDS

    overrides: list[str] = []
    ignored: list[str] = []
    index = 0
    while index < len(extra):
        token = extra[index]
        index += 1
        if not token.startswith("--") or token == "--":
            ignored.append(token if not token.startswith("-") else token.split("=")[0])
            continue
        name, has_value, value = token[2:].partition("=")
        if not has_value:
            if index < len(extra) and not extra[index].startswith("--"):
                value, index = extra[index], index + 1
            else:
                value = None
        key = name.replace("-", "_")
        if key in FIELDS and key not in JOB_OWNED_FIELDS and value is not None:
            overrides += [f"--{key}", value]
        else:
            ignored.append(f"--{name}")
    return overrides, ignored


def parse_arguments(argv: Sequence[str],
                    environ: Mapping[str, str] | None = None) -> JobArguments:
    """Parse the job's options; raises ``msresnet.config.profile.ConfigError`` for a bad
    override and ``SystemExit`` (argparse) for missing/invalid job options.

    ``--data_url``/``--train_url`` fall back to the environment variables
    ``data_url``/``train_url``: what ModelArts sets when an input or output
    parameter is to be "obtained from an environment variable"."""
    from msresnet.config.profile import parse_overrides

    env = os.environ if environ is None else environ
    parser = _parser()
    known, extra = parser.parse_known_args(list(argv))
    for name in ("data_url", "train_url"):
        if getattr(known, name) is None:
            if not env.get(name):
                parser.error(f"--{name} is required (or the environment variable {name})")
            setattr(known, name, env[name])
    override_tokens, ignored = split_extra(extra)
    overrides = dict(parse_overrides(override_tokens, source="job arguments"))
    progress = known.progress
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    return JobArguments(
        data_url=known.data_url, train_url=known.train_url, profile=known.profile,
        cache_dir=known.cache_dir, threads=known.threads, sync_timeout=known.sync_timeout,
        progress=progress, overrides=overrides, ignored=ignored)


def default_cache_dir(candidate: Path = Path("/cache")) -> Path:
    """``/cache`` when it exists and is writable (ModelArts), else ``$TMPDIR/msresnet-cache``."""
    if candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK):
        return candidate
    return Path(tempfile.gettempdir()) / "msresnet-cache"


@dataclass(frozen=True)
class JobPlan:
    """Where this job reads and writes, decided from the two URLs (see the module
    docstring): ``stage`` when ``data_url`` is remote, ``upload_url`` when
    ``train_url`` is."""

    cache: Path
    data_source: str  # what is staged (remote) or read in place (local)
    stage: bool
    data_dir: Path  # where prepare_dataset() puts cifar-10-batches-bin
    output_dir: Path
    upload_url: str | None

    @property
    def flow(self) -> str:
        if self.stage and self.upload_url:
            return "older flow: the job copies data in and results out"
        if not self.stage and not self.upload_url:
            return "input/output parameters: the platform copies data in and results out"
        return ("mixed: " + ("the job copies data in" if self.stage else
                             "the platform copies data in") + ", " +
                ("the job uploads results" if self.upload_url else
                 "the platform uploads results"))


def plan_job(args: JobArguments) -> JobPlan:
    """Decide the flow: a remote URL is copied by the job, a local path is used."""
    cache = (args.cache_dir or default_cache_dir()).resolve()
    data, train = staging.parse_url(args.data_url), staging.parse_url(args.train_url)
    output = cache / "output" if train.remote else Path(train.path)
    return JobPlan(cache=cache, data_source=args.data_url if data.remote else data.path,
                   stage=data.remote, data_dir=cache / "data", output_dir=output,
                   upload_url=args.train_url if train.remote else None)


def platform_note(environ: Mapping[str, str] | None = None) -> str:
    """The ModelArts variables that are set, as ``NAME=value`` (none are secret)."""
    env = os.environ if environ is None else environ
    found = [f"{name}={env[name]}" for name in PLATFORM_VARIABLES if env.get(name)]
    return ", ".join(found) if found else "none of " + "/".join(PLATFORM_VARIABLES[:5])


def find_dataset_source(staged: Path) -> Path:
    """What to hand :func:`msresnet.data.prepare.prepare_dataset` in the staged input:
    the archive itself, a folder with ``cifar-10-batches-bin/``, or the extracted files."""
    from msresnet.data.cifar10 import FOLDER_NAME, TRAIN_FILES

    if staged.is_file():
        return staged
    if (staged / FOLDER_NAME).is_dir() or (staged / TRAIN_FILES[0]).is_file():
        return staged
    archives = sorted(p for p in staged.iterdir() if p.name.endswith((".tar.gz", ".tgz")))
    if len(archives) == 1:
        return archives[0]
    found = ", ".join(sorted(p.name for p in staged.iterdir())) or "nothing"
    raise staging.StagingError(
        f"--data_url holds no CIFAR-10 data: expected {FOLDER_NAME}/, its .bin files or "
        f"one .tar.gz archive, found {found}")


def _setup_logging(log_file: Path | None) -> list[logging.Handler]:
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    root = logging.getLogger("msresnet")
    root.setLevel(logging.INFO)
    for handler in handlers:
        handler.setFormatter(fmt)
        root.addHandler(handler)
    return handlers


def _environment_note() -> str:
    if staging.backend() == "moxing":
        return "MoXing (the platform's authorisation; no AK/SK needed)"
    settings = staging.StoreSettings.from_env()
    creds = "missing" if missing_credentials() else "set"
    return (f"endpoint {settings.endpoint or 'AWS default'}, region "
            f"{settings.region or 'default'}, credentials {creds} (AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY)")


def _log_plan(args: JobArguments, plan: JobPlan, profile: str) -> None:
    log.info("profile %s; cache folder %s", profile, plan.cache)
    log.info("flow: %s", plan.flow)
    log.info("platform variables: %s", platform_note())
    for name in args.ignored:
        log.info("ignoring argument %s (not a job option or config field)", name)
    if args.overrides:
        log.info("config overrides from the command line: %s",
                 ", ".join(f"{k}={v}" for k, v in args.overrides.items()))
    if plan.stage or plan.upload_url:
        log.info("object store: %s", _environment_note())


def stage_data(args: JobArguments, plan: JobPlan) -> Path:
    """Step 1: where the input is on this node. A remote ``--data_url`` is copied
    into the cache by one process per node (the others wait); a local one is used."""
    if not plan.stage:
        staged = Path(plan.data_source)
        if not staged.exists():
            raise staging.ObjectNotFoundError(
                f"--data_url {plan.data_source} does not exist in this container",
                plan.data_source)
        log.info("data is local (the platform downloaded it): %s", staged)
        return staged
    staged = plan.cache / "input"
    if not staging.is_directory(args.data_url):
        name = staging.parse_url(args.data_url).key.rstrip("/").rsplit("/", 1)[-1]
        staged = staged / os.path.basename(name)
    synced = sync_data(args.data_url, staged, timeout=args.sync_timeout,
                       lock_dir=plan.cache, threads=args.threads, progress=args.progress)
    log.info("staged %s -> %s: %s", args.data_url, staged,
             "copied here" if synced.owner else f"copied by another process "
             f"(waited {synced.waited:.1f} s)")
    if synced.owner:
        rate = (synced.bytes or 0) / 1e6 / synced.seconds if synced.seconds else 0.0
        log.info("staging: %s copied, %s skipped, %s bytes in %.1f s (%.1f MB/s)",
                 synced.copied, synced.skipped, f"{synced.bytes:,}",
                 synced.seconds or 0.0, rate)
    return staged


def deliver_outputs(args: JobArguments, plan: JobPlan, summary: dict[str, Any]) -> None:
    """Step 4: rank 0 uploads the output folder (the other ranks wrote nothing); in
    today's flow the platform uploads the local output folder itself."""
    from msresnet.training.distributed import rank_info

    if plan.upload_url is None:
        log.info("outputs left in %s for the platform to upload", plan.output_dir)
        summary["output_files"] = len(staging.file_sizes(plan.output_dir))
    elif rank_info().is_main:
        log.info("uploading %s -> %s", plan.output_dir, plan.upload_url)
        uploaded = staging.copy_parallel(plan.output_dir, plan.upload_url,
                                         threads=args.threads, progress=args.progress)
        log.info("uploaded: %s in %.1f s (%.1f MB/s)", uploaded.summary(), uploaded.seconds,
                 uploaded.megabytes_per_second)
        summary["uploaded_files"] = uploaded.files


class JobError(RuntimeError):
    """The job cannot run here as it is (the message says why and what to do)."""


def check_mindspore_version(installed: str | None = None) -> str:
    """The installed MindSpore's version, or :class:`JobError` when it lies outside the
    package's range (:data:`msresnet.doctor.software.SUPPORTED`).

    A ModelArts preset image brings its own MindSpore, and the one the book's pages
    name carries 2.7.0rc1, a pre-release below the range: the job says so before it
    stages anything, instead of failing somewhere in training. Read from the
    package's metadata, so MindSpore is not imported here.
    """
    from importlib.metadata import PackageNotFoundError, version

    from msresnet.doctor.software import SUPPORTED_TEXT, pinned_mindspore, supported_mindspore

    install = f"install mindspore=={pinned_mindspore() or '2.10.0'}"
    try:
        installed = installed or version("mindspore")
    except PackageNotFoundError:
        raise JobError(f"MindSpore is not installed in this Python; {install} first") from None
    if not supported_mindspore(installed):
        raise JobError(f"MindSpore {installed} is outside the package's range "
                       f"({SUPPORTED_TEXT}); {install} before the job (e.g. first in the "
                       "boot command), or choose an image that has it")
    return installed


def run(args: JobArguments, plan: JobPlan | None = None) -> dict[str, Any]:
    """Stage, prepare, train, upload: the job itself (``plan``:
    :func:`plan_job`'s, made here when not given). Returns the summary ``msresnet job``
    prints. The data is validated once, when the training opens it."""
    from msresnet.data.prepare import prepare_dataset
    from msresnet.config.run import build_run_config
    from msresnet.training.train import train_and_evaluate

    plan = plan or plan_job(args)
    overrides = {**args.overrides, "data_dir": str(plan.data_dir),
                 "output_dir": str(plan.output_dir)}
    config = build_run_config(args.profile, overrides)  # config errors before any transfer
    check_mindspore_version()
    refuse_compile_cache()  # the training would, after the transfer
    _log_plan(args, plan, config.profile)
    staged = stage_data(args, plan)

    # 2. prepare (extract and validate; safe to call from every process)
    source = find_dataset_source(staged)
    folder = prepare_dataset(source, root=plan.data_dir,
                             md5=config.data_md5 if source.is_file() else None,
                             progress=args.progress)
    log.info("dataset ready: %s (%s)", folder.folder, folder.action)

    # 3. train
    result = train_and_evaluate(config, progress=args.progress, data_validated=folder.validated)
    best = result.best or {}
    summary: dict[str, Any] = {
        "train_url": args.train_url, "epochs": result.epochs, "steps": result.steps,
        "final_loss": result.final_loss, "best_top1": best.get("top1")}
    deliver_outputs(args, plan, summary)
    return summary


def _upload_log(plan: JobPlan) -> None:
    """The uploaded job.log ends before the upload: send the complete one too."""
    from msresnet.training.distributed import rank_info

    try:
        if plan.upload_url and rank_info().is_main:
            staging.copy(plan.output_dir / JOB_LOG, plan.upload_url.rstrip("/") + "/" + JOB_LOG)
    except staging.StagingError as error:
        log.warning("could not upload the final %s: %s", JOB_LOG, error)


def run_logged(args: JobArguments) -> dict[str, Any]:
    """:func:`run`, logged to ``job.log`` in the output folder (uploaded once more, whole,
    at the end): what ``msresnet job`` and the boot file run. An error is written to
    ``job.log`` with its traceback and raised: ``msresnet`` prints the one line
    (:func:`msresnet.command_line.run`: exit 2 for a bad argument, config, data or store,
    3 for anything the book does not raise on purpose)."""
    plan = plan_job(args)
    handlers = _setup_logging(plan.output_dir / JOB_LOG)
    try:
        summary = run(args, plan)
        handlers[-1].flush()
        _upload_log(plan)
    except Exception as error:  # the reader's (a line) or a bug (the traceback too)
        (log.error if is_ours(error) else log.exception)(
            "the job failed: %s: %s", type(error).__name__, error)
        raise
    finally:
        for handler in handlers:
            logging.getLogger("msresnet").removeHandler(handler)
            handler.close()
    return summary


if __package__ in (None, ""):  # run as a file: the ModelArts boot file (not python -m)
    from msresnet.command_line import run as run_verb

    # what msresnet job (msresnet.commands.job) does, without the command layer
    sys.exit(run_verb(lambda argv: print(json.dumps(run_logged(parse_arguments(argv)))),
                      prog="msresnet job"))
