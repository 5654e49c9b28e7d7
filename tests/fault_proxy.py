"""Test helper: a loopback HTTP proxy in front of the test S3 server that can fail.

Point ``S3_ENDPOINT`` at :attr:`FaultProxy.endpoint`; every request is forwarded
unchanged (the Host header too, so signatures still match) to the real server,
except those that match a :class:`Fault`, which get the answer an S3 store gives
when it is in trouble: HTTP 500 with an ``InternalError`` XML body. A fault can
skip the first matches ("the Nth request fails"), fail a bounded number of times
or until it is cleared. Loopback only; the server thread stops on exit.
"""

from __future__ import annotations

import http.client
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

SERVER_MESSAGE = "We encountered an internal error. Please try again."
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection",
               "te", "trailer", "upgrade"}


@dataclass
class Fault:
    """Answer 500 to requests with this method whose path contains ``path`` (and
    whose query contains ``query``), after letting ``skip`` of them through, at
    most ``times`` times (None: until cleared)."""

    method: str
    path: str = ""
    query: str = ""
    skip: int = 0
    times: int | None = None
    status: int = 500
    seen: int = 0
    failed: int = 0

    def hit(self, method: str, target: str) -> bool:
        parts = urlsplit(target)
        if method != self.method or self.path not in parts.path or self.query not in parts.query:
            return False
        self.seen += 1
        if self.seen <= self.skip or (self.times is not None and self.failed >= self.times):
            return False
        self.failed += 1
        return True


@dataclass
class FaultProxy:
    """``with FaultProxy(upstream_endpoint) as proxy: proxy.faults.append(Fault(...))``."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    log: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status

    def __post_init__(self) -> None:
        parts = urlsplit(self.upstream)
        assert parts.hostname == "127.0.0.1", "loopback only"
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                return None

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy._lock:
                    fault = next((f for f in proxy.faults if f.hit(self.command, self.path)),
                                 None)
                if fault is not None:
                    self._fail(fault.status)
                    return
                upstream = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
                try:
                    upstream.putrequest(self.command, self.path, skip_host=True,
                                        skip_accept_encoding=True)
                    for name, value in self.headers.items():
                        if name.lower() not in (*_HOP_BY_HOP, "content-length", "expect"):
                            upstream.putheader(name, value)
                    upstream.putheader("Content-Length", str(len(body)))
                    upstream.endheaders(body)
                    answer = upstream.getresponse()
                    data = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for name, value in answer.getheaders():
                        if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                    proxy.log.append((self.command, self.path, answer.status))
                finally:
                    upstream.close()

            def _fail(self, status: int) -> None:
                body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError"
                        f"</Code><Message>{SERVER_MESSAGE}</Message><RequestId>fault-proxy"
                        "</RequestId></Error>").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                proxy.log.append((self.command, self.path, status))

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def failed(self) -> int:
        return sum(fault.failed for fault in self.faults)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
