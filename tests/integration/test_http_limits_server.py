"""Limits of server/http.py through a real `langgraph dev`: configured secrets never echoed (tool
list, server log), atomic knowledge-base creation, one web quota for every path that fetches the
web and an ingest budget, request body limits, per-user web caches, the model utility quota, and
web search provider errors in the routes' error shape."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import jwt
import pytest

from scripts.free_port import free_port
from tests.integration.conftest import AGENT_API_KEYS, API_KEYS, DevServer, server_env
from tests.web_servers import LoopbackServer, Reply

pytestmark = pytest.mark.integration

JWT_SECRET = "jwt-secret-for-limit-tests-0123456789"
AUDIENCE = "agent-engine-limit-tests"
WEB_QUOTA = 3
UTILITY_QUOTA = 2
INGEST_BYTES = 6000
BODY_LIMIT = 64 * 1024
# Secrets in the configuration of an MCP server that fails: its URL's query and userinfo, a header.
URL_TOKEN = "urltok-5f1e9c7d"
URL_PASSWORD = "userpw-a8b2c4d6"
HEADER_SECRET = "hdrsecret-3c5e7a9b"
PAGE = (
    "<html><head><title>Heron notes</title></head><body><article><h1>Herons</h1>"
    + ("<p>Grey herons stand still for minutes before they strike at a fish. " * 8)
    + "</p></article></body></html>"
)


def token(sub: str) -> str:
    claims = {"sub": sub, "aud": AUDIENCE, "exp": int(time.time() + 600)}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


def fresh_user() -> str:
    return f"u{uuid.uuid4().hex[:10]}"


def searx_reply(request) -> Reply:
    query = request.query.get("q", [""])[0]
    results = [{"title": f"About {query}", "url": "https://example.org/a", "content": f"On {query}."}]
    return Reply(body=json.dumps({"results": results}), content_type="application/json")


@pytest.fixture(scope="module")
def web():
    """A loopback SearXNG, a web site, and an MCP endpoint that refuses every call."""
    routes = {
        "/search": searx_reply,
        "/heron.html": Reply(body=PAGE),
        "/notes.md": Reply(
            body="# Notes\n\n" + "The copper kettle whistles at noon. " * 60, content_type="text/markdown"
        ),
    }
    with LoopbackServer(routes) as server:
        yield server


@pytest.fixture(scope="module")
def limits_server(pg_uri, openai_server, web, tmp_path_factory):
    """`langgraph dev` with small limits, SearXNG as the only configured provider besides a Jina
    endpoint nobody answers, and an MCP server whose configuration carries secrets."""
    mcp_url = f"http://deploy:{URL_PASSWORD}@127.0.0.1:{web.port}/mcp?token={URL_TOKEN}&region=eu"
    env = server_env(
        openai_server,
        POSTGRES_URI=pg_uri,
        POSTGRES_SCHEMA="it_limits",
        AGENT_API_KEYS=AGENT_API_KEYS,
        AGENT_ADMIN_USERS="ops",
        AGENT_JWT_SECRET=JWT_SECRET,
        AGENT_JWT_AUDIENCE=AUDIENCE,
        SEARXNG_URL=web.base_url,
        WEB_SEARCH_PROVIDER="",
        TAVILY_API_KEY="",
        JINA_API_KEY="jina-key-for-tests",
        JINA_SEARCH_URL=f"http://127.0.0.1:{free_port()}/",  # nothing listens there
        WEB_ALLOW_LOOPBACK="1",
        AGENT_TOOL_RETRIES="0",
        WEB_QUOTA_REQUESTS=str(WEB_QUOTA),
        WEB_QUOTA_WINDOW="86400",
        UTILITY_QUOTA_REQUESTS=str(UTILITY_QUOTA),
        UTILITY_QUOTA_WINDOW="86400",
        KB_INGEST_QUOTA_BYTES=str(INGEST_BYTES),
        KB_INGEST_QUOTA_WINDOW="86400",
        HTTP_MAX_BODY_BYTES=str(BODY_LIMIT),
        MCP_SERVERS=json.dumps(
            {"vault": {"transport": "streamable_http", "url": mcp_url, "headers": {"X-Api-Key": HEADER_SECRET}}}
        ),
        MCP_CONNECT_TIMEOUT="5",
    )
    server = DevServer(tmp_path_factory.mktemp("limits-dev"), env)
    server.start()
    yield server
    server.stop()


def api(server: DevServer, who: str) -> httpx.AsyncClient:
    """An HTTP client for an API-key user (alice, bob, ops) or any other name as a JWT user."""
    credential = API_KEYS[who] if who in API_KEYS else token(who)
    return httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {credential}"}, timeout=60)


def assert_error(reply: httpx.Response, status: int, code: str) -> dict:
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert body["error"] == code and body["message"] and isinstance(body["details"], dict), body
    return body


async def test_mcp_secrets_are_not_shown_to_users_or_written_to_the_log(limits_server):
    async with api(limits_server, "alice") as client:
        answer = await client.get("/api/v1/tools")
    assert answer.status_code == 200, answer.text
    [problem] = [p for p in answer.json()["unavailable"] if p["server"] == "vault"]
    assert problem["error"]  # still says what went wrong
    log = limits_server.log_path.read_text(errors="replace")
    assert "vault" in log  # the failure is logged for the operator ...
    for secret in (URL_TOKEN, URL_PASSWORD, HEADER_SECRET):
        assert secret not in answer.text, problem
        assert secret not in log  # ... without the secrets


async def test_knowledge_base_creation_is_atomic(limits_server):
    name = f"race-{uuid.uuid4().hex[:8]}"
    async with api(limits_server, "alice") as alice, api(limits_server, "bob") as bob:
        replies = await asyncio.gather(
            *(
                (alice if i % 2 else bob).post("/api/v1/kb", json={"name": name, "description": f"try {i}"})
                for i in range(10)
            )
        )
        created = [r for r in replies if r.status_code == 201]
        assert len(created) == 1, [r.status_code for r in replies]
        for refused in (r for r in replies if r.status_code != 201):
            assert_error(refused, 409, "KB_EXISTS")
        owner = created[0].json()["owner"]
        assert owner in ("alice", "bob")
        mine, other = (alice, bob) if owner == "alice" else (bob, alice)
        stored = (await mine.get(f"/api/v1/kb/{name}")).json()
        assert stored["owner"] == owner and stored["description"] == created[0].json()["description"]
        # the other user can neither take it over nor delete it
        assert (await other.delete(f"/api/v1/kb/{name}")).status_code in (403, 404)
        assert (await mine.get(f"/api/v1/kb/{name}")).json()["owner"] == owner


async def test_ingesting_urls_counts_against_the_web_quota(limits_server, web):
    who = fresh_user()
    async with api(limits_server, who) as client:
        kb = f"q-{uuid.uuid4().hex[:8]}"
        assert (await client.post("/api/v1/kb", json={"name": kb})).status_code == 201
        for _ in range(WEB_QUOTA):
            assert (await client.post("/api/v1/web/read", json={"urls": "not a url"})).status_code == 400
        assert_error(
            await client.post("/api/v1/web/read", json={"urls": web.url("/heron.html")}), 429, "QUOTA_EXCEEDED"
        )
        fetched_before = len(web.requests_to("/heron.html"))
        refused = await client.post(f"/api/v1/kb/{kb}/urls", json={"urls": [web.url("/heron.html")] * 5})
        body = assert_error(refused, 429, "QUOTA_EXCEEDED")
        assert body["details"]["retry_after"] > 0 and body["details"]["kind"] == "web_read"
        assert len(web.requests_to("/heron.html")) == fetched_before  # nothing was fetched
        assert (await client.get(f"/api/v1/kb/{kb}")).json()["documents"] == 0


async def test_ingest_has_a_per_user_byte_budget(limits_server, web):
    who = fresh_user()
    async with api(limits_server, who) as client:
        kb = f"b-{uuid.uuid4().hex[:8]}"
        assert (await client.post("/api/v1/kb", json={"name": kb})).status_code == 201
        small = b"Teal lanterns glow at dusk. " * 80  # 2,240 bytes
        first = await client.post(f"/api/v1/kb/{kb}/documents", files={"files": ("one.txt", small, "text/plain")})
        assert first.status_code == 200, first.text
        second = await client.post(f"/api/v1/kb/{kb}/documents", files={"files": ("two.txt", small, "text/plain")})
        assert second.status_code == 200, second.text
        third = await client.post(f"/api/v1/kb/{kb}/documents", files={"files": ("three.txt", small, "text/plain")})
        body = assert_error(third, 429, "QUOTA_EXCEEDED")
        assert "bytes" in body["message"] and body["details"]["kind"] == "ingest_bytes"
        assert int(third.headers["retry-after"]) > 0
        # several files are all or none: one that would not fit leaves the others out too
        both = await client.post(
            f"/api/v1/kb/{kb}/documents",
            files=[("files", ("four.txt", b"Short.", "text/plain")), ("files", ("five.txt", small, "text/plain"))],
        )
        assert_error(both, 429, "QUOTA_EXCEEDED")
        mixed = await client.post(
            f"/api/v1/kb/{kb}/documents",
            files=[("files", ("six.txt", b"Short.", "text/plain")), ("files", ("logo.png", b"\x89PNG", "image/png"))],
        )
        assert_error(mixed, 415, "UNSUPPORTED_FILE_TYPE")
        urls = await client.post(f"/api/v1/kb/{kb}/urls", json={"urls": [web.url("/notes.md")]})
        assert_error(urls, 429, "QUOTA_EXCEEDED")  # fetched pages count too
        sources = (await client.get(f"/api/v1/kb/{kb}/sources")).json()["items"]
        assert [s["source"] for s in sources] == ["one.txt", "two.txt"]
    # administrators are not limited
    async with api(limits_server, "ops") as admin:
        upload = await admin.post(f"/api/v1/kb/{kb}/documents", files={"files": ("three.txt", small * 3, "text/plain")})
        assert upload.status_code == 200, upload.text


async def test_request_bodies_have_a_size_limit(limits_server):
    async with api(limits_server, "alice") as client:
        big = {"query": "x" * (BODY_LIMIT + 10)}
        body = assert_error(await client.post("/api/v1/kb/anything/search", json=big), 413, "PAYLOAD_TOO_LARGE")
        assert body["details"]["limit_bytes"] == BODY_LIMIT

        async def chunks():  # no Content-Length: the limit applies while reading
            for _ in range(BODY_LIMIT // 1024 + 8):
                yield b"x" * 1024

        streamed = await client.post(
            "/api/v1/kb/anything/documents", content=chunks(), headers={"Content-Type": "application/octet-stream"}
        )
        # uploads have their own, larger limit: this body is under it and reaches the route
        assert streamed.status_code != 413
        streamed = await client.post("/api/v1/web/search", content=chunks(), headers={"Content-Type": "text/plain"})
        assert_error(streamed, 413, "PAYLOAD_TOO_LARGE")
        # routes still work under the limit
        assert (await client.get("/api/v1/kb")).status_code == 200


async def test_deeply_nested_json_is_a_clear_400(limits_server):
    deep = "[" * 10_000 + "]" * 10_000
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with api(limits_server, "alice") as client:
        for path in ("/api/v1/mcp", "/api/v1/web/search"):
            reply = await client.post(path, content=deep, headers=headers)
            assert_error(reply, 400, "JSON_TOO_DEEP")
        # nested-but-reasonable JSON still gets through to the route (here: its validation)
        ok = await client.post("/api/v1/web/search", json={"query": [[[["x"]]]]})
        assert_error(ok, 422, "VALIDATION_ERROR")


async def test_web_caches_reveal_nothing_across_users(limits_server, web):
    query = f"private {uuid.uuid4().hex[:8]}"
    page = web.url(f"/heron.html?v={uuid.uuid4().hex[:8]}")
    async with api(limits_server, fresh_user()) as first, api(limits_server, fresh_user()) as second:
        searched = len(web.requests_to("/search"))
        assert (await first.post("/api/v1/web/search", json={"query": query})).status_code == 200
        assert (await second.post("/api/v1/web/search", json={"query": query})).status_code == 200
        assert len(web.requests_to("/search")) == searched + 2  # the second user's search was not a cache hit
        read = await first.post("/api/v1/web/read", json={"urls": page})
        assert read.status_code == 200 and read.json()["results"][0]["cached"] is False
        again = await second.post("/api/v1/web/read", json={"urls": page})
        assert again.status_code == 200 and again.json()["results"][0]["cached"] is False
        # one user's own repeat is still served from the cache
        mine = await first.post("/api/v1/web/read", json={"urls": page})
        assert mine.status_code == 200 and mine.json()["results"][0]["cached"] is True


async def test_model_utility_routes_have_a_quota(limits_server):
    async with api(limits_server, fresh_user()) as client:
        for _ in range(UTILITY_QUOTA):
            reply = await client.get("/api/v1/daily-tip")
            assert reply.status_code != 429, reply.text
        body = assert_error(await client.get("/api/v1/daily-tip"), 429, "QUOTA_EXCEEDED")
        assert (
            body["details"]["kind"] == "utility"
            and int((await client.get("/api/v1/daily-tip")).headers["retry-after"]) > 0
        )
        title = await client.post("/api/v1/title", json={"messages": [{"role": "user", "content": "hi"}]})
        assert_error(title, 429, "QUOTA_EXCEEDED")
        related = await client.post("/api/v1/related-questions", json={"question": "q", "answer": "a"})
        assert_error(related, 429, "QUOTA_EXCEEDED")


async def test_search_provider_choice_and_an_unreachable_provider(limits_server):
    async with api(limits_server, fresh_user()) as client:
        found = await client.post("/api/v1/web/search", json={"query": "herons"})
        assert found.status_code == 200 and found.json()["search_engine"] == "searxng"  # the first configured
        down = await client.post("/api/v1/web/search", json={"query": "herons", "search_engine": "jina"})
        body = assert_error(down, 503, "WEB_SEARCH_UNAVAILABLE")
        assert body["details"]["retry_after"] > 0 and "jina" in body["message"].lower()
        unset = await client.post("/api/v1/web/search", json={"query": "herons", "search_engine": "tavily"})
        body = assert_error(unset, 400, "INVALID_REQUEST")
        assert "searxng" in body["message"] and "TAVILY_API_KEY" not in body["message"]
