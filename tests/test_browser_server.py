"""The browser test's file server (tests/browser_check.py) on a client that hangs up
mid-file: the next request is served and the test log gets no traceback."""

from __future__ import annotations

import socket
import struct
import threading
import time
import urllib.request
from pathlib import Path

from browser_check import serve_directory


def _handler_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """The request threads started since ``before`` (another server's are not waited on)."""
    return [t for t in threading.enumerate()
            if t not in before and "process_request_thread" in t.name]


def test_a_client_that_hangs_up_mid_file_leaves_no_traceback(tmp_path: Path, capsys) -> None:
    (tmp_path / "big.bin").write_bytes(bytes(64 << 20))  # more than the socket buffers hold
    (tmp_path / "small.txt").write_text("served")
    with serve_directory(tmp_path) as url:
        host, port = url.split("//")[1].rstrip("/").split(":")
        before = set(threading.enumerate())
        client = socket.create_connection((host, int(port)), timeout=10)
        client.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.recv(4096).startswith(b"HTTP/1.0 200")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset, as when Chromium drops a request
        deadline = time.monotonic() + 30
        while _handler_threads(before) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _handler_threads(before), "the handler still sends the file"
        with urllib.request.urlopen(url + "small.txt", timeout=10) as response:
            assert response.read() == b"served"
    assert "Traceback" not in capsys.readouterr().err
