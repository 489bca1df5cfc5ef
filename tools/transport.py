"""An httpx transport over an httpcore connection pool with a network backend of the caller's choice.

httpx has no option for the network backend its connections are opened with; this transport is
built from public parts only (`httpx.AsyncBaseTransport`, `httpcore.AsyncConnectionPool(
network_backend=...)`), so a backend that checks every address it dials (tools.net) sees every
connection, redirects included. httpcore's errors are raised as the matching httpx errors.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterator

import httpcore
import httpx

# Most specific first: the first class an httpcore error is an instance of names its httpx twin.
_HTTPX_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProxyError, httpx.ProxyError),
)


@contextlib.contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core_error, httpx_error in _HTTPX_ERRORS:
            if isinstance(exc, core_error):
                raise httpx_error(str(exc), request=request) from exc
        raise


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes], request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors(self._request):
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        aclose = getattr(self._stream, "aclose", None)
        if aclose is not None:
            await aclose()


class BackendTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 transport whose connections are all opened through `network_backend`."""

    def __init__(
        self, *, network_backend: httpcore.AsyncNetworkBackend, ssl_context: ssl.SSLContext, max_connections: int = 10
    ) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context, network_backend=network_backend, max_connections=max_connections
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` through the pool and wrap the answer as an httpx response."""
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors(request):
            core_response = await self._pool.handle_async_request(core_request)
        assert isinstance(core_response.stream, AsyncIterable)
        return httpx.Response(
            status_code=core_response.status,
            headers=core_response.headers,
            stream=_ResponseStream(core_response.stream, request),
            extensions=core_response.extensions,
        )

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self._pool.aclose()
