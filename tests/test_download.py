"""Tests of msresnet.data.download against a real HTTP server on 127.0.0.1.

The server is http.server in a thread; its handler honours ``Range`` and can be
told to cut the connection midway, answer with errors, stall, or ignore
``Range``, so resume, retry and timeout are exercised over real sockets.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from msresnet.data import cifar10
from msresnet.data import prepare as preparation
from msresnet.data.download import (ChecksumError, DownloadError, download, md5sum, part_path,
                               quarantine_path)

PAYLOAD = np.random.default_rng(0).integers(0, 256, 200_000, dtype=np.uint8).tobytes()
PAYLOAD_MD5 = hashlib.md5(PAYLOAD).hexdigest()


@dataclass
class Behaviour:
    """What the test server does; tests change it before a download."""

    payload: bytes = PAYLOAD
    drop_after: list[int] = field(default_factory=list)   # per request: cut after N body bytes
    statuses: list[int] = field(default_factory=list)     # per request: answer with this error first
    stall: list[float] = field(default_factory=list)      # per request: wait this long before answering
    released: threading.Event = field(default_factory=threading.Event)  # set: stalls end unanswered
    ignore_range: bool = False
    ranges: list[str | None] = field(default_factory=list)  # the Range header of every request


class Handler(BaseHTTPRequestHandler):
    behaviour: Behaviour

    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        b = self.server.behaviour  # type: ignore[attr-defined]
        header = self.headers.get("Range")
        b.ranges.append(header)
        if b.stall and b.released.wait(b.stall.pop(0)):
            return  # the test is over: its client hung up long ago
        if b.statuses:
            self.send_error(b.statuses.pop(0))
            return
        data, start = b.payload, 0
        match = re.fullmatch(r"bytes=(\d+)-", header or "")
        if match and not b.ignore_range:
            start = int(match.group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if b.drop_after:
            body = body[:b.drop_after.pop(0)]
            self.close_connection = True
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            # The client hung up before the body was sent (a download that stops
            # early, on purpose): what the tests check is on the client's side, and
            # socketserver would print this thread's traceback into the test log.
            self.close_connection = True


@dataclass
class Server:
    url: str
    behaviour: Behaviour


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.behaviour = Behaviour()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield Server(f"http://127.0.0.1:{httpd.server_address[1]}/cifar-10-binary.tar.gz",
                     httpd.behaviour)  # type: ignore[attr-defined]
    finally:
        httpd.behaviour.released.set()  # type: ignore[attr-defined]
        httpd.shutdown()
        httpd.server_close()


class Sleeps(list):
    """A stand-in for time.sleep that records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_plain_download(server: Server, tmp_path: Path) -> None:
    dest = download(server.url, tmp_path / "a.tar.gz", md5=PAYLOAD_MD5, progress=True)
    assert dest.read_bytes() == PAYLOAD
    assert not part_path(dest).exists()
    assert server.behaviour.ranges == [None]


def test_resumes_after_connection_drop(server: Server, tmp_path: Path) -> None:
    server.behaviour.drop_after = [70_000]
    sleeps = Sleeps()
    dest = download(server.url, tmp_path / "a.tar.gz", md5=PAYLOAD_MD5, progress=False,
                    chunk_bytes=4096, backoff=0.5, sleep=sleeps)
    assert md5sum(dest) == PAYLOAD_MD5
    assert server.behaviour.ranges == [None, "bytes=70000-"]
    assert sleeps == [0.5]


def test_resumes_a_part_file_from_an_earlier_run(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    part_path(dest).write_bytes(PAYLOAD[:1234])
    download(server.url, dest, md5=PAYLOAD_MD5, progress=False)
    assert server.behaviour.ranges == ["bytes=1234-"]
    assert dest.read_bytes() == PAYLOAD


def test_server_ignoring_range_restarts_cleanly(server: Server, tmp_path: Path) -> None:
    server.behaviour.ignore_range = True
    dest = tmp_path / "a.tar.gz"
    part_path(dest).write_bytes(b"x" * 5000)  # would corrupt the file if appended to
    download(server.url, dest, md5=PAYLOAD_MD5, progress=False)
    assert dest.read_bytes() == PAYLOAD


def test_complete_part_file_answered_with_416(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    part_path(dest).write_bytes(PAYLOAD)
    download(server.url, dest, md5=PAYLOAD_MD5, progress=False)
    assert server.behaviour.ranges == [f"bytes={len(PAYLOAD)}-"]
    assert dest.read_bytes() == PAYLOAD


def test_retries_server_errors_with_exponential_backoff(server: Server, tmp_path: Path) -> None:
    server.behaviour.statuses = [503, 502]
    sleeps = Sleeps()
    download(server.url, tmp_path / "a.tar.gz", md5=PAYLOAD_MD5, progress=False, backoff=1.0, sleep=sleeps)
    assert sleeps == [1.0, 2.0]
    assert len(server.behaviour.ranges) == 3


def test_gives_up_after_retries(server: Server, tmp_path: Path) -> None:
    server.behaviour.statuses = [503] * 10
    sleeps = Sleeps()
    with pytest.raises(DownloadError, match=r"giving up after 3 attempts.*HTTP 503"):
        download(server.url, tmp_path / "a.tar.gz", retries=2, progress=False, sleep=sleeps)
    assert len(server.behaviour.ranges) == 3
    assert not (tmp_path / "a.tar.gz").exists()


def test_permanent_http_error_is_not_retried(server: Server, tmp_path: Path) -> None:
    server.behaviour.statuses = [404]
    sleeps = Sleeps()
    with pytest.raises(DownloadError, match=r"cifar-10-binary\.tar\.gz: HTTP 404"):
        download(server.url, tmp_path / "a.tar.gz", progress=False, sleep=sleeps)
    assert sleeps == [] and len(server.behaviour.ranges) == 1


def test_stalled_server_times_out_and_is_retried(server: Server, tmp_path: Path) -> None:
    """The first answer would come after 60 s; a client that honours its 0.3 s timeout
    retries and is done in well under a second on an idle machine. The bound is wide
    (30 s) so that a loaded machine cannot fail it, and still far below the stall."""
    server.behaviour.stall = [60.0]
    started = time.monotonic()
    download(server.url, tmp_path / "a.tar.gz", md5=PAYLOAD_MD5, progress=False, timeout=0.3, backoff=0.0)
    assert time.monotonic() - started < 30  # did not wait for the stalled answer
    assert len(server.behaviour.ranges) == 2


def test_wrong_checksum_quarantines_and_next_run_downloads_again(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    wrong = "0" * 32
    with pytest.raises(ChecksumError) as info:
        download(server.url, dest, md5=wrong, progress=False)
    message = str(info.value)
    assert server.url in message and f"expected {wrong}" in message and f"got {PAYLOAD_MD5}" in message
    assert not dest.exists() and not part_path(dest).exists()
    assert quarantine_path(dest).read_bytes() == PAYLOAD
    download(server.url, dest, md5=PAYLOAD_MD5, progress=False)
    assert len(server.behaviour.ranges) == 2  # fetched again, not trusted


def test_existing_good_file_is_not_fetched_again(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "a.tar.gz"
    dest.write_bytes(PAYLOAD)
    download(server.url, dest, md5=PAYLOAD_MD5, progress=False)
    assert server.behaviour.ranges == []


def test_only_http_urls(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="only http"):
        download("ftp://example.org/x.tar.gz", tmp_path / "x", progress=False)


# ---- prepare_dataset() from a URL, end to end -------------------------------------------------

def fake_archive_bytes(records: int = 4) -> bytes:
    """A tiny but well-formed CIFAR-10 binary archive, in memory."""
    rng = np.random.default_rng(1)
    files = {cifar10.META_FILE: ("\n".join(cifar10.CLASSES) + "\n\n").encode()}
    for name in (*cifar10.TRAIN_FILES, *cifar10.TEST_FILES):
        raw = rng.integers(0, 256, (records, cifar10.RECORD_BYTES), dtype=np.uint8)
        raw[:, 0] = np.arange(records) % 10
        files[name] = raw.tobytes()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{cifar10.FOLDER_NAME}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(autouse=True)
def few_records_per_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """fake_archive_bytes holds 4 records per file, not the 10,000 that validation
    requires for MindSpore (cifar10.RECORDS_PER_FILE, tested in test_cifar10.py and
    test_preparation.py)."""
    monkeypatch.setattr(cifar10, "RECORDS_PER_FILE", None)


def test_prepare_from_url_survives_a_dropped_connection(server: Server, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("msresnet.data.download.RETRY_BACKOFF_SECONDS", 0.0)
    archive = fake_archive_bytes()
    server.behaviour.payload = archive
    server.behaviour.drop_after = [len(archive) // 2]
    expected = hashlib.md5(archive).hexdigest()
    report = preparation.prepare_dataset(server.url, tmp_path, md5=expected, progress=False)
    assert report.action == "downloaded and extracted"
    assert report.checksum == f"md5 {expected} verified (given by caller)"
    assert (report.train_records, report.test_records) == (20, 4)
    assert server.behaviour.ranges[1] == f"bytes={len(archive) // 2}-"


def test_prepare_from_unknown_url_without_md5_reports_skipped_check(server: Server, tmp_path: Path) -> None:
    archive = fake_archive_bytes()
    server.behaviour.payload = archive
    report = preparation.prepare_dataset(server.url, tmp_path, progress=False)
    assert report.checksum.startswith(f"md5 {hashlib.md5(archive).hexdigest()} computed; check skipped")


def test_prepare_from_url_with_wrong_md5(server: Server, tmp_path: Path) -> None:
    server.behaviour.payload = fake_archive_bytes()
    with pytest.raises(cifar10.DatasetError, match=r"MD5 mismatch: expected f{32}, got [0-9a-f]{32}"):
        preparation.prepare_dataset(server.url, tmp_path, md5="f" * 32, progress=False)
    assert not (tmp_path / cifar10.FOLDER_NAME).exists()
    assert (tmp_path / "cifar-10-binary.tar.gz.bad").exists()
