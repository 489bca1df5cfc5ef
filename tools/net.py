"""SSRF-safe HTTP GET for every tool that fetches a URL chosen by a user or a model.

The policy is enforced twice:

* before any connection, on the URL itself (`check_url`): scheme, credentials, port, and hosts
  that are IP literals (in any notation) or well-known loopback/metadata names;
* at connect time, inside the HTTP client's network backend: the host is resolved once with
  `resolve_host`, every resolved address is checked, and the socket is opened to one of those
  checked addresses. TLS still uses the original host name for SNI and certificate checks, and
  the Host header is untouched. Checking and connecting on the same resolution defeats DNS
  rebinding, and every redirect hop goes through the same backend.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import ipaddress
import re
import socket
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

import httpcore
import httpx

from settings import settings
from tools.errors import ToolError, ToolInputError, TransientToolError
from tools.transport import BackendTransport

DEFAULT_MAX_BYTES = 5 * 1024 * 1024  # the one cap on a fetched body, web_read's included
DEFAULT_TIMEOUT_SECONDS = 15.0
DEFAULT_MAX_REDIRECTS = 5
MAX_URL_LENGTH = 4096

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchErrorCode(StrEnum):
    INVALID_URL_FORMAT = "INVALID_URL_FORMAT"
    URL_NOT_ALLOWED = "URL_NOT_ALLOWED"
    TIMEOUT = "TIMEOUT"
    URL_NOT_ACCESSIBLE = "URL_NOT_ACCESSIBLE"
    RATE_LIMITED = "RATE_LIMITED"
    SERVER_ERROR = "SERVER_ERROR"
    UNSUPPORTED_CONTENT_TYPE = "UNSUPPORTED_CONTENT_TYPE"
    TOO_MANY_REDIRECTS = "TOO_MANY_REDIRECTS"


class FetchError(ToolError):
    """A URL could not be fetched; `code` is a `FetchErrorCode`, `retryable` says if retrying may help."""

    retryable = False

    def __init__(self, code: FetchErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class FetchInputError(FetchError, ToolInputError):
    """The URL itself is malformed or refused by the SSRF policy; never retried."""


class TransientFetchError(FetchError, TransientToolError):
    """Timeout, HTTP 429/5xx or an interrupted connection; the tool runner may retry."""

    retryable = True


def fetch_error(code: FetchErrorCode, message: str, *, transient: bool = False) -> FetchError:
    """Build the `FetchError` subclass that matches `code` (input error, transient or plain)."""
    if code in (FetchErrorCode.INVALID_URL_FORMAT, FetchErrorCode.URL_NOT_ALLOWED):
        return FetchInputError(code, message)
    if transient:
        return TransientFetchError(code, message)
    return FetchError(code, message)


@dataclass(frozen=True)
class NetConfig:
    allow_loopback: bool
    user_agent: str


def net_config() -> NetConfig:
    """Read the fetch settings from the environment (at call time)."""
    config = settings()
    return NetConfig(allow_loopback=config.WEB_ALLOW_LOOPBACK, user_agent=config.WEB_USER_AGENT.strip())


# --- address policy -------------------------------------------------------------------------

_BLOCKED_RANGES: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.ip_network(network), reason)
    for network, reason in (
        ("0.0.0.0/8", "unspecified or 'this network' address"),
        ("10.0.0.0/8", "private address"),
        ("100.64.0.0/10", "shared (carrier-grade NAT) address"),
        ("127.0.0.0/8", "loopback address"),
        ("169.254.0.0/16", "link-local address (includes cloud metadata 169.254.169.254)"),
        ("172.16.0.0/12", "private address"),
        ("192.0.0.0/24", "IETF protocol assignment"),
        ("192.0.2.0/24", "documentation address"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private address"),
        ("198.18.0.0/15", "benchmarking address"),
        ("198.51.100.0/24", "documentation address"),
        ("203.0.113.0/24", "documentation address"),
        ("224.0.0.0/4", "multicast address"),
        ("240.0.0.0/4", "reserved address"),
        ("::/128", "unspecified address"),
        ("::1/128", "loopback address"),
        ("::ffff:0:0/96", "IPv4-mapped IPv6 address"),
        ("::/96", "IPv4-compatible IPv6 address"),
        ("64:ff9b:1::/48", "local-use NAT64 address"),
        ("100::/64", "discard-only address"),
        ("2001::/23", "IETF protocol assignment (includes Teredo)"),
        ("2001:db8::/32", "documentation address"),
        ("fc00::/7", "unique-local address"),
        ("fe80::/10", "link-local address"),
        ("fec0::/10", "site-local address"),
        ("ff00::/8", "multicast address"),
    )
)
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_IPV4_LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
_IPV6_LOOPBACK = ipaddress.IPv6Address("::1")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address forwards to."""
    if address in _NAT64_WELL_KNOWN:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    return None


def _is_plain_loopback(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in _IPV4_LOOPBACK
    return address == _IPV6_LOOPBACK


def blocked_address_reason(address: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why connecting to `address` is refused, or None when it is a public unicast address.

    With `allow_loopback`, exactly 127.0.0.0/8 and ::1 are allowed (never IPv4-mapped forms,
    private ranges or metadata addresses).
    """
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return "scoped IPv6 address"
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner = blocked_address_reason(embedded)
            return f"IPv6 address wrapping {embedded} ({inner})" if inner else None
    if allow_loopback and _is_plain_loopback(address):
        return None
    for network, reason in _BLOCKED_RANGES:
        if address.version == network.version and address in network:
            return reason
    if address.is_multicast:
        return "multicast address"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "site-local address"
    if (
        address.is_private
        or address.is_reserved
        or address.is_loopback
        or address.is_link_local
        or address.is_unspecified
        or not address.is_global
    ):
        return "non-public address"
    return None


# --- URL / host policy ----------------------------------------------------------------------

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
_METADATA_NAMES = {"metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_HOST_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")


def _check_host(host: str, *, allow_loopback: bool) -> None:
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        reason = blocked_address_reason(literal, allow_loopback=allow_loopback)
        if reason:
            raise fetch_error(FetchErrorCode.URL_NOT_ALLOWED, f"Refused to fetch {host}: {reason}.")
        return
    name = host.lower().rstrip(".")
    labels = name.split(".")
    if not name or not all(_HOST_LABEL.match(label) for label in labels):
        raise fetch_error(FetchErrorCode.INVALID_URL_FORMAT, f"Invalid host name {host!r}.")
    if all(_NUMERIC_LABEL.match(label) for label in labels):
        # Decimal, octal, hex and short IPv4 forms (2130706433, 0177.0.0.1, 0x7f.1, 127.1) that
        # inet_aton would turn into an address: refused outright, whatever they decode to.
        raise fetch_error(
            FetchErrorCode.URL_NOT_ALLOWED,
            f"Refused to fetch {host}: non-canonical numeric IP address; write it as a dotted quad.",
        )
    if name in _METADATA_NAMES:
        raise fetch_error(FetchErrorCode.URL_NOT_ALLOWED, f"Refused to fetch {host}: cloud metadata host.")
    if (name in _LOOPBACK_NAMES or name.endswith(".localhost")) and not allow_loopback:
        raise fetch_error(FetchErrorCode.URL_NOT_ALLOWED, f"Refused to fetch {host}: loopback host name.")


def check_url(url: str, *, allow_loopback: bool = False) -> httpx.URL:
    """Parse `url` and apply the static SSRF policy; return the parsed URL or raise `FetchError`.

    Host names are only checked by name here; their addresses are checked at connect time.
    """
    if not isinstance(url, str) or not url.strip():
        raise fetch_error(FetchErrorCode.INVALID_URL_FORMAT, "URL must be a non-empty string.")
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise fetch_error(FetchErrorCode.INVALID_URL_FORMAT, f"URL is longer than {MAX_URL_LENGTH} characters.")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise fetch_error(FetchErrorCode.INVALID_URL_FORMAT, f"Invalid URL {url!r}: {exc}.") from None
    if not parsed.scheme:
        raise fetch_error(FetchErrorCode.INVALID_URL_FORMAT, f"URL {url!r} has no scheme; use http:// or https://.")
    if parsed.scheme not in ("http", "https"):
        raise fetch_error(
            FetchErrorCode.URL_NOT_ALLOWED, f"Scheme {parsed.scheme!r} is not allowed; only http and https are."
        )
    if parsed.userinfo:
        raise fetch_error(FetchErrorCode.URL_NOT_ALLOWED, "URLs with embedded credentials (user@host) are not allowed.")
    if not parsed.host:
        raise fetch_error(FetchErrorCode.INVALID_URL_FORMAT, f"URL {url!r} has no host.")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise fetch_error(FetchErrorCode.INVALID_URL_FORMAT, f"Invalid port {parsed.port}.")
    _check_host(parsed.raw_host.decode("ascii"), allow_loopback=allow_loopback)
    return parsed


# --- connect-time enforcement ---------------------------------------------------------------


async def resolve_host(host: str, port: int) -> list[str]:
    """Resolve `host` to the addresses the OS would connect to, in getaddrinfo order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _PolicyNetworkBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks and connects to the checked address, so nothing unchecked is dialled."""

    def __init__(self, *, allow_loopback: bool) -> None:
        self._allow_loopback = allow_loopback
        self._inner = httpcore.AnyIOBackend()

    async def _checked_addresses(self, host: str, port: int) -> list[str]:
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                resolved = await resolve_host(host, port)
            except OSError as exc:
                raise fetch_error(FetchErrorCode.URL_NOT_ACCESSIBLE, f"Could not resolve host {host}: {exc}.") from None
            try:
                addresses = [ipaddress.ip_address(address) for address in resolved]
            except ValueError:
                message = f"Host {host} resolved to a non-IP address."
                raise fetch_error(FetchErrorCode.URL_NOT_ALLOWED, message) from None
        if not addresses:
            raise fetch_error(FetchErrorCode.URL_NOT_ACCESSIBLE, f"Host {host} has no addresses.")
        for address in addresses:
            reason = blocked_address_reason(address, allow_loopback=self._allow_loopback)
            if reason:
                raise fetch_error(
                    FetchErrorCode.URL_NOT_ALLOWED, f"Refused to fetch {host}: it resolves to {address} ({reason})."
                )
        return [str(address) for address in addresses]

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._checked_addresses(host, port)
        last_error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        raise fetch_error(FetchErrorCode.URL_NOT_ALLOWED, "Unix sockets are not allowed.")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=False)


async def check_public_host(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, each checked by the policy: FetchError (URL_NOT_ALLOWED
    naming the refused address, or URL_NOT_ACCESSIBLE when it does not resolve) otherwise."""
    _check_host(host, allow_loopback=False)
    return await _PolicyNetworkBackend(allow_loopback=False)._checked_addresses(host, port)


def policy_transport() -> httpx.AsyncBaseTransport:
    """An httpx transport that connects to public addresses only, each connection's resolved
    addresses checked (redirects included): for HTTP clients of libraries that send requests to a
    URL a user chose (an OpenAI-compatible base URL sent with a run request)."""
    return BackendTransport(network_backend=_PolicyNetworkBackend(allow_loopback=False), ssl_context=_ssl_context())


def _policy_client(*, allow_loopback: bool, timeout: float, user_agent: str) -> httpx.AsyncClient:
    # Every connection is opened by the policy backend; the transport knows no proxy (an
    # environment proxy would dial the target itself, out of the policy's reach).
    transport = BackendTransport(
        network_backend=_PolicyNetworkBackend(allow_loopback=allow_loopback), ssl_context=_ssl_context()
    )
    return httpx.AsyncClient(
        transport=transport,
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        trust_env=False,
        headers={
            "User-Agent": user_agent,
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,"
            "application/json;q=0.8,*/*;q=0.1",
        },
    )


# --- responses ------------------------------------------------------------------------------

_TEXT_MEDIA_TYPES = {
    "application/xhtml+xml",
    "application/xml",
    "application/json",
    "application/ld+json",
    "application/rss+xml",
    "application/atom+xml",
    "application/javascript",
    "application/x-ndjson",
}


def is_text_media_type(media_type: str) -> bool:
    """Whether a media type (no parameters, lower case) is text the tools may read."""
    return (
        media_type.startswith("text/")
        or media_type in _TEXT_MEDIA_TYPES
        or (media_type.startswith("application/") and media_type.endswith(("+xml", "+json")))
    )


@dataclass(frozen=True)
class FetchResult:
    """A fetched response. `content` is at most `max_bytes` long; `truncated` says it was cut."""

    url: str
    status_code: int
    headers: httpx.Headers
    content: bytes
    truncated: bool
    redirects: tuple[str, ...] = ()

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        match = re.search(r";\s*charset\s*=\s*\"?([\w.:-]+)", self.headers.get("content-type", ""), re.I)
        if not match:
            return None
        try:
            return codecs.lookup(match.group(1)).name
        except LookupError:
            return None

    @property
    def not_modified(self) -> bool:
        return self.status_code == 304

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")

    @property
    def last_modified(self) -> str | None:
        return self.headers.get("last-modified")

    def text(self) -> str:
        """The body decoded with the declared charset (UTF-8 if none); bad bytes are replaced."""
        return self.content.decode(self.charset or "utf-8", errors="replace")


def _status_error(response: httpx.Response) -> FetchError | None:
    status = response.status_code
    label = f"HTTP {status} {response.reason_phrase}".strip()
    if status == 408:
        return fetch_error(FetchErrorCode.TIMEOUT, f"{response.url} answered {label}.", transient=True)
    if status == 429:
        return fetch_error(FetchErrorCode.RATE_LIMITED, f"{response.url} answered {label}.", transient=True)
    if status >= 500:
        return fetch_error(FetchErrorCode.SERVER_ERROR, f"{response.url} answered {label}.", transient=True)
    if status >= 400 or (300 <= status < 400 and status != 304):
        return fetch_error(FetchErrorCode.URL_NOT_ACCESSIBLE, f"{response.url} answered {label}.")
    return None


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        room = max_bytes - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


_CROSS_ORIGIN_DROPPED_HEADERS = ("authorization", "cookie", "proxy-authorization")


async def _follow_redirects(
    client: httpx.AsyncClient,
    url: httpx.URL,
    *,
    headers: Mapping[str, str],
    max_bytes: int,
    max_redirects: int,
    allow_loopback: bool,
    accept: Callable[[str], bool],
) -> FetchResult:
    visited: list[str] = []
    request_headers = dict(headers)
    for _ in range(max_redirects + 1):
        async with client.stream("GET", url, headers=request_headers) as response:
            location = response.headers.get("location")
            if response.is_redirect and location:
                visited.append(str(url))
                next_url = check_url(str(url.join(location)), allow_loopback=allow_loopback)
                if str(next_url) in visited:
                    raise fetch_error(FetchErrorCode.TOO_MANY_REDIRECTS, f"Redirect loop at {next_url}.")
                if next_url.scheme != url.scheme or next_url.host != url.host or next_url.port != url.port:
                    request_headers = {
                        k: v for k, v in request_headers.items() if k.lower() not in _CROSS_ORIGIN_DROPPED_HEADERS
                    }
                url = next_url
                continue
            error = _status_error(response)
            if error:
                raise error
            if response.status_code == 304:
                return FetchResult(str(url), 304, response.headers, b"", False, tuple(visited))
            media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if not accept(media_type):
                refused = f"{url} has content type {media_type or 'none'!r}"
                readable = "; only text, HTML, XML and JSON are read." if accept is is_text_media_type else "."
                raise fetch_error(FetchErrorCode.UNSUPPORTED_CONTENT_TYPE, refused + readable)
            content, truncated = await _read_capped(response, max_bytes)
            return FetchResult(str(url), response.status_code, response.headers, content, truncated, tuple(visited))
    raise fetch_error(
        FetchErrorCode.TOO_MANY_REDIRECTS, f"More than {max_redirects} redirects starting at {visited[0]}."
    )


async def safe_get(
    url: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    headers: Mapping[str, str] | None = None,
    allow_loopback: bool | None = None,
    max_redirects: int = DEFAULT_MAX_REDIRECTS,
    accept: Callable[[str], bool] = is_text_media_type,
) -> FetchResult:
    """GET a public http(s) URL under the SSRF policy and return its (text) body.

    Args:
        url: http or https URL; anything resolving to a non-public address is refused.
        timeout: overall deadline in seconds for the whole fetch, redirects included.
        max_bytes: body bytes kept (after content decoding); the rest is dropped and
            `truncated` is set.
        headers: extra request headers (e.g. If-None-Match); credentials are dropped on
            cross-origin redirects.
        allow_loopback: also allow 127.0.0.0/8 and ::1; None reads WEB_ALLOW_LOOPBACK.
        max_redirects: redirects followed (each hop re-checked) before TOO_MANY_REDIRECTS.
        accept: which media types (no parameters, lower case) are read; others raise
            UNSUPPORTED_CONTENT_TYPE before the body is read. Text kinds by default.

    A 304 answer is returned as a result with `not_modified` set. Failures raise `FetchError`
    with a `FetchErrorCode`; timeouts, 429 and 5xx raise `TransientFetchError`.
    """
    config = net_config()
    if allow_loopback is None:
        allow_loopback = config.allow_loopback
    target = check_url(url, allow_loopback=allow_loopback)
    client = _policy_client(allow_loopback=allow_loopback, timeout=timeout, user_agent=config.user_agent)
    try:
        async with asyncio.timeout(timeout):
            async with client:
                return await _follow_redirects(
                    client,
                    target,
                    headers=headers or {},
                    max_bytes=max_bytes,
                    max_redirects=max_redirects,
                    allow_loopback=allow_loopback,
                    accept=accept,
                )
    except (TimeoutError, httpx.TimeoutException):
        message = f"Fetching {url} took longer than {timeout:g}s."
        raise fetch_error(FetchErrorCode.TIMEOUT, message, transient=True) from None
    except httpx.ConnectError as exc:
        message = f"Could not connect to {url}: {exc or 'connection failed'}."
        raise fetch_error(FetchErrorCode.URL_NOT_ACCESSIBLE, message) from None
    except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.CloseError) as exc:
        message = f"Connection to {url} was interrupted: {exc or type(exc).__name__}."
        raise fetch_error(FetchErrorCode.URL_NOT_ACCESSIBLE, message, transient=True) from None
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise fetch_error(FetchErrorCode.INVALID_URL_FORMAT, f"Invalid URL {url!r}: {exc}.") from None
    except httpx.DecodingError as exc:
        message = f"Could not decode the response from {url}: {exc}."
        raise fetch_error(FetchErrorCode.URL_NOT_ACCESSIBLE, message) from None
