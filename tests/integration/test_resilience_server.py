"""Stops through a real `langgraph dev`: Postgres going down and coming back under the server,
and runs stopped in the middle (cancelled during a slow tool, or by the recursion limit)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx
import pytest

from store.postgres import stop_embedded_postgres
from tests.integration.conftest import ROOT, key, user

pytestmark = pytest.mark.integration


def start_postgres(env: dict[str, str]) -> None:
    """Start the test's embedded Postgres again (a process of its own, as an operator would)."""
    started = subprocess.run(
        [sys.executable, "-m", "store.postgres", "start"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr


def assert_unavailable(reply: httpx.Response) -> None:
    """A 503 in the routes' error shape, naming the database."""
    assert reply.status_code == 503, (reply.status_code, reply.text)
    body = reply.json()
    assert body["error"] == "DATABASE_UNAVAILABLE" and "database" in body["message"].lower()
    assert isinstance(body["details"], dict)


async def test_postgres_down_answers_503_keeps_the_connection_and_recovers(restartable, openai_server):
    client = restartable.client(None)
    k = key()
    openai_server.script(k, ["before", "after"])
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "react", input=user(f"{k} one"))

    stop_embedded_postgres()
    async with httpx.AsyncClient(base_url=restartable.url, timeout=60) as http:
        # One client, one kept-alive connection: every answer arrives on it, none is dropped.
        for method, path in [
            ("GET", "/api/v1/kb"),
            ("GET", f"/threads/{tid}/state"),
            ("POST", "/store/items/search"),
            ("GET", "/api/v1/kb"),
        ]:
            body = {"namespace_prefix": ["memories"]} if method == "POST" else None
            started = time.monotonic()
            reply = await http.request(method, path, json=body)
            print(f"{method} {path}: {reply.status_code} in {time.monotonic() - started:.2f} s")
            assert_unavailable(reply)
        tools = await http.get("/api/v1/tools")
        assert tools.status_code in (200, 503), tools.text
        if tools.status_code == 503:
            assert_unavailable(tools)

        await asyncio.to_thread(start_postgres, restartable.env)
        back = time.monotonic()
        # The server reconnects by itself: each route (checkpoints, store, knowledge bases) serves again.
        for path in (f"/threads/{tid}/state", "/api/v1/kb"):
            deadline = back + 60
            while True:
                reply = await http.get(path)
                if reply.status_code != 503 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            print(f"{path} served {time.monotonic() - back:.2f} s after Postgres was back")
            assert reply.status_code == 200, reply.text
        state = (await http.get(f"/threads/{tid}/state")).json()
        assert [m["content"] for m in state["values"]["messages"]][-1] == "before"
    final = await client.runs.wait(tid, "react", input=user("two"))
    assert final["messages"][-1]["content"] == "after"


async def test_a_run_when_postgres_goes_down_ends_with_a_clear_error_after_its_streamed_text(
    restartable, openai_server
):
    client = restartable.client(None)
    k = key()
    words = "the streamed answer keeps coming " * 12
    openai_server.script(k, [{"content": words, "delay_per_token": 0.1}])
    thread = await client.threads.create()
    text = ""
    events: list = []
    stopped = False

    async def consume() -> None:
        nonlocal text, stopped
        async for part in client.runs.stream(
            thread["thread_id"], "react", input=user(f"{k} talk"), stream_mode=["messages-tuple"]
        ):
            events.append(part)
            if part.event == "messages":
                chunk = part.data[0]
                if chunk.get("type") == "AIMessageChunk" and isinstance(chunk.get("content"), str):
                    text += chunk["content"]
            if len(text) > 40 and not stopped:
                stopped = True
                await asyncio.to_thread(stop_embedded_postgres)

    await asyncio.wait_for(consume(), 120)  # ends: no hang
    assert stopped and text.startswith("the streamed answer") and len(text) > 40
    errors = [p.data for p in events if p.event == "error"]
    assert errors, [p.event for p in events][-5:]
    assert errors[-1]["error"] == "DatabaseUnavailable", errors[-1]
    assert "database" in errors[-1]["message"].lower()
