"""Through a real `langgraph dev`: `POST /api/v1/tools/{name}` (the agents' tool runner, its
checks and quotas, memory per caller) and the per-user run quotas (runs per window, runs at
once) answered 429 in the routes' error shape before anything is written."""

from __future__ import annotations

import json
import time

import httpx
import jwt
import pytest
from langgraph_sdk import get_client

from tests.integration.conftest import AGENT_API_KEYS, API_KEYS, DevServer, key, server_env, user, wait_status
from tests.web_servers import LoopbackServer, Reply

pytestmark = pytest.mark.integration

JWT_SECRET = "jwt-secret-for-tool-tests-0123456789"
AUDIENCE = "agent-engine-tool-tests"
WEB_QUOTA = 2
RUN_QUOTA = 3


def token(sub: str) -> str:
    claims = {"sub": sub, "aud": AUDIENCE, "exp": int(time.time() + 600)}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


def searx_reply(request) -> Reply:
    query = request.query.get("q", [""])[0]
    results = [{"title": f"About {query}", "url": "https://example.org/1", "content": f"{query} facts"}]
    return Reply(body=json.dumps({"results": results}), content_type="application/json")


@pytest.fixture(scope="module")
def server(pg_uri, openai_server, tmp_path_factory):
    """`langgraph dev` with JWT users, a loopback search engine, a web quota of WEB_QUOTA, and run
    quotas of RUN_QUOTA runs a day and one run at a time per user."""
    with LoopbackServer({"/search": searx_reply}) as web:
        env = server_env(
            openai_server,
            POSTGRES_URI=pg_uri,
            POSTGRES_SCHEMA="it_tools",
            AGENT_API_KEYS=AGENT_API_KEYS,
            AGENT_ADMIN_USERS="ops",
            AGENT_JWT_SECRET=JWT_SECRET,
            AGENT_JWT_AUDIENCE=AUDIENCE,
            SEARXNG_URL=web.base_url,
            WEB_SEARCH_PROVIDER="searxng",
            TAVILY_API_KEY="",
            JINA_API_KEY="",
            AGENT_TOOL_RETRIES="0",
            WEB_QUOTA_REQUESTS=str(WEB_QUOTA),
            WEB_QUOTA_WINDOW="86400",
            RUN_QUOTA_RUNS=str(RUN_QUOTA),
            RUN_QUOTA_WINDOW="86400",
            RUN_QUOTA_CONCURRENT="1",
        )
        dev = DevServer(tmp_path_factory.mktemp("tools-dev"), env)
        dev.start()
        yield dev
        dev.stop()


def api(server: DevServer, who: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token(who)}"} if who else {}
    return httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60)


async def test_a_tool_runs_with_its_timing_and_bad_calls_get_the_error_shape(server):
    async with api(server, f"tools-{key()}") as client:
        done = await client.post("/api/v1/tools/calculator", json={"expression": "17% of 2340"})
        assert done.status_code == 200, done.text
        body = done.json()
        assert body["tool"] == "calculator" and body["result"] == pytest.approx(397.8)
        assert body["attempts"] == 1 and body["duration_ms"] >= 0 and body["started_at"] <= body["finished_at"]

        unknown = await client.post("/api/v1/tools/teleport", json={})
        assert unknown.status_code == 404 and unknown.json()["error"] == "TOOL_NOT_FOUND"
        assert "calculator" in unknown.json()["details"]["available"]

        missing = await client.post("/api/v1/tools/calculator", json={"expr": "1+1"})
        assert missing.status_code == 422 and missing.json()["error"] == "VALIDATION_ERROR"
        assert missing.json()["details"]["errors"] == [{"field": "expression", "message": "Field required"}]

        refused = await client.post("/api/v1/tools/calculator", json={"expression": "1/0"})
        assert refused.status_code == 422 and "division by zero" in refused.json()["message"]

        too_long = await client.post("/api/v1/tools/calculator", json={"expression": "1+" * 15_000 + "1"})
        assert too_long.status_code == 422 and "at most 20,000" in too_long.json()["message"]

        not_an_object = await client.post("/api/v1/tools/calculator", json=["1+1"])
        assert not_an_object.status_code == 422 and not_an_object.json()["error"] == "VALIDATION_ERROR"
    async with api(server, None) as anonymous:
        assert (await anonymous.post("/api/v1/tools/calculator", json={"expression": "1"})).status_code == 401


async def test_memory_tools_act_on_the_callers_own_memories(server):
    k = key()
    async with api(server, f"mem-a-{k}") as alice, api(server, f"mem-b-{k}") as bob:
        saved = await alice.post(
            "/api/v1/tools/save_memory", json={"text": f"The user keeps a tortoise named {k}.", "category": "fact"}
        )
        assert saved.status_code == 200, saved.text
        assert saved.json()["result"]["action"] == "created"
        mine = await alice.post("/api/v1/tools/search_semantic_memory", json={"query": f"tortoise {k}"})
        assert mine.status_code == 200 and k in json.dumps(mine.json()["result"]["results"])
        theirs = await bob.post("/api/v1/tools/search_semantic_memory", json={"query": f"tortoise {k}"})
        assert theirs.status_code == 200 and theirs.json()["result"]["count"] == 0
        assert k not in json.dumps(theirs.json()["result"]["results"])
    alice_store = get_client(url=server.url, api_key=token(f"mem-a-{k}"))
    items = await alice_store.store.search_items(["memories", f"mem-a-{k}"], limit=50)
    assert k in json.dumps(items)


async def test_web_tools_over_the_route_use_the_callers_web_quota(server):
    k = key()
    async with api(server, f"web-{k}") as client, api(server, f"web-other-{k}") as other:
        for _ in range(WEB_QUOTA):
            found = await client.post("/api/v1/tools/web_search", json={"query": f"otters {k}"})
            assert found.status_code == 200, found.text
            assert found.json()["result"][0]["title"] == f"About otters {k}"
        over = await client.post("/api/v1/tools/web_search", json={"query": "otters"})
        assert over.status_code == 429 and over.json()["error"] == "QUOTA_EXCEEDED"
        assert over.json()["details"]["kind"] == "web_search" and int(over.headers["retry-after"]) > 0
        # the same budget as the HTTP search route
        assert (await client.post("/api/v1/web/search", json={"query": "otters"})).status_code == 429
        assert (await other.post("/api/v1/tools/web_search", json={"query": "otters"})).status_code == 200


async def post_run(server: DevServer, who: str, thread_id: str, text: str) -> httpx.Response:
    async with api(server, who) as client:
        return await client.post(f"/threads/{thread_id}/runs/wait", json={"assistant_id": "react", "input": user(text)})


async def test_run_quotas_per_user_concurrent_and_per_window(server, openai_server):
    k = key()
    who, other = f"runs-{k}", f"runs-other-{k}"
    openai_server.script(f"{k}-fast", ["done"] * 10)
    openai_server.script(f"{k}-slow", [{"content": "slow", "delay": 120}])
    client = get_client(url=server.url, api_key=token(who))
    first = await client.threads.create()
    assert (await post_run(server, who, first["thread_id"], f"{k}-fast one")).status_code == 200

    slow = await client.threads.create()
    held = await client.runs.create(slow["thread_id"], "react", input=user(f"{k}-slow two"))
    assert await wait_status(client, slow["thread_id"], held["run_id"], {"running"}) == "running"
    second = await client.threads.create()
    busy = await post_run(server, who, second["thread_id"], f"{k}-fast three")
    assert busy.status_code == 429 and busy.json()["error"] == "QUOTA_EXCEEDED", busy.text
    assert busy.json()["details"]["kind"] == "concurrent_runs" and busy.json()["details"]["active"] == 1
    assert int(busy.headers["retry-after"]) > 0
    assert (await client.threads.get_state(second["thread_id"]))["values"] == {}  # nothing written
    # another user's runs are theirs alone
    other_thread = await get_client(url=server.url, api_key=token(other)).threads.create()
    assert (await post_run(server, other, other_thread["thread_id"], f"{k}-fast other")).status_code == 200

    await client.runs.cancel(slow["thread_id"], held["run_id"], wait=True)
    assert (await post_run(server, who, second["thread_id"], f"{k}-fast three")).status_code == 200
    # three runs made (the refused one not counted): the fourth is over the window's quota
    over = await post_run(server, who, second["thread_id"], f"{k}-fast four")
    assert over.status_code == 429 and over.json()["details"]["kind"] == "runs", over.text
    assert over.json()["details"]["limit"] == RUN_QUOTA and int(over.headers["retry-after"]) > 0
    messages = (await client.threads.get_state(second["thread_id"]))["values"]["messages"]
    assert f"{k}-fast four" not in json.dumps(messages)
    # administrators are not limited
    admin = get_client(url=server.url, api_key=API_KEYS["ops"])
    for _ in range(RUN_QUOTA + 1):
        thread = await admin.threads.create()
        await admin.runs.wait(thread["thread_id"], "react", input=user(f"{k}-fast admin"))


async def test_answers_say_whether_web_search_was_on(server, openai_server):
    k = key()
    openai_server.script(f"{k}-web", ["Nothing to search."])
    openai_server.script(f"{k}-sums", ["Sums only."])
    client = get_client(url=server.url, api_key=token(f"meta-{k}"))
    answers = {}
    for name, context in (("web", {}), ("sums", {"tools": ["calculator"]})):
        thread = await client.threads.create()
        await client.runs.wait(thread["thread_id"], "react", input=user(f"{k}-{name} hi"), context=context)
        answers[name] = (await client.threads.get_state(thread["thread_id"]))["values"]["messages"][-1]
    assert answers["web"]["response_metadata"]["web_search"] is True
    assert answers["sums"]["response_metadata"]["web_search"] is False
    assert all(answer["response_metadata"]["model"] for answer in answers.values())
    offered: dict[str, set] = {}  # the tools of each run's first model call, named by its question
    for request in openai_server.requests():
        first = next((m for m in request.get("messages") or [] if m.get("role") == "user"), {})
        for name in answers:
            if f"{k}-{name}" in str(first.get("content")):
                offered.setdefault(name, {tool["function"]["name"] for tool in request.get("tools") or []})
    assert "web_search" in offered["web"] and "web_search" not in offered["sums"]
