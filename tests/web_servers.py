"""Loopback HTTP servers for tests: stdlib `http.server` on 127.0.0.1 in a background thread.

Routes map a path (query string excluded) to a `Reply` or to a function of the recorded
request returning one; routes can be added while the server runs. Every request is recorded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    """What the server answers. `body` may be an iterable of chunks (streamed, no Content-Length)."""

    status: int = 200
    body: bytes | str | Iterable[bytes] = b""
    content_type: str | None = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


Route = Reply | Callable[[RecordedRequest], Reply]


class LoopbackServer:
    """An HTTP/1.0 server on 127.0.0.1:<free port>; use as a context manager."""

    def __init__(self, routes: dict[str, Route] | None = None) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if request.path == path]

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                split = urlsplit(self.path)
                request = RecordedRequest(
                    path=split.path,
                    query=parse_qs(split.query),
                    headers={name.lower(): value for name, value in self.headers.items()},
                )
                with server._lock:
                    server.requests.append(request)
                route = server.routes.get(split.path)
                if route is None:
                    reply = Reply(status=404, body="not found", content_type="text/plain")
                else:
                    reply = route(request) if callable(route) else route
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                try:
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading (size cap, timeout): expected in tests

            def _send(self, reply: Reply) -> None:
                self.send_response(reply.status)
                if reply.content_type is not None:
                    self.send_header("Content-Type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                body = reply.body.encode() if isinstance(reply.body, str) else reply.body
                if isinstance(body, bytes):
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.end_headers()
                for chunk in body:
                    if server._stopping.is_set():
                        return
                    self.wfile.write(chunk)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
