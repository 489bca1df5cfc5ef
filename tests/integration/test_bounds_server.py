"""Hostile or broken input through a real `langgraph dev`: a plan of thousands of steps, from the
planner or in a client's edit, refused at once while the server keeps answering; a knowledge base
with nothing to match by meaning; requests refused with a 4xx before anything is written (a
recursion limit too small to answer, missing fields on the server's own routes, compressed bodies)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import uuid

import httpx
import pytest
from langgraph_sdk.errors import APIStatusError

from tests.integration.conftest import ADMIN_USER, API_KEYS, key, user

pytestmark = pytest.mark.integration

HUGE = 5_000


def huge_plan(count: int = HUGE) -> list[dict]:
    """A plan whose steps reference each other by name as plain text: the shape that once made
    validation compile one pattern per pair of steps."""
    return [
        {
            "id": f"s{n}",
            "description": f"step {n} uses s{n - 1}",
            "tool": "calculator",
            "args": {"expression": f"s{n - 1} + {n}"},
        }
        for n in range(1, count + 1)
    ]


@contextlib.asynccontextmanager
async def server_kept_answering(url: str):
    """Polls `/ok` while the block runs; fails the test when one poll waits over 5 s (a blocked
    event loop answers nothing at all, for minutes)."""
    polls: list[float] = []
    stop = asyncio.Event()

    async def poll() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            while not stop.is_set():
                response = await http.get("/ok")
                response.raise_for_status()
                polls.append(1)
                await asyncio.sleep(0.1)

    task = asyncio.create_task(poll())
    try:
        yield polls
    finally:
        stop.set()
        await task  # raises httpx.ReadTimeout when the server stopped answering
    assert polls


async def test_a_resumed_plan_of_thousands_of_steps_is_refused_with_the_server_answering(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    one = {"id": "a", "description": "6*7", "tool": "calculator", "args": {"expression": "6*7"}}
    openai_server.script(k, [{"content": "", "tool_calls": [{"name": "Plan", "args": {"steps": [one]}}]}, "42."])
    context = {"approve_plan": True}
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "plan_execute", input=user(f"{k} compute"), context=context)
    assert (await client.threads.get_state(tid))["next"] == ["approve"]
    steps = huge_plan()
    edits = [
        {"decisions": [{"type": "edit", "edited_action": {"name": "run_plan", "args": {"steps": steps}}}]},
        {"action": "edit", "plan": steps},
    ]
    async with server_kept_answering(dev_server.url):
        for resume in edits:
            await asyncio.wait_for(
                client.runs.wait(tid, "plan_execute", command={"resume": resume}, context=context), timeout=60
            )
            state = await client.threads.get_state(tid)
            value = state["tasks"][0]["interrupts"][0]["value"]
            assert f"the plan has {HUGE} steps; at most" in value["error"]
            assert state["next"] == ["approve"]  # still waiting, the request answerable
    final = await client.runs.wait(tid, "plan_execute", command={"resume": {"action": "approve"}}, context=context)
    assert final["messages"][-1]["content"] == "42."


async def test_a_planner_answer_of_thousands_of_steps_is_refused_with_the_server_answering(dev_server, openai_server):
    client = dev_server.client("alice")
    k = key()
    huge = {"content": "", "tool_calls": [{"name": "Plan", "args": {"steps": huge_plan()}}]}
    openai_server.script(k, [huge, huge, huge])
    tid = (await client.threads.create())["thread_id"]
    async with server_kept_answering(dev_server.url):
        final = await asyncio.wait_for(client.runs.wait(tid, "plan_execute", input=user(f"{k} compute")), timeout=120)
    assert final["status"] == "failed"
    assert f"the plan has {HUGE} steps; at most" in final["messages"][-1]["content"]


async def test_a_shared_knowledge_base_named_by_a_code_without_description_breaks_no_router(dev_server, openai_server):
    """An administrator shares `hr<digits>` with no description: every user's router still answers."""
    name = f"hr{uuid.uuid4().int % 10**6:06d}"
    admin = {"x-api-key": API_KEYS[ADMIN_USER]}
    async with httpx.AsyncClient(base_url=dev_server.url, headers=admin, timeout=60) as http:
        assert (await http.post("/api/v1/kb", json={"name": name})).status_code == 201
        assert (await http.patch(f"/api/v1/kb/{name}", json={"shared": True})).status_code == 200
        try:
            alice = dev_server.client("alice")
            k = key()
            choice = {"route": "general", "confidence": 0.9, "reason": "a general question"}
            classified = {"content": "", "tool_calls": [{"name": "RouteChoice", "args": choice}]}
            openai_server.script(k, [classified, "Twenty-five days a year."])
            tid = (await alice.threads.create())["thread_id"]
            parts = [
                part
                async for part in alice.runs.stream(
                    tid, "router", input=user(f"{k} what is our leave policy?"), stream_mode=["custom", "values"]
                )
            ]
            assert not [part.data for part in parts if part.event == "error"]
            assert [p.data for p in parts if p.event == "custom" and p.data.get("event") == "route_decided"]
            values = [part.data for part in parts if part.event == "values"][-1]
            assert values["messages"][-1]["type"] == "ai" and values["messages"][-1]["content"]
        finally:
            assert (await http.delete(f"/api/v1/kb/{name}")).status_code in (200, 204)


async def test_a_recursion_limit_too_small_to_answer_is_refused_before_anything_is_written(dev_server, openai_server):
    client = dev_server.client("alice")
    tid = (await client.threads.create())["thread_id"]
    with pytest.raises(APIStatusError) as refused:
        await client.runs.create(tid, "react", input=user("What is 6*7?"), config={"recursion_limit": 1})
    response = refused.value.response
    assert response.status_code == 422 and response.json()["details"] == {"field": "config.recursion_limit"}
    state = await client.threads.get_state(tid)
    assert not (state["values"] or {}).get("messages") and state["next"] == []
    assert await client.runs.list(tid) == []


@pytest.mark.parametrize(
    "path, body, field",
    [
        ("/store/items/search", {"query": "a"}, "namespace_prefix"),
        ("/runs/crons", {}, "assistant_id"),
        ("/ui/react", {}, "name"),
    ],
)
async def test_the_servers_own_routes_answer_a_missing_field_with_a_4xx(dev_server, path, body, field):
    async with httpx.AsyncClient(base_url=dev_server.url, headers={"x-api-key": API_KEYS["alice"]}) as http:
        response = await http.post(path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "VALIDATION_ERROR" and response.json()["details"] == {"field": field}


async def test_a_compressed_body_is_refused_with_415(dev_server):
    headers = {
        "x-api-key": API_KEYS["alice"],
        "content-type": "application/json",
        "content-encoding": "gzip",
        "accept": "application/json, text/event-stream",
    }
    body = gzip.compress(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
    async with httpx.AsyncClient(base_url=dev_server.url, headers=headers) as http:
        for path in ("/api/v1/mcp", "/threads"):
            response = await http.post(path, content=body)
            assert response.status_code == 415, (path, response.text)
            assert response.json()["error"] == "UNSUPPORTED_CONTENT_ENCODING"
