"""msresnet.storage.staging against a real S3-compatible server (moto on 127.0.0.1)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from unittest import mock

import fsspec
import pytest
from s3fs import S3FileSystem

from msresnet.storage import staging, transfer
from msresnet.storage.backend import Backend, CopyResult, Registration
from msresnet.storage.fsspec_backend import FsspecBackend
from msresnet.testing.local_s3 import local_server
from msresnet.storage.moxing_backend import MoxingBackend
from s3server import (FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, closed_port,
                      new_bucket_name, running_server)

QUICK = 6.0  # seconds: "fails quickly" (botocore: 3 attempts, 3 s connect timeout)


@pytest.fixture(scope="module")
def server():
    with running_server() as srv:
        yield srv


@pytest.fixture()
def bucket(server):
    name = new_bucket_name()
    staging.make_dirs(f"s3://{name}")
    return name


def make_tree(root: Path, seed: int = 0) -> dict[str, bytes]:
    """A folder with nested files of assorted sizes (one empty)."""
    rng = random.Random(seed)
    files = {
        "a.bin": rng.randbytes(1000),
        "empty.txt": b"",
        "sub/b.bin": rng.randbytes(70_000),
        "sub/deeper/c.txt": b"hello\n",
        "sub/deeper/d.bin": rng.randbytes(3),
        "other/e.bin": rng.randbytes(250_000),
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------- round trip
def test_round_trip_local_server_local_is_byte_identical(tmp_path, bucket):
    files = make_tree(tmp_path / "src")
    up = staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/data", progress=False)
    assert (up.copied, up.skipped, up.bytes) == (6, 0, sum(map(len, files.values())))
    assert staging.list_directory(f"s3://{bucket}/data", recursive=True) == sorted(files)
    assert staging.list_directory(f"s3://{bucket}/data") == ["a.bin", "empty.txt", "other", "sub"]
    sizes = {name: len(data) for name, data in sorted(files.items())}
    assert staging.file_sizes(f"s3://{bucket}/data") == sizes

    down = staging.copy_parallel(f"obs://{bucket}/data", tmp_path / "dst", progress=False)
    assert down.copied == 6
    assert read_tree(tmp_path / "dst") == files


def test_second_copy_transfers_nothing(tmp_path, bucket):
    files = make_tree(tmp_path / "src")
    staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/d", progress=False)
    again = staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/d", progress=False)
    assert (again.copied, again.skipped, again.bytes) == (0, len(files), 0)

    staging.copy_parallel(f"s3://{bucket}/d", tmp_path / "dst", progress=False)
    again = staging.copy_parallel(f"s3://{bucket}/d", tmp_path / "dst", progress=False)
    assert (again.copied, again.skipped, again.bytes) == (0, len(files), 0)


def test_same_size_different_content_is_copied_again(tmp_path, bucket):
    make_tree(tmp_path / "src")
    staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/d", progress=False)
    target = tmp_path / "src" / "sub" / "b.bin"
    data = bytearray(target.read_bytes())
    data[123] ^= 0xFF  # same size: only the ETag/MD5 comparison can notice
    target.write_bytes(bytes(data))
    again = staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/d", progress=False)
    assert again.copied_files == ["sub/b.bin"] and again.skipped == 5


def test_multipart_upload_etag_is_recomputed_locally(tmp_path, bucket):
    big = tmp_path / "src" / "big.bin"
    big.parent.mkdir()
    big.write_bytes(random.Random(1).randbytes(2 * staging.UPLOAD_PART_SIZE + 12345))
    staging.copy_parallel(big.parent, f"s3://{bucket}/m", progress=False)
    etag = staging.filesystem("s3").info(f"{bucket}/m/big.bin")["ETag"].strip('"')
    assert etag.endswith("-3")  # three parts: a multipart upload
    assert etag == staging.multipart_etag(str(big), staging.UPLOAD_PART_SIZE)
    assert staging.local_matches_etag(str(big), etag) is True
    again = staging.copy_parallel(big.parent, f"s3://{bucket}/m", progress=False)
    assert (again.copied, again.skipped) == (0, 1)


def test_single_file_copy_and_small_api(tmp_path, bucket):
    (tmp_path / "one.txt").write_text("one")
    result = staging.copy(tmp_path / "one.txt", f"s3://{bucket}/x/one.txt")
    assert (result.copied, result.bytes) == (1, 3)
    assert staging.copy(tmp_path / "one.txt", f"s3://{bucket}/x/one.txt").skipped == 1
    assert staging.exists(f"s3://{bucket}/x/one.txt") and staging.exists(f"s3://{bucket}/x")
    assert staging.is_directory(f"s3://{bucket}/x")
    assert not staging.is_directory(f"s3://{bucket}/x/one.txt")
    assert not staging.exists(f"s3://{bucket}/nothing")
    assert not staging.exists("s3://no-such-bucket-here/x")
    with pytest.raises(staging.ConfigurationError, match="recursive=True"):
        staging.remove(f"s3://{bucket}/x")
    staging.remove(f"s3://{bucket}/x", recursive=True)
    assert not staging.exists(f"s3://{bucket}/x")
    with pytest.raises(staging.ObjectNotFoundError, match=f"s3://{bucket}/x"):
        staging.remove(f"s3://{bucket}/x")


def test_local_to_local_and_file_urls(tmp_path):
    files = make_tree(tmp_path / "src")
    result = staging.copy_parallel(f"file://{tmp_path}/src", tmp_path / "dst", progress=False)
    assert result.copied == len(files) and read_tree(tmp_path / "dst") == files
    assert staging.copy_parallel(tmp_path / "src", tmp_path / "dst", progress=False).skipped == 6


# ------------------------------------------------------------------ interruption
_KILL_AFTER = textwrap.dedent("""
    import os, signal, sys
    from msresnet.storage import staging, transfer
    limit, seen = int(sys.argv[3]), [0]
    original = transfer.Progress.relative_update
    def relative_update(self, inc=1):
        original(self, inc)
        seen[0] += inc
        if seen[0] >= limit:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, like a preempted node
    transfer.Progress.relative_update = relative_update
    staging.copy_parallel(sys.argv[1], sys.argv[2], threads=1, progress=False)
""")


def _killed_copy(src: str, dst: str, after_bytes: int) -> None:
    done = subprocess.run([sys.executable, "-c", _KILL_AFTER, src, dst, str(after_bytes)],
                          env=os.environ.copy(), timeout=120)
    assert done.returncode == -9, "the copy was expected to be killed midway"


def test_killed_download_leaves_no_complete_looking_file(tmp_path, bucket):
    src = tmp_path / "src"
    files = make_tree(src)
    files["z_large.bin"] = random.Random(2).randbytes(12 * 2**20)
    (src / "z_large.bin").write_bytes(files["z_large.bin"])
    staging.copy_parallel(src, f"s3://{bucket}/big", progress=False)

    dst = tmp_path / "dst"
    _killed_copy(f"s3://{bucket}/big", str(dst), after_bytes=4 * 2**20)
    partial = [p for p in dst.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".part") for p in partial)  # it died mid-file...
    assert not (dst / "z_large.bin").exists()  # ...and the final name is not there
    for path in partial:  # whatever carries a final name is complete
        if not path.name.endswith(".part"):
            assert path.read_bytes() == files[path.relative_to(dst).as_posix()]
    assert "z_large.bin" not in staging.list_directory(dst, recursive=True)

    rerun = staging.copy_parallel(f"s3://{bucket}/big", dst, progress=False)
    assert "z_large.bin" in rerun.copied_files
    assert read_tree(dst) == files  # byte-identical, and no .part file left behind


def test_killed_multipart_upload_leaves_no_object(tmp_path, bucket):
    src = tmp_path / "src"
    src.mkdir()
    data = random.Random(3).randbytes(2 * staging.UPLOAD_PART_SIZE + 1000)
    (src / "big.bin").write_bytes(data)
    _killed_copy(str(src), f"s3://{bucket}/up", after_bytes=1)  # after the first part
    assert not staging.exists(f"s3://{bucket}/up/big.bin")  # parts are invisible
    rerun = staging.copy_parallel(src, f"s3://{bucket}/up", progress=False)
    assert rerun.copied == 1
    staging.copy(f"s3://{bucket}/up/big.bin", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == data


def test_transient_errors_are_retried_then_reported(tmp_path, bucket, monkeypatch):
    make_tree(tmp_path / "src")
    original, failures = transfer.transfer_file, {"n": 0}

    def flaky(src, src_loc, info, dst, dst_loc, progress):
        if src_loc.key.endswith("e.bin") and failures["n"] < 2:
            failures["n"] += 1
            progress.relative_update(100)  # partial progress that must be undone
            raise ConnectionResetError("connection reset by peer")
        return original(src, src_loc, info, dst, dst_loc, progress)

    monkeypatch.setattr(transfer, "transfer_file", flaky)
    monkeypatch.setattr(transfer.time, "sleep", lambda seconds: None)
    result = staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/r", progress=False)
    assert (result.copied, result.retried) == (6, 2)

    def broken(*args):
        raise ConnectionResetError("connection reset by peer")

    monkeypatch.setattr(transfer, "transfer_file", broken)
    (tmp_path / "src" / "new.bin").write_bytes(b"new")
    with pytest.raises(staging.TransferError, match="after 3 attempts"):
        staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/r", retries=2, progress=False)


# ----------------------------------------------------------------------- errors
def _timed(call):
    started = time.perf_counter()
    with pytest.raises(staging.StagingError) as info:
        call()
    return info.value, time.perf_counter() - started


def test_missing_bucket(tmp_path, server):
    error, seconds = _timed(lambda: staging.copy_parallel(
        "s3://no-such-bucket-anywhere/data", tmp_path / "d", progress=False))
    assert isinstance(error, staging.BucketNotFoundError) and seconds < QUICK
    assert "s3://no-such-bucket-anywhere/data" in str(error)
    error, _ = _timed(lambda: staging.copy_parallel(
        tmp_path, "obs://no-such-bucket-anywhere/out", progress=False))
    assert isinstance(error, staging.BucketNotFoundError)


def test_missing_key(tmp_path, bucket):
    url = f"s3://{bucket}/not/there.tar.gz"
    error, seconds = _timed(lambda: staging.copy(url, tmp_path / "x"))
    assert isinstance(error, staging.ObjectNotFoundError) and seconds < QUICK
    assert url in str(error)
    error, _ = _timed(lambda: staging.copy_parallel(f"s3://{bucket}/not", tmp_path / "d"))
    assert isinstance(error, staging.ObjectNotFoundError)


def test_missing_credentials_fail_before_any_request(tmp_path, bucket, monkeypatch):
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    error, seconds = _timed(lambda: staging.copy_parallel(f"s3://{bucket}", tmp_path / "d"))
    assert isinstance(error, staging.CredentialsError) and seconds < 1.0
    assert "AWS_SECRET_ACCESS_KEY" in str(error)


@pytest.mark.parametrize("variable, value", [
    ("AWS_SECRET_ACCESS_KEY", "wrong-secret-0123456789"),
    ("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG0"),
])
def test_wrong_credentials(tmp_path, bucket, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    url = f"obs://{bucket}/data"
    error, seconds = _timed(lambda: staging.copy_parallel(url, tmp_path / "d"))
    assert isinstance(error, staging.CredentialsError) and seconds < QUICK
    assert url in str(error) and value not in str(error)


def test_unreachable_endpoint_fails_in_seconds(tmp_path, bucket, monkeypatch):
    monkeypatch.setenv("S3_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    url = f"s3://{bucket}/data"
    error, seconds = _timed(lambda: staging.copy_parallel(url, tmp_path / "d"))
    assert isinstance(error, staging.EndpointUnreachableError)
    assert seconds < QUICK, f"took {seconds:.1f} s"
    assert url in str(error)


def test_obs_needs_an_endpoint(monkeypatch, server):
    monkeypatch.delenv("S3_ENDPOINT")
    with pytest.raises(staging.ConfigurationError, match="S3_ENDPOINT"):
        staging.list_directory("obs://bucket/key")


# --------------------------------------------------------------- no secret leaks
def test_nothing_shows_the_credentials(tmp_path, bucket, monkeypatch):
    fs = staging.filesystem("obs")
    settings = staging.StoreSettings.from_env()
    texts = [repr(fs), str(fs), repr(fs.storage_options), repr(settings),
             repr(server_repr := local_server()), repr(staging.describe_environment())]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET_ACCESS_KEY + "x")
    error, _ = _timed(lambda: staging.list_directory(f"s3://{bucket}"))
    texts.append(str(error))
    for text in texts:
        assert FAKE_ACCESS_KEY_ID not in text and FAKE_SECRET_ACCESS_KEY not in text
    assert "endpoint=" in repr(fs) and server_repr.port is None


# ------------------------------------------------------------------ URLs, settings
def test_parse_url():
    assert staging.parse_url("obs://bkt/a/b.tar").path == "bkt/a/b.tar"
    assert staging.parse_url("s3a://bkt").key == ""
    assert staging.parse_url("file:///tmp/x").path == "/tmp/x"
    assert staging.parse_url("rel/dir").path == os.path.abspath("rel/dir")
    with pytest.raises(staging.ConfigurationError, match="unsupported URL scheme 'http'"):
        staging.parse_url("http://example.com/x")
    with pytest.raises(staging.ConfigurationError) as info:
        staging.parse_url("s3://AKIAX:topsecret@bkt/key")
    assert "topsecret" not in str(info.value) and "***@bkt" in str(info.value)


def test_obs_needs_its_own_protocol_class():
    # A plain alias keeps "obs:" in the bucket name; the subclass strips it.
    assert S3FileSystem._strip_protocol("obs://bkt/key") != "bkt/key"
    assert staging.ObsFileSystem._strip_protocol("obs://bkt/key") == "bkt/key"
    assert fsspec.get_filesystem_class("obs") is staging.ObsFileSystem


def test_settings_from_environment():
    default = staging.StoreSettings.from_env({})
    assert (default.endpoint, default.connect_timeout, default.max_attempts) == (None, 3.0, 3)
    obs = staging.StoreSettings.from_env({
        "S3_ENDPOINT": "https://obs.cn-north-4.myhuaweicloud.com/", "AWS_REGION": "cn-north-4"})
    assert obs.endpoint == "https://obs.cn-north-4.myhuaweicloud.com"
    assert obs.effective_addressing_style() == "auto"
    loopback = staging.StoreSettings.from_env({"S3_ENDPOINT": "http://127.0.0.1:9000"})
    assert loopback.effective_addressing_style() == "path"
    for bad in ({"S3_ENDPOINT": "obs.cn-north-4.myhuaweicloud.com"},
                {"S3_ADDRESSING_STYLE": "sideways"}, {"S3_CONNECT_TIMEOUT": "soon"}):
        with pytest.raises(staging.ConfigurationError, match=next(iter(bad))):
            staging.StoreSettings.from_env(bad)


def test_temporary_files_are_invisible(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.bin").write_bytes(b"a")
    (tmp_path / "src" / ".a.bin.staging-0123abcd.part").write_bytes(b"partial")
    assert staging.list_directory(tmp_path / "src") == ["a.bin"]
    result = staging.copy_parallel(tmp_path / "src", tmp_path / "dst", progress=False)
    assert result.copied == 1 and sorted(os.listdir(tmp_path / "dst")) == ["a.bin"]


def test_local_server_exports_its_credentials_and_restores_the_environment(monkeypatch):
    from msresnet.testing.local_s3 import LocalS3Server

    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.setenv("LOCAL_S3_ACCESS_KEY_ID", "AKIATESTTESTTESTTEST")
    monkeypatch.setenv("LOCAL_S3_SECRET_ACCESS_KEY", "chosen-by-the-test")
    with LocalS3Server() as local:  # the way tests make the notebook use known keys
        assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIATESTTESTTESTTEST"
        assert os.environ["S3_ENDPOINT"] == local.endpoint
        assert "chosen-by-the-test" not in repr(local)
        staging.make_dirs("s3://canary-bucket")
        assert staging.list_directory("s3://canary-bucket") == []
    assert "AWS_ACCESS_KEY_ID" not in os.environ
    with LocalS3Server(access_key_id="AKIAX", secret_access_key="y") as other:
        assert other.environment()["AWS_SECRET_ACCESS_KEY"] == "y"


# ------------------------------------------------------- server faults (HTTP 5xx)
@pytest.fixture()
def faulty(server, monkeypatch):
    """The test server behind a loopback proxy that can answer 500; quick retries."""
    from fault_proxy import FaultProxy

    with FaultProxy(server.endpoint) as proxy:
        monkeypatch.setenv("S3_ENDPOINT", proxy.endpoint)
        monkeypatch.setenv("S3_MAX_ATTEMPTS", "2")
        monkeypatch.setattr(transfer.time, "sleep", lambda seconds: None)
        yield proxy


def test_listing_that_keeps_failing_names_url_operation_and_message(bucket, faulty):
    from fault_proxy import SERVER_MESSAGE, Fault

    url = f"obs://{bucket}/data"
    faulty.faults.append(Fault("GET", path=f"/{bucket}", query="list-type=2"))
    with pytest.raises(staging.ServerError) as info:
        staging.list_directory(url)
    error = info.value
    assert url in str(error) and "ListObjectsV2" in str(error)
    assert SERVER_MESSAGE in str(error) and "HTTP 500 InternalError" in str(error)
    assert (error.operation, error.status, error.server_message) == (
        "ListObjectsV2", 500, SERVER_MESSAGE)
    assert faulty.failed() == 2  # S3_MAX_ATTEMPTS: botocore retried once, then gave up
    faulty.faults.clear()
    assert staging.list_directory(f"s3://{bucket}") == []


def test_one_failed_request_is_retried_and_the_copy_completes(tmp_path, bucket, faulty):
    from fault_proxy import Fault

    files = make_tree(tmp_path / "src")
    faulty.faults.append(Fault("PUT", path="/other/e.bin", times=1))  # the Nth request
    result = staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/d", progress=False)
    assert result.copied == len(files) and faulty.failed() == 1
    staging.copy_parallel(f"s3://{bucket}/d", tmp_path / "back", progress=False)
    assert read_tree(tmp_path / "back") == files


def test_download_failing_midway_leaves_only_complete_files(tmp_path, bucket, faulty):
    from fault_proxy import SERVER_MESSAGE, Fault

    files = make_tree(tmp_path / "src")
    staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/d", progress=False)
    # sorted order: a.bin, empty.txt, other/e.bin (fails on every attempt), sub/...
    faulty.faults.append(Fault("GET", path=f"/{bucket}/d/other/e.bin"))
    dst = tmp_path / "dst"
    with pytest.raises(staging.ServerError) as info:
        staging.copy_parallel(f"s3://{bucket}/d", dst, threads=1, retries=1,
                              progress=False)
    message = str(info.value)
    assert f"s3://{bucket}/d/other/e.bin" in message and "after 2 attempts" in message
    assert "GetObject" in message and SERVER_MESSAGE in message
    left = read_tree(dst)
    assert "other/e.bin" not in left and 0 < len(left) < len(files)
    assert all(files[name] == data for name, data in left.items())  # complete or absent
    assert not [p for p in dst.rglob("*") if p.name.endswith(".part")]

    faulty.faults.clear()
    rerun = staging.copy_parallel(f"s3://{bucket}/d", dst, progress=False)
    assert "other/e.bin" in rerun.copied_files and rerun.skipped == len(left)
    assert read_tree(dst) == files


def test_upload_failing_midway_leaves_no_partial_object(tmp_path, bucket, faulty):
    from fault_proxy import Fault

    files = make_tree(tmp_path / "src")
    faulty.faults.append(Fault("PUT", path=f"/{bucket}/up/other/e.bin"))
    with pytest.raises(staging.ServerError, match="PutObject"):
        staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/up", threads=1, retries=1,
                              progress=False)
    faulty.faults.clear()
    there = staging.list_directory(f"s3://{bucket}/up", recursive=True)
    assert "other/e.bin" not in there and there
    staging.copy_parallel(f"s3://{bucket}/up", tmp_path / "check", progress=False)
    assert all(files[name] == data for name, data in read_tree(tmp_path / "check").items())
    rerun = staging.copy_parallel(tmp_path / "src", f"s3://{bucket}/up", progress=False)
    assert rerun.copied_files == ["other/e.bin"] or "other/e.bin" in rerun.copied_files
    assert staging.list_directory(f"s3://{bucket}/up", recursive=True) == sorted(files)


# --------------------------------------------------------------------- MoXing
FAKE_MOXING = Path(__file__).parent / "fake_moxing"


@pytest.fixture()
def moxing(tmp_path, monkeypatch):
    """The stand-in ``moxing`` importable, storing obs:// under tmp_path/store, and
    no object-store settings or credentials at all in the environment."""
    from s3server import clear_environment

    saved = clear_environment()
    monkeypatch.syspath_prepend(str(FAKE_MOXING))
    monkeypatch.setenv("FAKE_MOXING_ROOT", str(tmp_path / "store"))
    monkeypatch.delenv("MSRESNET_STAGING_BACKEND", raising=False)
    _forget_moxing()
    import moxing as fake

    fake.file.CALLS.clear()
    try:
        yield fake.file
    finally:
        _forget_moxing()  # later tests must not find the stand-in imported
        os.environ.update(saved)


def _forget_moxing() -> None:
    for name in [m for m in sys.modules if m == "moxing" or m.startswith("moxing.")]:
        del sys.modules[name]


def test_moxing_is_used_when_importable(tmp_path, moxing):
    assert staging.backend() == "moxing"
    files = make_tree(tmp_path / "src")
    staging.make_dirs("obs://bucket")
    up = staging.copy_parallel(tmp_path / "src", "obs://bucket/data")
    assert (up.copied, up.bytes) == (len(files), sum(map(len, files.values())))
    assert ("copy_parallel", (str(tmp_path / "src"), "obs://bucket/data")) in moxing.CALLS
    assert read_tree(tmp_path / "store" / "bucket" / "data") == files  # it did the work

    assert staging.exists("obs://bucket/data/a.bin") and staging.is_directory("obs://bucket/data")
    assert staging.list_directory("obs://bucket/data") == ["a.bin", "empty.txt", "other", "sub"]
    assert staging.list_directory("obs://bucket/data", recursive=True) == sorted(files)
    assert staging.file_sizes("obs://bucket/data") == {k: len(v) for k, v in sorted(files.items())}

    down = staging.copy_parallel("obs://bucket/data", tmp_path / "dst")
    assert down.copied_files == sorted(files) and read_tree(tmp_path / "dst") == files
    assert not [p for p in (tmp_path / "dst").iterdir() if p.name.startswith(".")]
    one = staging.copy("obs://bucket/data/sub/b.bin", tmp_path / "one.bin")
    assert one.bytes == len(files["sub/b.bin"])
    assert (tmp_path / "one.bin").read_bytes() == files["sub/b.bin"]
    with pytest.raises(staging.ConfigurationError, match="recursive=True"):
        staging.remove("obs://bucket/data")
    staging.remove("obs://bucket/data", recursive=True)
    assert not staging.exists("obs://bucket/data")
    used = {operation for operation, _ in moxing.CALLS}
    assert {"copy_parallel", "copy", "exists", "is_directory", "list_directory",
            "make_dirs", "remove", "get_size"} <= used
    # local-to-local copies stay with this module
    moxing.CALLS.clear()
    staging.copy_parallel(tmp_path / "src", tmp_path / "elsewhere", progress=False)
    assert moxing.CALLS == []


def test_moxing_errors_name_the_url_and_downloads_stay_all_or_nothing(tmp_path, moxing,
                                                                      monkeypatch):
    with pytest.raises(staging.ObjectNotFoundError, match="obs://bucket/missing.bin"):
        staging.copy("obs://bucket/missing.bin", tmp_path / "x.bin")
    make_tree(tmp_path / "store" / "bucket" / "data")
    monkeypatch.setenv("FAKE_MOXING_FAIL", "copy_parallel")
    with pytest.raises(staging.TransferError,
                       match="MoXing copy_parallel failed for obs://bucket/data: RuntimeError"):
        staging.copy_parallel("obs://bucket/data", tmp_path / "dst")
    assert list((tmp_path / "dst").iterdir()) == []  # no half-copied folder left behind


def test_backend_can_be_forced(moxing, monkeypatch):
    monkeypatch.setenv("MSRESNET_STAGING_BACKEND", "open")
    assert staging.backend() == "open"
    monkeypatch.setenv("MSRESNET_STAGING_BACKEND", "sideways")
    with pytest.raises(staging.ConfigurationError, match="MSRESNET_STAGING_BACKEND"):
        staging.backend()
    monkeypatch.setenv("MSRESNET_STAGING_BACKEND", "moxing")
    with mock.patch.dict(sys.modules, {"moxing": None}):  # import fails, as off ModelArts
        with pytest.raises(staging.ConfigurationError, match="import moxing"):
            staging.backend()


def test_no_moxing_is_left_importable_after_the_moxing_tests():
    assert "moxing" not in sys.modules and staging.backend() == "open"


def test_moxing_path_needs_neither_credentials_nor_s3fs(tmp_path):
    """In a fresh process where s3fs and botocore cannot be imported."""
    script = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("s3fs", "botocore", "aiobotocore", "boto3"):
                    raise ImportError(f"{name} is blocked")
        sys.meta_path.insert(0, Block())
        from msresnet.storage import staging
        staging.copy_parallel(sys.argv[1], "obs://bucket/in")
        print(staging.backend(), staging.list_directory("obs://bucket/in", recursive=True))
    """)
    make_tree(tmp_path / "src")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
    env.update(PYTHONPATH=str(FAKE_MOXING), FAKE_MOXING_ROOT=str(tmp_path / "store"))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "src")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("moxing ['a.bin', 'empty.txt', 'other/e.bin'")


# ------------------------------------------------------------ the backend registry
class Recorder:
    """A third backend, registered by one entry: it records what reaches it."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def copy_parallel(self, src, dst, result, *, threads, retries, progress):
        self.calls.append(("copy_parallel", dst.url))
        result.copied = 3

    def copy(self, src, dst, result, *, retries, progress):
        self.calls.append(("copy", dst.url))
        result.copied = 1

    def exists(self, loc):
        self.calls.append(("exists", loc.url))
        return True

    def is_directory(self, loc):
        self.calls.append(("is_directory", loc.url))
        return False

    def list_directory(self, loc, recursive):
        self.calls.append(("list_directory", loc.url))
        return ["a"]

    def file_sizes(self, loc):
        self.calls.append(("file_sizes", loc.url))
        return {"a": 1}

    def make_dirs(self, loc):
        self.calls.append(("make_dirs", loc.url))

    def remove(self, loc, recursive):
        self.calls.append(("remove", loc.url))


def _parameters(function) -> list[tuple[str, object, object]]:
    import inspect

    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("implementation", [FsspecBackend, MoxingBackend, Recorder])
def test_backends_satisfy_the_protocol(implementation):
    operations = [name for name in vars(Backend) if not name.startswith("_")
                  and callable(getattr(Backend, name))]
    assert len(operations) == 8, operations  # the eight public functions
    for name in operations:
        assert _parameters(getattr(implementation, name)) == _parameters(
            getattr(Backend, name)), f"{implementation.__name__}.{name}"
    instance = implementation(None) if implementation is MoxingBackend else implementation()
    assert isinstance(instance, Backend) and isinstance(instance.name, str)
    if implementation is not Recorder:  # the real ones are those the registry names
        assert instance.name in staging.BACKENDS


def test_a_new_backend_is_one_registry_entry_chosen_once_per_call(tmp_path, monkeypatch):
    recorder, loads = Recorder(), []

    def load():
        loads.append(1)
        return recorder

    monkeypatch.setitem(staging.BACKENDS, "recorder", Registration(load, needs="nothing"))
    monkeypatch.setenv("MSRESNET_STAGING_BACKEND", "recorder")
    assert staging.backend() == "recorder"
    loads.clear()
    (tmp_path / "src").mkdir()
    assert staging.copy_parallel(tmp_path / "src", "obs://b/d").copied == 3
    assert staging.copy("s3://b/f", tmp_path / "f").copied == 1
    assert staging.exists("obs://b/x") and not staging.is_directory("obs://b/x")
    assert staging.list_directory("obs://b/x", recursive=True) == ["a"]
    assert staging.file_sizes("obs://b/x") == {"a": 1}
    staging.make_dirs("s3://b")
    staging.remove("obs://b/x", recursive=True)
    assert [operation for operation, _ in recorder.calls] == [
        "copy_parallel", "copy", "exists", "is_directory", "list_directory", "file_sizes",
        "make_dirs", "remove"]
    assert len(loads) == 8  # each call chose its backend once, through the registry
    # between two local folders the open backend stays in charge
    result = staging.copy_parallel(tmp_path / "src", tmp_path / "dst", progress=False)
    assert isinstance(result, CopyResult) and len(recorder.calls) == 8
    monkeypatch.setenv("MSRESNET_STAGING_BACKEND", "sideways")
    with pytest.raises(staging.ConfigurationError, match="moxing, open, recorder"):
        staging.backend()


def test_an_unavailable_backend_is_skipped_by_auto_and_named_when_insisted_on(monkeypatch):
    monkeypatch.setitem(staging.BACKENDS, "never", Registration(lambda: None, needs="a unicorn"))
    monkeypatch.delenv("MSRESNET_STAGING_BACKEND", raising=False)
    assert staging.backend() == "open"
    monkeypatch.setenv("MSRESNET_STAGING_BACKEND", "never")
    with pytest.raises(staging.ConfigurationError, match="never, but that backend needs a unicorn"):
        staging.backend()
