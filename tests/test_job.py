"""msresnet job: arguments, data discovery, and a real run against moto."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest

from msresnet.jobs import job
from msresnet.storage import staging
from msresnet.data.cifar10 import (CLASSES, FOLDER_NAME, META_FILE, RECORD_BYTES, TEST_FILES,
                              TRAIN_FILES)
from msresnet.config.profile import ConfigError
from msresnet.paths import REPO_ROOT
from prerequisites import chapter
from s3server import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, new_bucket_name, running_server

SECRETS = (FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY)


# ------------------------------------------------------------------------ arguments
def test_platform_arguments_are_ignored_and_config_keys_become_overrides():
    args = job.parse_arguments([
        "--data_url", "obs://b/data/", "--train_url", "obs://b/out/", "--config", "smoke",
        "--init_method", "tcp://10.0.0.1:6000", "--num_gpus", "1", "--verbose",
        "--epoch_size", "3", "--train-samples=256", "--output_dir", "/elsewhere"])
    assert args.overrides == {"epoch_size": 3, "train_samples": 256}
    assert args.ignored == ["--init_method", "--num_gpus", "--verbose", "--output_dir"]
    assert (args.data_url, args.train_url) == ("obs://b/data/", "obs://b/out/")
    assert args.profile == "smoke"


def test_bad_override_value_names_the_key():
    with pytest.raises(ConfigError, match="epoch_size"):
        job.parse_arguments(["--data_url", "x", "--train_url", "y", "--epoch_size", "many"])


def test_missing_required_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        job.parse_arguments(["--train_url", "obs://b/out"])
    assert info.value.code == 2 and "--data_url" in capsys.readouterr().err


def test_urls_can_come_from_the_environment():
    args = job.parse_arguments(["--config", "smoke"],
                               environ={"data_url": "/in/data_url_0", "train_url": "/out/x"})
    assert (args.data_url, args.train_url) == ("/in/data_url_0", "/out/x")
    given = job.parse_arguments(["--data_url", "obs://b/d/"], environ={"train_url": "/out"})
    assert (given.data_url, given.train_url) == ("obs://b/d/", "/out")


def test_the_flow_follows_the_urls(tmp_path):
    older = job.plan_job(job.parse_arguments(
        ["--data_url", "obs://b/data/", "--train_url", "obs://b/runs/r1/",
         "--cache_dir", str(tmp_path)], environ={}))
    assert older.stage and older.upload_url == "obs://b/runs/r1/"
    assert older.output_dir == tmp_path.resolve() / "output" and "older flow" in older.flow
    current = job.plan_job(job.parse_arguments(
        ["--data_url", str(tmp_path / "in"), "--train_url", f"file://{tmp_path}/out",
         "--cache_dir", str(tmp_path)], environ={}))
    assert not current.stage and current.upload_url is None
    assert current.data_source == str(tmp_path / "in")
    assert current.output_dir == tmp_path / "out" and "platform copies" in current.flow
    mixed = job.plan_job(job.parse_arguments(
        ["--data_url", str(tmp_path / "in"), "--train_url", "s3://b/out/"], environ={}))
    assert mixed.flow.startswith("mixed") and mixed.upload_url == "s3://b/out/"


def test_platform_variables_are_reported():
    note = job.platform_note({"MA_JOB_DIR": "/home/ma-user/modelarts/user-job-dir",
                              "VC_TASK_INDEX": "0", "MA_NUM_GPUS": "8", "OTHER": "x"})
    assert note == ("MA_JOB_DIR=/home/ma-user/modelarts/user-job-dir, VC_TASK_INDEX=0, "
                    "MA_NUM_GPUS=8")
    assert job.platform_note({}).startswith("none of MA_JOB_DIR")


def test_default_cache_dir(tmp_path):
    assert job.default_cache_dir(tmp_path) == tmp_path  # exists and writable: used
    fallback = job.default_cache_dir(tmp_path / "missing")
    assert fallback.name == "msresnet-cache" and fallback.parent != tmp_path


# ------------------------------------------------------------------ dataset discovery
def write_tiny_cifar(folder: Path, records: int = 96, seed: int = 0) -> Path:
    """A valid cifar-10-batches-bin of flat grey images whose shade is the label.

    MindSpore's CIFAR-10 reader wants the official 10,000 records per file, so the
    job test uses ``records=10_000``; flat images compress to almost nothing, which
    keeps the archive small and the staging fast."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META_FILE).write_text("\n".join(CLASSES) + "\n")
    for name in (*TRAIN_FILES, *TEST_FILES):
        labels = rng.integers(0, 10, size=records, dtype=np.uint8)
        data = np.repeat((labels * 25)[:, None], RECORD_BYTES, axis=1).astype(np.uint8)
        data[:, 0] = labels
        (folder / name).write_bytes(data.tobytes())
    return folder


def test_find_dataset_source(tmp_path):
    extracted = write_tiny_cifar(tmp_path / "a" / FOLDER_NAME)
    assert job.find_dataset_source(tmp_path / "a") == tmp_path / "a"
    assert job.find_dataset_source(extracted) == extracted  # the .bin files themselves
    (tmp_path / "b").mkdir()
    archive = tmp_path / "b" / "cifar-10-binary.tar.gz"
    archive.write_bytes(b"not checked here")
    assert job.find_dataset_source(tmp_path / "b") == archive
    assert job.find_dataset_source(archive) == archive
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("hi")
    with pytest.raises(staging.StagingError, match="found notes.txt"):
        job.find_dataset_source(tmp_path / "c")


# ------------------------------------------------------------------- real job runs
@pytest.fixture(scope="module")
def server():
    with running_server() as srv:
        yield srv


@pytest.fixture(scope="module")
def dataset_url(server, tmp_path_factory):
    """obs://<bucket>/datasets/cifar10/ holding a tiny cifar-10-binary.tar.gz."""
    root = tmp_path_factory.mktemp("tiny")
    write_tiny_cifar(root / FOLDER_NAME, records=10_000)
    (root / "upload").mkdir()
    with tarfile.open(root / "upload" / "cifar-10-binary.tar.gz", "w:gz") as tar:
        tar.add(root / FOLDER_NAME, arcname=FOLDER_NAME)
    bucket = new_bucket_name("job")
    staging.make_dirs(f"s3://{bucket}")
    staging.copy_parallel(root / "upload", f"obs://{bucket}/datasets/cifar10", progress=False)
    return bucket, f"obs://{bucket}/datasets/cifar10/"


def run_job(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "msresnet", "job", *args], capture_output=True,
                          text=True, env=os.environ.copy(), timeout=timeout, cwd=REPO_ROOT)


# Chapter 6 runs this job from obs:// URLs on its own local server and asserts the
# same under strict nbval in the test command (exit code, epochs and steps, the
# ignored platform arguments and the overrides, every uploaded file, no credential in
# what the job printed; tests/test_nbval_outputs.py greps the files it wrote), so
# make test leaves this twin out and make unit-test runs it (pyproject.toml).
@pytest.mark.slow
@pytest.mark.twin
def test_job_stages_trains_and_uploads(tmp_path, dataset_url):
    bucket, data_url = dataset_url
    train_url = f"obs://{bucket}/runs/smoke/"
    done = run_job("--data_url", data_url, "--train_url", train_url, "--config", "smoke",
                   "--cache_dir", str(tmp_path / "cache"), "--init_method", "tcp://127.0.0.1:1",
                   "--num_gpus", "1", "--epoch_size", "1", "--train_samples", "64",
                   "--eval_samples", "64", "--depth", "14", "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["epochs"], summary["steps"]) == (1, 2)

    uploaded = staging.list_directory(train_url, recursive=True)
    for name in ("best.ckpt", "best.json", "config.yaml", "history.csv", "history.json",
                 "job.log", "result.json", "train.log", "resnet50-1_2.ckpt"):
        assert name in uploaded, uploaded
    staging.copy_parallel(train_url, tmp_path / "outputs", progress=False)
    job_log = (tmp_path / "outputs" / "job.log").read_text()
    assert "ignoring argument --init_method" in job_log and "uploaded:" in job_log
    assert "config overrides from the command line: epoch_size=1" in job_log

    # no secret in anything the job printed or wrote
    texts = [done.stdout, done.stderr] + [
        p.read_text(errors="replace") for p in (tmp_path / "outputs").iterdir()
        if p.suffix in (".log", ".json", ".yaml", ".csv")]
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


@pytest.fixture(scope="module")
def tiny_archive(tmp_path_factory) -> Path:
    """A folder holding a tiny cifar-10-binary.tar.gz (10,000 flat images per file)."""
    root = tmp_path_factory.mktemp("tiny-local")
    write_tiny_cifar(root / FOLDER_NAME, records=10_000)
    (root / "input").mkdir()
    with tarfile.open(root / "input" / "cifar-10-binary.tar.gz", "w:gz") as tar:
        tar.add(root / FOLDER_NAME, arcname=FOLDER_NAME)
    return root / "input"


SMALL_RUN = ("--config", "smoke", "--epoch_size", "1", "--train_samples", "64",
             "--eval_samples", "64", "--depth", "14", "--no-progress")


def _without_object_store(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "S3_", "FAKE_MOXING", "MSRESNET_STAGING"))
           and k not in ("data_url", "train_url")}
    env.update(extra)
    return env


@pytest.mark.slow
def test_current_flow_local_input_and_output_needs_no_object_store(tmp_path, tiny_archive):
    """ModelArts input/output parameters: the platform has downloaded the input and
    will upload the output folder; the job reads and writes local paths only, here
    given as environment variables ("obtain from: environment variable")."""
    out = tmp_path / "outputs" / "train_url_0"
    env = _without_object_store({"data_url": str(tiny_archive), "train_url": str(out),
                                 "MA_NUM_GPUS": "1", "VC_TASK_INDEX": "0"})
    done = subprocess.run([sys.executable, "-m", "msresnet", "job", *SMALL_RUN,
                           "--cache_dir", str(tmp_path / "cache")], capture_output=True,
                          text=True, env=env, timeout=900, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["epochs"] == 1 and "uploaded_files" not in summary
    written = sorted(p.name for p in out.iterdir())
    for name in ("best.ckpt", "config.yaml", "job.log", "result.json", "train.log"):
        assert name in written, written
    assert summary["output_files"] == len(written)
    log_text = (out / "job.log").read_text()
    assert "flow: input/output parameters" in log_text
    assert "platform variables: VC_TASK_INDEX=0, MA_NUM_GPUS=1" in log_text
    assert "object store:" not in log_text and "uploading" not in log_text
    assert not (tmp_path / "cache" / "input").exists()  # nothing was copied in


@pytest.mark.slow
def test_older_flow_through_moxing_needs_no_credentials(tmp_path, tiny_archive):
    """obs:// URLs on a node where ``import moxing`` works (the stand-in): the job is
    started as a boot file, copies through MoXing and has no AK/SK at all."""
    store, calls = tmp_path / "store", tmp_path / "moxing-calls.jsonl"
    shutil.copytree(tiny_archive, store / "bucket" / "data")
    env = _without_object_store({
        "PYTHONPATH": str(REPO_ROOT / "tests" / "fake_moxing"),
        "FAKE_MOXING_ROOT": str(store), "FAKE_MOXING_LOG": str(calls)})
    done = subprocess.run([sys.executable, str(REPO_ROOT / "msresnet" / "jobs" / "job.py"),
                           "--data_url", "obs://bucket/data/",
                           "--train_url", "obs://bucket/runs/r1/", *SMALL_RUN,
                           "--cache_dir", str(tmp_path / "cache")], capture_output=True,
                          text=True, env=env, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    operations = [json.loads(line) for line in calls.read_text().splitlines()]
    copies = [o["args"] for o in operations if o["op"] == "copy_parallel"]
    assert copies[0][0] == "obs://bucket/data" and copies[-1][1] == "obs://bucket/runs/r1"
    uploaded = sorted(p.name for p in (store / "bucket" / "runs" / "r1").iterdir())
    for name in ("best.ckpt", "job.log", "result.json", "train.log"):
        assert name in uploaded, uploaded
    assert "MoXing (the platform's authorisation" in done.stdout
    assert "flow: older flow" in done.stdout


def test_job_reports_a_staging_error_quickly(tmp_path, server):
    started = time.perf_counter()
    done = run_job("--data_url", "obs://no-such-bucket-for-job/data/",
                   "--train_url", "obs://no-such-bucket-for-job/out/",
                   "--cache_dir", str(tmp_path / "cache"), timeout=120)
    assert done.returncode == 2  # the store's error: the reader's to fix, one line
    assert "BucketNotFoundError" in done.stdout
    assert "obs://no-such-bucket-for-job/data/" in done.stdout
    assert time.perf_counter() - started < 60  # no training was started
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr


# ------------------------------------------------------------- the chapter notebook
# What chapter 6 prints and writes when it runs (with recognisable fake credentials)
# is checked on its one run in the test command, strict nbval: tests/test_nbval_outputs.py.
CHAPTER = "06_obs_staging"


def test_stored_notebook_holds_no_credentials():
    text = chapter(CHAPTER).read_text()  # renamed: skipped locally, failed under CI=true
    import re

    assert not re.search(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", text), "an access key id is stored"
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize("found, ok", [("2.10.0", True), ("2.7.0", True), ("2.10.0rc1", True),
                                       ("2.7.0rc1", False), ("2.6.0", False), ("2.11.0", False)])
def test_the_job_refuses_a_mindspore_outside_the_packages_range(found, ok):
    """The preset image the book names carries 2.7.0rc1: refused before any staging,
    naming the version and the install that fixes it."""
    if ok:
        assert job.check_mindspore_version(found) == found
    else:
        with pytest.raises(job.JobError, match=rf"MindSpore {found} is outside the package's "
                                               r"range \(2.7 to below 2.11\); install "
                                               r"mindspore==2\.10\.0"):
            job.check_mindspore_version(found)


def test_the_job_checks_mindspore_before_it_stages_anything(monkeypatch, tmp_path):
    staged = []
    monkeypatch.setattr(job, "check_mindspore_version",
                        lambda: (_ for _ in ()).throw(job.JobError("MindSpore 2.7.0rc1 ...")))
    monkeypatch.setattr(job, "stage_data", lambda *a: staged.append(a))
    args = job.parse_arguments(["--data_url", str(tmp_path / "data"), "--train_url",
                                str(tmp_path / "out"), "--config", "smoke"])
    with pytest.raises(job.JobError, match="2.7.0rc1"):
        job.run(args)
    assert staged == []
