"""Loopback HTTP servers for tests: stdlib `http.server` on 127.0.0.1 in a background thread.

Routes map a path (query string excluded) to a `Reply` or to a function of the recorded
request returning one; routes can be added while the server runs. Every request is recorded.
"""

from __future__ import annotations

import datetime
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


def self_signed_tls(hostname: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting only it) for a certificate naming `hostname`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.NamedTemporaryFile("wb", suffix=".pem") as chain:
        chain.write(cert_pem + key_pem)
        chain.flush()
        server_context.load_cert_chain(chain.name)
    client_context = ssl.create_default_context(cadata=cert_pem.decode())
    return server_context, client_context


class LoopbackServer:
    """An HTTP/1.0 server on 127.0.0.1:<free port>; use as a context manager.

    With `tls`, it speaks HTTPS and records the SNI names clients send in `sni_names`.
    """

    def __init__(self, routes: dict[str, Route] | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.requests: list[RecordedRequest] = []
        self.sni_names: list[str | None] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._scheme = "https" if tls else "http"
        if tls is not None:
            tls.sni_callback = lambda _socket, name, _context: self.sni_names.append(name)
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.port}"

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
            def do_GET(self) -> None:
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
