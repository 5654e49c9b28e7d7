"""sync_data: one copy per node, the other processes wait (real processes, real server)."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msresnet.storage import staging, sync
from s3server import new_bucket_name, running_server

@pytest.fixture(scope="module")
def server():
    with running_server() as srv:
        yield srv


@pytest.fixture()
def dataset(server, tmp_path):
    """A bucket holding a small 'dataset' folder; returns its URL and the files."""
    bucket = new_bucket_name("sync")
    staging.make_dirs(f"s3://{bucket}")
    rng = random.Random(5)
    files = {f"part_{i}.bin": rng.randbytes(200_000) for i in range(6)}
    for name, data in files.items():
        (tmp_path / "seed").mkdir(exist_ok=True)
        (tmp_path / "seed" / name).write_bytes(data)
    staging.copy_parallel(tmp_path / "seed", f"s3://{bucket}/dataset", progress=False)
    return f"s3://{bucket}/dataset", files


# What each process of a "node" runs: msresnet sync's command line (msresnet.commands.sync),
# then it lists the destination at once - proving it returned only after the copy was complete.
WORKER = ("import json, os, sys; from msresnet.commands.sync import main; main(sys.argv[1:]); "
          "print(json.dumps(sorted(os.listdir(sys.argv[2])) if os.path.isdir(sys.argv[2]) "
          "else []))")


def run_workers(count: int, src: str, dst: Path, lock_dir: Path, job: str,
                timeout: float = 60.0) -> list[dict]:
    """``count`` processes running :func:`msresnet.commands.sync.main` at the same time."""
    command = [sys.executable, "-c", WORKER, src, str(dst), "--world", str(count),
               "--job", job, "--timeout", str(timeout), "--lock_dir", str(lock_dir)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
             for _ in range(count)]
    results = []
    for proc in procs:
        *_, report, listing = proc.communicate(timeout=120)[0].strip().splitlines()
        results.append({**json.loads(report), "files": json.loads(listing)})
    return results


def test_one_process_copies_the_others_wait(tmp_path, dataset):
    src, files = dataset
    dst, locks = tmp_path / "cache" / "data", tmp_path / "cache"
    results = run_workers(4, src, dst, locks, job="job-1")
    owners = [r for r in results if r.get("owner")]
    assert len(owners) == 1, results
    assert all("error" not in r for r in results), results
    # every process returned after the copy: all saw the complete folder
    assert all(r["files"] == sorted(files) for r in results)
    # the waiters learned the owner's counts from the done marker
    assert {r["copied"] for r in results} == {len(files)}
    assert {p.name: p.read_bytes() for p in dst.iterdir()} == files
    # markers cleaned up: only the data folder is left in the cache folder
    assert sorted(p.name for p in locks.iterdir()) == ["data"]


def test_second_sync_copies_nothing(tmp_path, dataset):
    src, files = dataset
    dst = tmp_path / "cache" / "data"
    first = sync.sync_data(src, dst, job="j", world=1, progress=False)
    second = sync.sync_data(src, dst, job="j", world=1, progress=False)
    assert first.owner and second.owner  # markers were removed after the first
    assert (first.copied, second.copied, second.skipped) == (len(files), 0, len(files))
    assert sorted(os.listdir(tmp_path / "cache")) == ["data"]


def test_failure_reaches_the_waiters_at_once(tmp_path, server):
    bucket = new_bucket_name("sync")
    staging.make_dirs(f"s3://{bucket}")
    started = time.monotonic()
    results = run_workers(3, f"s3://{bucket}/missing", tmp_path / "cache" / "d",
                          tmp_path / "cache", job="job-2", timeout=60)
    errors = sorted(r["error"] for r in results)
    assert errors == ["ObjectNotFoundError", "SyncError", "SyncError"], results
    assert time.monotonic() - started < 30  # nobody sat out the 60 s timeout
    assert all("missing" in r["message"] for r in results)
    assert list((tmp_path / "cache").iterdir()) == []  # failure markers cleaned too


def test_timeout_is_honoured(tmp_path, dataset):
    src, _ = dataset
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tag = sync.marker_tag("job-3", "sync_data", src, str(tmp_path / "d"))
        markers = sync.Markers(tmp_path, tag)
        markers.lock.write_text(json.dumps(
            {"pid": holder.pid, "host": socket.gethostname(), "token": "t"}))
        started = time.monotonic()
        with pytest.raises(sync.SyncTimeoutError, match=f"process {holder.pid}"):
            sync.sync_data(src, tmp_path / "d", job="job-3", world=2, timeout=1.0,
                           poll_interval=0.05)
        # at its 1 s timeout, not when the holder ends (30 s): the upper bound is wide
        # so that a loaded machine cannot fail it
        assert 1.0 <= time.monotonic() - started < 15.0
    finally:
        holder.kill()
        holder.wait()


def test_dead_owner_is_replaced(tmp_path, dataset):
    src, files = dataset
    cache = tmp_path / "cache"
    cache.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now belongs to no process
    markers = sync.Markers(cache, sync.marker_tag("job-4", "sync_data", src, str(cache / "d")))
    markers.lock.write_text(json.dumps(
        {"pid": dead.pid, "host": socket.gethostname(), "token": "old"}))
    markers.done.write_text(json.dumps({"token": "older-run", "pid": 1}))  # stale verdict
    result = sync.sync_data(src, cache / "d", job="job-4", world=1, timeout=10,
                            progress=False)
    assert result.owner and result.copied == len(files)
    assert sorted(os.listdir(cache)) == ["d"]


def test_marker_names_are_unique_per_job_and_copy():
    base = sync.marker_tag("job", "sync_data", "s3://b/x", "/cache/x")
    assert base == sync.marker_tag("job", "sync_data", "s3://b/x", "/cache/x")
    others = {sync.marker_tag("job2", "sync_data", "s3://b/x", "/cache/x"),
              sync.marker_tag("job", "sync_data", "s3://b/y", "/cache/x"),
              sync.marker_tag("job", "sync_data", "s3://b/x", "/cache/y")}
    assert base not in others and len(others) == 3


def test_environment_defaults(monkeypatch):
    assert sync.job_id({"JOB_ID": "modelarts-42"}) == "modelarts-42"
    assert sync.job_id({}) == f"ppid-{os.getppid()}"
    assert sync.local_world_size({"RANK_SIZE": "16"}) == 8  # 8 devices per server
    assert sync.local_world_size({"RANK_SIZE": "16", "LOCAL_WORLD_SIZE": "4"}) == 4
    assert sync.local_world_size({}) == 1
