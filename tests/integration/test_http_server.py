"""server/http.py through a real `langgraph dev`: web routes, knowledge bases, tool list, MCP
outward with a real MCP client, JWT users beside API keys, and the Postgres web quota shared by
the routes and the tools inside runs."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import jwt
import pytest
from langgraph_sdk import get_client

from tests.integration.conftest import (
    AGENT_API_KEYS,
    API_KEYS,
    KB_DATA,
    DevServer,
    key,
    server_env,
    sql,
    tool_messages,
    user,
)
from tests.web_servers import LoopbackServer, Reply

JWT_SECRET = "jwt-secret-for-tests-0123456789abcdef"
AUDIENCE = "agent-engine-tests"
QUOTA = 4
PAGE = (
    "<html><head><title>Otter facts</title></head><body><article><h1>Otters</h1>"
    + ("<p>Sea otters hold hands while sleeping so they do not drift apart. " * 8)
    + "</p></article></body></html>"
)


def token(sub: str, *, secret: str = JWT_SECRET, audience: str = AUDIENCE, expires_in: float = 600) -> str:
    """A signed HS256 JWT for `sub`."""
    claims = {"sub": sub, "aud": audience, "exp": int(time.time() + expires_in)}
    return jwt.encode(claims, secret, algorithm="HS256")


def searx_reply(request) -> Reply:
    query = request.query.get("q", [""])[0]
    results = [
        {"title": f"Result {i} for {query}", "url": f"https://example.org/{i}", "content": f"About {query} #{i}"}
        for i in range(1, 4)
    ]
    return Reply(body=json.dumps({"results": results}), content_type="application/json")


@pytest.fixture(scope="module")
def web():
    """A loopback SearXNG (`/search`) and web site (`/otters.html`, `/notes.md`, `/missing`)."""
    routes = {
        "/search": searx_reply,
        "/otters.html": Reply(body=PAGE),
        "/notes.md": Reply(
            body="# Lantern notes\n\nThe copper lantern glows teal at dusk.\n", content_type="text/markdown"
        ),
        "/missing": Reply(status=404, body="not here"),
    }
    with LoopbackServer(routes) as server:
        yield server


@pytest.fixture(scope="module")
def http_server(pg_uri, openai_server, web, tmp_path_factory):
    """`langgraph dev` with API keys and HS256 JWTs, a quota of QUOTA per day, a loopback search engine."""
    env = server_env(
        openai_server,
        POSTGRES_URI=pg_uri,
        POSTGRES_SCHEMA="it_http",
        AGENT_API_KEYS=AGENT_API_KEYS,
        AGENT_ADMIN_USERS="ops",
        AGENT_JWT_SECRET=JWT_SECRET,
        AGENT_JWT_AUDIENCE=AUDIENCE,
        SEARXNG_URL=web.base_url,
        WEB_SEARCH_PROVIDER="searxng",
        TAVILY_API_KEY="",
        JINA_API_KEY="",
        WEB_ALLOW_LOOPBACK="1",
        AGENT_TOOL_RETRIES="0",
        WEB_QUOTA_REQUESTS=str(QUOTA),
        WEB_QUOTA_WINDOW="86400",
    )
    server = DevServer(tmp_path_factory.mktemp("http-dev"), env)
    server.start()
    yield server
    server.stop()


def api(server: DevServer, who: str | None) -> httpx.AsyncClient:
    """An HTTP client for `who`: an API-key user, a JWT (`jwt:<sub>`), or nobody (None)."""
    headers = {}
    if who and who.startswith("jwt:"):
        headers["Authorization"] = f"Bearer {token(who[4:])}"
    elif who:
        headers["Authorization"] = f"Bearer {API_KEYS[who]}"
    return httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60)


async def test_routes_are_in_the_openapi_document_and_need_credentials(http_server):
    async with api(http_server, None) as anonymous:
        spec = (await anonymous.get("/openapi.json")).json()
        for path in (
            "/api/v1/web/search",
            "/api/v1/web/read",
            "/api/v1/kb",
            "/api/v1/kb/{name}/search",
            "/api/v1/tools",
        ):
            assert path in spec["paths"], path
        assert "/threads" in spec["paths"]  # the server's own routes are still there
        refused = await anonymous.post("/api/v1/web/search", json={"query": "otters"})
        assert refused.status_code == 401 and "Missing API key" in refused.text
    async with httpx.AsyncClient(base_url=http_server.url, headers={"Authorization": "Bearer nope"}) as wrong:
        assert (await wrong.get("/api/v1/tools")).status_code == 401


@pytest.mark.parametrize(
    "bad_token, reason",
    [
        (token("eve", expires_in=-120), "expired"),
        (token("eve", secret="another-secret-0123456789abcdef0"), "signature"),
        (token("eve", audience="someone-else"), "audience"),
    ],
)
async def test_bad_jwts_are_refused_with_the_reason(http_server, bad_token, reason):
    async with httpx.AsyncClient(base_url=http_server.url, headers={"Authorization": f"Bearer {bad_token}"}) as client:
        refused = await client.get("/api/v1/tools")
    assert refused.status_code == 401 and reason in refused.json()["detail"]


async def test_jwt_users_are_isolated_like_key_users(http_server):
    dave = get_client(url=http_server.url, api_key=token("dave"))  # a JWT where a key would go
    thread = await dave.threads.create()
    assert thread["metadata"]["owner"] == "dave"
    alice = http_server.client("alice")
    assert thread["thread_id"] not in [t["thread_id"] for t in await alice.threads.search(limit=100)]
    with pytest.raises(Exception) as hidden:
        await alice.threads.get(thread["thread_id"])
    assert "not found" in str(hidden.value)
    assert (await dave.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]


async def test_tool_list_has_json_schemas(http_server):
    async with api(http_server, "alice") as client:
        answer = await client.get("/api/v1/tools")
    assert answer.status_code == 200
    tools = {t["function"]["name"]: t["function"] for t in answer.json()["tools"]}
    assert answer.json()["count"] == len(answer.json()["tools"]) == len(tools)
    assert {"web_search", "web_read", "knowledge_base_search", "calculator"} <= set(tools)
    assert tools["web_search"]["parameters"]["required"] == ["query"]
    assert "runtime" not in tools["web_read"]["parameters"]["properties"]


async def test_web_search_route(http_server):
    async with api(http_server, "jwt:searcher") as client:
        found = await client.post("/api/v1/web/search", json={"query": "sea otters", "max_results": 2})
        assert found.status_code == 200, found.text
        body = found.json()
        assert body["search_engine"] == "searxng" and body["total_results"] == 2
        assert body["results"][0] == {
            "rank": 1,
            "title": "Result 1 for sea otters",
            "url": "https://example.org/1",
            "snippet": "About sea otters #1",
            "domain": "example.org",
        }
        invalid = await client.post("/api/v1/web/search", json={"query": "x", "max_results": 0})
        assert invalid.status_code == 422
        assert invalid.json()["error"] == "VALIDATION_ERROR" and "max_results" in invalid.json()["message"]
        engine = await client.post("/api/v1/web/search", json={"query": "x", "search_engine": "google"})
        assert engine.status_code == 422 and "search_engine" in engine.json()["message"]
        missing = await client.post("/api/v1/web/search", json={"max_results": 2})
        assert missing.status_code == 422 and missing.json()["details"]["errors"][0]["field"] == "query"


async def test_web_read_route_and_its_error_codes(http_server, web):
    async with api(http_server, "jwt:reader") as client:
        read = await client.post("/api/v1/web/read", json={"urls": [web.url("/otters.html"), web.url("/missing")]})
        assert read.status_code == 200, read.text
        body = read.json()
        assert (body["total_urls"], body["successful"], body["failed"]) == (2, 1, 1)
        page, missing = body["results"]
        assert (
            page["status"] == "success"
            and page["title"] in ("Otter facts", "Otters")
            and "hold hands" in page["content"]
        )
        assert page["word_count"] > 10 and page["extracted_at"]
        assert missing["status"] == "error" and missing["error_code"] == "URL_NOT_ACCESSIBLE"
        invalid = await client.post("/api/v1/web/read", json={"urls": "not a url"})
        assert invalid.status_code == 400 and invalid.json()["error"] == "INVALID_URL_FORMAT"
        inaccessible = await client.post("/api/v1/web/read", json={"urls": web.url("/missing")})
        assert inaccessible.status_code == 400 and inaccessible.json()["error"] == "URL_NOT_ACCESSIBLE"
    async with api(http_server, "jwt:reader2") as client:
        spa = await client.post("/api/v1/web/read", json={"urls": web.url("/otters.html"), "wait_for_selector": "#app"})
        assert spa.status_code == 422 and "wait_for_selector" in spa.json()["message"]


async def test_quota_is_shared_by_the_route_and_the_tool_in_postgres(http_server, openai_server, pg_uri):
    """QUOTA searches per window for one user, counted in Postgres whether made over HTTP or by
    the agent's tool; over it, the route answers 429 and the tool reports a clear error."""
    who = f"quota-{key()}"
    async with api(http_server, f"jwt:{who}") as client:
        for _ in range(QUOTA - 1):
            assert (await client.post("/api/v1/web/search", json={"query": "otters"})).status_code == 200
        k = key()
        openai_server.script(
            k,
            [
                {"content": "", "tool_calls": [{"name": "web_search", "args": {"query": "otters"}, "id": "s1"}]},
                "searched",
                {"content": "", "tool_calls": [{"name": "web_search", "args": {"query": "otters"}, "id": "s2"}]},
                "refused",
            ],
        )
        runner = get_client(url=http_server.url, api_key=token(who))
        thread = await runner.threads.create()
        await runner.runs.wait(thread["thread_id"], "react", input=user(f"{k} search otters"))
        state = await runner.threads.get_state(thread["thread_id"])
        assert tool_messages(state)["s1"]["status"] != "error"  # the QUOTA-th use, by the tool
        over = await client.post("/api/v1/web/search", json={"query": "otters"})
        assert over.status_code == 429 and over.json()["error"] == "QUOTA_EXCEEDED"
        assert over.json()["details"]["retry_after"] > 0 and int(over.headers["retry-after"]) > 0
        await runner.runs.wait(thread["thread_id"], "react", input=user(f"{k} again"))
        state = await runner.threads.get_state(thread["thread_id"])
        refused = tool_messages(state)["s2"]
        assert refused["status"] == "error" and "Quota exceeded" in str(refused["content"])
        # reads have their own budget
        assert (await client.post("/api/v1/web/read", json={"urls": "not a url"})).status_code == 400
    rows = sql(pg_uri, "SELECT kind, used FROM it_http.web_quota WHERE user_id = %s", (who,))
    assert dict(rows)["web_search"] >= QUOTA + 1 and dict(rows)["web_read"] == 1
    # administrators are not limited
    async with api(http_server, "ops") as admin:
        for _ in range(QUOTA + 1):
            assert (await admin.post("/api/v1/web/search", json={"query": "otters"})).status_code == 200


async def test_knowledge_base_lifecycle_and_owner_rule(http_server, web):
    name = f"kb-{key()}"
    async with api(http_server, "alice") as alice, api(http_server, "bob") as bob:
        created = await alice.post("/api/v1/kb", json={"name": name, "description": "alice's notes"})
        assert created.status_code == 201 and created.json()["owner"] == "alice"
        assert (await alice.post("/api/v1/kb", json={"name": name})).json()["error"] == "KB_EXISTS"
        bad_name = await alice.post("/api/v1/kb", json={"name": "Bad Name"})
        assert bad_name.status_code == 422 and "name" in bad_name.json()["message"]
        files = [
            ("files", ("lighthouse.txt", b"The lighthouse keeper logs ZX-4471 storms every winter.", "text/plain")),
            ("files", ("garden.md", b"# Garden\n\nTomatoes need warm soil and steady water.", "text/markdown")),
        ]
        uploaded = await alice.post(f"/api/v1/kb/{name}/documents", files=files, data={"date": "2023-05-10"})
        assert uploaded.status_code == 200, uploaded.text
        assert [d["status"] for d in uploaded.json()["documents"]] == ["created", "created"]
        dated = await alice.post(f"/api/v1/kb/{name}/search", json={"query": "tomatoes in the week of 8 May 2023"})
        assert dated.json()["retrieval_results"][0]["date"] == "2023-05-10T00:00:00.000000+00:00"
        undated = [("files", ("bad-date.txt", b"x", "text/plain"))]
        bad_date = await alice.post(f"/api/v1/kb/{name}/documents", files=undated, data={"date": "someday"})
        assert bad_date.status_code == 400 and "date='someday'" in bad_date.json()["message"], bad_date.text
        exe = await alice.post(
            f"/api/v1/kb/{name}/documents", files=[("files", ("tool.exe", b"MZ", "application/octet-stream"))]
        )
        assert exe.status_code == 415 and exe.json()["error"] == "UNSUPPORTED_FILE_TYPE"
        by_url = await alice.post(f"/api/v1/kb/{name}/urls", json={"urls": [web.url("/notes.md"), web.url("/missing")]})
        assert by_url.status_code == 200, by_url.text
        assert by_url.json()["documents"][0]["title"] == "Lantern notes" and len(by_url.json()["failed"]) == 1
        unreachable = await alice.post(f"/api/v1/kb/{name}/urls", json={"urls": [web.url("/missing")]})
        assert unreachable.status_code == 400 and unreachable.json()["error"] == "URL_NOT_ACCESSIBLE"
        # private to its owner: unknown to bob until an administrator shares it
        hidden = await bob.post(f"/api/v1/kb/{name}/search", json={"query": "ZX-4471", "strategy": "keyword"})
        assert hidden.status_code == 404 and hidden.json()["error"] == "KB_NOT_FOUND"
        assert name not in hidden.json()["details"]["existing"]
        assert (await bob.delete(f"/api/v1/kb/{name}")).status_code == 404
        assert name not in [kb["name"] for kb in (await bob.get("/api/v1/kb")).json()["items"]]
        async with api(http_server, "ops") as admin:
            shared = await admin.patch(f"/api/v1/kb/{name}", json={"shared": True})
            assert shared.status_code == 200 and shared.json()["shared"] is True
        # shared: every user may search it; only the owner (or an administrator) may change it
        hits = await bob.post(f"/api/v1/kb/{name}/search", json={"query": "ZX-4471", "strategy": "keyword"})
        assert hits.status_code == 200 and hits.json()["retrieval_results"][0]["source"] == "lighthouse.txt"
        for linked in ("graph", "fusion"):  # every strategy of the store, the knowledge graph's too
            found = await bob.post(f"/api/v1/kb/{name}/search", json={"query": "lighthouse keeper", "strategy": linked})
            assert found.status_code == 200 and found.json()["strategy"] == linked, found.text
            assert found.json()["retrieval_results"][0]["source"] == "lighthouse.txt"
        strategy = await bob.post(f"/api/v1/kb/{name}/search", json={"query": "x", "strategy": "fuzzy"})
        assert strategy.status_code == 422 and "strategy" in strategy.json()["message"]
        forbidden = await bob.delete(f"/api/v1/kb/{name}")
        assert forbidden.status_code == 403 and forbidden.json()["error"] == "KB_FORBIDDEN"
        unshare = await alice.patch(f"/api/v1/kb/{name}", json={"shared": False})
        assert unshare.status_code == 403 and unshare.json()["error"] == "KB_FORBIDDEN"  # administrators only
        sources = (await alice.get(f"/api/v1/kb/{name}/sources")).json()["items"]
        assert [s["source"] for s in sources] == sorted(["garden.md", "lighthouse.txt", web.url("/notes.md")])
        removed = await alice.delete(f"/api/v1/kb/{name}/sources", params={"source": "lighthouse.txt"})
        assert removed.status_code == 200 and removed.json()["chunks"] >= 1
        gone = await alice.post(f"/api/v1/kb/{name}/search", json={"query": "ZX-4471", "strategy": "keyword"})
        assert all(r["source"] != "lighthouse.txt" for r in gone.json()["retrieval_results"])
        again = await alice.delete(f"/api/v1/kb/{name}/sources", params={"source": "lighthouse.txt"})
        assert again.status_code == 404 and again.json()["error"] == "SOURCE_NOT_FOUND"
        assert (await alice.get(f"/api/v1/kb/{name}")).json()["documents"] == 2
        assert name in [kb["name"] for kb in (await bob.get("/api/v1/kb")).json()["items"]]
        assert (await alice.delete(f"/api/v1/kb/{name}")).status_code == 200
        unknown = await alice.get(f"/api/v1/kb/{name}")
        assert unknown.status_code == 404 and unknown.json()["error"] == "KB_NOT_FOUND"
        unknown_search = await bob.post(f"/api/v1/kb/{name}/search", json={"query": "x"})
        assert unknown_search.status_code == 404 and unknown_search.json()["error"] == "KB_NOT_FOUND"


async def test_pdf_urls_are_ingested_and_other_binary_types_refused(http_server, web):
    name = f"pdf-{key()}"
    web.routes["/manual.pdf"] = Reply(body=(KB_DATA / "handbook.pdf").read_bytes(), content_type="application/pdf")
    web.routes["/logo.png"] = Reply(body=b"\x89PNG\r\n", content_type="image/png")
    # a user of its own: each fetched URL counts against the user's web_read quota (QUOTA a day)
    async with api(http_server, "jwt:pdf-reader") as alice:
        assert (await alice.post("/api/v1/kb", json={"name": name})).status_code == 201
        by_url = await alice.post(
            f"/api/v1/kb/{name}/urls", json={"urls": [web.url("/manual.pdf"), web.url("/logo.png")]}
        )
        assert by_url.status_code == 200, by_url.text
        (document,) = by_url.json()["documents"]
        assert (document["format"], document["title"], document["status"]) == ("pdf", "Staff Handbook", "created")
        (failed,) = by_url.json()["failed"]
        assert failed["url"] == web.url("/logo.png") and "'image/png'" in failed["error"] and "PDF" in failed["error"]
        hits = await alice.post(f"/api/v1/kb/{name}/search", json={"query": "leave requests", "strategy": "keyword"})
        top = hits.json()["retrieval_results"][0]
        assert (top["source"], top["page"]) == (web.url("/manual.pdf"), 1)
        assert (await alice.delete(f"/api/v1/kb/{name}")).status_code == 200


async def test_tools_over_mcp_with_a_real_client(http_server):
    from langchain_mcp_adapters.client import MultiServerMCPClient

    name = f"mcp-{key()}"
    async with api(http_server, "ops") as admin:
        assert (await admin.post("/api/v1/kb", json={"name": name})).status_code == 201
        files = [("files", ("otters.txt", b"Sea otters keep a favourite rock in a skin pouch.", "text/plain"))]
        assert (await admin.post(f"/api/v1/kb/{name}/documents", files=files)).status_code == 200
    client = MultiServerMCPClient(
        {
            "engine": {
                "transport": "streamable_http",
                "url": f"{http_server.url}/api/v1/mcp",
                "headers": {"Authorization": f"Bearer {token('mcp-user')}"},
            }
        }
    )
    tools = {t.name: t for t in await client.get_tools()}
    assert {"web_search", "web_read", "knowledge_base_search", "list_knowledge_bases"} <= set(tools)
    searched = await tools["web_search"].ainvoke({"query": "otters", "max_results": 1})
    assert "Result 1 for otters" in str(searched)
    found = await tools["knowledge_base_search"].ainvoke({"kb": name, "query": "favourite rock", "strategy": "keyword"})
    assert "skin pouch" in str(found)
    # another user's private knowledge base is neither listed nor searched
    private = f"mcp-private-{key()}"
    async with api(http_server, "alice") as alice:
        assert (await alice.post("/api/v1/kb", json={"name": private})).status_code == 201
        files = [("files", ("diary.txt", b"Alice hides the spare key under the blue flowerpot.", "text/plain"))]
        assert (await alice.post(f"/api/v1/kb/{private}/documents", files=files)).status_code == 200
    listed = await tools["list_knowledge_bases"].ainvoke({})
    assert name in str(listed) and private not in str(listed)
    try:  # an MCP tool error: raised or returned as the tool's text, depending on the adapter
        answer = str(await tools["knowledge_base_search"].ainvoke({"kb": private, "query": "spare key"}))
    except Exception as exc:
        answer = str(exc)
    assert "Unknown knowledge base" in answer and "flowerpot" not in answer
    # without credentials the MCP endpoint is refused like every route
    anonymous = MultiServerMCPClient(
        {"engine": {"transport": "streamable_http", "url": f"{http_server.url}/api/v1/mcp"}}
    )
    with pytest.raises(Exception) as refused:
        await asyncio.wait_for(anonymous.get_tools(), 30)
    assert "401" in repr(refused.value) or "Unauthorized" in repr(refused.value)


async def test_a_document_deleted_through_the_api_leaves_the_knowledge_graph(http_server, pg_uri):
    """Its entities, relations and links go with it: graph search no longer walks to it."""
    name = f"kb-{key()}"
    company = b"Prajor Dynamics is a maker of precision sensors. Prajor Dynamics was founded by Edda Delkel."
    founder = b"Edda Delkel was born in Morvenholm. Edda Delkel studied at the Ostvel Institute."
    question = {"query": "Where was the founder of Prajor Dynamics born?", "strategy": "graph"}
    async with api(http_server, "alice") as alice:
        assert (await alice.post("/api/v1/kb", json={"name": name})).status_code == 201
        files = [("files", ("company.txt", company, "text/plain")), ("files", ("founder.txt", founder, "text/plain"))]
        assert (await alice.post(f"/api/v1/kb/{name}/documents", files=files)).status_code == 200
        before = (await alice.post(f"/api/v1/kb/{name}/search", json=question)).json()["retrieval_results"]
        assert "founder.txt" in [r["source"] for r in before]
        entities = "SELECT e.name FROM it_http.kb_graph_entities e WHERE e.kb = %s ORDER BY e.name"
        assert "Morvenholm" in [row[0] for row in sql(pg_uri, entities, (name,))]
        removed = await alice.delete(f"/api/v1/kb/{name}/sources", params={"source": "founder.txt"})
        assert removed.status_code == 200, removed.text
        after = (await alice.post(f"/api/v1/kb/{name}/search", json=question)).json()["retrieval_results"]
        assert "founder.txt" not in [r["source"] for r in after]
        names = [row[0] for row in sql(pg_uri, entities, (name,))]
        assert "Morvenholm" not in names and "Ostvel Institute" not in names and "Prajor Dynamics" in names
        assert (await alice.delete(f"/api/v1/kb/{name}")).status_code == 200
