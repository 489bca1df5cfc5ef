"""SSRF policy of tools.net: hostile URLs, hostile DNS answers, hostile redirects.

Every refusal must come from the policy before any socket is opened: a spy on the real
connect records each attempt, and only 127.0.0.1 is ever dialled.
"""

import ipaddress
import socket

import httpcore
import pytest

from tests.web_servers import LoopbackServer, Reply, self_signed_tls
from tools import net
from tools.errors import ToolInputError, TransientToolError
from tools.net import FetchError, FetchErrorCode, blocked_address_reason, check_url, safe_get

NOT_ALLOWED = FetchErrorCode.URL_NOT_ALLOWED
INVALID = FetchErrorCode.INVALID_URL_FORMAT

HOSTILE_URLS = [
    ("http://127.0.0.1/", NOT_ALLOWED),
    ("http://127.0.0.1.:8080/", NOT_ALLOWED),
    ("http://localhost/", NOT_ALLOWED),
    ("http://localhost./", NOT_ALLOWED),
    ("http://LOCALHOST/", NOT_ALLOWED),
    ("http://api.localhost/", NOT_ALLOWED),
    ("http://2130706433/", NOT_ALLOWED),  # decimal 127.0.0.1
    ("http://0177.0.0.1/", INVALID),  # octal; httpx rejects it as an IPv4 literal
    ("http://0x7f.0.0.1/", NOT_ALLOWED),  # hex
    ("http://0x7f000001/", NOT_ALLOWED),
    ("http://127.1/", NOT_ALLOWED),  # short form
    ("http://0/", NOT_ALLOWED),
    ("http://0.0.0.0/", NOT_ALLOWED),
    ("http://%31%32%37.0.0.1/", INVALID),  # percent-encoded host
    ("http://[::1]/", NOT_ALLOWED),
    ("http://[::]/", NOT_ALLOWED),
    ("http://[::ffff:127.0.0.1]/", NOT_ALLOWED),
    ("http://[::ffff:7f00:1]/", NOT_ALLOWED),
    ("http://[0:0:0:0:0:ffff:127.0.0.1]/", NOT_ALLOWED),
    ("http://[::127.0.0.1]/", NOT_ALLOWED),  # IPv4-compatible
    ("http://[fe80::1]/", NOT_ALLOWED),
    ("http://[fe80::1%25eth0]/", NOT_ALLOWED),
    ("http://[fc00::1]/", NOT_ALLOWED),
    ("http://[fd12:3456::1]/", NOT_ALLOWED),
    ("http://[fec0::1]/", NOT_ALLOWED),
    ("http://[ff02::1]/", NOT_ALLOWED),
    ("http://[2002:7f00:1::]/", NOT_ALLOWED),  # 6to4 of 127.0.0.1
    ("http://[2002:a9fe:a9fe::]/", NOT_ALLOWED),  # 6to4 of 169.254.169.254
    ("http://[64:ff9b::a9fe:a9fe]/", NOT_ALLOWED),  # NAT64 of 169.254.169.254
    ("http://[64:ff9b::10.0.0.1]/", NOT_ALLOWED),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", NOT_ALLOWED),  # Teredo
    ("http://169.254.169.254/latest/meta-data/", NOT_ALLOWED),
    ("http://metadata.google.internal/computeMetadata/v1/", NOT_ALLOWED),
    ("http://10.0.0.1/", NOT_ALLOWED),
    ("http://172.16.0.1/", NOT_ALLOWED),
    ("http://192.168.1.1/", NOT_ALLOWED),
    ("http://100.64.0.1/", NOT_ALLOWED),  # shared address space
    ("http://198.18.0.1/", NOT_ALLOWED),  # benchmarking
    ("http://224.0.0.1/", NOT_ALLOWED),  # multicast
    ("http://255.255.255.255/", NOT_ALLOWED),
    ("http://user:secret@example.com/", NOT_ALLOWED),
    ("http://example.com@127.0.0.1/", NOT_ALLOWED),
    ("http://127.0.0.1\\@example.com/", NOT_ALLOWED),
    ("file:///etc/passwd", NOT_ALLOWED),
    ("gopher://127.0.0.1:6379/_INFO", NOT_ALLOWED),
    ("ftp://example.com/file.txt", NOT_ALLOWED),
    ("dict://127.0.0.1:11211/stats", NOT_ALLOWED),
    ("data:text/html,<script>alert(1)</script>", NOT_ALLOWED),
    ("javascript:alert(1)", NOT_ALLOWED),
    ("http:///etc/passwd", INVALID),
    ("//example.com/", INVALID),
    ("example.com", INVALID),
    ("http://example.com:99999/", INVALID),
    ("http://exa mple.com/", INVALID),
    ("", INVALID),
]


@pytest.fixture(autouse=True)
def policy_spies(monkeypatch):
    """Record DNS look-ups and TCP connects; only loopback connects go through."""
    monkeypatch.delenv("WEB_ALLOW_LOOPBACK", raising=False)
    calls = {"resolved": [], "connected": []}
    real_connect = httpcore.AnyIOBackend.connect_tcp

    async def fail_resolve(host, port):
        calls["resolved"].append(host)
        raise socket.gaierror(socket.EAI_NONAME, "no DNS in tests")

    async def spy_connect(self, host, port, *args, **kwargs):
        calls["connected"].append(host)
        assert ipaddress.ip_address(host).is_loopback, f"test tried to connect to {host}"
        return await real_connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(net, "resolve_host", fail_resolve)
    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", spy_connect)
    return calls


def fake_dns(monkeypatch, calls, answers: dict[str, list[str]]):
    async def resolve(host, port):
        calls["resolved"].append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "unknown test host")
        return answers[host]

    monkeypatch.setattr(net, "resolve_host", resolve)


@pytest.fixture
def server():
    with LoopbackServer() as running:
        yield running


async def refused(url, **kwargs) -> FetchError:
    with pytest.raises(FetchError) as caught:
        await safe_get(url, timeout=5, **kwargs)
    return caught.value


def test_the_suite_is_large():
    assert len(HOSTILE_URLS) >= 25


@pytest.mark.parametrize(("url", "code"), HOSTILE_URLS)
async def test_hostile_url_is_refused_before_any_lookup_or_connect(url, code, policy_spies):
    error = await refused(url)
    assert error.code == code, str(error)
    assert isinstance(error, ToolInputError)
    assert policy_spies["resolved"] == []
    assert policy_spies["connected"] == []


@pytest.mark.parametrize(
    "answer",
    [
        ["10.0.0.5"],
        ["192.168.1.1"],
        ["169.254.169.254"],
        ["::1"],
        ["127.0.0.1"],
        ["::ffff:10.0.0.5"],
        ["fd00::1"],
        ["100.64.1.2"],
        ["93.184.216.34", "10.0.0.5"],  # one public, one private: refused as a whole
        ["2606:4700::1111", "fe80::1"],
    ],
)
async def test_name_resolving_to_a_blocked_address_is_refused(monkeypatch, policy_spies, answer):
    fake_dns(monkeypatch, policy_spies, {"innocent.example": answer})
    error = await refused("https://innocent.example/page")
    assert error.code == NOT_ALLOWED
    assert "innocent.example" in str(error)
    assert policy_spies["resolved"] == ["innocent.example"]
    assert policy_spies["connected"] == []


async def test_loopback_allowed_still_refuses_a_name_with_one_private_address(monkeypatch, policy_spies):
    fake_dns(monkeypatch, policy_spies, {"mixed.example": ["127.0.0.1", "10.0.0.1"]})
    error = await refused("http://mixed.example/", allow_loopback=True)
    assert error.code == NOT_ALLOWED
    assert policy_spies["connected"] == []


async def test_unresolvable_name_is_not_accessible(policy_spies):
    error = await refused("https://does-not-exist.example/")
    assert error.code == FetchErrorCode.URL_NOT_ACCESSIBLE
    assert policy_spies["connected"] == []


async def test_loopback_server_is_refused_unless_loopback_is_allowed(server, monkeypatch, policy_spies):
    server.routes["/ok"] = Reply(body="hello", content_type="text/plain")
    error = await refused(server.url("/ok"))
    assert error.code == NOT_ALLOWED
    assert server.requests == []

    monkeypatch.setenv("WEB_ALLOW_LOOPBACK", "1")
    result = await safe_get(server.url("/ok"), timeout=5)
    assert result.content == b"hello"
    assert policy_spies["connected"] == ["127.0.0.1"]


async def test_allow_loopback_does_not_open_private_or_metadata_ranges():
    for address in ["10.0.0.1", "169.254.169.254", "192.168.0.1", "::ffff:127.0.0.1", "fe80::1", "0.0.0.0"]:
        assert blocked_address_reason(ipaddress.ip_address(address), allow_loopback=True), address
    for address in ["127.0.0.1", "127.8.9.10", "::1"]:
        assert blocked_address_reason(ipaddress.ip_address(address), allow_loopback=True) is None
        assert blocked_address_reason(ipaddress.ip_address(address)) is not None


def test_public_addresses_and_urls_pass_the_policy():
    for address in ["8.8.8.8", "93.184.216.34", "2606:4700::1111", "2002:808:808::1", "64:ff9b::808:808"]:
        assert blocked_address_reason(ipaddress.ip_address(address)) is None, address
    assert check_url("https://Example.com/a?b=1").host == "example.com"
    assert check_url("http://93.184.216.34:8080/").port == 8080
    assert check_url("https://xn--mnchen-3ya.de/").host == "münchen.de"


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::ffff:127.0.0.1]:{port}/ok",  # mapped loopback stays refused with loopback allowed
        "http://2130706433:{port}/ok",
        "http://private-name.example/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:{port}/_x",
    ],
)
async def test_redirect_to_a_blocked_target_is_refused(server, monkeypatch, policy_spies, location):
    fake_dns(monkeypatch, policy_spies, {"private-name.example": ["192.168.1.1"]})
    server.routes["/ok"] = Reply(body="must not be reached", content_type="text/plain")
    server.routes["/hop"] = Reply(status=302, headers={"Location": location.format(port=server.port)})
    error = await refused(server.url("/hop"), allow_loopback=True)
    assert error.code == NOT_ALLOWED, str(error)
    assert [r.path for r in server.requests] == ["/hop"]
    assert set(policy_spies["connected"]) == {"127.0.0.1"}


async def test_connection_goes_to_the_checked_address_with_the_original_host_header(server, monkeypatch, policy_spies):
    fake_dns(monkeypatch, policy_spies, {"pinned.example": ["127.0.0.1"]})
    server.routes["/who"] = Reply(body="ok", content_type="text/plain")
    result = await safe_get(f"http://pinned.example:{server.port}/who", timeout=5, allow_loopback=True)
    assert result.content == b"ok"
    assert server.requests[0].headers["host"] == f"pinned.example:{server.port}"
    assert policy_spies["connected"] == ["127.0.0.1"]


async def test_https_to_the_pinned_address_keeps_the_host_name_for_sni_and_verification(monkeypatch, policy_spies):
    server_tls, client_tls = self_signed_tls("pinned.example")
    monkeypatch.setattr(net, "_ssl_context", lambda: client_tls)
    fake_dns(monkeypatch, policy_spies, {"pinned.example": ["127.0.0.1"]})
    with LoopbackServer({"/secure": Reply(body="over tls", content_type="text/plain")}, tls=server_tls) as server:
        result = await safe_get(f"https://pinned.example:{server.port}/secure", timeout=5, allow_loopback=True)
        assert result.content == b"over tls"
        assert server.sni_names == ["pinned.example"]
        assert server.requests[0].headers["host"] == f"pinned.example:{server.port}"
        # The certificate names pinned.example, not the address: verification uses the URL's host.
        error = await refused(f"https://127.0.0.1:{server.port}/secure", allow_loopback=True)
        assert error.code == FetchErrorCode.URL_NOT_ACCESSIBLE
        assert "certificate" in str(error)
    assert policy_spies["connected"] == ["127.0.0.1", "127.0.0.1"]


async def test_each_connection_rechecks_dns_so_rebinding_is_refused(server, monkeypatch, policy_spies):
    answers = iter([["127.0.0.1"], ["169.254.169.254"]])

    async def rebinding(host, port):
        policy_spies["resolved"].append(host)
        return next(answers)

    monkeypatch.setattr(net, "resolve_host", rebinding)
    server.routes["/x"] = Reply(body="first", content_type="text/plain")
    url = f"http://rebind.example:{server.port}/x"
    assert (await safe_get(url, timeout=5, allow_loopback=True)).content == b"first"
    error = await refused(url, allow_loopback=True)
    assert error.code == NOT_ALLOWED
    assert "169.254.169.254" in str(error)
    assert policy_spies["connected"] == ["127.0.0.1"]


async def test_http_errors_map_to_codes_and_retryability(server):
    server.routes["/missing"] = Reply(status=404, body="no")
    server.routes["/busy"] = Reply(status=429, body="slow down")
    server.routes["/broken"] = Reply(status=503, body="down")
    missing = await refused(server.url("/missing"), allow_loopback=True)
    busy = await refused(server.url("/busy"), allow_loopback=True)
    broken = await refused(server.url("/broken"), allow_loopback=True)
    assert (missing.code, missing.retryable, isinstance(missing, TransientToolError)) == (
        FetchErrorCode.URL_NOT_ACCESSIBLE,
        False,
        False,
    )
    assert (busy.code, isinstance(busy, TransientToolError)) == (FetchErrorCode.RATE_LIMITED, True)
    assert (broken.code, broken.retryable, isinstance(broken, TransientToolError)) == (
        FetchErrorCode.SERVER_ERROR,
        True,
        True,
    )


async def test_closed_port_is_not_accessible():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = await refused(f"http://127.0.0.1:{port}/", allow_loopback=True)
    assert error.code == FetchErrorCode.URL_NOT_ACCESSIBLE


async def test_body_is_cut_at_max_bytes(server):
    server.routes["/big"] = Reply(body=(b"x" * 1000 for _ in range(20)), content_type="text/plain")
    server.routes["/exact"] = Reply(body=b"y" * 100, content_type="text/plain")
    big = await safe_get(server.url("/big"), timeout=5, allow_loopback=True, max_bytes=4096)
    exact = await safe_get(server.url("/exact"), timeout=5, allow_loopback=True, max_bytes=100)
    assert (len(big.content), big.truncated) == (4096, True)
    assert (exact.content, exact.truncated) == (b"y" * 100, False)


async def test_connection_dropped_mid_body_is_a_transient_fetch_error(server):
    # Content-Length promises more than is sent before the server closes the connection.
    server.routes["/cut"] = Reply(
        body=iter([b"partial"]), content_type="text/plain", headers={"Content-Length": "1000"}
    )
    error = await refused(server.url("/cut"), allow_loopback=True)
    assert (error.code, error.retryable) == (FetchErrorCode.URL_NOT_ACCESSIBLE, True)
    assert "interrupted" in str(error)
